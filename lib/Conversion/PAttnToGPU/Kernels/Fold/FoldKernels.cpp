//===- FoldKernels.cpp - The fold's device-side forms ---------------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the kernels of pattn.scale_normalizer and
// pattn.fold_query, the device side of --pattn-fold-channel-scales. The
// normalizer computes what pattn::numerics::computeFoldNormalizer computes
// on the host, and the fold what pattn::numerics::foldQueryRow does, bit
// for bit, so static and dynamic tables fold alike.
//
//===----------------------------------------------------------------------===//

#include "Kernels/Common/KernelBuilder.h"
#include "Kernels/Kernels.h"
#include "pattn/Numerics/Numerics.h"

#include <limits>

using namespace mlir;
using namespace pattn;
namespace numerics = ::pattn::numerics;

/// Warps of a fold block: the per-warp results its reductions combine.
static constexpr int64_t kBlockWarps = kBlockThreads / kWarpThreads;

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

namespace {
/// The normalizer of a channel table: N's exponent (i32), N itself (f32)
/// and whether the table folds (i1).
struct TableNormalizer {
  Value exponent, value, foldable;
};
} // namespace

/// The table's largest and smallest nonzero finite magnitudes (as bits)
/// and its count of non-finite entries, reduced over the block: each warp
/// by shuffles, its lane 0 into `buffers` (three [kBlockWarps] i32
/// workgroup buffers), then every thread over the warps (integer max, min
/// and sum: any order gives the same bits). Then N as
/// numerics::computeFoldNormalizer computes it on the host, and the flag
/// as checkFoldLegality decides it.
static TableNormalizer reduceNormalizer(KernelBuilder &kb, Value scales,
                                        Value tid, ArrayRef<Value> buffers,
                                        float softmaxScale) {
  OpBuilder &builder = kb.b;
  Location loc = kb.loc;
  // Magnitudes compare as their bit patterns, so the reduction is integer.
  Value rows = memref::DimOp::create(builder, loc, scales, 0);
  Value columns = memref::DimOp::create(builder, loc, scales, 1);
  Value total = kb.mul(rows, columns);
  Value infinityBits = kb.i32(0x7F800000);
  SmallVector<Value> partial = kb.forLoop(
      tid, total, kb.index(kBlockThreads), {kb.i32(0), infinityBits, kb.i32(0)},
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
      kb.forLoop(kb.index(0), kb.index(kBlockWarps), kb.index(1),
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
static void storeNormalizer(KernelBuilder &kb, Value tid,
                            const TableNormalizer &normalizer, Value out,
                            Value flag) {
  kb.ifThen(kb.cmpi(arith::CmpIPredicate::eq, tid, kb.index(0)), [&] {
    kb.store(normalizer.value, out, {kb.index(0)});
    Value word = arith::ExtUIOp::create(kb.b, kb.loc, kb.b.getI32Type(),
                                        normalizer.foldable);
    kb.store(word, flag, {kb.index(0)});
  });
}

auto ::pattn::buildScaleNormalizerKernel(KernelModule &kernels,
                                         ScaleNormalizerOp op) -> Kernel {
  MLIRContext *context = op.getContext();
  OpBuilder builder(context);
  Location loc = op.getLoc();
  Type i32 = IntegerType::get(context, 32);
  Type buffer = workgroupMemRefType({kBlockWarps}, i32);
  Kernel result =
      kernels.create(builder, loc, "pattn_scale_normalizer",
                     ValueRange{op.getScales(), op.getOut(), op.getFlag()}, {},
                     {buffer, buffer, buffer});
  gpu::GPUFuncOp kernel = result.func;
  KernelBuilder kb(builder, loc);
  Value tid = kb.threadId();
  ArrayRef<BlockArgument> buffers = kernel.getWorkgroupAttributions();
  TableNormalizer normalizer = reduceNormalizer(
      kb, kernel.getArgument(0), tid, {buffers[0], buffers[1], buffers[2]},
      op.getSoftmaxScale().convertToFloat());
  storeNormalizer(kb, tid, normalizer, kernel.getArgument(1),
                  kernel.getArgument(2));
  gpu::ReturnOp::create(builder, loc);
  return result;
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

namespace {
/// One channel of a folded row: q * s / N as a mantissa product and the
/// power of two it sits at (numerics::foldQueryRow's p[c]).
struct FoldedChannel {
  Value queryMantissa, scaleMantissa; ///< in ±[1, 2)
  Value shift;   ///< p = queryMantissa * scaleMantissa * 2^shift
  Value binade;  ///< of p rounded to 24 bits
  Value nonzero; ///< p != 0
  Value signBit; ///< of p, as fp32 bits
};
} // namespace

static FoldedChannel foldChannel(KernelBuilder &kb, Value q, Value s,
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

auto ::pattn::buildFoldQueryKernel(KernelModule &kernels, FoldQueryOp op,
                                   ScaleNormalizerOp fusedNormalizer)
    -> Kernel {
  MLIRContext *context = op.getContext();
  OpBuilder builder(context);
  Location loc = op.getLoc();
  Type i32 = IntegerType::get(context, 32);
  Type buffer = workgroupMemRefType({kBlockWarps}, i32);
  SmallVector<Value> operands = {op.getQuery(), op.getScales(), op.getOut(),
                                 op.getNormalizer(), op.getExponents()};
  SmallVector<Type> buffers = {buffer};
  if (fusedNormalizer) {
    operands.push_back(fusedNormalizer.getFlag());
    buffers.append(3, buffer);
  }
  Kernel result =
      kernels.create(builder, loc, "pattn_fold_query", operands, {}, buffers);
  gpu::GPUFuncOp kernel = result.func;
  KernelBuilder kb(builder, loc);
  Value query = kernel.getArgument(0), scales = kernel.getArgument(1);
  Value out = kernel.getArgument(2), normalizerBuffer = kernel.getArgument(3);
  Value exponents = kernel.getArgument(4);
  ArrayRef<BlockArgument> shared = kernel.getWorkgroupAttributions();
  Value rowMaxima = shared[0];
  Type element = cast<MemRefType>(op.getQuery().getType()).getElementType();
  int64_t numHeads = static_cast<int64_t>(op.getNumHeads());

  // One block per (token, head) row; see numerics::foldQueryRow.
  Value token = kb.blockId(gpu::Dimension::x);
  Value head = kb.blockId(gpu::Dimension::y);
  Value tid = kb.threadId();
  Value kvHeads = memref::DimOp::create(builder, loc, scales, 0);
  Value headDim = memref::DimOp::create(builder, loc, scales, 1);
  Value kvHead = kb.divs(head, kb.divs(kb.index(numHeads), kvHeads));
  Value normalizerExponent;
  if (fusedNormalizer) {
    // Every block reduces the (small) table itself, as the normalizer
    // kernel would, and block (0, 0) stores N and the flag for the
    // attention ops that follow.
    TableNormalizer normalizer =
        reduceNormalizer(kb, scales, tid, {shared[1], shared[2], shared[3]},
                         fusedNormalizer.getSoftmaxScale().convertToFloat());
    normalizerExponent = normalizer.exponent;
    Value firstToken = kb.cmpi(arith::CmpIPredicate::eq, token, kb.index(0));
    Value firstHead = kb.cmpi(arith::CmpIPredicate::eq, head, kb.index(0));
    Value firstRow = kb.land(firstToken, firstHead);
    kb.ifThen(firstRow, [&] {
      storeNormalizer(kb, tid, normalizer, normalizerBuffer,
                      kernel.getArgument(5));
    });
  } else {
    // N is a normal power of two: its exponent is its biased field - 127.
    Value normalizer = kb.load(normalizerBuffer, {kb.index(0)});
    Value normalizerField = exponentField(kb, kb.bitcast(i32, normalizer));
    normalizerExponent = kb.sub(normalizerField, kb.i32(127));
  }
  auto channelAt = [&](Value c) {
    Value q = kb.toF32(kb.load(query, {token, head, c}));
    Value s = kb.load(scales, {kvHead, c});
    return foldChannel(kb, q, s, normalizerExponent);
  };

  // The row exponent: the largest binade over the nonzero products.
  Value none = kb.i32(std::numeric_limits<int32_t>::min());
  Value partial =
      kb.forLoop(tid, headDim, kb.index(kBlockThreads), {none},
                 [&](Value c, ValueRange carried) -> SmallVector<Value> {
                   FoldedChannel channel = channelAt(c);
                   Value larger = kb.maxs(carried[0], channel.binade);
                   return {kb.select(channel.nonzero, larger, carried[0])};
                 })[0];
  // Per warp by shuffles, then every thread combines the warps' maxima.
  partial = kb.laneReduce(partial, kWarpThreads,
                          [&](Value a, Value b) { return kb.maxs(a, b); });
  Value warp = kb.divs(tid, kb.index(kWarpThreads));
  Value lane = kb.rems(tid, kb.index(kWarpThreads));
  kb.ifThen(kb.cmpi(arith::CmpIPredicate::eq, lane, kb.index(0)),
            [&] { kb.store(partial, rowMaxima, {warp}); });
  kb.barrier();
  Value first = kb.index(0), end = kb.index(kBlockWarps);
  Value rowMax =
      kb.forLoop(first, end, kb.index(1), {none},
                 [&](Value i, ValueRange carried) -> SmallVector<Value> {
                   return {kb.maxs(carried[0], kb.load(rowMaxima, {i}))};
                 })[0];
  Value empty = kb.cmpi(arith::CmpIPredicate::eq, rowMax, none);
  Value rowExponent = kb.select(empty, kb.i32(0), rowMax);
  kb.ifThen(kb.cmpi(arith::CmpIPredicate::eq, tid, kb.index(0)),
            [&] { kb.store(rowExponent, exponents, {token, head}); });

  // outs = T(p * 2^-e), one rounding: (mq / 4) * ms is at least 1/4, so
  // its fma error is exact, and 2^(shift - e + 2) moves it exactly while
  // the result stays normal; smaller products are zeros of their sign.
  Value flushBelow = kb.i32(-numerics::kFoldRowFlushBinades);
  kb.forLoop(tid, headDim, kb.index(kBlockThreads), {},
             [&](Value c, ValueRange) -> SmallVector<Value> {
               FoldedChannel channel = channelAt(c);
               Value gap = kb.sub(channel.binade, rowExponent);
               Value kept =
                   kb.land(channel.nonzero,
                           kb.cmpi(arith::CmpIPredicate::sge, gap, flushBelow));
               Value shift = kb.sub(channel.shift, rowExponent);
               shift = kb.add(shift, kb.i32(2));
               Value scale = kb.powerOfTwo(kb.maxs(shift, kb.i32(-126)));
               Value quarter = kb.fmul(channel.queryMantissa, kb.f32(0.25f));
               Value folded = kb.roundScaledProductOnce(
                   quarter, channel.scaleMantissa, scale, element);
               Value zeroBits = kb.bitcast(kb.b.getF32Type(), channel.signBit);
               Value zero =
                   arith::TruncFOp::create(kb.b, kb.loc, element, zeroBits);
               kb.store(kb.select(kept, folded, zero), out, {token, head, c});
               return {};
             });
  gpu::ReturnOp::create(builder, loc);
  return result;
}
