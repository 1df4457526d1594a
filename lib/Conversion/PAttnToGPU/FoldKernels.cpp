//===- FoldKernels.cpp - The fold's device-side forms ---------------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the kernels of pattn.scale_normalizer and
// pattn.fold_query, the dynamic half of --pattn-fold-channel-scales. The
// normalizer computes on the device exactly what
// pattn::numerics::checkFoldLegality computes on the host, so a dynamic
// table takes the same path a static one with the same values would.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"
#include "Kernels.h"
#include "pattn/Numerics/Numerics.h"


using namespace mlir;
using namespace mlir::pattn;
using namespace ::pattn;
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

auto ::pattn::buildScaleNormalizerKernel(KernelModule &kernels,
                                                 ScaleNormalizerOp op) -> Kernel {
  MLIRContext *context = op.getContext();
  OpBuilder builder(context);
  Location loc = op.getLoc();
  Type i32 = IntegerType::get(context, 32);
  Type buffer = MemRefType::get(
      {kBlockThreads}, i32, AffineMap(),
      gpu::AddressSpaceAttr::get(context, gpu::AddressSpace::Workgroup));
  Kernel result = kernels.create(
      builder, loc, "pattn_scale_normalizer",
      ValueRange{op.getScales(), op.getOut(), op.getFlag()}, {},
      {buffer, buffer, buffer});
  gpu::GPUFuncOp kernel = result.func;
  KernelBuilder kb(builder, loc);
  Value scales = kernel.getArgument(0), out = kernel.getArgument(1);
  Value flag = kernel.getArgument(2);
  Value maxBits = kernel.getWorkgroupAttributions()[0];
  Value minBits = kernel.getWorkgroupAttributions()[1];
  Value badCount = kernel.getWorkgroupAttributions()[2];

  // Magnitudes compare as their bit patterns, so the reduction is integer.
  Value tid = kb.threadId();
  Value rows = memref::DimOp::create(builder, loc, scales, 0);
  Value columns = memref::DimOp::create(builder, loc, scales, 1);
  Value total = kb.mul(rows, columns);
  Value infinityBits = kb.i32(0x7F800000);
  SmallVector<Value> partial = kb.forLoop(
      tid, total, kb.index(kBlockThreads),
      {kb.i32(0), infinityBits, kb.i32(0)},
      [&](Value e, ValueRange c) -> SmallVector<Value> {
        Value s = kb.load(scales, {kb.divs(e, columns), kb.rems(e, columns)});
        Value bits = kb.andi(kb.bitcast(kb.b.getI32Type(), s), kb.i32(0x7FFFFFFF));
        Value finite = kb.cmpi(arith::CmpIPredicate::slt, bits, infinityBits);
        Value nonzero = kb.cmpi(arith::CmpIPredicate::ne, bits, kb.i32(0));
        Value largest = kb.select(finite, kb.maxs(c[0], bits), c[0]);
        Value smallest =
            kb.select(kb.land(finite, nonzero), kb.mins(c[1], bits), c[1]);
        Value bad = kb.select(finite, c[2], kb.add(c[2], kb.i32(1)));
        return {largest, smallest, bad};
      });
  kb.store(partial[0], maxBits, {tid});
  kb.store(partial[1], minBits, {tid});
  kb.store(partial[2], badCount, {tid});
  kb.barrier();

  int maxExponent =
      numerics::maxFoldExponent(op.getSoftmaxScale().convertToFloat());
  kb.ifThen(kb.cmpi(arith::CmpIPredicate::eq, tid, kb.index(0)), [&] {
    SmallVector<Value> all = kb.forLoop(
        kb.index(0), kb.index(kBlockThreads), kb.index(1),
        {kb.i32(0), infinityBits, kb.i32(0)},
        [&](Value i, ValueRange c) -> SmallVector<Value> {
          return {kb.maxs(c[0], kb.load(maxBits, {i})),
                  kb.mins(c[1], kb.load(minBits, {i})),
                  kb.add(c[2], kb.load(badCount, {i}))};
        });
    Value largest = all[0], smallest = all[1];
    Value allZero = kb.cmpi(arith::CmpIPredicate::eq, largest, kb.i32(0));
    Value top = ilogbOfBits(kb, largest);
    Value wanted = kb.select(allZero, kb.i32(0), kb.add(top, kb.i32(1)));
    Value exponent = kb.mins(kb.maxs(wanted, kb.i32(numerics::minFoldExponent())),
                             kb.i32(maxExponent));
    Value span = kb.select(allZero, kb.i32(0),
                           kb.sub(top, ilogbOfBits(kb, smallest)));
    Value foldable = kb.land(
        kb.land(kb.cmpi(arith::CmpIPredicate::eq, all[2], kb.i32(0)),
                kb.cmpi(arith::CmpIPredicate::sle, span,
                        kb.i32(numerics::kFoldBinadeBudget))),
        kb.cmpi(arith::CmpIPredicate::sle, wanted, exponent));
    // A table that cannot fold gets the neutral N = 1, as on the host.
    exponent = kb.select(foldable, exponent, kb.i32(0));
    Value normalizer = kb.bitcast(kb.b.getF32Type(),
                                  kb.shl(kb.add(exponent, kb.i32(127)), kb.i32(23)));
    kb.store(normalizer, out, {kb.index(0)});
    kb.store(arith::ExtUIOp::create(kb.b, loc, kb.b.getI32Type(), foldable),
             flag, {kb.index(0)});
  });
  gpu::ReturnOp::create(builder, loc);
  return result;
}

auto ::pattn::buildFoldQueryKernel(KernelModule &kernels,
                                           FoldQueryOp op) -> Kernel {
  OpBuilder builder(op.getContext());
  Location loc = op.getLoc();
  SmallVector<Value> operands = {op.getQuery(), op.getScales(), op.getOut()};
  if (op.getNormalizer())
    operands.push_back(op.getNormalizer());
  Kernel result =
      kernels.create(builder, loc, "pattn_fold_query", operands, {}, {});
  gpu::GPUFuncOp kernel = result.func;
  KernelBuilder kb(builder, loc);
  Value query = kernel.getArgument(0), scales = kernel.getArgument(1);
  Value out = kernel.getArgument(2);
  Value normalizerBuffer = op.getNormalizer() ? kernel.getArgument(3) : Value();
  Type element = cast<MemRefType>(op.getQuery().getType()).getElementType();
  int64_t numHeads = static_cast<int64_t>(op.getNumHeads());

  Value token = kb.blockId(gpu::Dimension::x);
  Value head = kb.blockId(gpu::Dimension::y);
  Value kvHeads = memref::DimOp::create(builder, loc, scales, 0);
  Value headDim = memref::DimOp::create(builder, loc, scales, 1);
  Value kvHead = kb.divs(head, kb.divs(kb.index(numHeads), kvHeads));
  Value normalizer =
      normalizerBuffer ? kb.load(normalizerBuffer, {kb.index(0)}) : Value();
  kb.forLoop(kb.threadId(), headDim, kb.index(kBlockThreads), {},
             [&](Value c, ValueRange) -> SmallVector<Value> {
               Value ratio = kb.load(scales, {kvHead, c});
               // s / N is exact: N is a power of two.
               if (normalizer)
                 ratio = kb.fdiv(ratio, normalizer);
               Value q = kb.toF32(kb.load(query, {token, head, c}));
               kb.store(kb.roundProductOnce(q, ratio, element), out,
                        {token, head, c});
               return {};
             });
  gpu::ReturnOp::create(builder, loc);
  return result;
}
