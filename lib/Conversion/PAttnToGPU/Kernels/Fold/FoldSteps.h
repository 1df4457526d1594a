//===- FoldSteps.h - The fold's steps, shared by the kernels ----*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// The steps of --pattn-fold-channel-scales' device side, written once: a
// channel table's normalizer N (pattn::numerics::computeFoldNormalizer) and
// its fold flag, and a query row folded by the table
// (pattn::numerics::foldQueryRow), bit for bit as on the host. The fold
// kernels (FoldKernels.cpp) use them, and so does the XQA decode when it
// folds its own query tile (docs/Lowering.md, "The fold inside the
// decode").
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_FOLD_FOLDSTEPS_H
#define PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_FOLD_FOLDSTEPS_H

#include "Kernels/Common/KeyRange.h"

namespace pattn {

/// The normalizer of a channel table: N's exponent (i32), N itself (f32)
/// and whether the table folds (i1).
struct TableNormalizer {
  mlir::Value exponent, value, foldable;
};

/// The normalizer of `scales` (a [kv_heads, head_dim] f32 table), reduced
/// by the block's first `warps` warps (`tid` < 32 x warps; every thread of
/// the block must reach the barrier inside) through `buffers`, three
/// [warps] i32 workgroup buffers. Every thread gets the same bits.
TableNormalizer reduceTableNormalizer(KernelBuilder &kb, mlir::Value scales,
                                      mlir::Value tid, int64_t warps,
                                      llvm::ArrayRef<mlir::Value> buffers,
                                      float softmaxScale);

/// Thread 0 stores N into `out` and the flag (1: folds) into `flag`.
void storeTableNormalizer(KernelBuilder &kb, mlir::Value tid,
                          const TableNormalizer &normalizer, mlir::Value out,
                          mlir::Value flag);

/// The exponent (i32) of a normalizer N loaded as f32: a normal power of
/// two, so its biased field - 127.
mlir::Value normalizerExponentOf(KernelBuilder &kb, mlir::Value normalizer);

/// One channel of a folded row: q * s / N as a mantissa product and the
/// power of two it sits at (numerics::foldQueryRow's p[c]).
struct FoldedChannel {
  mlir::Value queryMantissa, scaleMantissa; ///< in ±[1, 2)
  mlir::Value shift;   ///< p = queryMantissa * scaleMantissa * 2^shift
  mlir::Value binade;  ///< of p rounded to 24 bits
  mlir::Value nonzero; ///< p != 0
  mlir::Value signBit; ///< of p, as fp32 bits
};

/// Query element `q` (f32) folded by table entry `s` under N = 2^exponent.
FoldedChannel foldChannel(KernelBuilder &kb, mlir::Value q, mlir::Value s,
                          mlir::Value normalizerExponent);

/// The folded value T(p * 2^-e) of `channel` in a row of exponent
/// `rowExponent`, one rounding into `element`; a product more than
/// numerics::kFoldRowFlushBinades below the row's largest is a zero of its
/// sign (`flushBelow`, -kFoldRowFlushBinades as i32, is created here when
/// null; a loop creates it once before).
mlir::Value foldedValue(KernelBuilder &kb, const FoldedChannel &channel,
                        mlir::Value rowExponent, mlir::Type element,
                        mlir::Value flushBelow = {});

/// The sentinel "no nonzero product yet" of a row's exponent reduction.
mlir::Value noRowExponent(KernelBuilder &kb);

/// A row's exponent from its largest binade (`none`, a noRowExponent: 0).
mlir::Value rowExponentOf(KernelBuilder &kb, mlir::Value largestBinade,
                          mlir::Value none);

/// Stages a block's query tile folded: as stageQueryTile, but row r holds
/// the row's query folded by `scales` (row kvHead of the table) under N =
/// 2^normalizerExponent, in `queryElement` rounding, then the tile's
/// element. Warp w of `warps` (lane `lane`) folds rows w, w + warps, ...,
/// each lane columns lane, lane + 32, ...; the row's exponent goes into
/// the row's padding (columns headDim and headDim + 1: its low and high 16
/// bits), where foldedTileRowExponent reads it. Rows past the block's
/// tokens are zero with exponent 0.
void stageFoldedQueryTile(
    KernelBuilder &kb, const QueryTile &tile, const BlockQueries &queries,
    llvm::function_ref<mlir::Value(mlir::Value)> channelOf, mlir::Value scales,
    mlir::Value normalizerExponent, mlir::Value warp, mlir::Value lane,
    int64_t warps);

/// The exponent (i32) stageFoldedQueryTile stored for row `row` (index).
mlir::Value foldedTileRowExponent(KernelBuilder &kb, mlir::Value tile,
                                  mlir::Value row, int64_t headDim);

} // namespace pattn

#endif // PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_FOLD_FOLDSTEPS_H
