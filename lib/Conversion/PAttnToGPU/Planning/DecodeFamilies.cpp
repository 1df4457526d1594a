//===- DecodeFamilies.cpp - The decode kernel families' registry ----------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the registry: per family, the conditions of the
// eligibility table (SPEC §6, asked chip by chip) plus what only the
// family's own layout knows (the MLA tiles' shared memory, wgmma), its
// planner (DecodePlan.h) and its kernel builder (Kernels.h).
//
//===----------------------------------------------------------------------===//

#include "Planning/DecodeFamilies.h"
#include "Planning/DecodePlan.h"
#include "pattn/Dialect/PAttn/Transforms/ConstantTables.h"
#include "pattn/Dialect/PAttn/Transforms/Eligibility.h"
#include "pattn/Numerics/Numerics.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cassert>

using namespace mlir;
using namespace pattn;
namespace numerics = ::pattn::numerics;

//===----------------------------------------------------------------------===//
// Ops as the eligibility table sees them
//===----------------------------------------------------------------------===//

/// Where the K channel scales of `op` stand.
static void describeKeyScales(PagedAttentionOp op, AttentionConfig &config) {
  if (std::optional<int32_t> guard = op.getGuardValue()) {
    config.keyFold = *guard == 1 ? KeyScaleFold::GuardedFolded
                                 : KeyScaleFold::GuardedFallback;
    return;
  }
  if (op.getKey().getType().getScale() != ScaleGranularity::channel) {
    config.keyFold = KeyScaleFold::NotNeeded;
    return;
  }
  std::optional<SmallVector<float>> table =
      getConstantScaleTable(op.getKScale());
  if (!table) {
    config.keyFold = KeyScaleFold::DynamicUnfolded;
    return;
  }
  // Non-finite static tables are an error in the fold; a clamped N folds.
  numerics::FoldLegality legality =
      numerics::checkFoldLegality(*table, op.getEffectiveSoftmaxScale());
  config.keyBinadeSpan = legality.binadeSpan;
  config.keyFold = legality.verdict == numerics::FoldLegality::Verdict::TooWide
                       ? KeyScaleFold::StaticTooWide
                       : KeyScaleFold::StaticUnfolded;
}

static AttentionConfig describe(PagedAttentionOp op, Chip chip) {
  CacheType key = op.getKey().getType();
  AttentionConfig config;
  config.chip = chip;
  config.activation =
      cast<MemRefType>(op.getQuery().getType()).getElementType();
  config.headDim = key.getHeadDim();
  config.numHeads = static_cast<int64_t>(op.getNumHeads());
  config.kvHeads = key.getKvHeads();
  config.queryTokens = static_cast<int64_t>(op.getMaxQueryLen());
  config.blockSize = key.getBlockSize();
  config.keyEncoding = key.getEncoding();
  config.valueEncoding = op.getValue().getType().getEncoding();
  config.softcap = op.getSoftcap().convertToFloat();
  config.valueChannelScales =
      op.getValue().getType().getScale() == ScaleGranularity::channel;
  describeKeyScales(op, config);
  return config;
}

/// The cache encoding that reads like a record lane's codes.
static Encoding laneEncoding(LaneAttr lane) {
  Type type = lane.getElementType();
  if (isa<Float4E2M1FNType>(type))
    return Encoding::nvfp4;
  if (isa<Float8E4M3FNType>(type))
    return Encoding::f8e4m3;
  if (isa<Float8E5M2Type>(type))
    return Encoding::f8e5m2;
  if (type.isBF16())
    return Encoding::bf16;
  if (type.isSignlessInteger(8))
    return Encoding::i8;
  return Encoding::f16;
}

/// MLA is attention with one KV head of latent + rope channels.
static AttentionConfig describe(MlaDecodeOp op, Chip chip) {
  RecordType record = op.getCache().getType().getRecord();
  LaneAttr latent = record.getLane("latent"), rope = record.getLane("rope");
  AttentionConfig config;
  config.chip = chip;
  config.activation =
      cast<MemRefType>(op.getQuery().getType()).getElementType();
  config.headDim = int64_t(latent.getCount()) + rope.getCount();
  config.numHeads = static_cast<int64_t>(op.getNumHeads());
  config.kvHeads = 1;
  config.queryTokens = static_cast<int64_t>(op.getMaxQueryLen());
  config.blockSize = op.getCache().getType().getBlockSize();
  config.keyEncoding = laneEncoding(latent);
  config.valueEncoding = laneEncoding(latent);
  config.mla = true;
  config.mlaRecord = describeMlaRecord(record);
  return config;
}

