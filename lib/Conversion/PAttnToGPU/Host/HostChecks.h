//===- HostChecks.h - Dynamic sizes checked before any launch ---*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// SPEC §7: the generated host entry, not only the Python layer, checks every
// dynamic size against the others before anything launches. The verifiers
// compare the sizes known at compile time; a dimension that is `?` on one
// side is compared here, at the top of the function, against the other
// operand's size or the size the cache type implies.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_LIB_CONVERSION_PATTNTOGPU_HOST_HOSTCHECKS_H
#define PATTN_LIB_CONVERSION_PATTNTOGPU_HOST_HOSTCHECKS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace pattn {

/// The runtime entry a failed check calls: it records
/// PATTN_ERROR_INVALID_ARGUMENT with the message and both sizes, after which
/// the runtime runs nothing else of the call (its errors are sticky) and the
/// entry returns that status.
inline constexpr llvm::StringLiteral kRejectSizes = "pattnRuntimeRejectSizes";

/// Emits at `builder`'s insertion point (the top of `function`, before any
/// launch) one check per dynamic size of a pattn op's operands that reaches
/// the function's arguments. A failing check calls kRejectSizes with a
/// message naming the function, the op, its location and the two sizes.
void emitHostSizeChecks(mlir::OpBuilder &builder, mlir::func::FuncOp function);

} // namespace pattn

#endif // PATTN_LIB_CONVERSION_PATTNTOGPU_HOST_HOSTCHECKS_H
