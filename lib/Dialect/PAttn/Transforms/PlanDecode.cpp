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
  LogicalResult initialize(MLIRContext *context) override;
  void runOnOperation() override;

  /// The chips, checked by initialize.
  SmallVector<::pattn::Chip> targets;
};
} // namespace

LogicalResult PlanDecodePass::initialize(MLIRContext *context) {
  // Options are not ops: their errors carry no location and dump no IR.
  auto fail = [&]() {
    return emitError(UnknownLoc::get(context)) << "pattn-plan-decode: ";
  };
  targets.clear();
  std::string error = ::pattn::parseChipList(chips, targets);
  if (!error.empty())
    return fail() << "chips: " << error;
  if (keysPerSplit <= 0 || keysPerSplit % 128 != 0)
    return fail() << "keys-per-split=" << int64_t(keysPerSplit)
                  << " must be a positive multiple of 128";
  if (xqaKeysPerSplit < 64)
    return fail() << "xqa-keys-per-split=" << int64_t(xqaKeysPerSplit)
                  << " must be at least 64";
  return success();
}

void PlanDecodePass::runOnOperation() {
  Operation *root = getOperation();
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
        // The selector checked one chip; the tile must fit every chip
        // built for (a large custom record may not fit a 99 KiB one).
        // Which of the two tensor-core kernels, and why not the warpgroup
        // one (pattn-compile --remarks shows it next to the backend).
        std::string notWarpgroup;
        ::pattn::XqaMlaPlanAttr mlaPlan =
            ::pattn::planXqaMlaDecode(mla, targets, &notWarpgroup);
        if (notWarpgroup.empty())
          mla.emitRemark() << "xqa plan: the warpgroup (wgmma) kernel, "
                           << mlaPlan.getHeadsPerBlock() << " heads per block";
        else
          mla.emitRemark() << "xqa plan: the mma.sync kernel, "
                           << mlaPlan.getHeadsPerBlock()
                           << " heads per block (not the warpgroup kernel: "
                           << notWarpgroup << ")";
        for (::pattn::Chip chip : targets) {
          int64_t limit =
              ::pattn::getTargetDescription(chip).sharedMemoryPerBlock;
          if (mlaPlan.getSharedBytes() > limit) {
            mla.emitOpError()
                << "has backend xqa, but its tensor-core tile needs "
                << mlaPlan.getSharedBytes() << " bytes of shared memory > "
                << limit << " on " << ::pattn::stringifyChip(chip)
                << "; select the backend for that chip or use "
                   "force=portable";
            ok = false;
            break;
          }
        }
        return mlaPlan;
      });
  });
  if (!ok)
    signalPassFailure();
}
