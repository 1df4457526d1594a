//===- OpOrder.cpp - Generated IR independent of the host compiler --------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//

#include "Host/OpOrder.h"

#include "mlir/IR/Block.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

using namespace mlir;

/// Ops that keep their place relative to each other. The block's last op
/// (its terminator) is one by position, which needs no trait lookup (see
/// docs/Embedding.md on templated traits in GCC-built C hosts).
static bool isAnchor(Operation *op) {
  return op->getNumRegions() > 0 || op->getNumSuccessors() > 0 ||
         op == &op->getBlock()->back() || !isMemoryEffectFree(op);
}

/// The values an anchor needs from `block`: its operands, then those used
/// inside its regions, in IR order.
static SmallVector<Value> neededValues(Operation *anchor, Block *block) {
  SmallVector<Value> values(anchor->getOperands());
  for (Region &region : anchor->getRegions())
    region.walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        if (Operation *def = operand.getDefiningOp();
            def && def->getBlock() == block)
          values.push_back(operand);
    });
  return values;
}

static void orderBlock(Block &block) {
  SmallVector<Operation *> original;
  for (Operation &op : block)
    original.push_back(&op);
  llvm::DenseSet<Operation *> placed;
  SmallVector<Operation *> order;
  // Places the pure ops behind `values`, operands first (an explicit stack:
  // chains of thousands of ops are common in unrolled kernels).
  auto placeDependencies = [&](ArrayRef<Value> values) {
    SmallVector<std::pair<Operation *, unsigned>> stack;
    auto push = [&](Value value) {
      Operation *def = value.getDefiningOp();
      if (def && def->getBlock() == &block && !isAnchor(def) &&
          !placed.contains(def)) {
        placed.insert(def);
        stack.push_back({def, 0});
      }
    };
    for (Value value : values) {
      push(value);
      while (!stack.empty()) {
        auto &[op, next] = stack.back();
        if (next < op->getNumOperands()) {
          Value operand = op->getOperand(next++);
          push(operand);
          continue;
        }
        order.push_back(op);
        stack.pop_back();
      }
    }
  };
  for (Operation *op : original) {
    if (!isAnchor(op))
      continue;
    placeDependencies(neededValues(op, &block));
    order.push_back(op);
    placed.insert(op);
  }
  // What no anchor needs is dead, unless another block of the region uses
  // it: those (none in generated code) stay, before the terminator.
  SmallVector<Operation *> kept;
  for (Operation *op : llvm::reverse(original)) {
    if (placed.contains(op))
      continue;
    if (op->use_empty())
      op->erase();
    else
      kept.insert(kept.begin(), op);
  }
  if (!kept.empty() && !order.empty() && order.back() == original.back())
    order.insert(order.end() - 1, kept.begin(), kept.end());
  else
    order.append(kept.begin(), kept.end());
  for (Operation *op : order)
    op->moveBefore(&block, block.end());
}

void pattn::orderOpsDeterministically(Operation *function) {
  // Inner blocks first, so that the walk over an anchor's regions sees
  // their final order.
  SmallVector<Block *> blocks;
  function->walk<WalkOrder::PostOrder>(
      [&](Block *block) { blocks.push_back(block); });
  for (Block *block : blocks)
    orderBlock(*block);
}
