//===- PlanDecode.cpp - Write each attention op's tiling ------------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements --pattn-plan-decode: after the backend choice, each
// attention op gets the plan its kernels are built from, made by the kernel
// family that will build them (DecodeFamilies.h), so the decision lives in
// IR, where lit tests can see it, and the lowering only obeys it.
//
//===----------------------------------------------------------------------===//

#include "Planning/DecodeFamilies.h"
#include "Planning/DecodePlan.h"
#include "pattn/Conversion/PAttnToGPU.h"
#include "pattn/Dialect/PAttn/IR/PAttnOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/DebugLog.h"
#include "llvm/Support/raw_ostream.h"

#define DEBUG_TYPE "pattn-plan-decode"

namespace pattn {
#define GEN_PASS_DEF_PATTNPLANDECODE
#include "pattn/Conversion/Passes.h.inc"
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
  int64_t tile = xqaKeysPerTile;
  if (tile != 0 && tile != 16 && tile != 32 && tile != 64 && tile != 128)
    return fail() << "xqa-keys-per-tile=" << tile
                  << " must be 0 (the planner's choice), 16, 32, 64 or 128";
  if (xqaStages != 0 && (xqaStages < 2 || xqaStages > 8))
    return fail() << "xqa-stages=" << int64_t(xqaStages)
                  << " must be 0 (the planner's choice) or 2 to 8";
  for (auto [name, cluster] :
       {std::pair<StringRef, int64_t>{"xqa-cluster-heads", xqaClusterHeads},
        {"xqa-cluster-splits", xqaClusterSplits}})
    if (cluster != 0 && cluster != 1 && cluster != 2 && cluster != 4 &&
        cluster != 8)
      return fail() << name << "=" << cluster
                    << " must be 0 or 1 (none), 2, 4 or 8";
  if (promptKernel != "xqa" && promptKernel != "prefill" &&
      promptKernel != "prefill-mma-sync" && promptKernel != "prefill-wgmma")
    return fail() << "prompt-kernel=" << promptKernel
                  << " is not prefill, prefill-mma-sync, prefill-wgmma or xqa";
  return success();
}

