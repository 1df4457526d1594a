//===- VerifyPlans.cpp - Plans checked against the chips built for --------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the check that runs before --convert-pattn-to-gpu
// rewrites anything: every decode has a plan, and every plan fits the chips
// whose kernels obey it. A plan made for sm_90a (227 KiB of shared memory
// per block, wgmma) lowered for sm_86 (99 KiB, no wgmma) is an error here,
// not a kernel that fails to launch.
//
//===----------------------------------------------------------------------===//

#include "Planning/VerifyPlans.h"
#include "Planning/DecodePlan.h"
#include "pattn/Dialect/PAttn/IR/PAttnOps.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace pattn;

/// The shared memory per block that `plan` needs (0 for the portable
/// kernels, whose shared buffers are static and small).
static int64_t sharedBytesOf(Attribute plan) {
  if (auto xqa = dyn_cast<XqaPlanAttr>(plan))
    return xqa.getSharedBytes();
  if (auto prefill = dyn_cast<PrefillPlanAttr>(plan))
    return prefill.getSharedBytes();
  if (auto mla = dyn_cast<XqaMlaPlanAttr>(plan))
    return mla.getSharedBytes();
  return 0;
}

/// The chips `plan` was made for.
static ArrayRef<Chip> targetsOf(Attribute plan) {
  if (auto xqa = dyn_cast<XqaPlanAttr>(plan))
    return xqa.getTargets();
  if (auto prefill = dyn_cast<PrefillPlanAttr>(plan))
    return prefill.getTargets();
  if (auto mla = dyn_cast<XqaMlaPlanAttr>(plan))
    return mla.getTargets();
  return cast<PortablePlanAttr>(plan).getTargets();
}

/// The blocks per SM that `plan` promises the host and ptxas, and the most
/// that `chip` holds of its blocks (1 for the portable kernels, which
/// promise nothing).
static std::pair<int64_t, int64_t> residencyOf(Attribute plan, Chip chip) {
  if (auto xqa = dyn_cast<XqaPlanAttr>(plan))
    return {xqa.getResidentBlocksOn(chip),
            xqaResidentBlocks(xqa.getSharedBytes(), chip)};
  if (auto prefill = dyn_cast<PrefillPlanAttr>(plan))
    return {prefill.getResidentBlocksOn(chip),
            xqaResidentBlocks(prefill.getSharedBytes(), chip)};
  if (auto mla = dyn_cast<XqaMlaPlanAttr>(plan))
    return {mla.getResidentBlocksOn(chip),
            xqaMlaResidentBlocks(mla.getKernel(), mla.getSharedBytes(), chip)};
  return {1, 1};
}

/// Whether `plan` is a warpgroup (wgmma) kernel's: the MLA or prefill one.
static bool needsWgmma(Attribute plan) {
  if (auto prefill = dyn_cast<PrefillPlanAttr>(plan))
    return prefill.getKernel() == TensorCoreKernel::wgmma;
  auto mla = dyn_cast<XqaMlaPlanAttr>(plan);
  return mla && mla.getKernel() == TensorCoreKernel::wgmma;
}

/// The plan --pattn-plan-decode recorded on a decode op (null if none).
static Attribute recordedPlan(Operation *op) {
  if (auto paged = dyn_cast<PagedAttentionOp>(op))
    return paged.getPlanAttr();
  return cast<MlaDecodeOp>(op).getPlanAttr();
}

/// The plan that `chip`'s kernels of `op` obey.
static Attribute planFor(Operation *op, Chip chip) {
  if (auto mla = dyn_cast<MlaDecodeOp>(op))
    if (DictionaryAttr chipPlans = mla.getChipPlansAttr())
      if (Attribute own = chipPlans.get(stringifyChip(chip)))
        return own;
  return recordedPlan(op);
}

