//===- PAttnOps.cpp - pattn operation verifiers ---------------------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the verifiers and memory effects of the pattn ops.
// Every structural rule of SPEC §2-4 that can be checked on the IR is checked
// here, with a message that names the operand and the expected shape.
//
//===----------------------------------------------------------------------===//

#include "pattn/Dialect/PAttn/IR/PAttnOps.h"

#include "pattn/Target/TargetDescription.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;
using namespace pattn;

#define GET_OP_CLASSES
#include "pattn/Dialect/PAttn/IR/PAttnOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Shared checks
//===----------------------------------------------------------------------===//

static std::string formatShape(ArrayRef<int64_t> shape) {
  std::string text = "[";
  llvm::raw_string_ostream os(text);
  llvm::interleaveComma(shape, os, [&](int64_t dim) {
    if (ShapedType::isDynamic(dim))
      os << "?";
    else
      os << dim;
  });
  os << "]";
  return text;
}

/// Checks that operand `name` is a contiguous memref (or, with
/// `pageStrided`, one whose pages may lie a static stride apart:
/// hasPagedLayout) whose shape matches `expected` (a dynamic dimension on
/// either side matches anything).
static LogicalResult checkShape(Operation *op, StringRef name, Value value,
                                ArrayRef<int64_t> expected,
                                bool pageStrided = false) {
  auto type = cast<MemRefType>(value.getType());
  if (pageStrided && !hasPagedLayout(type))
    return op->emitOpError()
           << name << " must be contiguous within each page: an identity "
           << "layout, or strided<[S, ...], offset: O> with row-major inner "
           << "strides, a static page stride S of at least one page and a "
           << "static offset O, both multiples of 16 bytes, got " << type;
  if (!pageStrided && !type.getLayout().isIdentity())
    return op->emitOpError() << name << " must be a contiguous memref "
                             << "(identity layout), got " << type;
  bool matches = type.getRank() == int64_t(expected.size());
  for (auto [dim, want] : llvm::zip(type.getShape(), expected))
    matches &= ShapedType::isDynamic(dim) || ShapedType::isDynamic(want) ||
               dim == want;
  if (!matches)
    return op->emitOpError() << name << " must have shape "
                             << formatShape(expected) << ", got " << type;
  return success();
}

/// Checks the element type of operand `name` against `allowed`.
static LogicalResult checkElement(Operation *op, StringRef name, Value value,
                                  function_ref<bool(Type)> allowed,
                                  StringRef description) {
  Type element = cast<MemRefType>(value.getType()).getElementType();
  if (!allowed(element))
    return op->emitOpError() << name << " must hold " << description
                             << " elements, got " << element;
  return success();
}

static bool isI32(Type t) { return t.isSignlessInteger(32); }
static bool isF32(Type t) { return t.isF32(); }
static bool isHalf(Type t) { return t.isF16() || t.isBF16(); }
static bool isActivation(Type t) {
  return t.isF16() || t.isBF16() || t.isF32();
}
static bool isSlotIndex(Type t) {
  return t.isSignlessInteger(32) || t.isSignlessInteger(64);
}

/// Dimension `index` of a memref operand; dynamic when the operand has no
/// such dimension (its rank is checked, and reported, on its own).
static int64_t dimOf(Value value, unsigned index) {
  auto type = cast<MemRefType>(value.getType());
  if (index >= type.getRank())
    return ShapedType::kDynamic;
  return type.getDimSize(index);
}

/// num_heads in [1, kMaxHeads] (an I64Attr: 2^63 and up read as negative).
static LogicalResult verifyNumHeads(Operation *op, int64_t numHeads) {
  if (numHeads < 1 || numHeads > kMaxHeads)
    return op->emitOpError() << "num_heads " << numHeads << " must be in [1, "
                             << kMaxHeads << "]";
  return success();
}

