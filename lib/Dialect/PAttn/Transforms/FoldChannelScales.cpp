//===- FoldChannelScales.cpp - Fold per-channel scales ----------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements --pattn-fold-channel-scales: per-channel K scales are
// folded into the query after division by a power of two (so the fold is
// exact and cannot overflow), each query row renormalized by its own power
// of two (so it keeps every channel that matters whatever |q|), and
// per-channel V scales move to the output.
// The arithmetic is pattn's numerics library; this pass only rewrites IR.
//
//===----------------------------------------------------------------------===//

#include "pattn/Dialect/PAttn/IR/PAttnOps.h"
#include "pattn/Dialect/PAttn/Transforms/ConstantTables.h"
#include "pattn/Dialect/PAttn/Transforms/Passes.h"
#include "pattn/Numerics/Numerics.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/DebugLog.h"

#define DEBUG_TYPE "pattn-fold-channel-scales"

namespace pattn {
#define GEN_PASS_DEF_PATTNFOLDCHANNELSCALES
#include "pattn/Dialect/PAttn/Transforms/Passes.h.inc"
} // namespace pattn

using namespace mlir;
using namespace pattn;
namespace numerics = ::pattn::numerics;

namespace {

/// Creates new IR for one attention op: buffers, globals, views.
class FoldRewriter {
public:
  FoldRewriter(PagedAttentionOp op, SymbolTableCollection &symbols)
      : op(op), builder(op), symbols(symbols), loc(op.getLoc()) {}

  /// A buffer shaped like `like`, with its dynamic sizes read from it.
  Value allocLike(Value like) {
    auto type = cast<MemRefType>(like.getType());
    SmallVector<Value> sizes;
    for (int64_t dim = 0; dim < type.getRank(); ++dim)
      if (type.isDynamicDim(dim))
        sizes.push_back(memref::DimOp::create(builder, loc, like, dim));
    Value buffer = memref::AllocOp::create(builder, loc, type, sizes);
    temporaries.push_back(buffer);
    return buffer;
  }

  /// One i32 per (token, head) row of `query`: the fold's row exponents.
  Value allocRowExponents(Value query, int64_t numHeads) {
    auto type = cast<MemRefType>(query.getType());
    auto rowsType =
        MemRefType::get({type.getDimSize(0), numHeads}, builder.getI32Type());
    SmallVector<Value> sizes;
    if (type.isDynamicDim(0))
      sizes.push_back(memref::DimOp::create(builder, loc, query, 0));
    Value buffer = memref::AllocOp::create(builder, loc, rowsType, sizes);
    temporaries.push_back(buffer);
    return buffer;
  }

  Value alloc(ArrayRef<int64_t> shape, Type element) {
    Value buffer =
        memref::AllocOp::create(builder, loc, MemRefType::get(shape, element));
    temporaries.push_back(buffer);
    return buffer;
  }

  /// Frees the temporaries right after the rewritten attention op(s).
  void deallocTemporaries() {
    OpBuilder after(op->getBlock(), std::next(Block::iterator(op)));
    for (Value buffer : temporaries)
      memref::DeallocOp::create(after, loc, buffer);
  }

  /// A private constant global holding `values`, read back as a memref.
  Value constantGlobal(StringRef name, MemRefType type,
                       ArrayRef<float> values) {
    // In the op's own module (which may be nested), renamed against that
    // module's symbols.
    auto module = op->getParentOfType<ModuleOp>();
    // The table must exist before the new global does, or it would be
    // built with both clashing names in it.
    SymbolTable &table = symbols.getSymbolTable(module);
    OpBuilder globalBuilder = OpBuilder::atBlockBegin(module.getBody());
    auto tensorType =
        RankedTensorType::get(type.getShape(), type.getElementType());
    auto global = memref::GlobalOp::create(
        globalBuilder, loc, name, globalBuilder.getStringAttr("private"), type,
        DenseElementsAttr::get(tensorType, values), /*constant=*/true,
        /*alignment=*/IntegerAttr());
    table.insert(global); // renames on a clash
    return memref::GetGlobalOp::create(builder, loc, type, global.getSymName());
  }

