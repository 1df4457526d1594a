//===- TargetDescription.h - What pattn knows about each chip ---*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// The one table of chip-specific facts the GPU lowering and the compile
// pipeline use: the NVVM chip name, the PTX version it needs (sm_100a needs
// PTX 8.6 and sm_120a PTX 8.7 with LLVM 22), and which conversion
// instructions the chip has. Everything chip-specific reads this table.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_CONVERSION_TARGETDESCRIPTION_H
#define PATTN_CONVERSION_TARGETDESCRIPTION_H

#include "pattn/Dialect/PAttn/Transforms/Eligibility.h"

#include "llvm/ADT/StringRef.h"

namespace pattn {

struct TargetDescription {
  Chip chip;
  llvm::StringRef ptxFeatures; ///< "+ptx80", "+ptx86", "+ptx87"
  /// cvt.rn.f16x2.e4m3x2 / e5m2x2 exist (sm_89 and up).
  bool hasFp8Conversion;
  /// cvt.rn.f16x2.e2m1x2 exists (sm_100a / sm_120a families).
  bool hasFp4Conversion;
};

const TargetDescription &getTargetDescription(Chip chip);

/// The lowest compute capability whose chips convert fp8 in hardware (89):
/// devices below it run the bit-trick kernels, devices at or above it the
/// hardware-conversion ones.
unsigned firstFp8ConversionCapability();

/// The same for the e2m1 conversion (100).
unsigned firstFp4ConversionCapability();

/// The chips `pattn-compile` builds for when none are named.
llvm::ArrayRef<Chip> defaultCompileChips();

} // namespace pattn

#endif // PATTN_CONVERSION_TARGETDESCRIPTION_H
