//===- OpOrder.h - Generated IR independent of the host compiler -*- C++
//-*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// The kernels and host code pattn generates are written with nested builder
// calls (`kb.add(kb.mul(a, b), kb.index(8))`), and C++ leaves the order in
// which a call's arguments are evaluated unspecified: GCC and Clang create
// the same ops in different orders. orderOpsDeterministically rewrites the
// order of side-effect-free ops so that it depends only on the IR's
// dataflow and on the order of the ops with effects, which statements fix.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_LIB_CONVERSION_PATTNTOGPU_HOST_OPORDER_H
#define PATTN_LIB_CONVERSION_PATTNTOGPU_HOST_OPORDER_H

#include "mlir/IR/Operation.h"

namespace pattn {

/// In every block of the function-like op `function` (and below): the ops with
/// memory effects, regions or successors ("anchors") keep their relative order;
/// each side-effect-free op moves to just before the first anchor that needs it
/// (through its operands or a use inside the anchor's regions), its own
/// operands first, in operand order. Side-effect-free ops that nothing needs
/// are erased. Semantics are unchanged: only pure ops move, and never above an
/// operand.
void orderOpsDeterministically(mlir::Operation *function);

} // namespace pattn

#endif // PATTN_LIB_CONVERSION_PATTNTOGPU_HOST_OPORDER_H