static LogicalResult verifyPlanOnChip(Operation *op, Attribute plan,
                                      Chip chip) {
  const TargetDescription &target = getTargetDescription(chip);
  if (!llvm::is_contained(targetsOf(plan), chip))
    return op->emitOpError()
           << "has a plan made for [" << joinChipNames(targetsOf(plan))
           << "], but is lowered for " << target.name
           << ": plan it for the chips it is lowered for "
              "(--pattn-plan-decode=chips=...)";
  // A plan names its chips; these hold the plan to what they have, should
  // its numbers not fit them.
  int64_t shared = sharedBytesOf(plan);
  if (shared > target.sharedMemoryPerBlock)
    return op->emitOpError()
           << "has a plan that needs " << shared
           << " bytes of shared memory per block, but " << target.name
           << " allows " << target.sharedMemoryPerBlock;
  if (needsWgmma(plan) && !target.has(MmaKind::WgmmaM64NNK16))
    return op->emitOpError() << "has the warpgroup plan (wgmma), but "
                             << target.name << " has no wgmma";
  auto [promised, holds] = residencyOf(plan, chip);
  if (promised > holds)
    return op->emitOpError()
           << "has a plan of " << promised << " resident blocks per SM, but "
           << target.name << " holds " << holds << " of its blocks";
  return success();
}

/// The plan's operand type against the op's: an XQA plan over bf16 data
/// must multiply bf16 (f16 would round it), and one over f16 data f16.
static LogicalResult verifyOperand(Operation *op, Attribute plan) {
  auto paged = dyn_cast<PagedAttentionOp>(op);
  Type operand;
  if (auto xqa = dyn_cast<XqaPlanAttr>(plan))
    operand = xqa.getOperand();
  else if (auto prefill = dyn_cast<PrefillPlanAttr>(plan))
    operand = prefill.getOperand();
  if (!operand || !paged)
    return success();
  bool bf16 =
      xqaUsesBf16(cast<MemRefType>(paged.getQuery().getType()).getElementType(),
                  paged.getKey().getType(), paged.getValue().getType());
  if (operand.isBF16() != bf16)
    return op->emitOpError() << "has a tensor-core plan over " << operand
                             << " operands, but its query and caches need "
                             << (bf16 ? "bf16" : "f16");
  return success();
}

/// A prefill plan's shared memory holds its tiles, and the wgmma kernel's
/// copies give each pass of its 128 threads whole core matrices: rows of at
/// most 16 segments (256 bytes).
static LogicalResult verifyPrefillLayout(PagedAttentionOp op,
                                         PrefillPlanAttr plan) {
  CacheType key = op.getKey().getType(), value = op.getValue().getType();
  if (plan.getKernel() == TensorCoreKernel::wgmma)
    for (CacheType side : {key, value})
      if (side.getRowBytes() > 256)
        return op.emitOpError()
               << "has a wgmma prefill plan, but a cache row of "
               << side.getRowBytes()
               << " bytes: its copies take rows of at most 256";
  int64_t total = layoutPrefillShared(key, value, plan.getKeysPerTile(),
                                      plan.getStages(), plan.getKernel())
                      .total;
  if (total > plan.getSharedBytes())
    return op.emitOpError()
           << "has a prefill plan of " << plan.getSharedBytes()
           << " bytes of shared memory, but its tiles take " << total;
  return success();
}

/// An XQA plan's shared memory against the window its kernel lays out
/// (query tile, liveness flags, a copy warp's barriers, the ring, the
/// merge): a hand-written plan that promised less would have the kernel
/// address past its window.
static LogicalResult verifySharedLayout(Operation *op, Attribute plan) {
  auto paged = dyn_cast<PagedAttentionOp>(op);
  if (auto prefill = dyn_cast<PrefillPlanAttr>(plan); paged && prefill)
    return verifyPrefillLayout(paged, prefill);
  auto xqa = dyn_cast<XqaPlanAttr>(plan);
  if (!paged || !xqa)
    return success();
  bool copyWarp = xqa.getThreads() > kBlockThreads;
  XqaSharedLayout layout = layoutXqaShared(
      paged.getKey().getType(), paged.getValue().getType(), xqa.getRows(),
      xqa.getKeysPerTile(), xqa.getStages(), xqa.getKeyWarps(), copyWarp);
  if (layout.total > xqa.getSharedBytes())
    return op->emitOpError() << "has an XQA plan of " << xqa.getSharedBytes()
                             << " bytes of shared memory, but its tiles, ring"
                             << (copyWarp ? ", copy-warp barriers" : "")
                             << " and merge take " << layout.total;
  return success();
}

