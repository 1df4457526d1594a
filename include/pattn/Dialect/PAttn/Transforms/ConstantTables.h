//===- ConstantTables.h - Scale tables known at compile time ----*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// Both the fold and the backend selection treat a scale table differently
// when its values are known at compile time. This is where "known" is
// defined: a constant memref.global read with memref.get_global, or an
// arith.constant tensor turned into a buffer with bufferization.to_buffer.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_DIALECT_PATTN_TRANSFORMS_CONSTANTTABLES_H
#define PATTN_DIALECT_PATTN_TRANSFORMS_CONSTANTTABLES_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace pattn {

/// The f32 values of `table` in row-major order, or nullopt when they are
/// not compile-time constants.
std::optional<llvm::SmallVector<float>>
getConstantScaleTable(mlir::Value table);

/// SPEC §2: a static scale (a K/V/out scale, a write scale or an MLA outer
/// scale known at compile time) must be finite. Emits an error at `op`
/// naming the operand, the value and its index, and fails, otherwise
/// succeeds; scales that are not compile-time constants are checked by
/// nobody here (the device code keeps them finite or reports them).
mlir::LogicalResult verifyStaticScalesAreFinite(mlir::Operation *op);

} // namespace pattn

#endif // PATTN_DIALECT_PATTN_TRANSFORMS_CONSTANTTABLES_H
