//===- PlanDecode.cpp - Write each attention op's tiling ------------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements --pattn-plan-decode: after the backend choice, each
// attention op gets the plan its kernels are built from (DecodePlan.h), so
// the decision lives in IR, where lit tests can see it, and the lowering
// only obeys it.
//
//===----------------------------------------------------------------------===//

#include "pattn/Dialect/PAttn/IR/PAttnOps.h"
#include "pattn/Dialect/PAttn/Transforms/DecodePlan.h"
#include "pattn/Dialect/PAttn/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/DebugLog.h"

#define DEBUG_TYPE "pattn-plan-decode"

namespace pattn {
#define GEN_PASS_DEF_PATTNPLANDECODE
#include "pattn/Dialect/PAttn/Transforms/Passes.h.inc"
} // namespace pattn

using namespace mlir;
using namespace pattn;

namespace {
struct PlanDecodePass
    : public ::pattn::impl::PAttnPlanDecodeBase<PlanDecodePass> {
  using Base::Base;
  void runOnOperation() override;
};
} // namespace

void PlanDecodePass::runOnOperation() {
  Operation *root = getOperation();
  SmallVector<::pattn::Chip> targets;
  std::string error = ::pattn::parseChipList(chips, targets);
  if (!error.empty()) {
    root->emitError() << error;
    return signalPassFailure();
  }
  if (keysPerSplit <= 0 || keysPerSplit % 128 != 0) {
    root->emitError() << "keys-per-split must be a positive multiple of 128";
    return signalPassFailure();
  }
  if (xqaKeysPerSplit < 64) {
    root->emitError() << "xqa-keys-per-split must be at least 64";
    return signalPassFailure();
  }

  bool ok = true;
  auto plan = [&](Operation *op, std::optional<Backend> backend,
                  function_ref<Attribute()> xqa) {
    if (!backend) {
      op->emitOpError() << "has no backend; run --pattn-select-backend "
                           "before --pattn-plan-decode";
      ok = false;
      return;
    }
    Attribute chosen = *backend == Backend::xqa
                           ? xqa()
                           : ::pattn::planPortableDecode(op, keysPerSplit);
    LDBG() << op->getName() << " at " << op->getLoc() << ": " << chosen;
    op->setAttr("plan", chosen);
  };
  root->walk([&](Operation *op) {
    if (auto attention = dyn_cast<PagedAttentionOp>(op))
      plan(op, attention.getBackend(), [&]() -> Attribute {
        return ::pattn::planXqaDecode(attention, targets, xqaKeysPerSplit);
      });
    else if (auto mla = dyn_cast<MlaDecodeOp>(op))
      plan(op, mla.getBackend(), [&]() -> Attribute {
        mla.emitOpError() << "has backend xqa, which MLA decode does not "
                             "have yet";
        ok = false;
        return ::pattn::planPortableDecode(op, keysPerSplit);
      });
  });
  if (!ok)
    signalPassFailure();
}