/// A dimension value that is known and equal, or unknown on one side.
static bool dimsAgree(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

/// Checks a K, V or write scale operand against a cache's granularity:
/// tensor scales are [1], channel scales [kv_heads, head_dim], and other
/// granularities take no operand.
static LogicalResult checkScaleOperand(Operation *op, StringRef name,
                                       CacheType cache, Value scale) {
  ScaleGranularity granularity = cache.getScale();
  bool wanted = granularity == ScaleGranularity::tensor ||
                granularity == ScaleGranularity::channel;
  if (!wanted && scale)
    return op->emitOpError()
           << name << " given, but the cache's scale granularity is '"
           << stringifyScaleGranularity(granularity) << "'"
           << (granularity == ScaleGranularity::token
                   ? " (token scales are bound with the cache)"
                   : "");
  if (wanted && !scale)
    return op->emitOpError()
           << name << " is required by the cache's '"
           << stringifyScaleGranularity(granularity) << "' scale granularity";
  if (!scale)
    return success();
  SmallVector<int64_t> shape = {1};
  if (granularity == ScaleGranularity::channel)
    shape = {cache.getKvHeads(), cache.getHeadDim()};
  if (failed(checkShape(op, name, scale, shape)) ||
      failed(checkElement(op, name, scale, isF32, "f32")))
    return failure();
  return success();
}

/// The sequence metadata shared by paged_attention and mla_decode: the block
/// table, the lengths, the optional query starts, and the query-token bound
/// (at most `queryLenLimit`: a prompt's length for paged_attention, the
/// speculative tokens for mla_decode).
static LogicalResult checkSequenceOperands(Operation *op, Value query,
                                           Value blockTable, Value seqLens,
                                           Value queryStart,
                                           int64_t maxQueryLen,
                                           int64_t queryLenLimit) {
  if (failed(checkShape(op, "block_table", blockTable,
                        {ShapedType::kDynamic, ShapedType::kDynamic})) ||
      failed(checkElement(op, "block_table", blockTable, isI32, "i32")))
    return failure();
  int64_t batch = dimOf(blockTable, 0);
  if (failed(checkShape(op, "seq_lens", seqLens, {batch})) ||
      failed(checkElement(op, "seq_lens", seqLens, isI32, "i32")))
    return failure();
  if (maxQueryLen < 1 || maxQueryLen > queryLenLimit)
    return op->emitOpError()
           << "max_query_len " << maxQueryLen << " must be in [1, "
           << queryLenLimit << "] query tokens per sequence";
  if (queryStart) {
    int64_t starts =
        ShapedType::isDynamic(batch) ? ShapedType::kDynamic : batch + 1;
    return failure(
        failed(checkShape(op, "query_start", queryStart, {starts})) ||
        failed(checkElement(op, "query_start", queryStart, isI32, "i32")));
  }
  if (maxQueryLen != 1)
    return op->emitOpError() << "max_query_len " << maxQueryLen
                             << " needs query_start to say where each "
                                "sequence's query tokens begin";
  if (!dimsAgree(dimOf(query, 0), batch))
    return op->emitOpError()
           << "without query_start each sequence has one query token, but "
              "the query has "
           << dimOf(query, 0) << " tokens for a batch of " << batch;
  return success();
}

static LogicalResult checkSoftmaxScale(Operation *op,
                                       std::optional<APFloat> scale) {
  if (!scale)
    return success();
  float value = scale->convertToFloat();
  if (!(std::isfinite(value) && value > 0.0f))
    return op->emitOpError()
           << "softmax_scale " << value << " must be finite and positive";
  return success();
}

/// Records that `op` reads every memref or cache operand except `written`,
/// which it writes.
static void
addEffects(Operation *op, ArrayRef<OpOperand *> written,
           SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
               &effects) {
  for (OpOperand &operand : op->getOpOperands()) {
    if (llvm::is_contained(written, &operand))
      effects.emplace_back(MemoryEffects::Write::get(), &operand,
                           SideEffects::DefaultResource::get());
    else
      effects.emplace_back(MemoryEffects::Read::get(), &operand,
                           SideEffects::DefaultResource::get());
  }
}

//===----------------------------------------------------------------------===//
// BindCacheOp
//===----------------------------------------------------------------------===//

LogicalResult BindCacheOp::verify() {
  Operation *op = getOperation();
  auto isByte = [](Type t) { return t.isSignlessInteger(8); };
  if (failed(checkElement(op, "storage", getStorage(), isByte, "i8 (byte)")))
    return failure();

  SmallVector<Value> paged = {getStorage()};
  if (auto recordCache = dyn_cast<RecordCacheType>(getType())) {
    if (getGroupScales() || getTokenScales())
      return emitOpError() << "a record cache keeps its scales inside the "
                              "records and binds no scale buffers";
    if (failed(checkShape(op, "storage", getStorage(),
                          recordCache.getStorageShape(ShapedType::kDynamic))))
      return failure();
  } else {
    auto cache = cast<CacheType>(getType());
    if (failed(checkShape(op, "storage", getStorage(),
                          cache.getStorageShape(ShapedType::kDynamic),
                          /*pageStrided=*/true)))
      return failure();
    if (cache.needsGroupScales() != bool(getGroupScales()))
      return emitOpError() << (getGroupScales() ? "group_scales given for"
                                                : "group_scales required by")
                           << " a " << stringifyEncoding(cache.getEncoding())
                           << " cache";
    if (cache.needsTokenScales() != bool(getTokenScales()))
      return emitOpError() << (getTokenScales() ? "token_scales given for"
                                                : "token_scales required by")
                           << " a cache with '"
                           << stringifyScaleGranularity(cache.getScale())
                           << "' scales";
    if (Value groupScales = getGroupScales()) {
      auto isE4M3 = [](Type t) { return isa<Float8E4M3FNType>(t); };
      if (failed(checkShape(op, "group_scales", groupScales,
                            cache.getGroupScaleShape(ShapedType::kDynamic))) ||
          failed(checkElement(op, "group_scales", groupScales, isE4M3,
                              "f8E4M3FN")))
        return failure();
      paged.push_back(groupScales);
    }
    if (Value tokenScales = getTokenScales()) {
      if (failed(checkShape(op, "token_scales", tokenScales,
                            cache.getTokenScaleShape(ShapedType::kDynamic))) ||
          failed(checkElement(op, "token_scales", tokenScales, isF32, "f32")))
        return failure();
      paged.push_back(tokenScales);
    }
  }

  // Every buffer describes the same pages.
  for (Value buffer : paged)
    if (!dimsAgree(dimOf(buffer, 0), dimOf(getStorage(), 0)))
      return emitOpError() << "buffers disagree on the number of pages ("
                           << dimOf(getStorage(), 0) << " vs "
                           << dimOf(buffer, 0) << ")";

  // One storage has one meaning: bytes written as one cache type (say an
  // nvfp4 record with per-token scales) must never be read as another, also
  // when a binding goes through a view of the same bytes.
  if (Operation *clash = findBindingOfOverlappingBytes(op))
    return emitOpError() << "binds storage that is also bound as "
                         << clash->getResult(0).getType()
                         << "; a cache is read with the type it was written "
                            "with";
  return success();
}

//===----------------------------------------------------------------------===//
// WriteCacheOp
//===----------------------------------------------------------------------===//

LogicalResult WriteCacheOp::verify() {
  Operation *op = getOperation();
  CacheType cache = getCache().getType();
  int64_t firstHead = getFirstHead();
  int64_t heads = firstHead == 0 ? cache.getKvHeads() : ShapedType::kDynamic;
  if (failed(checkShape(op, "values", getValues(),
                        {ShapedType::kDynamic, heads, cache.getHeadDim()})))
    return failure();
  if (firstHead != 0) {
    int64_t available = dimOf(getValues(), 1);
    if (firstHead < 0 || ShapedType::isDynamic(available) ||
        firstHead > available - cache.getKvHeads())
      return emitOpError() << "first_head " << firstHead << " with the cache's "
                           << cache.getKvHeads()
                           << " kv heads must lie within the values' static "
                              "heads, got "
                           << getValues().getType();
  }
  if (failed(checkElement(op, "values", getValues(), isActivation,
                          "f16, bf16 or f32")) ||
      failed(checkShape(op, "slots", getSlots(), {dimOf(getValues(), 0)})) ||
      failed(checkElement(op, "slots", getSlots(), isSlotIndex, "i32 or i64")))
    return failure();
  return checkScaleOperand(op, "scale", cache, getScale());
}

void WriteCacheOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  addEffects(getOperation(), {&getCacheMutable()}, effects);
}