/// An XQA plan's clusters of cluster_heads KV heads' blocks must tile the
/// op's KV heads: a cluster spans consecutive blocks of one sequence. A
/// cluster of splits (cluster_splits), or a lone split that merges its own
/// rows (merges_unsplit), writes the op's output itself, so the op has no
/// guard (whose other op's merge would read its workspace) and
/// the plan is not a split prompt's decode side (`decodeSide`: its rows are
/// the merge's compact token slots).
static LogicalResult verifyClusters(Operation *op, Attribute plan,
                                    bool decodeSide) {
  auto paged = dyn_cast<PagedAttentionOp>(op);
  auto xqa = dyn_cast<XqaPlanAttr>(plan);
  if (!paged || !xqa)
    return success();
  int64_t kvHeads = paged.getKey().getType().getKvHeads();
  if (kvHeads % xqa.getClusterHeads() != 0)
    return op->emitOpError()
           << "has an XQA plan of clusters of " << xqa.getClusterHeads()
           << " KV heads' blocks, which do not divide its " << kvHeads
           << " KV heads";
  // A plan whose blocks merge their rows into the output themselves.
  std::string writer;
  if (int64_t splits = xqa.getClusterSplits(); splits > 1)
    writer = "whose clusters of " + std::to_string(splits) + " splits write";
  else if (xqa.getMergesUnsplit())
    writer = "whose lone split (merges_unsplit) writes";
  if (writer.empty())
    return success();
  if (paged.getGuard())
    return op->emitOpError()
           << "has an XQA plan " << writer
           << " its output, but it has a guard (the merge of its guarded "
              "pair reads its workspace)";
  if (decodeSide)
    return op->emitOpError()
           << "has a decode plan " << writer
           << " its output, but a split prompt's decode side leaves its rows "
              "to the merge";
  return success();
}

LogicalResult pattn::verifyDecodePlans(func::FuncOp function,
                                       ArrayRef<Chip> chips) {
  WalkResult result =
      function.walk([&](Operation *op) {
        if (!isa<PagedAttentionOp, MlaDecodeOp>(op))
          return WalkResult::advance();
        if (!recordedPlan(op)) {
          op->emitOpError()
              << "has no decode plan: run --pattn-plan-decode (with the chips "
                 "it is lowered for) before --convert-pattn-to-gpu, as "
                 "pattn-compile and --pattn-compile do";
          return WalkResult::interrupt();
        }
        // A split op's decode plan runs on the same chips.
        auto paged = dyn_cast<PagedAttentionOp>(op);
        Attribute decode = paged ? paged.getDecodePlanAttr() : Attribute();
        for (Chip chip : chips) {
          Attribute plan = planFor(op, chip);
          if (failed(verifyPlanOnChip(op, plan, chip)) ||
              failed(verifyOperand(op, plan)) ||
              failed(verifySharedLayout(op, plan)) ||
              failed(verifyClusters(op, plan, /*decodeSide=*/false)))
            return WalkResult::interrupt();
          if (decode &&
              (failed(verifyPlanOnChip(op, decode, chip)) ||
               failed(verifyOperand(op, decode)) ||
               failed(verifySharedLayout(op, decode)) ||
               failed(verifyClusters(op, decode, /*decodeSide=*/true))))
            return WalkResult::interrupt();
        }
        return WalkResult::advance();
      });
  return failure(result.wasInterrupted());
}
