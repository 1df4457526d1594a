//===- FoldSteps.cpp - The fold's steps, shared by the kernels -----------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the fold's device-side steps (FoldSteps.h): what
// pattn::numerics::computeFoldNormalizer and foldQueryRow compute on the
// host, bit for bit.
//
//===----------------------------------------------------------------------===//

#include "Kernels/Fold/FoldSteps.h"
#include "Kernels/Kernels.h"
#include "pattn/Numerics/Numerics.h"

#include <limits>

using namespace mlir;
using namespace pattn;
namespace numerics = ::pattn::numerics;

/// ilogb of a positive finite fp32 given by its bits (subnormals included).
static Value ilogbOfBits(KernelBuilder &kb, Value bits) {
  Value exponentField = kb.shru(bits, kb.i32(23));
  Value normal = kb.sub(exponentField, kb.i32(127));
  // A subnormal m * 2^-149 has ilogb = floor(log2 m) - 149, and m < 2^23
  // converts to fp32 exactly, so its exponent field gives floor(log2 m).
  Value asFloat = kb.bitcast(kb.b.getI32Type(), kb.toF32(bits));
  Value subnormal =
      kb.sub(kb.sub(kb.shru(asFloat, kb.i32(23)), kb.i32(127)), kb.i32(149));
  return kb.select(kb.cmpi(arith::CmpIPredicate::sgt, exponentField, kb.i32(0)),
                   normal, subnormal);
}

/// The table's largest and smallest nonzero finite magnitudes (as bits)
/// and its count of non-finite entries, reduced over
/// the block's first `warps` warps: each warp
/// by shuffles, its lane 0 into `buffers` (three [warps] i32
/// workgroup buffers), then every thread over the warps (integer max, min
/// and sum: any order gives the same bits). Then N as
/// numerics::computeFoldNormalizer computes it on the host, and the flag
/// as checkFoldLegality decides it.
TableNormalizer pattn::reduceTableNormalizer(KernelBuilder &kb, Value scales,
                                             Value tid, int64_t warps,
                                             ArrayRef<Value> buffers,
                                             float softmaxScale) {
  OpBuilder &builder = kb.b;
  Location loc = kb.loc;
  // Magnitudes compare as their bit patterns, so the reduction is integer.
  Value rows = memref::DimOp::create(builder, loc, scales, 0);
  Value columns = memref::DimOp::create(builder, loc, scales, 1);
  Value total = kb.mul(rows, columns);
  Value infinityBits = kb.i32(0x7F800000);
  SmallVector<Value> partial = kb.forLoop(
      tid, total, kb.index(warps * kWarpThreads),
      {kb.i32(0), infinityBits, kb.i32(0)},
      [&](Value e, ValueRange c) -> SmallVector<Value> {
        Value row = kb.divs(e, columns);
        Value column = kb.rems(e, columns);
        Value s = kb.load(scales, {row, column});
        Value magnitude = kb.i32(0x7FFFFFFF);
        Value bits = kb.andi(kb.bitcast(kb.b.getI32Type(), s), magnitude);
        Value finite = kb.cmpi(arith::CmpIPredicate::slt, bits, infinityBits);
        Value nonzero = kb.cmpi(arith::CmpIPredicate::ne, bits, kb.i32(0));
        Value largest = kb.select(finite, kb.maxs(c[0], bits), c[0]);
        Value counted = kb.land(finite, nonzero);
        Value smallest = kb.select(counted, kb.mins(c[1], bits), c[1]);
        Value bad = kb.select(finite, c[2], kb.add(c[2], kb.i32(1)));
        return {largest, smallest, bad};
      });
  Value largest =
      kb.laneReduce(partial[0], kWarpThreads,
                    [&](Value a, Value b) { return kb.maxs(a, b); });
  Value smallest =
      kb.laneReduce(partial[1], kWarpThreads,
                    [&](Value a, Value b) { return kb.mins(a, b); });
  Value bad = kb.laneReduce(partial[2], kWarpThreads,
                            [&](Value a, Value b) { return kb.add(a, b); });
  Value warp = kb.divs(tid, kb.index(kWarpThreads));
  Value lane = kb.rems(tid, kb.index(kWarpThreads));
  kb.ifThen(kb.cmpi(arith::CmpIPredicate::eq, lane, kb.index(0)), [&] {
    kb.store(largest, buffers[0], {warp});
    kb.store(smallest, buffers[1], {warp});
    kb.store(bad, buffers[2], {warp});
  });
  kb.barrier();
  SmallVector<Value> all =
      kb.forLoop(kb.index(0), kb.index(warps), kb.index(1),
                 {kb.i32(0), infinityBits, kb.i32(0)},
                 [&](Value i, ValueRange c) -> SmallVector<Value> {
                   Value largestSoFar = kb.maxs(c[0], kb.load(buffers[0], {i}));
                   Value smallestSoFar =
                       kb.mins(c[1], kb.load(buffers[1], {i}));
                   Value badSoFar = kb.add(c[2], kb.load(buffers[2], {i}));
                   return {largestSoFar, smallestSoFar, badSoFar};
                 });

  int maxExponent = numerics::maxFoldExponent(softmaxScale);
  Value allZero = kb.cmpi(arith::CmpIPredicate::eq, all[0], kb.i32(0));
  Value top = ilogbOfBits(kb, all[0]);
  Value zero = kb.i32(0);
  Value wanted = kb.select(allZero, zero, kb.add(top, kb.i32(1)));
  Value lowest = kb.maxs(wanted, kb.i32(numerics::minFoldExponent()));
  Value exponent = kb.mins(lowest, kb.i32(maxExponent));
  // Finite and within the binade budget, as checkFoldLegality says; a
  // clamped N folds (the row exponents absorb |s / N| > 1).
  Value span = kb.select(allZero, zero, kb.sub(top, ilogbOfBits(kb, all[1])));
  Value allFinite = kb.cmpi(arith::CmpIPredicate::eq, all[2], kb.i32(0));
  Value narrow = kb.cmpi(arith::CmpIPredicate::sle, span,
                         kb.i32(numerics::kFoldBinadeBudget));
  TableNormalizer result;
  result.foldable = kb.land(allFinite, narrow);
  // A table that cannot fold gets the neutral N = 1, as on the host.
  result.exponent = kb.select(result.foldable, exponent, kb.i32(0));
  Value biased = kb.add(result.exponent, kb.i32(127));
  Value field = kb.shl(biased, kb.i32(23));
  result.value = kb.bitcast(kb.b.getF32Type(), field);
  return result;
}

