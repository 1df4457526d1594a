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
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/DebugLog.h"
#include "llvm/Support/raw_ostream.h"

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

/// The remark on an MLA op's tensor-core plans: which kernel, on which
/// chips, and why not the warpgroup kernel where it is not.
static std::string describeMlaPlans(const ::pattn::XqaMlaPlans &plans,
                                    ArrayRef<::pattn::Chip> targets) {
  std::string text;
  llvm::raw_string_ostream os(text);
  auto kernel = [&](::pattn::XqaMlaPlanAttr plan) {
    os << (plan.getKernel() == ::pattn::XqaMlaKernel::wgmma
               ? "the warpgroup (wgmma) kernel, "
               : "the mma.sync kernel, ")
       << plan.getHeadsPerBlock() << " heads per block";
  };
  auto why = [&] {
    if (!plans.notWarpgroup.empty())
      os << " (not the warpgroup kernel: " << plans.notWarpgroup << ")";
  };
  os << "xqa plan: ";
  if (!plans.chipPlans) {
    kernel(plans.plan);
    why();
    return text;
  }
  // chip_plans hold the warpgroup plan on the chips with wgmma.
  auto chipsWhere = [&](bool own) {
    SmallVector<StringRef> names;
    for (::pattn::Chip chip : targets)
      if (bool(plans.chipPlans.get(::pattn::stringifyChip(chip))) == own)
        names.push_back(::pattn::stringifyChip(chip));
    return llvm::join(names, ", ");
  };
  kernel(cast<::pattn::XqaMlaPlanAttr>(plans.chipPlans.begin()->getValue()));
  os << ", on " << chipsWhere(true) << "; ";
  kernel(plans.plan);
  os << ", on " << chipsWhere(false);
  why();
  return text;
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
    else if (auto mla = dyn_cast<MlaDecodeOp>(op)) {
      // Set again below where the tensor-core plans need them.
      mla.removeChipPlansAttr();
      plan(op, mla.getBackend(), [&]() -> Attribute {
        // The selector checked one chip; the tile must fit every chip
        // built for (a large custom record may not fit a 99 KiB one).
        // Which of the two tensor-core kernels on which chips, and why not
        // the warpgroup one (pattn-compile --remarks shows it next to the
        // backend).
        ::pattn::XqaMlaPlans plans = ::pattn::planXqaMlaDecode(mla, targets);
        if (plans.chipPlans)
          mla.setChipPlansAttr(plans.chipPlans);
        mla.emitRemark() << describeMlaPlans(plans, targets);
        for (::pattn::Chip chip : targets) {
          int64_t limit =
              ::pattn::getTargetDescription(chip).sharedMemoryPerBlock;
          int64_t shared = plans.planFor(chip).getSharedBytes();
          if (shared > limit) {
            mla.emitOpError()
                << "has backend xqa, but its tensor-core tile needs " << shared
                << " bytes of shared memory > " << limit << " on "
                << ::pattn::stringifyChip(chip)
                << "; select the backend for that chip or use "
                   "force=portable";
            ok = false;
            break;
          }
        }
        return plans.plan;
      });
    }
  });
  if (!ok)
    signalPassFailure();
}
