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

using namespace mlir;
using namespace pattn;
namespace numerics = ::pattn::numerics;

/// Warps of a fold block: the per-warp results its reductions combine.
static constexpr int64_t kBlockWarps = kBlockThreads / kWarpThreads;
static_assert(kFoldRowsPerBlock == kBlockWarps, "a fold row per warp");

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

/// Folds one (token, head) row with one warp (see numerics::foldQueryRow):
/// lane l takes channels l, l + 32, ...; the row's largest binade by
/// shuffles; then each element rounded once into `out`. `buffers`: the
/// fold kernel's query, scales, out, normalizer and exponents.
static void foldRowByWarp(KernelBuilder &kb, FoldQueryOp op, Value token,
                          Value head, Value lane, Value normalizerExponent,
                          ValueRange buffers) {
  Value query = buffers[0], scales = buffers[1], out = buffers[2];
  Value exponents = buffers[4];
  Type element = cast<MemRefType>(op.getQuery().getType()).getElementType();
  int64_t numHeads = static_cast<int64_t>(op.getNumHeads());
  Value kvHeads = memref::DimOp::create(kb.b, kb.loc, scales, 0);
  Value headDim = memref::DimOp::create(kb.b, kb.loc, scales, 1);
  Value kvHead = kb.divs(head, kb.divs(kb.index(numHeads), kvHeads));
  auto channelAt = [&](Value c) {
    Value q = kb.toF32(kb.load(query, {token, head, c}));
    Value s = kb.load(scales, {kvHead, c});
    return foldChannel(kb, q, s, normalizerExponent);
  };
  // The row exponent: the largest binade over the nonzero products.
  Value step = kb.index(kWarpThreads);
  Value none = noRowExponent(kb);
  Value partial =
      kb.forLoop(lane, headDim, step, {none},
                 [&](Value c, ValueRange carried) -> SmallVector<Value> {
                   FoldedChannel channel = channelAt(c);
                   Value larger = kb.maxs(carried[0], channel.binade);
                   return {kb.select(channel.nonzero, larger, carried[0])};
                 })[0];
  Value largest = kb.laneReduce(
      partial, kWarpThreads, [&](Value a, Value b) { return kb.maxs(a, b); });
  Value rowExponent = rowExponentOf(kb, largest, none);
  kb.ifThen(kb.cmpi(arith::CmpIPredicate::eq, lane, kb.index(0)),
            [&] { kb.store(rowExponent, exponents, {token, head}); });

  // outs = T(p * 2^-e), one rounding (foldedValue).
  Value flushBelow = kb.i32(-numerics::kFoldRowFlushBinades);
  kb.forLoop(lane, headDim, step, {},
             [&](Value c, ValueRange) -> SmallVector<Value> {
               FoldedChannel channel = channelAt(c);
               Value folded =
                   foldedValue(kb, channel, rowExponent, element, flushBelow);
               kb.store(folded, out, {token, head, c});
               return {};
             });
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
  SmallVector<Type> buffers;
  if (fusedNormalizer) {
    operands.push_back(fusedNormalizer.getFlag());
    buffers.append(3, buffer);
  }
  Kernel result =
      kernels.create(builder, loc, "pattn_fold_query", operands, {}, buffers);
  gpu::GPUFuncOp kernel = result.func;
  KernelBuilder kb(builder, loc);
  Value scales = kernel.getArgument(1);
  Value normalizerBuffer = kernel.getArgument(3);
  int64_t numHeads = static_cast<int64_t>(op.getNumHeads());

  // One warp per (token, head) row, kFoldRowsPerBlock rows a block.
  Value block = kb.blockId(gpu::Dimension::x);
  Value tid = kb.threadId();
  Value warp = kb.divs(tid, kb.index(kWarpThreads));
  Value lane = kb.rems(tid, kb.index(kWarpThreads));
  Value normalizerExponent;
  if (fusedNormalizer) {
    // Every block reduces the (small) table itself, as the normalizer
    // kernel would, and block 0 stores N and the flag for the attention
    // ops that follow.
    ArrayRef<BlockArgument> shared = kernel.getWorkgroupAttributions();
    TableNormalizer normalizer = reduceTableNormalizer(
        kb, scales, tid, kBlockWarps, {shared[0], shared[1], shared[2]},
        fusedNormalizer.getSoftmaxScale().convertToFloat());
    normalizerExponent = normalizer.exponent;
    Value firstBlock = kb.cmpi(arith::CmpIPredicate::eq, block, kb.index(0));
    kb.ifThen(firstBlock, [&] {
      storeTableNormalizer(kb, tid, normalizer, normalizerBuffer,
                           kernel.getArgument(5));
    });
  } else {
    Value normalizer = kb.load(normalizerBuffer, {kb.index(0)});
    normalizerExponent = normalizerExponentOf(kb, normalizer);
  }
  Value firstRow = kb.mul(block, kb.index(kFoldRowsPerBlock));
  Value row = kb.add(firstRow, warp);
  Value tokens = memref::DimOp::create(builder, loc, kernel.getArgument(0), 0);
  Value rows = kb.mul(tokens, kb.index(numHeads));
  kb.ifThen(kb.cmpi(arith::CmpIPredicate::slt, row, rows), [&] {
    Value token = kb.divs(row, kb.index(numHeads));
    Value head = kb.rems(row, kb.index(numHeads));
    SmallVector<Value> arguments(kernel.getArguments().take_front(5));
    foldRowByWarp(kb, op, token, head, lane, normalizerExponent, arguments);
  });
  gpu::ReturnOp::create(builder, loc);
  return result;
}
