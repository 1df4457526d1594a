//===- TargetDescription.h - What pattn knows about each chip ---*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// The one chip capability table. Every chip-specific choice (the backend
// rules, the decode plans, the conversion instructions a kernel may use, the
// PTX version, which kernel module a device runs) reads it; nothing else
// names a chip. Plain facts, no MLIR: the eligibility rules, the planner,
// the GPU lowering and the compile pipeline all link it.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_TARGET_TARGETDESCRIPTION_H
#define PATTN_TARGET_TARGETDESCRIPTION_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace pattn {

/// The chips pattn compiles for.
enum class Chip : uint8_t {
  SM80,
  SM86,
  SM87,
  SM89,
  SM90,
  SM90a,
  SM100,
  SM100a,
  SM120,
  SM120a
};

/// "sm_90a" -> Chip::SM90a; nullopt for anything else (sm_75, "h100", ...).
std::optional<Chip> parseChip(llvm::StringRef name);
llvm::StringRef stringifyChip(Chip chip);
/// 80, 86, 87, 89, 90, 90, 100, 100, 120, 120.
unsigned computeCapability(Chip chip);
llvm::ArrayRef<Chip> supportedChips();
/// "sm_80, sm_86, ..., sm_120a", for diagnostics.
std::string supportedChipList();
/// "sm_80, sm_90a": `chips` for messages.
std::string joinChipNames(llvm::ArrayRef<Chip> chips);

/// The matrix-multiply instructions of a chip, as the kernels use them
/// (flags of TargetDescription::mmaKinds).
enum class MmaKind : uint8_t {
  /// mma.sync.aligned.m16n8k16 with f16/bf16 operands and fp32
  /// accumulation, with the ldmatrix (plain and .trans) and cp.async (4, 8,
  /// 16 bytes) that feed it: the tensor-core decodes' instructions.
  MmaSyncM16N8K16 = 1 << 0,
  /// wgmma.mma_async.m64nNk16 from shared-memory descriptors (sm_90a only):
  /// the warpgroup MLA kernel's.
  WgmmaM64NNK16 = 1 << 1,
};

/// The conversion instructions the codecs may use instead of bit tricks
/// (flags of TargetDescription::conversions).
enum class HardwareConversion : uint8_t {
  /// cvt.rn.f16x2.e4m3x2 / e5m2x2 (sm_89 and up).
  F8x2ToF16x2 = 1 << 0,
  /// cvt.rn.f16x2.e2m1x2 (sm_100a / sm_120a families).
  F4x2ToF16x2 = 1 << 1,
};

/// One row of the table.
struct TargetDescription {
  Chip chip;
  llvm::StringRef name; ///< "sm_90a"
  unsigned capability;  ///< 90
  /// An arch-specific target ("a" suffix): its cubins run on exactly this
  /// compute capability, never on a later one.
  bool archSpecific;
  llvm::StringRef ptxFeatures; ///< "+ptx80", "+ptx81", "+ptx86", "+ptx87"
  /// MmaKind flags.
  uint8_t mmaKinds;
  /// HardwareConversion flags.
  uint8_t conversions;
  /// Shared memory one block may opt into (bytes).
  int64_t sharedMemoryPerBlock;
  /// Shared memory of one SM (bytes).
  int64_t sharedMemoryPerSM;
  /// 32-bit registers of one SM.
  int64_t registersPerSM;

  bool has(MmaKind kind) const { return mmaKinds & uint8_t(kind); }
  bool has(HardwareConversion conversion) const {
    return conversions & uint8_t(conversion);
  }
};

const TargetDescription &getTargetDescription(Chip chip);

/// The chips `pattn-compile` builds for when none are named.
llvm::ArrayRef<Chip> defaultCompileChips();

/// Parses the chip names of a `chips` option into `chips`, or the default
/// compile chips when `names` is empty. Returns the error to report (naming
/// the first unsupported chip and the supported ones), empty on success.
std::string parseChipList(llvm::ArrayRef<std::string> names,
                          llvm::SmallVectorImpl<Chip> &chips);

/// The chip whose kernels a device of compute capability `capability` runs,
/// among `built`: the first built chip of exactly that capability (an
/// arch-specific one, sm_90a, before a generic one, sm_90), else the
/// highest generic (not arch-specific) chip below it, whose PTX the driver
/// compiles forward, else nullopt. So an sm_100a build is never chosen for
/// a 12.0 device.
std::optional<Chip> chipForDevice(llvm::ArrayRef<Chip> built,
                                  unsigned capability);

} // namespace pattn

#endif // PATTN_TARGET_TARGETDESCRIPTION_H