//===----------------------------------------------------------------------===//
// WriteRecordOp
//===----------------------------------------------------------------------===//

/// The latent and rope lanes an MLA op reads or writes.
static FailureOr<std::pair<LaneAttr, LaneAttr>> getMlaLanes(Operation *op,
                                                            RecordType record) {
  LaneAttr latent = record.getLane("latent");
  LaneAttr rope = record.getLane("rope");
  if (!latent || !rope)
    return op->emitOpError()
           << "needs a record with 'latent' and 'rope' lanes, got " << record;
  return std::make_pair(latent, rope);
}

/// The outer scale operand of a record op: required in tensor mode only.
static LogicalResult checkOuterScale(Operation *op, RecordType record,
                                     Value outerScale) {
  bool wanted = record.getMode() == ScaleGranularity::tensor;
  if (wanted != bool(outerScale))
    return op->emitOpError()
           << "outer_scale " << (wanted ? "is required by" : "given for")
           << " a record in '" << stringifyScaleGranularity(record.getMode())
           << "' mode";
  if (!outerScale)
    return success();
  return failure(
      failed(checkShape(op, "outer_scale", outerScale, {1})) ||
      failed(checkElement(op, "outer_scale", outerScale, isF32, "f32")));
}

LogicalResult WriteRecordOp::verify() {
  Operation *op = getOperation();
  RecordType record = getCache().getType().getRecord();
  FailureOr<std::pair<LaneAttr, LaneAttr>> lanes = getMlaLanes(op, record);
  if (failed(lanes))
    return failure();
  auto [latent, rope] = *lanes;
  int64_t tokens = dimOf(getLatent(), 0);
  if (failed(checkShape(op, "latent", getLatent(),
                        {ShapedType::kDynamic, latent.getCount()})) ||
      failed(checkElement(op, "latent", getLatent(), isActivation,
                          "f16, bf16 or f32")) ||
      failed(checkShape(op, "rope", getRope(), {tokens, rope.getCount()})) ||
      failed(checkElement(op, "rope", getRope(), isActivation,
                          "f16, bf16 or f32")) ||
      failed(checkShape(op, "slots", getSlots(), {tokens})) ||
      failed(checkElement(op, "slots", getSlots(), isSlotIndex, "i32 or i64")))
    return failure();
  return checkOuterScale(op, record, getOuterScale());
}

void WriteRecordOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  addEffects(getOperation(), {&getCacheMutable()}, effects);
}

//===----------------------------------------------------------------------===//
// RotaryOp
//===----------------------------------------------------------------------===//

int64_t RotaryOp::getRotaryDim() { return 2 * dimOf(getCos(), 1); }

LogicalResult RotaryOp::verify() {
  Operation *op = getOperation();
  Value input = getInput(), out = getOut();
  int64_t dynamic = ShapedType::kDynamic;
  if (failed(checkShape(op, "input", input, {dynamic, dynamic, dynamic})) ||
      failed(
          checkElement(op, "input", input, isActivation, "f16, bf16 or f32")) ||
      failed(checkShape(op, "outs", out,
                        {dimOf(input, 0), dynamic, dimOf(input, 2)})))
    return failure();
  Type element = cast<MemRefType>(input.getType()).getElementType();
  if (cast<MemRefType>(out.getType()).getElementType() != element)
    return emitOpError() << "outs must hold the input's element type ("
                         << element << "), got " << out.getType();
  int64_t inHeads = dimOf(input, 1), outHeads = dimOf(out, 1);
  int64_t headDim = dimOf(input, 2);
  if (ShapedType::isDynamic(inHeads) || ShapedType::isDynamic(outHeads) ||
      ShapedType::isDynamic(headDim))
    return emitOpError() << "input and outs need static heads and head_dim, "
                            "got "
                         << input.getType() << " and " << out.getType();
  if (headDim < 1 || outHeads < 1)
    return emitOpError() << "outs must have at least one head and channel, "
                            "got "
                         << out.getType();
  int64_t firstHead = getFirstHead();
  if (firstHead < 0 || firstHead > inHeads - outHeads)
    return emitOpError() << "first_head " << firstHead << " with " << outHeads
                         << " output heads must lie within the input's "
                         << inHeads << " heads";

  // The tables: [max_position, R/2] each, R <= head_dim.
  Value cos = getCos(), sin = getSin();
  if (failed(checkShape(op, "cos", cos, {dynamic, dynamic})) ||
      failed(checkElement(op, "cos", cos, isActivation, "f16, bf16 or f32")))
    return failure();
  if (sin.getType() != cos.getType())
    return emitOpError() << "sin must have the type of cos (" << cos.getType()
                         << "), got " << sin.getType();
  int64_t half = dimOf(cos, 1);
  if (ShapedType::isDynamic(half) || half < 1 || 2 * half > headDim)
    return emitOpError() << "cos and sin must be [max_position, R/2] with a "
                            "static R/2 in [1, head_dim/2 = "
                         << headDim / 2 << "], got " << cos.getType();

  // Positions: explicit, or those of the decode's sequences.
  Value positions = getPositions(), seqLens = getSeqLens();
  Value queryStart = getQueryStart();
  if (bool(positions) == bool(seqLens))
    return emitOpError() << "takes exactly one of positions (per token) and "
                            "seq_lens (positions of the appended tokens)";
  if (positions)
    return failure(
        failed(checkShape(op, "positions", positions, {dimOf(input, 0)})) ||
        failed(checkElement(op, "positions", positions, isSlotIndex,
                            "i32 or i64")) ||
        (queryStart &&
         failed(emitOpError() << "query_start goes with seq_lens, not with "
                                 "positions")) ||
        failed(verifyNorm()));
  if (failed(checkShape(op, "seq_lens", seqLens, {dynamic})) ||
      failed(checkElement(op, "seq_lens", seqLens, isI32, "i32")))
    return failure();
  int64_t batch = dimOf(seqLens, 0);
  if (queryStart) {
    int64_t starts = ShapedType::isDynamic(batch) ? dynamic : batch + 1;
    if (failed(checkShape(op, "query_start", queryStart, {starts})) ||
        failed(checkElement(op, "query_start", queryStart, isI32, "i32")))
      return failure();
  } else if (!dimsAgree(dimOf(input, 0), batch)) {
    return emitOpError()
           << "without query_start each sequence has one token, but the "
              "input has "
           << dimOf(input, 0) << " tokens for a batch of " << batch;
  }
  return verifyNorm();
}

