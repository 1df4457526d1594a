//===- TargetDescription.cpp - What pattn knows about each chip -----------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file holds the target table. The portable kernels decode fp8 and e2m1
// with integer bit tricks on every chip, so the conversion columns are not
// read by them; they record which chips may use the hardware conversions
// (the NVPTX backend aborts with "Cannot select" on chips without them).
//
//===----------------------------------------------------------------------===//

#include "pattn/Conversion/TargetDescription.h"

#include "llvm/Support/ErrorHandling.h"

using namespace pattn;

static const TargetDescription kTargets[] = {
    {Chip::SM80, "+ptx80", false, false},   {Chip::SM86, "+ptx80", false, false},
    {Chip::SM87, "+ptx80", false, false},   {Chip::SM89, "+ptx80", true, false},
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

llvm::ArrayRef<Chip> pattn::defaultCompileChips() {
  static const Chip chips[] = {Chip::SM80,  Chip::SM86,   Chip::SM89,
                               Chip::SM90a, Chip::SM100a, Chip::SM120a};
  return chips;
}