/// Thread 0 stores N and the fold flag.
void pattn::storeTableNormalizer(KernelBuilder &kb, Value tid,
                                 const TableNormalizer &normalizer, Value out,
                                 Value flag) {
  kb.ifThen(kb.cmpi(arith::CmpIPredicate::eq, tid, kb.index(0)), [&] {
    kb.store(normalizer.value, out, {kb.index(0)});
    Value word = arith::ExtUIOp::create(kb.b, kb.loc, kb.b.getI32Type(),
                                        normalizer.foldable);
    kb.store(word, flag, {kb.index(0)});
  });
}

/// The biased exponent field of fp32 bits.
static Value exponentField(KernelBuilder &kb, Value bits) {
  Value shifted = kb.shru(bits, kb.i32(23));
  Value mask = kb.i32(0xFF);
  return kb.andi(shifted, mask);
}

/// A nonzero finite fp32 x as m * 2^e with m in ±[1, 2) (subnormals
/// included: they are scaled into the normal range first).
static std::pair<Value, Value> splitFloat(KernelBuilder &kb, Value x) {
  Type i32 = kb.b.getI32Type();
  Value zero = kb.i32(0);
  Value subnormal = kb.cmpi(arith::CmpIPredicate::eq,
                            exponentField(kb, kb.bitcast(i32, x)), zero);
  Value scaled = kb.fmul(x, kb.f32(0x1p64f));
  Value normalized = kb.select(subnormal, scaled, x);
  Value bits = kb.bitcast(i32, normalized);
  Value exponent = exponentField(kb, bits);
  exponent = kb.sub(exponent, kb.i32(127));
  Value adjustment = kb.i32(64);
  adjustment = kb.select(subnormal, adjustment, zero);
  exponent = kb.sub(exponent, adjustment);
  Value signAndMantissa = kb.andi(bits, kb.i32(int32_t(0x807FFFFF)));
  Value mantissaBits = kb.ori(signAndMantissa, kb.i32(0x3F800000));
  return {kb.bitcast(kb.b.getF32Type(), mantissaBits), exponent};
}

Value pattn::normalizerExponentOf(KernelBuilder &kb, Value normalizer) {
  Value field = exponentField(kb, kb.bitcast(kb.b.getI32Type(), normalizer));
  return kb.sub(field, kb.i32(127));
}