/// The eligibility table's failures for `op` on each chip of `targets`,
/// each sentence once (most do not depend on the chip).
template <typename OpTy>
static SmallVector<std::string> eligibilityFailures(OpTy op,
                                                    ArrayRef<Chip> targets) {
  SmallVector<std::string> failures;
  for (Chip chip : targets)
    for (std::string &failure :
         checkXqaEligibility(describe(op, chip)).failures)
      if (!llvm::is_contained(failures, failure))
        failures.push_back(std::move(failure));
  return failures;
}

//===----------------------------------------------------------------------===//
// The families
//===----------------------------------------------------------------------===//

static bool decodesPaged(Operation *op) { return isa<PagedAttentionOp>(op); }
static bool decodesMla(Operation *op) { return isa<MlaDecodeOp>(op); }

static SmallVector<std::string> servesAll(Operation *, ArrayRef<Chip>) {
  return {};
}

static Attribute planPortable(Operation *op, ArrayRef<Chip> targets,
                              const DecodePlanOptions &options) {
  return planPortableDecode(op, options.portableKeysPerSplit, targets);
}

static bool ownsPortable(Attribute plan) { return isa<PortablePlanAttr>(plan); }

static DecodeKernels buildPortablePaged(KernelModule &module, Operation *op,
                                        Attribute plan,
                                        const DecodeSources &sources) {
  return buildPagedDecodeKernels(module, cast<PagedAttentionOp>(op),
                                 *sources.key, *sources.value,
                                 cast<PortablePlanAttr>(plan));
}

static DecodeKernels buildPortableMla(KernelModule &module, Operation *op,
                                      Attribute plan,
                                      const DecodeSources &sources) {
  return buildMlaDecodeKernels(module, cast<MlaDecodeOp>(op), *sources.records,
                               cast<PortablePlanAttr>(plan));
}

static SmallVector<std::string> xqaPagedRejections(Operation *op,
                                                   ArrayRef<Chip> targets) {
  return eligibilityFailures(cast<PagedAttentionOp>(op), targets);
}

static Attribute planXqaPaged(Operation *op, ArrayRef<Chip> targets,
                              const DecodePlanOptions &options) {
  return planXqaDecode(
      cast<PagedAttentionOp>(op), targets, options.xqaMaxKeysPerSplit,
      {options.xqaKeysPerTile, options.xqaStages, options.xqaCopyWarp,
       options.xqaScoresAhead, options.xqaClusterHeads,
       options.xqaClusterSplits, options.xqaMergeUnsplit});
}

static bool ownsXqaPaged(Attribute plan) { return isa<XqaPlanAttr>(plan); }

static DecodeKernels buildXqaPaged(KernelModule &module, Operation *op,
                                   Attribute plan,
                                   const DecodeSources &sources) {
  return buildXqaDecodeKernels(module, cast<PagedAttentionOp>(op),
                               cast<XqaPlanAttr>(plan), *sources.key,
                               *sources.value, sources.fold);
}

static Attribute planPrefillPaged(Operation *op, ArrayRef<Chip> targets,
                                  const DecodePlanOptions &options) {
  return planPrefill(cast<PagedAttentionOp>(op), targets,
                     options.xqaMaxKeysPerSplit, options.prefillWgmma);
}

static bool ownsPrefillPaged(Attribute plan) {
  return isa<PrefillPlanAttr>(plan);
}

static DecodeKernels buildPrefillPaged(KernelModule &module, Operation *op,
                                       Attribute plan,
                                       const DecodeSources &sources) {
  return buildPrefillKernels(module, cast<PagedAttentionOp>(op),
                             cast<PrefillPlanAttr>(plan), *sources.key,
                             *sources.value);
}

/// The MLA rows of the table, then the mma.sync tile's shared memory on
/// each chip.
static SmallVector<std::string>
xqaMlaMmaSyncRejections(Operation *op, ArrayRef<Chip> targets) {
  auto mla = cast<MlaDecodeOp>(op);
  SmallVector<std::string> failures = eligibilityFailures(mla, targets);
  MlaRecordLayout record =
      describeMlaRecord(mla.getCache().getType().getRecord());
  int64_t shared = layoutXqaMlaShared(record, kXqaMlaKeysPerTile).total;
  for (Chip chip : targets) {
    int64_t limit = getTargetDescription(chip).sharedMemoryPerBlock;
    if (shared > limit)
      failures.push_back(llvm::formatv(
          "MLA tile needs {0} bytes of shared memory > {1} on {2}", shared,
          limit, stringifyChip(chip)));
  }
  return failures;
}

