//===- Passes.h - pattn dialect passes --------------------------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// Declares the passes of the pattn dialect and the named pipeline that runs
// them in order.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_DIALECT_PATTN_TRANSFORMS_PASSES_H
#define PATTN_DIALECT_PATTN_TRANSFORMS_PASSES_H

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Pass/Pass.h"

namespace pattn {

/// The values of the `force` option of --pattn-select-backend.
#define GEN_PASS_DECL
#include "pattn/Dialect/PAttn/Transforms/Passes.h.inc"

/// Registers the dialect's passes (the fold).
void registerPasses();

} // namespace pattn

#endif // PATTN_DIALECT_PATTN_TRANSFORMS_PASSES_H