FoldedChannel pattn::foldChannel(KernelBuilder &kb, Value q, Value s,
                                 Value normalizerExponent) {
  Type i32 = kb.b.getI32Type();
  FoldedChannel channel;
  Value qBits = kb.bitcast(i32, q), sBits = kb.bitcast(i32, s);
  Value magnitude = kb.i32(0x7FFFFFFF), zero = kb.i32(0);
  Value qNonzero =
      kb.cmpi(arith::CmpIPredicate::ne, kb.andi(qBits, magnitude), zero);
  Value sNonzero =
      kb.cmpi(arith::CmpIPredicate::ne, kb.andi(sBits, magnitude), zero);
  channel.nonzero = kb.land(qNonzero, sNonzero);
  Value signs = arith::XOrIOp::create(kb.b, kb.loc, qBits, sBits);
  channel.signBit = kb.andi(signs, kb.i32(int32_t(0x80000000)));
  auto [qMantissa, qExponent] = splitFloat(kb, q);
  auto [sMantissa, sExponent] = splitFloat(kb, s);
  channel.queryMantissa = qMantissa;
  channel.scaleMantissa = sMantissa;
  channel.shift = kb.sub(kb.add(qExponent, sExponent), normalizerExponent);
  // |RN(mq * ms)| lies in [1, 4]: its exponent field adds 0, 1 or 2.
  Value product = kb.fmul(qMantissa, sMantissa);
  Value productField = exponentField(kb, kb.bitcast(i32, product));
  channel.binade = kb.add(channel.shift, kb.sub(productField, kb.i32(127)));
  return channel;
}

Value pattn::foldedValue(KernelBuilder &kb, const FoldedChannel &channel,
                         Value rowExponent, Type element, Value flushBelow) {
  // T(p * 2^-e), one rounding: (mq / 4) * ms is at least 1/4, so its fma
  // error is exact, and 2^(shift - e + 2) moves it exactly while the
  // result stays normal; smaller products are zeros of their sign.
  if (!flushBelow)
    flushBelow = kb.i32(-numerics::kFoldRowFlushBinades);
  Value gap = kb.sub(channel.binade, rowExponent);
  Value kept = kb.land(channel.nonzero,
                       kb.cmpi(arith::CmpIPredicate::sge, gap, flushBelow));
  Value shift = kb.sub(channel.shift, rowExponent);
  shift = kb.add(shift, kb.i32(2));
  Value scale = kb.powerOfTwo(kb.maxs(shift, kb.i32(-126)));
  Value quarter = kb.fmul(channel.queryMantissa, kb.f32(0.25f));
  Value folded =
      kb.roundScaledProductOnce(quarter, channel.scaleMantissa, scale, element);
  Value zeroBits = kb.bitcast(kb.b.getF32Type(), channel.signBit);
  Value zero = arith::TruncFOp::create(kb.b, kb.loc, element, zeroBits);
  return kb.select(kept, folded, zero);
}

/// Columns headDim and headDim + 1 of a folded tile's row: the row's
/// exponent, low and high 16 bits, each as the bits of an f16.
static void storeRowExponent(KernelBuilder &kb, Value tile, Value row,
                             int64_t headDim, Value exponent) {
  Type i16 = kb.b.getI16Type(), f16 = kb.b.getF16Type();
  Value halves[2] = {exponent, kb.shru(exponent, kb.i32(16))};
  for (int64_t half = 0; half < 2; ++half) {
    Value narrow = arith::TruncIOp::create(kb.b, kb.loc, i16, halves[half]);
    Value asF16 = arith::BitcastOp::create(kb.b, kb.loc, f16, narrow);
    kb.store(asF16, tile, {row, kb.index(headDim + half)});
  }
}

Value pattn::foldedTileRowExponent(KernelBuilder &kb, Value tile, Value row,
                                   int64_t headDim) {
  Type i16 = kb.b.getI16Type(), i32 = kb.b.getI32Type();
  SmallVector<Value> halves;
  for (int64_t half = 0; half < 2; ++half) {
    Value bits = kb.load(tile, {row, kb.index(headDim + half)});
    Value narrow = arith::BitcastOp::create(kb.b, kb.loc, i16, bits);
    halves.push_back(arith::ExtUIOp::create(kb.b, kb.loc, i32, narrow));
  }
  return kb.ori(halves[0], kb.shl(halves[1], kb.i32(16)));
}

Value pattn::noRowExponent(KernelBuilder &kb) {
  return kb.i32(std::numeric_limits<int32_t>::min());
}

Value pattn::rowExponentOf(KernelBuilder &kb, Value largestBinade, Value none) {
  Value empty = kb.cmpi(arith::CmpIPredicate::eq, largestBinade, none);
  return kb.select(empty, kb.i32(0), largestBinade);
}

