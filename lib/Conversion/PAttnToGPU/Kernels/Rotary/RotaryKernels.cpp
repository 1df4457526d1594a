//===- RotaryKernels.cpp - RMS-norm and rotary embedding on the GPU -------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the kernels of pattn.rotary: a position check that
// fails the whole call when any token's position lies outside the cos/sin
// tables (no read out of bounds, nothing written), and the rotation itself,
// one warp per (token, output head):
//
//   norm:   the sum of squares in f64 (no finite f16, bf16 or f32 input
//           overflows or underflows it), reduced over the warp; the row's
//           factor 1 / sqrt(mean + eps) in f64, applied before the f32
//           multiply by the weight
//   rotate: each lane takes channel pairs i, i + 32, ... of the first R
//           channels, (a, b) -> (a cos - b sin, b cos + a sin) in f32, and
//           the channels past R as they are (normalized)
//   store:  one rounding to the output type, saturating like the cache
//           writer's encoders (a finite input never gives inf)
//
//===----------------------------------------------------------------------===//

#include "Kernels/Common/KernelBuilder.h"
#include "Kernels/Kernels.h"
#include "Kernels/TensorCore/TensorCore.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace pattn;

namespace {

/// Output heads per block: one warp each.
constexpr int64_t kRotaryHeadsPerBlock = kBlockThreads / kWarpThreads;

/// The op's reads, then its output.
SmallVector<Value> rotaryOperands(RotaryOp op) {
  SmallVector<Value> operands = rotaryReads(op);
  operands.push_back(op.getOut());
  return operands;
}

/// An f64 xor-shuffle across the warp, as two 32-bit halves.
Value shuffleXorF64(KernelBuilder &kb, MmaBuilder &tc, Value x, int32_t mask) {
  Type i32 = kb.b.getI32Type(), i64 = kb.b.getI64Type();
  Value bits = kb.bitcast(i64, x);
  Value low = arith::TruncIOp::create(kb.b, kb.loc, i32, bits);
  Value highBits = kb.shru(bits, kb.i64(32));
  Value high = arith::TruncIOp::create(kb.b, kb.loc, i32, highBits);
  Value lowOther = tc.shuffleXor(low, mask);
  Value highOther = tc.shuffleXor(high, mask);
  Value lowWide = arith::ExtUIOp::create(kb.b, kb.loc, i64, lowOther);
  Value highWide = arith::ExtUIOp::create(kb.b, kb.loc, i64, highOther);
  Value joined = kb.ori(kb.shl(highWide, kb.i64(32)), lowWide);
  return kb.bitcast(kb.b.getF64Type(), joined);
}

/// The bits of `x` rounded once to `element` (f16 or bf16), as an i16.
Value roundedBits(KernelBuilder &kb, Value x, Type element) {
  Value bits = element.isF16() ? kb.encodeF16Bits(x) : kb.encodeBF16Bits(x);
  return arith::TruncIOp::create(kb.b, kb.loc, kb.b.getI16Type(), bits);
}

} // namespace

SmallVector<Value> pattn::rotaryReads(RotaryOp op) {
  SmallVector<Value> operands = {op.getInput(), op.getCos(), op.getSin()};
  for (Value optional : {op.getPositions(), op.getSeqLens(), op.getQueryStart(),
                         op.getNormWeight()})
    if (optional)
      operands.push_back(optional);
  return operands;
}

RotaryArguments pattn::bindRotaryArguments(RotaryOp op, ValueRange arguments) {
  unsigned next = 0;
  auto arg = [&](bool present) {
    return present ? arguments[next++] : Value();
  };
  RotaryArguments a;
  a.input = arg(true);
  a.cos = arg(true);
  a.sin = arg(true);
  a.positions = arg(bool(op.getPositions()));
  a.seqLens = arg(bool(op.getSeqLens()));
  a.queryStart = arg(bool(op.getQueryStart()));
  a.weight = arg(bool(op.getNormWeight()));
  return a;
}

/// Token `token`'s position (i64): positions[token] + offset, or its kv
/// position in its sequence (seq_lens[b] - n_b + i) + offset.
static Value rotaryPosition(KernelBuilder &kb, RotaryOp op,
                            const RotaryArguments &a, Value token) {
  Value offset = kb.i64(op.getPositionOffset());
  if (a.positions)
    return kb.add(kb.toI64(kb.load(a.positions, {token})), offset);
  auto [sequence, tokens, within] =
      findQuerySequence(kb, token, a.queryStart, a.seqLens);
  Value length = kb.toI64(kb.load(a.seqLens, {sequence}));
  Value before = kb.sub(length, kb.toI64(tokens));
  Value position = kb.add(before, kb.toI64(within));
  return kb.add(position, offset);
}

