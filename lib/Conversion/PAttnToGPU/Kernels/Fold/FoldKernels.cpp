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
#include "Kernels/Fold/FoldSteps.h"
#include "Kernels/Kernels.h"
#include "pattn/Numerics/Numerics.h"

#include <limits>

using namespace mlir;
using namespace pattn;
namespace numerics = ::pattn::numerics;

/// Warps of a fold block: the per-warp results its reductions combine.
static constexpr int64_t kBlockWarps = kBlockThreads / kWarpThreads;

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
  TableNormalizer normalizer =
      reduceTableNormalizer(kb, kernel.getArgument(0), tid, kBlockWarps,
                            {buffers[0], buffers[1], buffers[2]},
                            op.getSoftmaxScale().convertToFloat());
  storeTableNormalizer(kb, tid, normalizer, kernel.getArgument(1),
                       kernel.getArgument(2));
  gpu::ReturnOp::create(builder, loc);
  return result;
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
    TableNormalizer normalizer = reduceTableNormalizer(
        kb, scales, tid, kBlockWarps, {shared[1], shared[2], shared[3]},
        fusedNormalizer.getSoftmaxScale().convertToFloat());
    normalizerExponent = normalizer.exponent;
    Value firstToken = kb.cmpi(arith::CmpIPredicate::eq, token, kb.index(0));
    Value firstHead = kb.cmpi(arith::CmpIPredicate::eq, head, kb.index(0));
    Value firstRow = kb.land(firstToken, firstHead);
    kb.ifThen(firstRow, [&] {
      storeTableNormalizer(kb, tid, normalizer, normalizerBuffer,
                           kernel.getArgument(5));
    });
  } else {
    Value normalizer = kb.load(normalizerBuffer, {kb.index(0)});
    normalizerExponent = normalizerExponentOf(kb, normalizer);
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

  // outs = T(p * 2^-e), one rounding (foldedValue).
  Value flushBelow = kb.i32(-numerics::kFoldRowFlushBinades);
  kb.forLoop(tid, headDim, kb.index(kBlockThreads), {},
             [&](Value c, ValueRange) -> SmallVector<Value> {
               FoldedChannel channel = channelAt(c);
               Value folded =
                   foldedValue(kb, channel, rowExponent, element, flushBelow);
               kb.store(folded, out, {token, head, c});
               return {};
             });
  gpu::ReturnOp::create(builder, loc);
  return result;
}
