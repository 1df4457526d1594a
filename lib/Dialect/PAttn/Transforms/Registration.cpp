//===- Registration.cpp - pattn dialect pass registration -----------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file registers the dialect's own passes: the fold, which is
// target-neutral. Selection and planning sit beside the kernel families
// (lib/Conversion/PAttnToGPU/Planning) and register with the conversion.
//
//===----------------------------------------------------------------------===//

#include "pattn/Dialect/PAttn/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"

namespace pattn {
#define GEN_PASS_REGISTRATION
#include "pattn/Dialect/PAttn/Transforms/Passes.h.inc"
} // namespace pattn

void pattn::registerPasses() { registerPAttnPasses(); }
