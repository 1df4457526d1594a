//===- XqaPaged.h - The tensor-core split-KV decode's builder ---*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// The builder of the XQA decode of pattn.paged_attention, shared by the two
// files that implement it: XqaPagedCopies.cpp (query staging, page lookups,
// the cp.async ring, the block's key range) and XqaPaged.cpp (the per-tile
// steps, the key-warp merge and the kernel). Internal to that family.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_DECODE_XQAPAGED_H
#define PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_DECODE_XQAPAGED_H

#include "Kernels/Common/DecodeCommon.h"
#include "Kernels/Common/KernelBuilder.h"
#include "Kernels/Common/KeyRange.h"
#include "Kernels/Common/PagedCopies.h"
#include "Kernels/Kernels.h"
#include "Kernels/TensorCore/TensorCore.h"
#include "Planning/DecodePlan.h"

#include <array>
#include <optional>
#include <utility>

namespace pattn::xqa {

/// One side (K or V) of the cache as the XQA kernel reads it.
using XqaSide = PagedSide;

/// The kernel arguments that build hands on to its steps.
struct XqaArguments {
  mlir::Value query, seqLens, queryStart, guard, partialOut, partialStats;
  /// A plan of cluster_splits or merges_unsplit: the op's sinks, out_scale
  /// and output (null where absent), which the blocks' merge writes.
  mlir::Value sinks, outScale, out;
};

class XqaBuilder {
public:
  XqaBuilder(KernelModule &kernels, PagedAttentionOp op, XqaPlanAttr plan,
             const CacheBuffers &key, const CacheBuffers &value,
             const FusedFold *fold)
      : kernels(kernels), op(op), plan(plan), keyBuffers(key),
        valueBuffers(value), fold(fold), builder(op.getContext()),
        kb(builder, op.getLoc()), tc(kb, /*bf16=*/false) {}

  mlir::gpu::GPUFuncOp build(llvm::SmallVectorImpl<mlir::Value> &hostOperands);

private:
  KernelModule &kernels;
  PagedAttentionOp op;
  XqaPlanAttr plan;
  const CacheBuffers &keyBuffers, &valueBuffers;
  /// A fold this kernel computes itself (null: the query is read as is).
  const FusedFold *fold;
  mlir::OpBuilder builder;
  KernelBuilder kb;
  MmaBuilder tc;

  // Static facts.
  bool bf16 = false;
  int64_t headDim = 0, valueDim = 0, kvHeads = 0, group = 0, numHeads = 0;
  int64_t rows = 0, mTiles = 0, tileKeys = 0, stages = 0, keyWarps = 0,
          valueWarps = 0, blockSize = 0, resident = 0;
  XqaSharedLayout layout;
  XqaSide key, value;

  int64_t window = 0, nTiles = 0; ///< nTiles: this warp's 8-channel tiles
  /// The row halves (g, then g + 8) of an m-tile that can hold a real row:
  /// 1 when g x max_query_len <= 8, whose upper half is always padding, so
  /// that its logits, softmax and P rows are never computed.
  int64_t rowHalves = 2;
  /// A prompt's query tokens per block (the plan's query_tile; 0: a
  /// decode, whose block serves all of a sequence's tokens).
  int64_t tileTokens = 0;
  /// The decode kernel of a split prompt op (its plan is the op's
  /// decode_plan): the most query tokens of the sequences it serves; the
  /// blocks of longer sequences do nothing. 0: every sequence.
  int64_t decodeTokens = 0;
  float softcap = 0.0f;
  /// threads = 160: a copy warp (warp 4) looks up and copies every tile
  /// into the ring and signals each stage with an mbarrier; the four
  /// compute warps wait for a stage's bytes and release it, with no block
  /// barrier per tile.
  bool copyWarp = false;
  std::optional<StageBarriers> barriers;
  /// rows = 8 (XqaKeysAsRows.cpp): a warp's 16 keys are the mma's M rows and
  /// the query rows its N = 8 columns; the loop state is then the max and
  /// partial sum of rows 2t and 2t + 1 and nTiles / 2 tiles of Oᵀ.
  bool keysAsRows = false;
  /// scores_ahead (rows = 8): tile t + 1's Sᵀ is computed in iteration t,
  /// under tile t's softmax and P V (runTilesScoringAhead).
  bool scoresAhead = false;