LogicalResult RotaryOp::verifyNorm() {
  float epsilon = getNormEpsilon().convertToFloat();
  if (!(std::isfinite(epsilon) && epsilon > 0.0f))
    return emitOpError() << "norm_epsilon " << epsilon
                         << " must be finite and positive (an all-zero head "
                            "would divide 0 by 0)";
  Value weight = getNormWeight();
  if (!weight)
    return success();
  return failure(failed(checkShape(getOperation(), "norm_weight", weight,
                                   {dimOf(getInput(), 2)})) ||
                 failed(checkElement(getOperation(), "norm_weight", weight,
                                     isActivation, "f16, bf16 or f32")));
}

void RotaryOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  addEffects(getOperation(), {&getOutMutable()}, effects);
}

//===----------------------------------------------------------------------===//
// PagedAttentionOp
//===----------------------------------------------------------------------===//

/// A plan must match the recorded backend: the lowering obeys both.
/// A prompt (more than 8 query tokens per sequence) has more blocks than a
/// decode's grid holds and more rows than a decode block: only a prompt
/// plan lowers it (portable: `prompt = true`; XQA: a `query_tile` of at
/// most rows / g tokens; the prefill plan, only ever a prompt's, likewise),
/// and a decode needs a decode plan.
static LogicalResult checkPromptPlan(PagedAttentionOp op, Attribute plan) {
  int64_t maxQueryLen = static_cast<int64_t>(op.getMaxQueryLen());
  bool prompt = maxQueryLen > kMaxSpeculativeTokens;
  if (auto portable = dyn_cast<PortablePlanAttr>(plan);
      portable && prompt && !portable.getPrompt())
    return op.emitOpError()
           << "max_query_len " << maxQueryLen
           << " (a prompt) needs a portable plan with prompt = true, got "
           << plan;
  int64_t group = static_cast<int64_t>(op.getNumHeads()) /
                  op.getKey().getType().getKvHeads();
  if (auto prefill = dyn_cast<PrefillPlanAttr>(plan)) {
    if (!prompt)
      return op.emitOpError()
             << "has a prefill plan, but max_query_len " << maxQueryLen
             << " is a decode's (at most " << kMaxSpeculativeTokens << ")";
    if (prefill.getQueryTile() * group > prefill.getRows())
      return op.emitOpError()
             << "has a prefill plan whose query_tile " << prefill.getQueryTile()
             << " x g = " << group << " exceeds its rows (" << prefill.getRows()
             << ")";
    return success();
  }
  auto xqa = dyn_cast<XqaPlanAttr>(plan);
  if (!xqa)
    return success();
  int64_t tile = xqa.getQueryTile();
  if (prompt && (tile < 1 || tile * group > xqa.getRows()))
    return op.emitOpError() << "max_query_len " << maxQueryLen
                            << " (a prompt) needs an XQA plan whose query_tile "
                               "x g fits its rows ("
                            << xqa.getRows() << "), got query_tile " << tile
                            << " for g = " << group;
  if (!prompt && tile != 0)
    return op.emitOpError()
           << "query_tile " << tile
           << " is a prompt's plan, but max_query_len is " << maxQueryLen;
  if (!prompt && group * maxQueryLen > xqa.getRows())
    return op.emitOpError()
           << "has an XQA plan of " << xqa.getRows()
           << " rows, fewer than g x max_query_len = " << group * maxQueryLen;
  // Keys as M: a warp's value channels pair up into m16 tiles.
  int64_t valueChannels =
      op.getValue().getType().getHeadDim() / xqa.getValueWarps();
  if (xqa.getRows() == 8 && valueChannels % 16 != 0)
    return op.emitOpError() << "has an XQA plan of 8 rows (keys as the mma's "
                               "M), whose warps need value channels in "
                               "multiples of 16, got "
                            << valueChannels;
  return success();
}