namespace {
/// What every row of a warp's share of a folded tile uses: the lane's
/// columns, their table entries (one KV head's: the same for every row)
/// and the constants of the fold.
struct FoldedColumns {
  SmallVector<Value> columns, scales;
  Value normalizerExponent, none, flushBelow, zero;
  Type queryElement;
};

/// One row of a warp's share: its index, whether it is a token of the
/// block, and the lane's query elements.
struct FoldedRow {
  Value row, live;
  SmallVector<Value> query;
};
} // namespace

/// Folds `r` into the tile: the row's largest binade over the warp, each
/// element rounded once, the exponent into the row's padding.
static void foldRowIntoTile(KernelBuilder &kb, const QueryTile &tile,
                            const FoldedColumns &c, const FoldedRow &r,
                            Value lane) {
  SmallVector<FoldedChannel> channels;
  Value largest = c.none;
  for (auto [q, s] : llvm::zip_equal(r.query, c.scales)) {
    channels.push_back(foldChannel(kb, kb.toF32(q), s, c.normalizerExponent));
    Value larger = kb.maxs(largest, channels.back().binade);
    largest = kb.select(channels.back().nonzero, larger, largest);
  }
  largest = kb.laneReduce(largest, kWarpThreads,
                          [&](Value a, Value b) { return kb.maxs(a, b); });
  Value exponent = rowExponentOf(kb, largest, c.none);
  Value rowExponent = kb.select(r.live, exponent, kb.i32(0));
  for (auto [channel, column] : llvm::zip_equal(channels, c.columns)) {
    Value x =
        foldedValue(kb, channel, rowExponent, c.queryElement, c.flushBelow);
    if (c.queryElement != tile.element) {
      Value wide = kb.toF32(x);
      x = arith::TruncFOp::create(kb.b, kb.loc, tile.element, wide);
    }
    x = kb.select(r.live, x, c.zero);
    if (!tile.element.isF16())
      x = arith::BitcastOp::create(kb.b, kb.loc, kb.b.getF16Type(), x);
    kb.store(x, tile.tile, {r.row, column});
  }
  kb.ifThen(kb.cmpi(arith::CmpIPredicate::eq, lane, kb.index(0)), [&] {
    storeRowExponent(kb, tile.tile, r.row, tile.headDim, rowExponent);
  });
}

void pattn::stageFoldedQueryTile(KernelBuilder &kb, const QueryTile &tile,
                                 const BlockQueries &queries,
                                 function_ref<Value(Value)> channelOf,
                                 Value scales, Value normalizerExponent,
                                 Value warp, Value lane, int64_t warps) {
  assert(tile.rows % warps == 0 && tile.headDim % kWarpThreads == 0 &&
         "whole rows a warp, whole columns a lane");
  FoldedColumns c;
  c.queryElement = cast<MemRefType>(tile.query.getType()).getElementType();
  c.normalizerExponent = normalizerExponent;
  c.none = noRowExponent(kb);
  c.flushBelow = kb.i32(-numerics::kFoldRowFlushBinades);
  c.zero =
      arith::ConstantOp::create(kb.b, kb.loc, kb.b.getZeroAttr(tile.element));
  SmallVector<Value> channels;
  for (int64_t k = 0; k < tile.headDim / kWarpThreads; ++k) {
    Value column = kb.add(lane, kb.index(k * kWarpThreads));
    c.columns.push_back(column);
    channels.push_back(channelOf(column));
    c.scales.push_back(kb.load(scales, {tile.kvHead, channels.back()}));
  }
  // Every load of the warp's rows is issued before any is used: a row at
  // a time paid a memory round trip per row (32-row tiles: 8 a warp).
  Value firstHead = kb.mul(tile.kvHead, kb.index(tile.group));
  SmallVector<FoldedRow> rows;
  for (int64_t i = 0; i < tile.rows / warps; ++i) {
    // Row r = (token r / g, head kvHead x g + r % g); a row past the
    // block's tokens reads token 0 (a launch has one) and stores zero.
    FoldedRow r;
    r.row = kb.add(warp, kb.index(i * warps));
    Value token = kb.divs(r.row, kb.index(tile.group));
    Value within = kb.rems(r.row, kb.index(tile.group));
    Value head = kb.add(firstHead, within);
    r.live =
        kb.cmpi(arith::CmpIPredicate::slt, kb.toI32(token), queries.tokenCount);
    Value tokenIndex = kb.add(kb.toIndex(queries.tokenBegin), token);
    Value safeToken = kb.select(r.live, tokenIndex, kb.index(0));
    for (Value channel : channels)
      r.query.push_back(kb.load(tile.query, {safeToken, head, channel}));
    rows.push_back(std::move(r));
  }
  for (const FoldedRow &r : rows)
    foldRowIntoTile(kb, tile, c, r, lane);
}