/// The remark on an MLA op's tensor-core plans: which kernel, on which
/// chips, and why not the warpgroup kernel where it is not.
static std::string describeMlaPlans(const ::pattn::XqaMlaPlans &plans,
                                    ArrayRef<::pattn::Chip> targets) {
  std::string text;
  llvm::raw_string_ostream os(text);
  auto kernel = [&](::pattn::XqaMlaPlanAttr plan) {
    os << (plan.getKernel() == ::pattn::TensorCoreKernel::wgmma
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
    SmallVector<::pattn::Chip> chips;
    for (::pattn::Chip chip : targets)
      if (bool(plans.chipPlans.get(::pattn::stringifyChip(chip))) == own)
        chips.push_back(chip);
    return ::pattn::joinChipNames(chips);
  };
  kernel(cast<::pattn::XqaMlaPlanAttr>(plans.chipPlans.begin()->getValue()));
  os << ", on " << chipsWhere(true) << "; ";
  kernel(plans.plan);
  os << ", on " << chipsWhere(false);
  why();
  return text;
}

/// The prefill family's plan of a prompt where it was asked for, with the
/// decode plan of the batch's short sequences (set on the op as
/// decode_plan) and a remark on how the two cover the batch; null
/// otherwise. (The prefill family serves every op the XQA family does,
/// which the caller has checked.)
static Attribute
planPromptOnPrefill(PagedAttentionOp op, ArrayRef<::pattn::Chip> targets,
                    const ::pattn::DecodePlanOptions &options) {
  if (!options.prefill || static_cast<int64_t>(op.getMaxQueryLen()) <=
                              ::pattn::kMaxSpeculativeTokens)
    return {};
  const ::pattn::DecodeFamily &prefill =
      ::pattn::decodeFamily(::pattn::DecodeFamilyKind::PrefillPaged);
  auto plan =
      cast<::pattn::PrefillPlanAttr>(prefill.plan(op, targets, options));
  // The batch splits by each sequence's query tokens n (read on the
  // device): n <= T on the decode kernel, one block per (sequence, KV head,
  // split), whose rows fit T tokens; n > T on the prefill family,
  // ceil(n / query_tile) blocks per KV head. Alone, the prefill family
  // gave each decode token of a mixed batch a 64-row block.
  int64_t group = static_cast<int64_t>(op.getNumHeads()) /
                  op.getKey().getType().getKvHeads();
  int64_t decodeTokens = ::pattn::splitDecodeTokens(group);
  ::pattn::XqaPlanAttr decode = ::pattn::planXqaDecode(
      op, targets, options.xqaMaxKeysPerSplit,
      {options.xqaKeysPerTile, options.xqaStages, options.xqaCopyWarp,
       options.xqaScoresAhead, options.xqaClusterHeads,
       options.xqaClusterSplits, options.xqaMergeUnsplit},
      decodeTokens);
  op.setDecodePlanAttr(decode);
  // The kernel, and why not wgmma where it is mma.sync.
  std::string kernel = "wgmma";
  if (plan.getKernel() != ::pattn::TensorCoreKernel::wgmma)
    kernel = "mma.sync (not wgmma: " +
             ::pattn::prefillWgmmaRejection(op, targets, options.prefillWgmma) +
             ")";
  op.emitRemark() << "prefill plan: " << kernel << ", " << plan.getRows()
                  << " rows a block, query tiles of " << plan.getQueryTile()
                  << " tokens x g = " << group << ", " << plan.getKeysPerTile()
                  << "-key tiles x " << plan.getStages()
                  << " stages; sequences of at most " << decodeTokens
                  << " query tokens run on the decode kernel ("
                  << decode.getRows() << " rows, " << decode.getKeysPerTile()
                  << "-key tiles x " << decode.getStages() << " stages)";
  return plan;
}

void PlanDecodePass::runOnOperation() {
  Operation *root = getOperation();
  ::pattn::DecodePlanOptions options;
  options.portableKeysPerSplit = keysPerSplit;
  options.xqaMaxKeysPerSplit = xqaKeysPerSplit;
  options.xqaKeysPerTile = xqaKeysPerTile;
  options.xqaStages = xqaStages;
  options.xqaCopyWarp = xqaCopyWarp;
  options.xqaScoresAhead = xqaScoresAhead;
  options.xqaClusterHeads = xqaClusterHeads;
  options.xqaClusterSplits = xqaClusterSplits;
  options.xqaMergeUnsplit = xqaMergeUnsplit;
  options.prefill = promptKernel != "xqa";
  options.prefillWgmma =
      promptKernel == "prefill-mma-sync" ? ::pattn::PrefillWgmma::never
      : promptKernel == "prefill-wgmma"  ? ::pattn::PrefillWgmma::wherever
                                         : ::pattn::PrefillWgmma::whereFaster;
  bool ok = true;
  auto plan = [&](Operation *op, std::optional<Backend> backend) {
    if (!backend) {
      op->emitOpError() << "has no backend; run --pattn-select-backend "
                           "before --pattn-plan-decode";
      ok = false;
      return;
    }
    // Planned afresh: a split's decode plan only next to a prefill plan.
    if (auto paged = dyn_cast<PagedAttentionOp>(op))
      paged.removeDecodePlanAttr();
    if (*backend == Backend::portable) {
      op->setAttr("plan",
                  ::pattn::portableFamilyOf(op).plan(op, targets, options));
      return;
    }
    // The selector may have been asked about other chips: the tensor-core
    // family must serve every chip planned for.
    const ::pattn::DecodeFamily &family = ::pattn::tensorCoreFamilyOf(op);
    SmallVector<std::string> rejections = family.rejections(op, targets);
    if (!rejections.empty()) {
      op->emitOpError() << "has backend xqa, but " << family.name
                        << " cannot serve it on "
                        << ::pattn::joinChipNames(targets) << ": "
                        << llvm::join(rejections, "; ")
                        << "; select the backend for these chips or use "
                           "force=portable";
      ok = false;
      return;
    }
    auto mla = dyn_cast<MlaDecodeOp>(op);
    if (!mla) {
      Attribute chosen =
          planPromptOnPrefill(cast<PagedAttentionOp>(op), targets, options);
      if (!chosen)
        chosen = family.plan(op, targets, options);
      LDBG() << op->getName() << " at " << op->getLoc() << ": " << chosen;
      op->setAttr("plan", chosen);
      return;
    }
    // Which of the two tensor-core kernels on which chips, and why not the
    // warpgroup one (pattn-compile --remarks shows it next to the backend).
    ::pattn::XqaMlaPlans plans = ::pattn::planXqaMlaDecode(mla, targets);
    if (plans.chipPlans)
      mla.setChipPlansAttr(plans.chipPlans);
    mla.emitRemark() << describeMlaPlans(plans, targets);
    LDBG() << op->getName() << " at " << op->getLoc() << ": " << plans.plan;
    mla.setPlanAttr(plans.plan);
  };
  root->walk([&](Operation *op) {
    if (auto attention = dyn_cast<PagedAttentionOp>(op))
      plan(op, attention.getBackend());
    else if (auto mla = dyn_cast<MlaDecodeOp>(op)) {
      // Set again where the tensor-core plans need them.
      mla.removeChipPlansAttr();
      plan(op, mla.getBackend());
    }
  });
  if (!ok)
    signalPassFailure();
}