void pattn::emitPositionChecks(KernelBuilder &kb, RotaryOp op,
                               const RotaryArguments &a, Value first,
                               Value stride, Value flags, Value block,
                               Value errorWord) {
  OpBuilder &builder = kb.b;
  Location loc = kb.loc;
  Value rows = kb.toI64(memref::DimOp::create(builder, loc, a.cos, 0));
  Value tokens = memref::DimOp::create(builder, loc, a.input, 0);
  // Every thread that sees a bad position stores the same 1: benign.
  kb.forLoop(
      first, tokens, stride, {},
      [&](Value token, ValueRange) -> SmallVector<Value> {
        Value position = rotaryPosition(kb, op, a, token);
        Value negative =
            kb.cmpi(arith::CmpIPredicate::slt, position, kb.i64(0));
        Value pastEnd = kb.cmpi(arith::CmpIPredicate::sge, position, rows);
        Value bad = kb.lor(negative, pastEnd);
        kb.ifThen(bad, [&] {
          raiseRejection(kb, flags, block, errorWord, kPositionOutOfRangeBit);
        });
        return {};
      });
}

void pattn::emitRotaryRow(KernelBuilder &kb, RotaryOp op,
                          const RotaryArguments &a, Value token, Value inHead,
                          Value lane, Type element,
                          function_ref<void(Value, Value)> store) {
  OpBuilder &builder = kb.b;
  Location loc = kb.loc;
  MmaBuilder tc(kb, /*bf16=*/false);
  int64_t headDim = cast<MemRefType>(op.getOut().getType()).getDimSize(2);
  int64_t half = op.getRotaryDim() / 2;
  Value warpStride = kb.index(kWarpThreads);
  Value channels = kb.index(headDim);
  auto input = [&](Value channel) {
    return kb.toF32(kb.load(a.input, {token, inHead, channel}));
  };

  // The row's RMS factor, in f64.
  Value factor;
  if (a.weight) {
    Type f64 = builder.getF64Type();
    Value zero64 = arith::ConstantOp::create(builder, loc, f64,
                                             builder.getF64FloatAttr(0.0));
    Value sum = kb.forLoop(
        lane, channels, warpStride, {zero64},
        [&](Value c, ValueRange carried) -> SmallVector<Value> {
          Value x = arith::ExtFOp::create(builder, loc, f64, input(c));
          Value square = arith::MulFOp::create(builder, loc, x, x);
          return {arith::AddFOp::create(builder, loc, carried[0], square)};
        })[0];
    for (int32_t mask = 16; mask >= 1; mask /= 2) {
      Value other = shuffleXorF64(kb, tc, sum, mask);
      sum = arith::AddFOp::create(builder, loc, sum, other);
    }
    Value count = arith::ConstantOp::create(
        builder, loc, f64, builder.getF64FloatAttr(double(headDim)));
    Value epsilon = arith::ConstantOp::create(
        builder, loc, f64,
        builder.getF64FloatAttr(double(op.getNormEpsilon().convertToFloat())));
    Value mean = arith::DivFOp::create(builder, loc, sum, count);
    Value root = math::SqrtOp::create(
        builder, loc, arith::AddFOp::create(builder, loc, mean, epsilon));
    Value one = arith::ConstantOp::create(builder, loc, f64,
                                          builder.getF64FloatAttr(1.0));
    factor = arith::DivFOp::create(builder, loc, one, root);
  }
  // Channel c, normalized (f32).
  auto normalized = [&](Value channel) {
    Value x = input(channel);
    if (!factor)
      return x;
    Value wide = arith::ExtFOp::create(builder, loc, builder.getF64Type(), x);
    Value scaled = arith::MulFOp::create(builder, loc, wide, factor);
    Value narrow =
        arith::TruncFOp::create(builder, loc, builder.getF32Type(), scaled);
    return kb.fmul(narrow, kb.toF32(kb.load(a.weight, {channel})));
  };
  auto emit = [&](Value channel, Value x) {
    if (element.isF32())
      return store(channel, x);
    store(channel, kb.bitcast(element, roundedBits(kb, x, element)));
  };

  Value position = kb.toIndex(rotaryPosition(kb, op, a, token));
  Value pairs = kb.index(half);
  kb.forLoop(lane, pairs, warpStride, {},
             [&](Value pair, ValueRange) -> SmallVector<Value> {
               Value first, second;
               if (op.getInterleaved()) {
                 first = kb.mul(pair, kb.index(2));
                 second = kb.add(first, kb.index(1));
               } else {
                 first = pair;
                 second = kb.add(pair, kb.index(half));
               }
               Value x = normalized(first), y = normalized(second);
               Value c = kb.toF32(kb.load(a.cos, {position, pair}));
               Value s = kb.toF32(kb.load(a.sin, {position, pair}));
               Value xc = kb.fmul(x, c), ys = kb.fmul(y, s);
               Value rotatedFirst = kb.fsub(xc, ys);
               Value yc = kb.fmul(y, c), xs = kb.fmul(x, s);
               Value rotatedSecond = kb.fadd(yc, xs);
               emit(first, rotatedFirst);
               emit(second, rotatedSecond);
               return {};
             });
  Value firstPlain = kb.add(lane, kb.index(2 * half));
  kb.forLoop(firstPlain, channels, warpStride, {},
             [&](Value c, ValueRange) -> SmallVector<Value> {
               emit(c, normalized(c));
               return {};
             });
}