/// decode_plan: the short sequences' XQA decode plan next to a prefill plan.
static LogicalResult checkDecodePlan(PagedAttentionOp op) {
  XqaPlanAttr decode = op.getDecodePlanAttr();
  if (!decode)
    return success();
  if (!isa_and_nonnull<PrefillPlanAttr>(op.getPlanAttr()))
    return op.emitOpError() << "has a decode_plan, which splits a batch "
                               "with a #pattn.prefill_plan, but its plan is "
                            << op.getPlanAttr();
  if (decode.getQueryTile() != 0)
    return op.emitOpError()
           << "has a decode_plan with query_tile " << decode.getQueryTile()
           << "; the short sequences' plan is a decode's (query_tile = 0)";
  int64_t group = static_cast<int64_t>(op.getNumHeads()) /
                  op.getKey().getType().getKvHeads();
  if (decode.getRows() < group)
    return op.emitOpError() << "has a decode_plan of " << decode.getRows()
                            << " rows, fewer than g = " << group
                            << ": it would serve no query token";
  return success();
}

int64_t PagedAttentionOp::getSplitDecodeTokens() {
  XqaPlanAttr decode = getDecodePlanAttr();
  if (!decode)
    return 0;
  int64_t group =
      static_cast<int64_t>(getNumHeads()) / getKey().getType().getKvHeads();
  return std::min<int64_t>(decode.getRows() / group, kMaxSpeculativeTokens);
}

static LogicalResult checkPlan(Operation *op, std::optional<Backend> backend,
                               Attribute plan) {
  if (!plan)
    return success();
  if (!backend)
    return op->emitOpError()
           << "has a decode plan but no backend (run --pattn-select-backend "
              "before --pattn-plan-decode)";
  // MLA has its own tensor-core kernel and plan.
  bool mla = isa<MlaDecodeOp>(op);
  bool matches = *backend == Backend::xqa
                     ? (mla ? isa<XqaMlaPlanAttr>(plan)
                            : isa<XqaPlanAttr, PrefillPlanAttr>(plan))
                     : isa<PortablePlanAttr>(plan);
  if (!matches)
    return op->emitOpError()
           << "backend " << stringifyBackend(*backend) << " needs a "
           << (*backend == Backend::xqa
                   ? (mla ? "#pattn.xqa_mla_plan"
                          : "#pattn.xqa_plan or #pattn.prefill_plan")
                   : "#pattn.portable_plan")
           << ", got " << plan;
  auto attention = dyn_cast<PagedAttentionOp>(op);
  if (!attention)
    return success();
  return checkPromptPlan(attention, plan);
}

LogicalResult PagedAttentionOp::verify() {
  Operation *op = getOperation();
  CacheType key = getKey().getType(), value = getValue().getType();
  if (key.getBlockSize() != value.getBlockSize() ||
      key.getKvHeads() != value.getKvHeads() ||
      key.getHeadDim() != value.getHeadDim())
    return emitOpError() << "K and V caches must share block_size, kv_heads "
                            "and head_dim (one block table addresses both)";

  int64_t numHeads = static_cast<int64_t>(getNumHeads());
  if (failed(verifyNumHeads(op, numHeads)))
    return failure();
  if (numHeads % key.getKvHeads() != 0)
    return emitOpError() << "num_heads " << numHeads
                         << " must be a positive multiple of kv_heads "
                         << key.getKvHeads();
  if (failed(checkShape(op, "query", getQuery(),
                        {ShapedType::kDynamic, numHeads, key.getHeadDim()})) ||
      failed(checkElement(op, "query", getQuery(), isHalf, "f16 or bf16")))
    return failure();
  auto queryType = cast<MemRefType>(getQuery().getType());
  auto outType = cast<MemRefType>(getOut().getType());
  if (failed(checkShape(op, "outs", getOut(), queryType.getShape())))
    return failure();
  if (outType.getElementType() != queryType.getElementType())
    return emitOpError() << "outs must hold " << queryType.getElementType()
                         << " like the query, got " << outType.getElementType();

  if (failed(checkSequenceOperands(
          op, getQuery(), getBlockTable(), getSeqLens(), getQueryStart(),
          static_cast<int64_t>(getMaxQueryLen()), kMaxPromptTokens)) ||
      failed(checkScaleOperand(op, "k_scale", key, getKScale())) ||
      failed(checkScaleOperand(op, "v_scale", value, getVScale())))
    return failure();
  if (Value sinks = getSinks())
    if (failed(checkShape(op, "sinks", sinks, {numHeads})) ||
        failed(
            checkElement(op, "sinks", sinks, isActivation, "f16, bf16 or f32")))
      return failure();
  if (Value outScale = getOutScale())
    if (failed(checkShape(op, "out_scale", outScale,
                          {key.getKvHeads(), key.getHeadDim()})) ||
        failed(checkElement(op, "out_scale", outScale, isF32, "f32")))
      return failure();
  if (Value exponents = getQueryExponents()) {
    // Row exponents of a folded query: K is read at its scalar N.
    if (key.getScale() != ScaleGranularity::tensor)
      return emitOpError() << "query_exponents needs a tensor-scaled K (the "
                              "form --pattn-fold-channel-scales produces), "
                              "got scale = "
                           << stringifyScaleGranularity(key.getScale());
    if (failed(checkShape(op, "query_exponents", exponents,
                          {dimOf(getQuery(), 0), numHeads})) ||
        failed(checkElement(op, "query_exponents", exponents, isI32, "i32")))
      return failure();
  }
  if (bool(getGuard()) != getGuardValue().has_value())
    return emitOpError() << "guard and guard_value come together";
  if (Value guard = getGuard())
    if (failed(checkShape(op, "guard", guard, {1})) ||
        failed(checkElement(op, "guard", guard, isI32, "i32")))
      return failure();

  if (failed(checkSoftmaxScale(op, getSoftmaxScale())))
    return failure();
  float softcap = getSoftcap().convertToFloat();
  if (!(std::isfinite(softcap) && softcap >= 0.0f))
    return emitOpError() << "softcap " << softcap
                         << " must be finite and >= 0 (0 turns it off)";
  int64_t window = static_cast<int64_t>(getWindow());
  if (window != -1 && window < 1)
    return emitOpError() << "window " << window
                         << " must be >= 1, or -1 for no window";
  if (failed(checkPlan(op, getBackend(), getPlanAttr())))
    return failure();
  return checkDecodePlan(*this);
}

