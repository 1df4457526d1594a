//===- VerifyPlans.h - Plans checked against the chips ----------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// The conversion never plans: it lowers the plans --pattn-plan-decode
// recorded, after checking that each one fits every chip it is lowered for
// (shared memory per block, the instructions its kernel kind needs).
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_LIB_CONVERSION_PATTNTOGPU_PLANNING_VERIFYPLANS_H
#define PATTN_LIB_CONVERSION_PATTNTOGPU_PLANNING_VERIFYPLANS_H

#include "pattn/Target/TargetDescription.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace pattn {

/// Fails, with an error at the op, where a decode op of `function` has no
/// plan, or where the plan some chip of `chips` would run (an MLA op's
/// chip_plans entry for it, else its plan) was not made for that chip (its
/// `targets`), needs more shared memory per block than the chip has,
/// instructions it lacks (wgmma) or more resident blocks than it holds, or
/// multiplies operands of another type than the op's data needs.
mlir::LogicalResult verifyDecodePlans(mlir::func::FuncOp function,
                                      llvm::ArrayRef<Chip> chips);

} // namespace pattn

#endif // PATTN_LIB_CONVERSION_PATTNTOGPU_PLANNING_VERIFYPLANS_H