auto ::pattn::buildPositionCheckKernel(KernelModule &kernels, RotaryOp op)
    -> Kernel {
  MLIRContext *context = op.getContext();
  OpBuilder builder(context);
  Location loc = op.getLoc();
  Type i32 = builder.getI32Type();
  auto flagsType = MemRefType::get({ShapedType::kDynamic}, i32);
  auto errorWordType = MemRefType::get({1}, i32);
  Kernel result =
      kernels.create(builder, loc, "pattn_check_positions", rotaryOperands(op),
                     {flagsType, errorWordType}, {});
  gpu::GPUFuncOp kernel = result.func;
  KernelBuilder kb(builder, loc);
  RotaryArguments a = bindRotaryArguments(op, kernel.getArguments());
  unsigned count = kernel.getNumArguments();
  Value flags = kernel.getArgument(count - 2);
  Value errorWord = kernel.getArgument(count - 1);
  Value tid = kb.threadId();
  Value block = clearCheckVerdict(kb, flags, tid);
  Value threads =
      kb.mul(gpu::GridDimOp::create(builder, loc, gpu::Dimension::x),
             kb.index(kBlockThreads));
  Value first = kb.add(kb.mul(block, kb.index(kBlockThreads)), tid);
  emitPositionChecks(kb, op, a, first, threads, flags, block, errorWord);
  gpu::ReturnOp::create(builder, loc);
  return result;
}

auto ::pattn::buildRotaryKernel(KernelModule &kernels, RotaryOp op) -> Kernel {
  MLIRContext *context = op.getContext();
  OpBuilder builder(context);
  Location loc = op.getLoc();
  Kernel result = kernels.create(
      builder, loc, "pattn_rotary", rotaryOperands(op),
      {MemRefType::get({ShapedType::kDynamic}, builder.getI32Type())}, {});
  gpu::GPUFuncOp kernel = result.func;
  KernelBuilder kb(builder, loc);
  RotaryArguments a = bindRotaryArguments(op, kernel.getArguments());
  unsigned count = kernel.getNumArguments();
  Value out = kernel.getArgument(count - 2);
  Value flag = kernel.getArgument(count - 1);

  auto outType = cast<MemRefType>(op.getOut().getType());
  int64_t outHeads = outType.getDimSize(1);
  Value tid = kb.threadId();
  Value warp = kb.divs(tid, kb.index(kWarpThreads));
  Value lane = kb.rems(tid, kb.index(kWarpThreads));
  Value token = kb.blockId(gpu::Dimension::x);
  Value headBlock = kb.blockId(gpu::Dimension::y);
  Value firstOfBlock = kb.mul(headBlock, kb.index(kRotaryHeadsPerBlock));
  Value head = kb.add(firstOfBlock, warp);
  Value checked = checksPassed(kb, flag, lane);
  Value isHead = kb.cmpi(arith::CmpIPredicate::slt, head, kb.index(outHeads));
  // Whole warps are in or out (head is per warp): the shuffles of the norm
  // see every lane.
  kb.ifThen(kb.land(checked, isHead), [&] {
    Value inHead = kb.add(head, kb.index(op.getFirstHead()));
    emitRotaryRow(kb, op, a, token, inHead, lane, outType.getElementType(),
                  [&](Value channel, Value value) {
                    kb.store(value, out, {token, head, channel});
                  });
  });
  gpu::ReturnOp::create(builder, loc);
  return result;
}

int64_t pattn::rotaryBlocksPerToken(RotaryOp op) {
  int64_t heads = cast<MemRefType>(op.getOut().getType()).getDimSize(1);
  return (heads + kRotaryHeadsPerBlock - 1) / kRotaryHeadsPerBlock;
}
