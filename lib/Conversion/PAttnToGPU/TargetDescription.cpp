//===- TargetDescription.cpp - What pattn knows about each chip -----------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file holds the target table. The conversion columns record which
// chips may use the hardware fp8/fp4 conversions (the NVPTX backend aborts
// with "Cannot select" on chips without them). The decode kernels use the
// fp8 one (cvt.rn.f16x2.e4m3x2) where the table allows it; sm_89 needs PTX
// 8.1 for it (sm_90 has it from 7.8), hence +ptx81; the e2m1 one
// (cvt.rn.f16x2.e2m1x2) where the fp4 column allows it.
//
//===----------------------------------------------------------------------===//

#include "pattn/Conversion/TargetDescription.h"

#include "llvm/Support/ErrorHandling.h"

#include <algorithm>

using namespace pattn;

static const TargetDescription kTargets[] = {
    {Chip::SM80, "+ptx80", false, false},   {Chip::SM86, "+ptx80", false, false},
    {Chip::SM87, "+ptx80", false, false},   {Chip::SM89, "+ptx81", true, false},
    {Chip::SM90, "+ptx80", true, false},    {Chip::SM90a, "+ptx80", true, false},
    {Chip::SM100, "+ptx86", true, false},   {Chip::SM100a, "+ptx86", true, true},
    {Chip::SM120, "+ptx87", true, false},   {Chip::SM120a, "+ptx87", true, true},
};

const TargetDescription &pattn::getTargetDescription(Chip chip) {
  for (const TargetDescription &target : kTargets)
    if (target.chip == chip)
      return target;
  llvm_unreachable("chip missing from the target table");
}

/// The lowest compute capability among the chips whose `column` is set.
static unsigned firstCapabilityWith(bool TargetDescription::*column) {
  unsigned first = ~0u;
  for (const TargetDescription &target : kTargets)
    if (target.*column)
      first = std::min(first, computeCapability(target.chip));
  return first;
}

unsigned pattn::firstFp8ConversionCapability() {
  return firstCapabilityWith(&TargetDescription::hasFp8Conversion);
}

unsigned pattn::firstFp4ConversionCapability() {
  return firstCapabilityWith(&TargetDescription::hasFp4Conversion);
}

llvm::ArrayRef<Chip> pattn::defaultCompileChips() {
  static const Chip chips[] = {Chip::SM80,  Chip::SM86,   Chip::SM89,
                               Chip::SM90a, Chip::SM100a, Chip::SM120a};
  return chips;
}
