//===- PrefillPaged.h - The tensor-core prefill's builder -------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// The builder of the prefill of pattn.paged_attention, shared by the
// files that implement it: PrefillPaged.cpp (the block, the query, the
// tile loop, the write-out), PrefillSteps.cpp (a tile's decode into
// shared memory and a warp's 16-key step on mma.sync) and PrefillWgmma.cpp
// (a tile's products on wgmma). Internal to that family.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_PREFILL_PREFILLPAGED_H
#define PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_PREFILL_PREFILLPAGED_H

#include "Kernels/Common/KernelBuilder.h"
#include "Kernels/Common/KeyRange.h"
#include "Kernels/Common/PagedCopies.h"
#include "Kernels/Kernels.h"
#include "Kernels/TensorCore/TensorCore.h"
#include "Planning/DecodePlan.h"

#include <optional>

namespace pattn::prefill {

/// What a warp's tile steps read: the tile's K and V rows as 16-bit
/// [keys][elements] views (the decoded tile of a quantized side, else the
/// ring stage), the stage's byte offset and slot, and the tile's first key.
struct TileViews {
  mlir::Value keyRows, valueRows, stageBase, slot, tileStart;
};

class PrefillBuilder {
public:
  PrefillBuilder(KernelModule &kernels, PagedAttentionOp op,
                 PrefillPlanAttr plan, const CacheBuffers &key,
                 const CacheBuffers &value)
      : kernels(kernels), op(op), plan(plan), keyBuffers(key),
        valueBuffers(value), builder(op.getContext()), kb(builder, op.getLoc()),
        tc(kb, /*bf16=*/false) {}

  mlir::gpu::GPUFuncOp build(llvm::SmallVectorImpl<mlir::Value> &hostOperands);

private:
  KernelModule &kernels;
  PagedAttentionOp op;
  PrefillPlanAttr plan;
  const CacheBuffers &keyBuffers, &valueBuffers;
  mlir::OpBuilder builder;
  KernelBuilder kb;
  MmaBuilder tc;

  // Static facts.
  int64_t headDim = 0, valueDim = 0, kvHeads = 0, group = 0, numHeads = 0;
  int64_t rows = 0, tileTokens = 0, tileKeys = 0, stages = 0, blockSize = 0;
  int64_t window = 0, nTiles = 0;
  /// The block's threads: a warp per 16 rows (plan.getThreads()).
  int64_t blockThreads = 0;
  float softcap = 0.0f;
  PrefillSharedLayout layout;
  PagedSide key, value;
  /// Where a side is decoded into shared memory once per tile (a quantized
  /// side), its rows' channels are permuted within each word: position p of
  /// a word of n codes holds channel channelAt(p) (decodeWordHalves' pairs
  /// stored in order).
  bool keyDecoded = false, valueDecoded = false;
  /// The plan's kernel is wgmma: the query tile, the ring's rows and the
  /// decoded tiles are core matrices (8 rows x 16 bytes).
  bool wgmma = false;

  // Kernel values.
  mlir::Value smem, queryTile, tid, lane, warp, groupId, threadInGroup, kvHead;
  /// wgmma: the thread's warpgroup (its 64 rows: warpgroup x 64 ...).
  mlir::Value warpgroup;
  /// wgmma: the shared address (i64) of dynamic shared memory.
  mlir::Value smemAddress;
  mlir::Value blockTable, liveKeys, promptTile, split;
  BlockQueries queries;
  BlockKeys keys;
  /// The warp's first row (index) and the position of its first token.
  mlir::Value warpRow, warpFirstQueryPos;
  mlir::Value softmaxScale, log2e, negInf, zeroF32;
  /// The logit scale of the thread's rows g and g + 8 where the query was
  /// folded (empty otherwise).
  llvm::SmallVector<mlir::Value> rowScales;
  /// The warp's query fragments per 16-column step (empty: read per use).
  llvm::SmallVector<llvm::SmallVector<mlir::Value>> queryFragments;
  std::optional<PagedTileCopies> copies;

  mlir::Value index(int64_t v) { return kb.index(v); }
  mlir::Value view(int64_t offset, llvm::ArrayRef<int64_t> shape,
                   mlir::Type element);
  MmaBuilder::SoftmaxTiles softmaxTiles() const { return {1, nTiles, 2}; }

  // PrefillPaged.cpp: the steps of build, in the order it runs them.
  void computeFacts();
  mlir::gpu::GPUFuncOp
  createKernel(llvm::SmallVectorImpl<mlir::Value> &hostOperands,
               DecodeSignature &signature);
  void setUpBlock();
  /// A block whose prompt tile and key range are located: the copies, the
  /// query, the tile loop and the write-out.
  void runBlock(const DecodeSignature &signature,
                const DecodeSignature::SequenceArgs &args);
  /// The query tile (rows past the block's tokens zero, channels in the
  /// key side's order) and the warp's fragments; the rows' logit scales.
  void prepareQuery(mlir::Value query, mlir::Value queryExponents);
  llvm::SmallVector<mlir::Value> queryFragment(int64_t step);
  /// The loop over the block's tiles; returns the softmax state.
  llvm::SmallVector<mlir::Value> runTiles();
  /// Each real row's results: given a workspace without rows (the host's
  /// way of saying "one split, no merge"), the finished output as the
  /// merge would write it; else the unnormalized output and (max, sum) into
  /// the workspace of split `split`.
  void writeRows(llvm::ArrayRef<mlir::Value> state,
                 const DecodeSignature &signature);
  /// Where the thread's row half `h` goes: its row of the block, whether it
  /// is real, its token and head, and its (token, head) row of the output.
  struct RowPlace {
    mlir::Value row, real, token, head, outRow;
  };
  RowPlace rowPlace(int64_t h);
  /// The value channel of accumulator element e2 of n-tile nt.
  mlir::Value outputChannel(int64_t nt, int64_t e2);

