//===- KeyRange.h - A block's query rows and key range ----------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// The step every tensor-core kernel over a paged cache starts with: which
// query tokens of which sequence a block serves (a decode's sequence, or a
// prompt's query tile found by a scan over query_start), and the keys
// they see: the union of the rows' causal, windowed ranges, cut to the
// block's split, in whole tiles.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_COMMON_KEYRANGE_H
#define PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_COMMON_KEYRANGE_H

#include "Kernels/Common/KernelBuilder.h"
#include "Kernels/Kernels.h"

namespace pattn {

/// A block's query rows: its sequence, first token (of the query's) and
/// token count, as i32. A prompt tile's also has its first token's index
/// within the sequence and the sequence's query tokens.
struct BlockQueries {
  mlir::Value seq, tokenBegin, tokenCount;
  mlir::Value tileOffset, sequenceTokens; ///< prompt tiles only
};

/// The sequence and tokens of prompt tile `promptTile` (i32; tiles of
/// `tileTokens` tokens numbered one sequence after another): a scan over
/// the batch. Tiles past the last (the host launches a bound) have no
/// tokens.
BlockQueries locatePromptTile(KernelBuilder &kb, mlir::Value blockTable,
                              mlir::Value queryStart, mlir::Value promptTile,
                              int64_t tileTokens);

/// The keys of a block (i32): the sequence's length, the positions of its
/// first and (prompt tiles) last token, its keys [first, last) and their
/// tiles (firstTile = first / tileKeys, tileCount of them).
struct BlockKeys {
  mlir::Value length, firstQueryPos, lastQueryPos, first, last, firstTile,
      tileCount;
};

/// The key range of the block serving `queries` in split `split` (index):
/// splits of ceil(max keys / the grid's splits) rounded up to whole tiles,
/// the grid's splits on y for a prompt tile (`promptTile`), else on x.
BlockKeys blockKeyRange(KernelBuilder &kb, const BlockQueries &queries,
                        mlir::Value seqLens, mlir::Value blockTable,
                        int64_t blockSize, int64_t tileKeys, int64_t window,
                        mlir::Value split, bool promptTile);

/// A block's query tile in shared memory: `rows` rows, row r = (token
/// r / group, head kvHead x group + r % group) of the block's tokens (zero
/// past them), each `headDim` values of `element` (f16, or bf16 stored as
/// its bits in the f16 view `tile`: [rows][columns], or with
/// `coreMatrices` wgmma's K-major A, [headDim / 8][rows / 8][8][8]).
struct QueryTile {
  mlir::Value query, tile, tid, kvHead;
  int64_t rows = 0, headDim = 0, group = 0;
  mlir::Type element;
  bool coreMatrices = false;
  /// The block's threads that stage it (`tid` < threads).
  int64_t threads = kBlockThreads;
};

/// The query elements a thread loads before it stores any of them.
inline constexpr int64_t kQueryLoadsInFlight = 8;

/// Stages the tile, the block's `threads` threads (`tid`) one element
/// each in turn, kQueryLoadsInFlight loads issued together (a 64-row tile
/// of 128 channels takes 8 round trips to memory, not 64); column c holds
/// channel channelOf(c) of the query (the order of the kernel's K
/// operand).
void stageQueryTile(KernelBuilder &kb, const QueryTile &tile,
                    const BlockQueries &queries,
                    llvm::function_ref<mlir::Value(mlir::Value)> channelOf);

/// The logit scale of row `row` (index) of a folded query: `softmaxScale`
/// times 2^e, e its (token, head)'s exponent in `queryExponents` (0 for a
/// row past the block's tokens).
mlir::Value foldedRowScale(KernelBuilder &kb, mlir::Value queryExponents,
                           mlir::Value row, int64_t group, mlir::Value kvHead,
                           const BlockQueries &queries,
                           mlir::Value softmaxScale);

} // namespace pattn

#endif // PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_COMMON_KEYRANGE_H