  // Kernel values.
  mlir::Value smem, queryTile, seq, kvHead, tokenBegin, tokenCount, first, last,
      tid, lane, groupId, threadInGroup, keyGroup, valueGroup;
  mlir::Value blockTable, liveKeys;
  /// The block's keys: [first, last) of the sequence, tiles from firstTile.
  mlir::Value length, firstQueryPos, firstTile, tileCount;
  /// A prompt's block: its query tile (blockIdx.x), and the position of its
  /// last token (a decode's is length - 1).
  mlir::Value promptTile, lastQueryPos;
  /// Constants of the softmax; softmaxScale includes log2 e without softcap.
  mlir::Value softmaxScale, log2e, negInf, zeroF32;
  /// The row exponents of a folded query (or null), and then the logit
  /// scale of rows g and g + 8 of each m-tile (softmaxScale times 2^e).
  mlir::Value queryExponents;
  llvm::SmallVector<mlir::Value> rowScales;
  /// With a fused fold: its table, N (f32) and N's exponent (i32).
  mlir::Value foldScales, foldNormalizer, foldExponent;
  /// With a fused fold: N (computed, or read from k_scale) and whether
  /// this op runs (the guard, from the computed flag where the normalizer
  /// is fused). Every thread of the block takes part.
  mlir::Value prepareFold(mlir::Value guard);
  /// The logit scale of query-tile row `row`: softmaxScale times 2^e, e
  /// the row's fold exponent.
  mlir::Value rowLogitScale(mlir::Value row);
  /// Column `column` of the query tile holds channel queryChannel(column).
  mlir::Value queryChannel(mlir::Value column);
  /// The logit scale of element `at` of a step's scores, for the key
  /// scale `keyScale` of its column.
  mlir::Value logitScaleAt(int64_t at, mlir::Value keyScale) {
    return rowScales.empty() ? keyScale : rowScales[(at / 8) * 2 + at % 4 / 2];
  }
  /// Loads the row exponents of this thread's rows into rowScales.
  void loadRowScales();
  mlir::Value valueSegmentBase;

  /// The per-thread loop state: the running max and sum of rows g and
  /// g + 8 of each m-tile, then the output accumulators.
  MmaBuilder::SoftmaxTiles softmaxTiles() const {
    if (keysAsRows)
      return {1, nTiles / 2, 2};
    return {mTiles, nTiles, rowHalves};
  }
  int64_t maxAt(int64_t mt, int64_t h) const {
    return softmaxTiles().maxAt(mt, h);
  }
  int64_t sumAt(int64_t mt, int64_t h) const {
    return softmaxTiles().sumAt(mt, h);
  }
  int64_t accAt(int64_t mt, int64_t nt, int64_t e) const {
    return softmaxTiles().accAt(mt, nt, e);
  }

  mlir::Type operandType() { return tc.operandType(); }
  mlir::Value index(int64_t v) { return kb.index(v); }