  // PrefillSteps.cpp.
  /// Decodes the quantized sides of ring slot `slot` (stage at
  /// `stageBase`) into their decoded tiles, every 16-byte chunk by one
  /// thread; V's per-token scales are applied here. `valueShift` (wgmma:
  /// bytes, index) picks V's decoded buffer.
  void decodeTile(mlir::Value stageBase, mlir::Value valueShift = {});
  void decodeSide(const PagedSide &side, int64_t decodedAt, int64_t stride,
                  mlir::Value stageBase, mlir::Value shift);
  /// The channel at position `position` (< n) of a decoded word of n
  /// codes, and the channel of position `at` of a decoded row.
  static int64_t channelAt(int64_t position, int64_t n);
  mlir::Value decodedChannel(mlir::Value at, int64_t n);
  /// S = Q Kᵀ for keys n0 ... n0 + 15 of the tile: two n-tiles of fp32.
  llvm::SmallVector<mlir::Value> scoreStep(const TileViews &tile,
                                           mlir::Value n0);
  /// The step's base-2 logits: scales, softcap, and the masks (liveness,
  /// causal per row, window) unless every key is live and visible to every
  /// row of the warp.
  llvm::SmallVector<mlir::Value> logitStep(llvm::ArrayRef<mlir::Value> scores,
                                           const TileViews &tile,
                                           mlir::Value n0);
  /// O += P V over every value channel.
  void valueStep(const TileViews &tile, mlir::Value n0,
                 llvm::ArrayRef<mlir::Value> pOperands,
                 llvm::SmallVectorImpl<mlir::Value> &state);
  /// A word of 16-bit elements of `encoding`'s type as an mma operand.
  mlir::Value operandOf(mlir::Value word, bool decoded, Encoding encoding);
  /// The byte (index) of 16-byte chunk `segment` of key `keyIndex` in a
  /// side's ring rows (at `rows`, one every `stride` bytes, or wgmma's
  /// core matrices), and of element `channel` of a decoded row.
  mlir::Value rawChunkByte(mlir::Value rows, mlir::Value keyIndex,
                           mlir::Value segment, int64_t stride);
  mlir::Value decodedByte(int64_t decodedAt, int64_t stride,
                          mlir::Value keyIndex, mlir::Value channel,
                          mlir::Value shift);

  // PrefillWgmma.cpp.
  /// The tile loop on wgmma, software-pipelined: tile i's S is issued,
  /// then tile i - 1's P V, which runs under tile i's V decode and
  /// softmax; returns the softmax state.
  llvm::SmallVector<mlir::Value> runTilesWgmma();
  /// Tile `tile` (i32) of the block: its ring slot, stage and first key.
  TileViews tileViews(mlir::Value tile);
  /// Tile `tile` landed (its copies waited for, handed to the async proxy
  /// where a side is read in place, a block barrier), the copies of tile
  /// `tile` + stages - 1 issued (given `pages`; returns the next tile's),
  /// unless `deferCopies`, and a quantized K decoded and published.
  llvm::SmallVector<mlir::Value> landKeys(CpAsyncRing &ring, mlir::Value tile,
                                          mlir::ValueRange pages,
                                          bool deferCopies);
  /// A quantized V of tile `tile` decoded into buffer `tile` % 2 and
  /// fenced for the async proxy (the next block barrier publishes it).
  void decodeValues(mlir::Value tile);
  /// The byte offsets (index) of a tile's K and V operand rows: a decoded
  /// tile (V's buffer `tile` % 2), or the ring stage read in place.
  mlir::Value keyRowsOf(const TileViews &tile);
  mlir::Value valueRowsOf(const TileViews &tile, mlir::Value tile32);
  /// S of a tile (wgmma N = keys), issued and committed, not waited for:
  /// per thread the mma C fragments of its rows, n-tile after n-tile.
  llvm::SmallVector<mlir::Value> issueScores(mlir::Value keyRows);
  /// O += P V (wgmma N = the value channels, V read MN-major, P from
  /// registers: `pBits`, 4 per 16-key step), issued and committed, not
  /// waited for.
  void issueValues(mlir::Value valueRows, llvm::ArrayRef<mlir::Value> pBits,
                   llvm::SmallVectorImpl<mlir::Value> &s);
  /// The online softmax of tile `tile`'s `scores` (landed): the logits,
  /// the maxima and sums of `s`, then, when the previous P V is still
  /// `accumulatorsInFlight`, its wait and the accumulators' decay; returns
  /// P as wgmma A registers (i32 pairs, 4 per 16-key step).
  llvm::SmallVector<mlir::Value>
  softmaxOfTile(llvm::ArrayRef<mlir::Value> scores, mlir::Value tile,
                llvm::SmallVectorImpl<mlir::Value> &s,
                bool accumulatorsInFlight);
  /// Orders this thread's shared-memory stores before later wgmma reads
  /// (fence.proxy.async; a block barrier must follow).
  void publishToAsyncProxy();
};

} // namespace pattn::prefill

#endif // PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_PREFILL_PREFILLPAGED_H
