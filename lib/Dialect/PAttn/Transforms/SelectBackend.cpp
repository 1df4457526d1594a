//===- SelectBackend.cpp - Choose XQA or portable per op --------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements --pattn-select-backend. It describes each attention
// op as a pattn::AttentionConfig, asks the eligibility table, records the
// answer as a typed attribute and explains it in a remark, so a user always
// sees why an op did not get the tensor-core path.
//
//===----------------------------------------------------------------------===//

#include "pattn/Dialect/PAttn/IR/PAttnOps.h"
#include "pattn/Dialect/PAttn/Transforms/ConstantTables.h"
#include "pattn/Dialect/PAttn/Transforms/DecodePlan.h"
#include "pattn/Dialect/PAttn/Transforms/Eligibility.h"
#include "pattn/Dialect/PAttn/Transforms/Passes.h"
#include "pattn/Numerics/Numerics.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/DebugLog.h"
#include "llvm/Support/raw_ostream.h"

#define DEBUG_TYPE "pattn-select-backend"

namespace pattn {
#define GEN_PASS_DEF_PATTNSELECTBACKEND
#include "pattn/Dialect/PAttn/Transforms/Passes.h.inc"
} // namespace pattn

using namespace mlir;
using namespace pattn;
using ::pattn::AttentionConfig;
using ::pattn::KeyScaleFold;
namespace numerics = ::pattn::numerics;

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
      ::pattn::getConstantScaleTable(op.getKScale());
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

static AttentionConfig describe(PagedAttentionOp op, ::pattn::Chip chip) {
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
static AttentionConfig describe(MlaDecodeOp op, ::pattn::Chip chip) {
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
  config.mlaRecord = ::pattn::describeMlaRecord(record);
  return config;
}

namespace {
struct SelectBackendPass
    : public ::pattn::impl::PAttnSelectBackendBase<SelectBackendPass> {
  using Base::Base;
  LogicalResult initialize(MLIRContext *context) override;
  void runOnOperation() override;

  /// The options, checked by initialize.
  ::pattn::Chip targetChip = ::pattn::Chip::SM80;
  ::pattn::ForceBackend forced = ::pattn::ForceBackend::Auto;

  /// Decides one op; false when force=xqa meets an ineligible op.
  template <typename OpTy> bool decide(OpTy op, ::pattn::Chip chip);
};
} // namespace

template <typename OpTy>
bool SelectBackendPass::decide(OpTy op, ::pattn::Chip chip) {
  AttentionConfig config = describe(op, chip);
  ::pattn::Eligibility eligibility = ::pattn::checkXqaEligibility(config);
  LDBG() << op->getName() << " at " << op.getLoc() << ": "
         << eligibility.explain();

  Backend backend = eligibility.isXqa() ? Backend::xqa : Backend::portable;
  std::string reason = eligibility.explain();
  if (forced == ::pattn::ForceBackend::Portable) {
    backend = Backend::portable;
    reason = "portable: forced";
  } else if (forced == ::pattn::ForceBackend::Xqa && !eligibility.isXqa()) {
    op.emitError() << "force=xqa, but the op is not eligible for XQA on "
                   << ::pattn::stringifyChip(chip) << ": "
                   << llvm::join(eligibility.failures, "; ");
    return false;
  }
  if (backend == Backend::xqa) {
    reason = ("xqa: eligible on " + ::pattn::stringifyChip(chip)).str();
    ++numXqa;
  } else {
    ++numPortable;
  }
  op.setBackendAttr(BackendAttr::get(op.getContext(), backend));
  op.emitRemark() << reason;
  return true;
}

std::optional<::pattn::ForceBackend>
pattn::parseForceBackend(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<ForceBackend>>(name)
      .Case("auto", ForceBackend::Auto)
      .Case("xqa", ForceBackend::Xqa)
      .Case("portable", ForceBackend::Portable)
      .Default(std::nullopt);
}

LogicalResult SelectBackendPass::initialize(MLIRContext *context) {
  // Options are not ops: their errors carry no location and dump no IR.
  std::optional<::pattn::Chip> chipValue = ::pattn::parseChip(chip);
  if (!chipValue)
    return emitError(UnknownLoc::get(context))
           << "pattn-select-backend: "
           << (chip.empty() ? std::string("needs chip=<chip>")
                            : "unsupported chip='" + chip + "'")
           << "; supported chips: " << ::pattn::supportedChipList();
  std::optional<::pattn::ForceBackend> forceValue =
      ::pattn::parseForceBackend(force);
  if (!forceValue)
    return emitError(UnknownLoc::get(context))
           << "pattn-select-backend: unknown force='" << force
           << "'; expected auto, xqa or portable";
  targetChip = *chipValue;
  forced = *forceValue;
  return success();
}

void SelectBackendPass::runOnOperation() {
  Operation *root = getOperation();
  if (printTable)
    ::pattn::printEligibilityTable(llvm::errs());

  bool ok = true;
  root->walk([&](Operation *op) {
    if (auto attention = dyn_cast<PagedAttentionOp>(op))
      ok &= decide(attention, targetChip);
    else if (auto mla = dyn_cast<MlaDecodeOp>(op))
      ok &= decide(mla, targetChip);
  });
  if (!ok)
    signalPassFailure();
}