  /// `cache` read at another scale granularity.
  Value rescaleView(Value cache, ScaleGranularity granularity) {
    auto type = cast<CacheType>(cache.getType());
    auto viewType = CacheType::get(
        type.getContext(), type.getBlockSize(), type.getKvHeads(),
        type.getHeadDim(), type.getEncoding(), granularity, type.getLayout());
    return RescaleViewOp::create(builder, loc, viewType, cache);
  }

  PagedAttentionOp op;
  OpBuilder builder;
  SymbolTableCollection &symbols;
  Location loc;
  SmallVector<Value> temporaries;
};

struct FoldChannelScalesPass
    : public ::pattn::impl::PAttnFoldChannelScalesBase<FoldChannelScalesPass> {
  void runOnOperation() override;

private:
  LogicalResult foldOp(PagedAttentionOp op, SymbolTableCollection &symbols);
};

} // namespace

/// The operands of an attention op that the fold rewrites.
struct FoldedOperands {
  Value query, queryExponents, key, keyScale, value, valueScale, outScale,
      guard;
  IntegerAttr guardValue;

  explicit FoldedOperands(PagedAttentionOp op)
      : query(op.getQuery()), queryExponents(op.getQueryExponents()),
        key(op.getKey()), keyScale(op.getKScale()), value(op.getValue()),
        valueScale(op.getVScale()), outScale(op.getOutScale()),
        guard(op.getGuard()), guardValue(op.getGuardValueAttr()) {}
};

static void assignOptional(MutableOperandRange range, Value value) {
  if (value)
    range.assign(value);
  else
    range.clear();
}

/// A copy of `op` (at the builder's insertion point) reading `operands`.
static PagedAttentionOp rebuild(OpBuilder &builder, PagedAttentionOp op,
                                const FoldedOperands &operands) {
  auto copy = cast<PagedAttentionOp>(builder.clone(*op));
  copy.getQueryMutable().assign(operands.query);
  copy.getKeyMutable().assign(operands.key);
  copy.getValueMutable().assign(operands.value);
  assignOptional(copy.getQueryExponentsMutable(), operands.queryExponents);
  assignOptional(copy.getKScaleMutable(), operands.keyScale);
  assignOptional(copy.getVScaleMutable(), operands.valueScale);
  assignOptional(copy.getOutScaleMutable(), operands.outScale);
  assignOptional(copy.getGuardMutable(), operands.guard);
  copy.setGuardValueAttr(operands.guardValue);
  return copy;
}