float PagedAttentionOp::getEffectiveSoftmaxScale() {
  if (std::optional<APFloat> scale = getSoftmaxScale())
    return scale->convertToFloat();
  return 1.0f / std::sqrt(float(getKey().getType().getHeadDim()));
}

void PagedAttentionOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  addEffects(getOperation(), {&getOutMutable()}, effects);
}

//===----------------------------------------------------------------------===//
// MlaDecodeOp
//===----------------------------------------------------------------------===//

/// chip_plans: per chip a tensor-core plan that replaces `plan` there,
/// next to a tensor-core `plan`. (Whether a chip can run the plan is the
/// conversion's check: Planning/VerifyPlans.cpp.)
static LogicalResult checkChipPlans(Operation *op, Attribute plan,
                                    DictionaryAttr chipPlans) {
  if (!chipPlans)
    return success();
  if (!isa_and_nonnull<XqaMlaPlanAttr>(plan))
    return op->emitOpError()
           << "has chip_plans but no #pattn.xqa_mla_plan; chip_plans refine "
              "a tensor-core plan per chip";
  for (NamedAttribute entry : chipPlans) {
    std::optional<Chip> chip = parseChip(entry.getName().strref());
    if (!chip)
      return op->emitOpError()
             << "chip_plans names '" << entry.getName().strref()
             << "', which is not a chip (" << supportedChipList() << ")";
    auto chipPlan = dyn_cast<XqaMlaPlanAttr>(entry.getValue());
    if (!chipPlan)
      return op->emitOpError()
             << "chip_plans entry " << entry.getName().strref()
             << " must be a #pattn.xqa_mla_plan, got " << entry.getValue();
  }
  return success();
}

LogicalResult MlaDecodeOp::verify() {
  Operation *op = getOperation();
  RecordType record = getCache().getType().getRecord();
  FailureOr<std::pair<LaneAttr, LaneAttr>> lanes = getMlaLanes(op, record);
  if (failed(lanes))
    return failure();
  auto [latent, rope] = *lanes;
  int64_t numHeads = static_cast<int64_t>(getNumHeads());
  if (failed(verifyNumHeads(getOperation(), numHeads)))
    return failure();
  int64_t keyDim = int64_t(latent.getCount()) + rope.getCount();
  if (failed(checkShape(op, "query", getQuery(),
                        {ShapedType::kDynamic, numHeads, keyDim})) ||
      failed(checkElement(op, "query", getQuery(), isHalf, "f16 or bf16")) ||
      failed(checkShape(
          op, "outs", getOut(),
          {dimOf(getQuery(), 0), numHeads, int64_t(latent.getCount())})))
    return failure();
  Type queryElement = cast<MemRefType>(getQuery().getType()).getElementType();
  Type outElement = cast<MemRefType>(getOut().getType()).getElementType();
  if (outElement != queryElement)
    return emitOpError() << "outs must hold " << queryElement
                         << " like the query, got " << outElement;
  if (failed(checkSequenceOperands(
          op, getQuery(), getBlockTable(), getSeqLens(), getQueryStart(),
          static_cast<int64_t>(getMaxQueryLen()), kMaxSpeculativeTokens)) ||
      failed(checkOuterScale(op, record, getOuterScale())) ||
      failed(checkPlan(op, getBackend(), getPlanAttr())) ||
      failed(checkChipPlans(op, getPlanAttr(), getChipPlansAttr())))
    return failure();
  return checkSoftmaxScale(op, getSoftmaxScale());
}

void MlaDecodeOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  addEffects(getOperation(), {&getOutMutable()}, effects);
}

//===----------------------------------------------------------------------===//
// RescaleViewOp
//===----------------------------------------------------------------------===//

LogicalResult RescaleViewOp::verify() {
  CacheType source = getSource().getType(), result = getType();
  if (source.getScale() != ScaleGranularity::channel)
    return emitOpError() << "views a 'channel'-scaled cache, got '"
                         << stringifyScaleGranularity(source.getScale()) << "'";
  if (result.getScale() != ScaleGranularity::tensor &&
      result.getScale() != ScaleGranularity::none)
    return emitOpError() << "views the cache at 'tensor' or 'none' scale, got '"
                         << stringifyScaleGranularity(result.getScale()) << "'";
  if (CacheType::get(getContext(), source.getBlockSize(), source.getKvHeads(),
                     source.getHeadDim(), source.getEncoding(),
                     result.getScale(), source.getLayout()) != result)
    return emitOpError() << "may change only the scale granularity";
  return success();
}

//===----------------------------------------------------------------------===//
// ScaleNormalizerOp
//===----------------------------------------------------------------------===//

LogicalResult ScaleNormalizerOp::verify() {
  Operation *op = getOperation();
  if (failed(checkShape(op, "scales", getScales(),
                        {ShapedType::kDynamic, ShapedType::kDynamic})) ||
      failed(checkElement(op, "scales", getScales(), isF32, "f32")) ||
      failed(checkShape(op, "outs", getOut(), {1})) ||
      failed(checkElement(op, "outs", getOut(), isF32, "f32")) ||
      failed(checkShape(op, "flag", getFlag(), {1})) ||
      failed(checkElement(op, "flag", getFlag(), isI32, "i32")))
    return failure();
  return checkSoftmaxScale(op, getSoftmaxScale());
}

void ScaleNormalizerOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  effects.emplace_back(MemoryEffects::Read::get(), &getScalesMutable(),
                       SideEffects::DefaultResource::get());
  effects.emplace_back(MemoryEffects::Write::get(), &getOutMutable(),
                       SideEffects::DefaultResource::get());
  effects.emplace_back(MemoryEffects::Write::get(), &getFlagMutable(),
                       SideEffects::DefaultResource::get());
}

//===----------------------------------------------------------------------===//
// FoldQueryOp
//===----------------------------------------------------------------------===//

LogicalResult FoldQueryOp::verify() {
  Operation *op = getOperation();
  int64_t numHeads = static_cast<int64_t>(getNumHeads());
  if (failed(checkShape(op, "scales", getScales(),
                        {ShapedType::kDynamic, ShapedType::kDynamic})) ||
      failed(checkElement(op, "scales", getScales(), isF32, "f32")))
    return failure();
  int64_t kvHeads = dimOf(getScales(), 0), headDim = dimOf(getScales(), 1);
  if (failed(verifyNumHeads(op, numHeads)))
    return failure();
  if ((!ShapedType::isDynamic(kvHeads) &&
       (kvHeads < 1 || numHeads % kvHeads != 0)))
    return emitOpError() << "num_heads " << numHeads
                         << " must be a positive multiple of the scales' "
                            "kv_heads "
                         << kvHeads;
  if (failed(checkShape(op, "query", getQuery(),
                        {ShapedType::kDynamic, numHeads, headDim})) ||
      failed(checkElement(op, "query", getQuery(), isHalf, "f16 or bf16")) ||
      failed(checkShape(op, "outs", getOut(),
                        cast<MemRefType>(getQuery().getType()).getShape())))
    return failure();
  if (cast<MemRefType>(getOut().getType()).getElementType() !=
      cast<MemRefType>(getQuery().getType()).getElementType())
    return emitOpError() << "outs must hold the query's element type";
  if (failed(checkShape(op, "normalizer", getNormalizer(), {1})) ||
      failed(checkElement(op, "normalizer", getNormalizer(), isF32, "f32")))
    return failure();
  // One exponent per (token, head) row.
  int64_t tokens = dimOf(getQuery(), 0);
  if (failed(checkShape(op, "exponents", getExponents(), {tokens, numHeads})) ||
      failed(checkElement(op, "exponents", getExponents(), isI32, "i32")))
    return failure();
  return success();
}

void FoldQueryOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  addEffects(getOperation(), {&getOutMutable(), &getExponentsMutable()},
             effects);
}