static SmallVector<std::string> xqaMlaWgmmaRejections(Operation *op,
                                                      ArrayRef<Chip> targets) {
  auto mla = cast<MlaDecodeOp>(op);
  SmallVector<std::string> failures = xqaMlaMmaSyncRejections(op, targets);
  std::string reason = xqaMlaWarpgroupRejection(
      describeMlaRecord(mla.getCache().getType().getRecord()),
      static_cast<int64_t>(mla.getNumHeads()), targets);
  if (!reason.empty())
    failures.push_back(std::move(reason));
  return failures;
}

static Attribute planXqaMlaMmaSync(Operation *op, ArrayRef<Chip> targets,
                                   const DecodePlanOptions &) {
  return planTensorCoreKernel(cast<MlaDecodeOp>(op), TensorCoreKernel::mma_sync,
                              targets);
}

static Attribute planXqaMlaWgmma(Operation *op, ArrayRef<Chip> targets,
                                 const DecodePlanOptions &) {
  return planTensorCoreKernel(cast<MlaDecodeOp>(op), TensorCoreKernel::wgmma,
                              targets);
}

static bool ownsXqaMlaMmaSync(Attribute plan) {
  auto mla = dyn_cast<XqaMlaPlanAttr>(plan);
  return mla && mla.getKernel() == TensorCoreKernel::mma_sync;
}

static bool ownsXqaMlaWgmma(Attribute plan) {
  auto mla = dyn_cast<XqaMlaPlanAttr>(plan);
  return mla && mla.getKernel() == TensorCoreKernel::wgmma;
}

static DecodeKernels buildXqaMla(KernelModule &module, Operation *op,
                                 Attribute plan, const DecodeSources &sources) {
  return buildXqaMlaDecodeKernels(module, cast<MlaDecodeOp>(op),
                                  cast<XqaMlaPlanAttr>(plan), *sources.records);
}

static const DecodeFamily kFamilies[] = {
    {DecodeFamilyKind::XqaPaged, "xqa-paged", Backend::xqa, decodesPaged,
     xqaPagedRejections, planXqaPaged, ownsXqaPaged, buildXqaPaged},
    {DecodeFamilyKind::PrefillPaged, "prefill-paged", Backend::xqa,
     decodesPaged, xqaPagedRejections, planPrefillPaged, ownsPrefillPaged,
     buildPrefillPaged},
    {DecodeFamilyKind::PortablePaged, "portable-paged", Backend::portable,
     decodesPaged, servesAll, planPortable, ownsPortable, buildPortablePaged},
    {DecodeFamilyKind::XqaMlaWgmma, "xqa-mla-wgmma", Backend::xqa, decodesMla,
     xqaMlaWgmmaRejections, planXqaMlaWgmma, ownsXqaMlaWgmma, buildXqaMla},
    {DecodeFamilyKind::XqaMlaMmaSync, "xqa-mla-mma-sync", Backend::xqa,
     decodesMla, xqaMlaMmaSyncRejections, planXqaMlaMmaSync, ownsXqaMlaMmaSync,
     buildXqaMla},
    {DecodeFamilyKind::PortableMla, "portable-mla", Backend::portable,
     decodesMla, servesAll, planPortable, ownsPortable, buildPortableMla},
};

ArrayRef<DecodeFamily> pattn::decodeFamilies() { return kFamilies; }

const DecodeFamily &pattn::decodeFamily(DecodeFamilyKind kind) {
  for (const DecodeFamily &family : kFamilies)
    if (family.kind == kind)
      return family;
  llvm_unreachable("every kind has a row");
}

const DecodeFamily &pattn::familyOfPlan(Operation *op, Attribute plan) {
  for (const DecodeFamily &family : kFamilies)
    if (family.decodes(op) && family.owns(plan))
      return family;
  llvm_unreachable("the dialect's decode plans all have a family");
}

const DecodeFamily &pattn::tensorCoreFamilyOf(Operation *op) {
  return decodeFamily(isa<MlaDecodeOp>(op) ? DecodeFamilyKind::XqaMlaMmaSync
                                           : DecodeFamilyKind::XqaPaged);
}

const DecodeFamily &pattn::portableFamilyOf(Operation *op) {
  return decodeFamily(isa<MlaDecodeOp>(op) ? DecodeFamilyKind::PortableMla
                                           : DecodeFamilyKind::PortablePaged);
}
