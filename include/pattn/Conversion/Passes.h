//===- Passes.h - pattn conversion passes -----------------------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_CONVERSION_PASSES_H
#define PATTN_CONVERSION_PASSES_H

#include "pattn/Conversion/PAttnToGPU.h"

namespace pattn {
#define GEN_PASS_REGISTRATION
#include "pattn/Conversion/Passes.h.inc"
} // namespace pattn

#endif // PATTN_CONVERSION_PASSES_H