LogicalResult FoldChannelScalesPass::foldOp(PagedAttentionOp op,
                                            SymbolTableCollection &symbols) {
  // One half of a guarded pair was produced by this pass already.
  if (op.getGuard())
    return success();
  CacheType key = op.getKey().getType(), value = op.getValue().getType();
  bool keyIsChannel = key.getScale() == ScaleGranularity::channel;
  bool valueIsChannel = value.getScale() == ScaleGranularity::channel;
  if (!keyIsChannel && !valueIsChannel)
    return success();
  if (valueIsChannel && op.getOutScale())
    return op.emitOpError() << "has both out_scale and V channel scales; the "
                               "fold cannot combine them";

  // A static K table wider than the binade budget stays as it is (the
  // portable path applies it per element); a clamped N folds, since the row
  // exponents absorb |s / N| > 1 (docs/Passes.md). Non-finite static tables
  // were reported before any op was folded.
  float softmaxScale = op.getEffectiveSoftmaxScale();
  std::optional<SmallVector<float>> keyTable;
  if (keyIsChannel) {
    keyTable = ::pattn::getConstantScaleTable(op.getKScale());
    if (keyTable) {
      numerics::FoldLegality legality =
          numerics::checkFoldLegality(*keyTable, softmaxScale);
      if (legality.verdict != numerics::FoldLegality::Verdict::Legal) {
        LDBG() << "leaving K channel scales unfolded: span "
               << legality.binadeSpan;
        ++numUnfoldable;
        keyIsChannel = false;
      }
    }
  }
  if (!keyIsChannel && !valueIsChannel)
    return success();

  FoldRewriter rewriter(op, symbols);
  OpBuilder &builder = rewriter.builder;
  FoldedOperands operands(op);

  // V: o = sum_j p_j (v_j s_c) = s_c sum_j p_j v_j, so the channel scale
  // moves to the output epilogue and V is read at unit scale.
  if (valueIsChannel) {
    operands.outScale = op.getVScale();
    operands.valueScale = Value();
    operands.value =
        rewriter.rescaleView(op.getValue(), ScaleGranularity::none);
    ++numValueMoves;
  }

  if (!keyIsChannel) {
    rebuild(builder, op, operands);
    op.erase();
    return success();
  }

  Value keyView = rewriter.rescaleView(op.getKey(), ScaleGranularity::tensor);
  Value foldedQuery = rewriter.allocLike(op.getQuery());
  int64_t numHeads = static_cast<int64_t>(op.getNumHeads());
  Value rowExponents = rewriter.allocRowExponents(op.getQuery(), numHeads);

  if (keyTable) {
    // N is known at compile time; the device folds each row against it.
    numerics::FoldNormalizer normalizer =
        numerics::computeFoldNormalizer(*keyTable, softmaxScale);
    LDBG() << "static fold: N = 2^" << normalizer.exponent;
    Value normalizerBuffer = rewriter.constantGlobal(
        "__pattn_k_normalizer", MemRefType::get({1}, builder.getF32Type()),
        {normalizer.value});
    FoldQueryOp::create(builder, rewriter.loc, op.getQuery(), op.getKScale(),
                        normalizerBuffer, foldedQuery, rowExponents,
                        op.getNumHeadsAttr());
    operands.query = foldedQuery;
    operands.queryExponents = rowExponents;
    operands.key = keyView;
    operands.keyScale = normalizerBuffer;
    rebuild(builder, op, operands);
    rewriter.deallocTemporaries();
    ++numStaticFolds;
    op.erase();
    return success();
  }

  // Dynamic table: the device computes N and whether the table folds; the
  // folded form runs when it does and the original form otherwise.
  Value normalizer = rewriter.alloc({1}, builder.getF32Type());
  Value flag = rewriter.alloc({1}, builder.getI32Type());
  ScaleNormalizerOp::create(builder, rewriter.loc, op.getKScale(), normalizer,
                            flag, builder.getF32FloatAttr(softmaxScale));
  FoldQueryOp::create(builder, rewriter.loc, op.getQuery(), op.getKScale(),
                      normalizer, foldedQuery, rowExponents,
                      op.getNumHeadsAttr());

  FoldedOperands folded = operands;
  folded.query = foldedQuery;
  folded.queryExponents = rowExponents;
  folded.key = keyView;
  folded.keyScale = normalizer;
  folded.guard = flag;
  folded.guardValue = builder.getI32IntegerAttr(1);
  rebuild(builder, op, folded);

  FoldedOperands fallback = operands;
  fallback.guard = flag;
  fallback.guardValue = builder.getI32IntegerAttr(0);
  rebuild(builder, op, fallback);
  rewriter.deallocTemporaries();
  ++numGuardedFolds;
  op.erase();
  return success();
}

void FoldChannelScalesPass::runOnOperation() {
  ModuleOp module = getOperation();
  SymbolTableCollection symbols;
  SmallVector<PagedAttentionOp> ops;
  WalkResult checked = module.walk([&](Operation *op) {
    return failed(::pattn::verifyStaticScalesAreFinite(op))
               ? WalkResult::interrupt()
               : WalkResult::advance();
  });
  if (checked.wasInterrupted())
    return signalPassFailure();
  module.walk([&](PagedAttentionOp op) { ops.push_back(op); });
  for (PagedAttentionOp op : ops)
    if (failed(foldOp(op, symbols)))
      return signalPassFailure();
}