  /// A typed view of dynamic shared memory at byte `offset`.
  mlir::Value view(mlir::Value offset, llvm::ArrayRef<int64_t> shape,
                   mlir::Type element);
  mlir::Value view(int64_t offset, llvm::ArrayRef<int64_t> shape,
                   mlir::Type element);
  // The steps of build, in the order it runs them.
  /// The static facts of the op, its plan and its caches.
  void computeFacts();
  /// The host operands, the kernel with its launch bounds, its arguments
  /// (`args`) and the sides' descriptions.
  mlir::gpu::GPUFuncOp
  createKernel(llvm::SmallVectorImpl<mlir::Value> &hostOperands,
               XqaArguments &args);
  /// Shared memory views and the block and lane coordinates; returns the
  /// split (blockIdx.x).
  mlir::Value setUpBlock();
  /// The ring's prologue; returns the block-table entries of the first tile
  /// the loop copies.
  llvm::SmallVector<mlir::Value> startRing();
  /// The softmax constants and the rows' logit scales.
  void prepareSoftmax();
  /// The loop over the block's tiles, given the pages that startRing looked
  /// up; returns the per-thread softmax state after the last tile.
  llvm::SmallVector<mlir::Value>
  runTiles(llvm::ArrayRef<mlir::Value> aheadPages);
  /// The head of an iteration of the barrier ring's tile loop: waits until
  /// at most `newerPending` copy groups newer than the awaited tile's are
  /// in flight (and the block barrier), copies the tile stages - 1 ahead
  /// with the lookups `pages`; the tile (i32), its ring slot and the next
  /// lookups.
  struct TileIteration {
    mlir::Value i32Tile, slot;
    llvm::SmallVector<mlir::Value> nextPages;
  };
  TileIteration beginTile(CpAsyncRing &ring, mlir::Value iteration,
                          int32_t newerPending, mlir::Value i32Stages,
                          mlir::ValueRange pages);
  /// runTiles for a scores_ahead plan: the loop waits for tiles t and
  /// t + 1, finishes tile t from the scores the previous iteration
  /// computed, and computes tile t + 1's between its softmax and its P V.
  llvm::SmallVector<mlir::Value>
  runTilesScoringAhead(llvm::ArrayRef<mlir::Value> aheadPages);
  /// The loop state before the first tile (softmax rows, accumulators).
  llvm::SmallVector<mlir::Value> initialState();
  /// A tile's steps over ring slot `slot` (index) for tile `i32Tile`:
  /// scores, logits, the softmax update and P V, on the state `s`.
  void tileSteps(mlir::Value i32Tile, mlir::Value slot,
                 llvm::SmallVectorImpl<mlir::Value> &s);
  // With a copy warp.
  /// Everything after the key range: the barriers, then the copy warp's
  /// loop or the compute warps' (query, tiles, merge).
  void runWithCopyWarp(const XqaArguments &args, mlir::Value split);
  /// The copy warp's loop: each tile into its stage once released.
  void produceTiles();
  /// The compute warps' loop: each tile once its stage is full; returns
  /// the softmax state after the last.
  llvm::SmallVector<mlir::Value> consumeTiles();
  /// A barrier of the compute warps (the block's without a copy warp).
  void syncComputeWarps();

