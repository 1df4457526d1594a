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
#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace pattn {

/// The f32 values of `table` in row-major order, or nullopt when they are
/// not compile-time constants.
std::optional<llvm::SmallVector<float>> getConstantScaleTable(mlir::Value table);

} // namespace pattn

#endif // PATTN_DIALECT_PATTN_TRANSFORMS_CONSTANTTABLES_H