  /// tokenBegin/tokenCount, the sequence length and the block's key range
  /// (this split, the window) in tiles.
  void computeKeyRange(mlir::Value seqLens, mlir::Value queryStart,
                       mlir::Value split);
  /// The query tile in shared memory, and its fragments in registers where
  /// they are few.
  void prepareQuery(mlir::Value query);
  /// One k-step (16 channels) of a warp's 16 keys: B registers {b0, b1}
  /// of n-tile 0 (keys n0 + g), then of n-tile 1 (keys n0 + 8 + g), and
  /// the index of the step's 16 columns in the query tile.
  struct KeyStep {
    std::array<mlir::Value, 4> b;
    int64_t index;
  };
  /// Loads and decodes the K rows of a warp's 16-key step at `n0` and hands
  /// `use` each k-step in turn.
  void forEachKeyStep(mlir::Value keyRows, mlir::Value stageBase,
                      mlir::Value n0,
                      llvm::function_ref<void(const KeyStep &)> use);
  /// Loads and decodes the V rows of a warp's 16-key step at `n0` over its
  /// value channels and hands `use` each n-tile's B registers (keys 2t,
  /// 2t + 1, then 2t + 8, 2t + 9 of channel valueChannel(nTile, g)).
  void forEachValueTile(
      mlir::Value valueRows, mlir::Value stageBase, mlir::Value n0,
      llvm::function_ref<void(int64_t nTile, mlir::Value b0, mlir::Value b1)>
          use);
  /// One 16-key step of a warp: S = Q Kᵀ (mTiles x 2 n-tiles of fp32).
  llvm::SmallVector<mlir::Value>
  scoreStep(mlir::Value keyRows, mlir::Value stageBase, mlir::Value n0);
  /// The step's base-2 logits: scales, softcap, and masks unless every key
  /// is live and visible to every real row.
  llvm::SmallVector<mlir::Value>
  logitStep(llvm::ArrayRef<mlir::Value> scores, mlir::Value slot,
            mlir::Value tileStart, mlir::Value stageBase, mlir::Value n0);
  /// Whether a warp's 16-key step at `n0` skips the masks: every key live
  /// and visible to every real row (a warp-uniform value).
  mlir::Value stepUnmasked(mlir::Value slot, mlir::Value tileStart,
                           mlir::Value n0);
  /// Whether key position `keyPos` (`live`: on a live page, in range) is
  /// visible to query row `row`: causal for its token, inside the window.
  mlir::Value keyVisible(mlir::Value live, mlir::Value keyPos, mlir::Value row);
  /// O += P V over this warp's value channels.
  void valueStep(mlir::Value valueRows, mlir::Value stageBase, mlir::Value n0,
                 llvm::ArrayRef<llvm::SmallVector<mlir::Value>> pOperands,
                 llvm::SmallVectorImpl<mlir::Value> &s);
  /// Merges the key warps through shared memory and writes the block's
  /// partial output and statistics.
  void mergeKeyWarps(llvm::ArrayRef<mlir::Value> state, mlir::Value split,
                     mlir::Value partialOut, mlir::Value partialStats);
  /// cluster_splits: after every block of the cluster wrote its split's
  /// partial results, block `split` merges its share of the sequence's
  /// rows into the output; merges_unsplit: a lone split's block merges all
  /// of them (XqaSplitMerge.cpp).
  void mergeOwnSplits(const XqaArguments &args, mlir::Value split);
  /// Pieces split, split + splits, ... (a piece: a row's kBlockThreads
  /// channels) of the sequence's rows, merged from the workspace's `splits`
  /// splits into the output.
  void mergeRowPieces(const XqaArguments &args, mlir::Value split,
                      int64_t splits);
  void loadQueryTile(mlir::Value query);
  /// The block's tiles into the ring (set by prepareCopies).
  std::optional<PagedTileCopies> copies;
  /// The block's query rows (after computeKeyRange).
  BlockQueries blockQueries() const {
    BlockQueries queries;
    queries.seq = seq;
    queries.tokenBegin = tokenBegin;
    queries.tokenCount = tokenCount;
    return queries;
  }
  /// The copies' per-thread address parts (after computeKeyRange).
  void prepareCopies();
  /// The byte of ring slot `slot`'s stage in shared memory.
  mlir::Value stageBaseOf(mlir::Value slot) {
    return kb.add(kb.mul(slot, index(layout.stageBytes)), index(layout.ring));
  }
  /// The raw rows of `side` in ring slot `slot` as [keys][16-bit elements].
  mlir::Value ringRows(const XqaSide &side, mlir::Value slot);
  /// The f16x2 / bf16x2 pairs of a raw word of `side` (decodeWordHalves),
  /// times `groupScale` (a pair) when given.
  llvm::SmallVector<mlir::Value>
  decodeHalves(const XqaSide &side, mlir::Value word, mlir::Value groupScale);
  /// The power of two that `side`'s decoded pairs leave out: 2^14 for
  /// e2m1 codes decoded as subnormals (kb.fp4Subnormal), else 1. The
  /// logit scale takes the key's, the output the value's.
  float decodedScale(const XqaSide &side) const;
  /// Word `word` (groups 4 word ... 4 word + 3) of the e4m3 group scales
  /// of key `keyIndex` in the ring stage at `stageBase`.
  mlir::Value groupScaleWord(const XqaSide &side, mlir::Value stageBase,
                             mlir::Value keyIndex, mlir::Value word);
  /// The f32 per-token scales of keys `keyLow` and `keyLow` + 1 in the
  /// ring stage at `stageBase`, as a vector<2xf32>.
  mlir::Value tokenScalePair(const XqaSide &side, mlir::Value stageBase,
                             mlir::Value keyLow);
  /// `pair` times `scales` in fp32, rounded once to the operand type.
  mlir::Value scaledPair(mlir::Value pair, mlir::Value scales);
  /// A word of f16 or bf16 codes as a pair of that type.
  mlir::Value rawPair(mlir::Value word, Encoding encoding);
  /// The A registers of query k-step `step` (16 columns) of m-tile `mt`:
  /// kept in registers from the start when they are few, else read from
  /// the query tile at each use.
  llvm::ArrayRef<mlir::Value> queryFragment(int64_t step, int64_t mt);
  llvm::SmallVector<llvm::SmallVector<mlir::Value>> queryFragments;
  llvm::SmallVector<mlir::Value> fragmentScratch;
  llvm::SmallVector<mlir::Value> loadQueryFragment(int64_t step, int64_t mt);
  // Keys as M (rows = 8; XqaKeysAsRows.cpp).
  /// The B registers of query k-step `step`: columns 2t, 2t + 1 and
  /// 2t + 8, 2t + 9 of the step's 16 of row g.
  llvm::SmallVector<mlir::Value> loadQueryColumns(int64_t step);
  /// Sᵀ = K Qᵀ for a warp's 16-key step: element e holds key n0 + g +
  /// 8 (e >> 1), row 2t + (e & 1).
  llvm::SmallVector<mlir::Value> scoreStepKeysAsRows(mlir::Value keyRows,
                                                     mlir::Value stageBase,
                                                     mlir::Value n0);
  /// The keys n0 of the warp's 16-key step `step` of a tile.
  mlir::Value warpStepKeys(int64_t step);
  /// scoreStepKeysAsRows of each of the warp's steps of the tile in ring
  /// slot `slot`, four scores a step.
  llvm::SmallVector<mlir::Value> tileScoresKeysAsRows(mlir::Value slot);
  /// The base-2 logits of scoreStepKeysAsRows's elements.
  llvm::SmallVector<mlir::Value>
  logitStepKeysAsRows(llvm::ArrayRef<mlir::Value> scores, mlir::Value slot,
                      mlir::Value tileStart, mlir::Value stageBase,
                      mlir::Value n0);
  /// The online softmax update of the warp's steps (rows 2t and 2t + 1
  /// across the lanes of a column); returns per step Pᵀ as the two B
  /// registers of Oᵀ += Vᵀ Pᵀ.
  llvm::SmallVector<std::array<mlir::Value, 2>>
  softmaxKeysAsRows(llvm::ArrayRef<llvm::SmallVector<mlir::Value>> logits,
                    llvm::SmallVectorImpl<mlir::Value> &s);
  /// Oᵀ += Vᵀ Pᵀ over this warp's value channels.
  void valueStepKeysAsRows(mlir::Value valueRows, mlir::Value stageBase,
                           mlir::Value n0, std::array<mlir::Value, 2> pT,
                           llvm::SmallVectorImpl<mlir::Value> &s);
  /// The warp's rows' max, sum and Oᵀ into the merge area of shared memory
  /// ([key group][row][value_dim | max | sum]).
  void storeWarpPartialsKeysAsRows(llvm::ArrayRef<mlir::Value> state,
                                   mlir::Value merge, int64_t mergeStride);
  /// The lane's logit scale of rows 2t and 2t + 1 of a folded query.
  void loadRowScalesKeysAsRows();
  /// movmatrix.trans: the 8 x 8 16-bit matrix whose (row g, columns 2t,
  /// 2t + 1) this lane holds in `pair` (an mma operand register),
  /// transposed.
  mlir::Value transposeQuad(mlir::Value pair);

  /// The value channel of n-tile `nTile` (of this warp), column `n`.
  mlir::Value valueChannel(int64_t nTile, mlir::Value n);
};

} // namespace pattn::xqa

#endif // PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_DECODE_XQAPAGED_H
