//===- TensorCore.cpp - mma.sync building blocks --------------------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//

#include "Kernels/TensorCore/TensorCore.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace pattn;

Type MmaBuilder::operandType() const {
  return bf16 ? Type(kb.b.getBF16Type()) : Type(kb.b.getF16Type());
}

Value MmaBuilder::bitsOperand(Value halves) {
  if (!bf16)
    return halves;
  // bf16 mma operands are i32 registers.
  Value word = vector::BitCastOp::create(
      kb.b, kb.loc, VectorType::get({1}, kb.b.getI32Type()), halves);
  return vector::ExtractOp::create(kb.b, kb.loc, word, 0);
}

Value MmaBuilder::operand(Value pair) {
  auto pairType = cast<VectorType>(pair.getType());
  Type element = operandType();
  if (pairType.getElementType() != element) {
    // Through f32 (exact), then RNE.
    Value wide = arith::ExtFOp::create(
        kb.b, kb.loc, VectorType::get({2}, kb.b.getF32Type()), pair);
    pair = arith::TruncFOp::create(kb.b, kb.loc, VectorType::get({2}, element),
                                   wide);
  }
  return bitsOperand(pair);
}

Value MmaBuilder::packPair(Value lowF32, Value highF32) {
  Type element = operandType();
  Value low = arith::TruncFOp::create(kb.b, kb.loc, element, lowF32);
  Value high = arith::TruncFOp::create(kb.b, kb.loc, element, highF32);
  Value pair = vector::FromElementsOp::create(
      kb.b, kb.loc, VectorType::get({2}, element), ValueRange{low, high});
  return bitsOperand(pair);
}

SmallVector<Value> MmaBuilder::mma(ArrayRef<Value> a, ArrayRef<Value> b,
                                   ArrayRef<Value> c) {
  MLIRContext *context = kb.b.getContext();
  Type f32 = kb.b.getF32Type();
  auto resultType =
      LLVM::LLVMStructType::getLiteral(context, {f32, f32, f32, f32});
  std::optional<std::array<NVVM::MMATypes, 2>> types;
  if (bf16)
    types = std::array<NVVM::MMATypes, 2>{NVVM::MMATypes::bf16,
                                          NVVM::MMATypes::bf16};
  Value d = NVVM::MmaOp::create(
      kb.b, kb.loc, resultType, a, b, c, ArrayRef<int64_t>{16, 8, 16},
      std::nullopt, std::nullopt, types,
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                     NVVM::MMALayout::col});
  SmallVector<Value> result;
  for (int64_t i = 0; i < 4; ++i)
    result.push_back(LLVM::ExtractValueOp::create(kb.b, kb.loc, d, i));
  return result;
}

SmallVector<Value> MmaBuilder::ldmatrix(Value view, Value row, Value column,
                                        int64_t tiles, bool transpose) {
  Value fragment = nvgpu::LdMatrixOp::create(
      kb.b, kb.loc, VectorType::get({tiles, 2}, kb.b.getF16Type()), view,
      ValueRange{row, column}, kb.b.getBoolAttr(transpose),
      kb.b.getI32IntegerAttr(int32_t(tiles)));
  SmallVector<Value> words;
  auto wordType = VectorType::get({1}, kb.b.getI32Type());
  for (int64_t m = 0; m < tiles; ++m) {
    Value halves = vector::ExtractOp::create(kb.b, kb.loc, fragment, m);
    Value word = vector::BitCastOp::create(kb.b, kb.loc, wordType, halves);
    words.push_back(vector::ExtractOp::create(kb.b, kb.loc, word, 0));
  }
  return words;
}

/// The (row, column) lane `lane` addresses in an ldmatrix.x4 of rows key0
/// ... key0 + 15 times segments `segment` and `segment` + 1: matrix m =
/// lane / 8 is key half m % 2 of segment m / 2 (segment-major), or key half
/// m / 2 of segment m % 2 (keys-major).
static std::pair<Value, Value> segmentAddress(KernelBuilder &kb, Value lane,
                                              Value key0, Value segment,
                                              bool keysMajor) {
  Value matrix = kb.divs(lane, kb.index(8));
  Value half =
      keysMajor ? kb.divs(matrix, kb.index(2)) : kb.rems(matrix, kb.index(2));
  Value keyOffset = kb.mul(half, kb.index(8));
  Value laneRow = kb.rems(lane, kb.index(8));
  keyOffset = kb.add(keyOffset, laneRow);
  Value row = kb.add(key0, keyOffset);
  Value segmentOffset =
      keysMajor ? kb.rems(matrix, kb.index(2)) : kb.divs(matrix, kb.index(2));
  Value column = kb.add(segment, segmentOffset);
  column = kb.mul(column, kb.index(8));
  return {row, column};
}

SmallVector<Value> MmaBuilder::loadSegments(Value rowsView, Value lane,
                                            Value key0, Value segment,
                                            bool pair, bool transpose) {
  auto [row, column] =
      segmentAddress(kb, lane, key0, segment, /*keysMajor=*/false);
  return ldmatrix(rowsView, row, column, pair ? 4 : 2, transpose);
}

SmallVector<Value> MmaBuilder::loadSegmentsKeysMajor(Value rowsView, Value lane,
                                                     Value key0, Value segment,
                                                     bool transpose) {
  auto [row, column] =
      segmentAddress(kb, lane, key0, segment, /*keysMajor=*/true);
  return ldmatrix(rowsView, row, column, 4, transpose);
}

SmallVector<Value> MmaBuilder::loadOperandA(Value view, Value row,
                                            Value column) {
  Value fragment = nvgpu::LdMatrixOp::create(
      kb.b, kb.loc, VectorType::get({4, 2}, kb.b.getF16Type()), view,
      ValueRange{row, column}, kb.b.getBoolAttr(false),
      kb.b.getI32IntegerAttr(4));
  SmallVector<Value> registers;
  for (int64_t r = 0; r < 4; ++r) {
    Value halves = vector::ExtractOp::create(kb.b, kb.loc, fragment, r);
    registers.push_back(bitsOperand(halves));
  }
  return registers;
}

Value MmaBuilder::shuffleXor(Value v, int32_t mask) {
  return kb.shuffleXor(v, mask);
}

Value MmaBuilder::quadMax(Value v) {
  Value pairs = kb.fmax(v, shuffleXor(v, 1));
  return kb.fmax(pairs, shuffleXor(pairs, 2));
}

MmaBuilder::SoftmaxRow MmaBuilder::softmaxRow(Value oldMax, Value newMax,
                                              Value oldSum,
                                              ArrayRef<Value> logits,
                                              Value negInf, Value zero) {
  Value noKey = kb.cmpf(arith::CmpFPredicate::OEQ, newMax, negInf);
  Value finiteMax = kb.select(noKey, zero, newMax);
  SoftmaxRow row;
  row.alpha = exp2(kb.fsub(oldMax, finiteMax));
  row.sum = kb.fmul(oldSum, row.alpha);
  for (Value x : logits) {
    Value w = exp2(kb.fsub(x, finiteMax));
    row.sum = kb.fadd(row.sum, w);
    row.weights.push_back(w);
  }
  return row;
}

SmallVector<SmallVector<SmallVector<Value>>> MmaBuilder::softmaxSteps(
    const SoftmaxTiles &tiles, ArrayRef<SmallVector<Value>> logits,
    SmallVectorImpl<Value> &s, Value negInf, Value zeroF32) {
  SoftmaxWeights weights = softmaxWeights(tiles, logits, s, negInf, zeroF32);
  decayAccumulators(tiles, weights, s);
  return std::move(weights.pOperands);
}

MmaBuilder::SoftmaxWeights MmaBuilder::softmaxWeights(
    const SoftmaxTiles &tiles, ArrayRef<SmallVector<Value>> logits,
    SmallVectorImpl<Value> &s, Value negInf, Value zeroF32) {
  int64_t mTiles = tiles.mTiles;
  int64_t rowHalves = tiles.rowHalves;
  int64_t steps = logits.size();
  auto maxAt = [&](int64_t mt, int64_t h) { return tiles.maxAt(mt, h); };
  auto sumAt = [&](int64_t mt, int64_t h) { return tiles.sumAt(mt, h); };
  // Online softmax per row over every step's keys at once; P re-packed as
  // the A operand of P V, per step and m-tile.
  SmallVector<SmallVector<SmallVector<Value>>> pOperands(
      steps, SmallVector<SmallVector<Value>>(mTiles));
  SmallVector<Value> alphas(2 * mTiles);
  Value rescale = kb.boolean(false);
  Value one = kb.f32(1.0f);
  for (int64_t mt = 0; mt < mTiles; ++mt) {
    SmallVector<SmallVector<Value>> p(steps, SmallVector<Value>(8, zeroF32));
    for (int64_t h = 0; h < 2; ++h) {
      if (h >= rowHalves) {
        // Padding rows: P = 0, their state stays as it started.
        alphas[maxAt(mt, h)] = one;
        continue;
      }
      auto atOf = [&](int64_t nt, int64_t e2) {
        return (mt * 2 + nt) * 4 + 2 * h + e2;
      };
      Value stepsMax;
      SmallVector<Value> rowLogits;
      for (int64_t k = 0; k < steps; ++k) {
        ArrayRef<Value> step = logits[k];
        Value low = kb.fmax(step[atOf(0, 0)], step[atOf(0, 1)]);
        Value high = kb.fmax(step[atOf(1, 0)], step[atOf(1, 1)]);
        Value stepMax = kb.fmax(low, high);
        stepsMax = k ? kb.fmax(stepsMax, stepMax) : stepMax;
        rowLogits.append({step[atOf(0, 0)], step[atOf(0, 1)], step[atOf(1, 0)],
                          step[atOf(1, 1)]});
      }
      Value rowMax = quadMax(stepsMax);
      Value oldMax = s[maxAt(mt, h)];
      Value newMax = kb.fmax(oldMax, rowMax);
      MmaBuilder::SoftmaxRow row = softmaxRow(oldMax, newMax, s[sumAt(mt, h)],
                                              rowLogits, negInf, zeroF32);
      for (int64_t k = 0; k < steps; ++k)
        for (int64_t nt = 0; nt < 2; ++nt)
          for (int64_t e2 = 0; e2 < 2; ++e2)
            p[k][nt * 4 + 2 * h + e2] = row.weights[k * 4 + nt * 2 + e2];
      Value alpha = row.alpha, sum = row.sum;
      Value grew = kb.cmpf(arith::CmpFPredicate::OGT, newMax, oldMax);
      rescale = kb.lor(rescale, grew);
      alphas[maxAt(mt, h)] = alpha;
      s[maxAt(mt, h)] = newMax;
      s[sumAt(mt, h)] = sum;
    }
    // a0: row g keys 2t..; a1: row g+8; a2, a3: keys 2t+8.. .
    for (int64_t k = 0; k < steps; ++k)
      pOperands[k][mt] = {
          packPair(p[k][0], p[k][1]), packPair(p[k][2], p[k][3]),
          packPair(p[k][4], p[k][5]), packPair(p[k][6], p[k][7])};
  }
  return {std::move(pOperands), std::move(alphas), rescale};
}

void MmaBuilder::decayAccumulators(const SoftmaxTiles &tiles,
                                   const SoftmaxWeights &weights,
                                   SmallVectorImpl<Value> &s) {
  Location loc = kb.loc;
  OpBuilder &builder = kb.b;
  int64_t mTiles = tiles.mTiles, nTiles = tiles.nTiles;
  int64_t rowHalves = tiles.rowHalves;
  auto maxAt = [&](int64_t mt, int64_t h) { return tiles.maxAt(mt, h); };
  auto accAt = [&](int64_t mt, int64_t nt, int64_t e) {
    return tiles.accAt(mt, nt, e);
  };
  ArrayRef<Value> alphas = weights.alphas;
  // The accumulators decay by alpha = 2^(old max - new max) per
  // row, skipped (alpha = 1 on every row) unless some row of the
  // warp has a new maximum: after the first tiles it rarely does.
  Value allLanes = kb.i32(-1);
  Value anyRescale =
      NVVM::VoteSyncOp::create(builder, loc, builder.getI1Type(), allLanes,
                               weights.rescale, NVVM::VoteSyncKind::any);
  SmallVector<Type> accTypes(mTiles * nTiles * 4, builder.getF32Type());
  SmallVector<Value> accumulators = kb.ifElse(
      anyRescale, accTypes,
      [&]() -> SmallVector<Value> {
        SmallVector<Value> decayed;
        for (int64_t mt = 0; mt < mTiles; ++mt)
          for (int64_t nt = 0; nt < nTiles; ++nt)
            for (int64_t e = 0; e < 4; ++e)
              decayed.push_back(
                  e / 2 < rowHalves
                      ? kb.fmul(s[accAt(mt, nt, e)], alphas[maxAt(mt, e / 2)])
                      : s[accAt(mt, nt, e)]);
        return decayed;
      },
      [&]() -> SmallVector<Value> {
        return SmallVector<Value>(s.begin() + accAt(0, 0, 0), s.end());
      });
  std::copy(accumulators.begin(), accumulators.end(),
            s.begin() + accAt(0, 0, 0));
}

Value MmaBuilder::exp2(Value x) {
  return LLVM::CallIntrinsicOp::create(
             kb.b, kb.loc, kb.b.getF32Type(),
             kb.b.getStringAttr("llvm.nvvm.ex2.approx.ftz.f32"), ValueRange{x})
      .getResult(0);
}

void CpAsyncRing::issueIf(Value needed, function_ref<void()> copy) {
  kb.ifThen(needed, copy);
  NVVM::CpAsyncCommitGroupOp::create(kb.b, kb.loc);
}

void CpAsyncRing::issue(Value tile, function_ref<void()> copy) {
  issueIf(kb.cmpi(arith::CmpIPredicate::slt, tile, tileCount), copy);
}

void CpAsyncRing::land(int32_t newerPending) {
  NVVM::CpAsyncWaitGroupOp::create(kb.b, kb.loc, newerPending);
  kb.barrier();
}

/// Emits PTX `text` over 32-bit `operands` ("r"): side effects and a
/// memory clobber, so that no shared-memory access moves across it.
static void barrierAsm(KernelBuilder &kb, llvm::StringRef text,
                       ValueRange operands) {
  std::string constraints;
  for (size_t i = 0; i < operands.size(); ++i)
    constraints += "r,";
  constraints += "~{memory}";
  kb.inlinePtx(Type(), text, constraints, operands, /*sideEffects=*/true);
}

StageBarriers::StageBarriers(KernelBuilder &kb, Value smem, int64_t offset,
                             int64_t stages, bool tryWait)
    : kb(kb), stages(stages), tryWait(tryWait) {
  assert(offset % 8 == 0 && "mbarriers are 8-byte aligned");
  Value pointer =
      memref::ExtractAlignedPointerAsIndexOp::create(kb.b, kb.loc, smem);
  Value window =
      arith::IndexCastOp::create(kb.b, kb.loc, kb.b.getI32Type(), pointer);
  base = kb.add(window, kb.i32(int32_t(offset)));
}

Value StageBarriers::address(Value slot, bool empty) {
  Value at = kb.toI32(slot);
  if (empty)
    at = kb.add(at, kb.i32(int32_t(stages)));
  return kb.add(base, kb.mul(at, kb.i32(8)));
}

void StageBarriers::init(int64_t copyThreads, int64_t computeThreads) {
  for (int64_t s = 0; s < stages; ++s) {
    Value slot = kb.index(s);
    Value full = address(slot, /*empty=*/false);
    Value empty = address(slot, /*empty=*/true);
    Value copyCount = kb.i32(int32_t(copyThreads));
    barrierAsm(kb, "mbarrier.init.shared.b64 [$0], $1;", {full, copyCount});
    Value computeCount = kb.i32(int32_t(computeThreads));
    barrierAsm(kb, "mbarrier.init.shared.b64 [$0], $1;", {empty, computeCount});
  }
}

void StageBarriers::wait(Value at, Value parity) {
  // Labels are local to the braces, so every inlined copy has its own.
  std::string test = tryWait ? "mbarrier.try_wait.parity.shared.b64"
                             : "mbarrier.test_wait.parity.shared.b64";
  std::string text = "{\n.reg .pred pdone;\nLwait:\n" + test +
                     " pdone, [$0], $1;\n@!pdone bra Lwait;\n}";
  barrierAsm(kb, text, {at, parity});
}

void StageBarriers::waitFull(Value slot, Value parity) {
  wait(address(slot, /*empty=*/false), parity);
}

void StageBarriers::waitEmpty(Value slot, Value parity) {
  wait(address(slot, /*empty=*/true), parity);
}

void StageBarriers::arriveFull(Value slot) {
  // The cp.async arrival raises the pending count until the thread's copies
  // land; the plain arrival (a release) is the one the count expects.
  Value full = address(slot, /*empty=*/false);
  barrierAsm(kb, "cp.async.mbarrier.arrive.shared.b64 [$0];", {full});
  barrierAsm(kb,
             "{\n.reg .b64 state;\nmbarrier.arrive.shared.b64 state, [$0];\n}",
             {full});
}

void StageBarriers::arriveEmpty(Value slot) {
  Value empty = address(slot, /*empty=*/true);
  barrierAsm(kb,
             "{\n.reg .b64 state;\nmbarrier.arrive.shared.b64 state, [$0];\n}",
             {empty});
}

Value pattn::pairBits(KernelBuilder &kb, Value pair) {
  if (pair.getType().isInteger(32))
    return pair;
  Value word = vector::BitCastOp::create(
      kb.b, kb.loc, VectorType::get({1}, kb.b.getI32Type()), pair);
  return vector::ExtractOp::create(kb.b, kb.loc, word, 0);
}

Value WgmmaOps::descriptor(Value sharedBase, Value offset, int64_t leading,
                           int64_t stride) {
  // Bits [0, 14): the start address / 16; [16, 30): the leading byte
  // offset / 16; [32, 46): the stride byte offset / 16; swizzle mode 0.
  Value address = kb.add(sharedBase, kb.toI64(offset));
  Value start = kb.shru(address, kb.i64(4));
  start = kb.andi(start, kb.i64(0x3FFF));
  int64_t fields = (leading >> 4) << 16 | (stride >> 4) << 32;
  return kb.ori(start, kb.i64(fields));
}

Value WgmmaOps::advance(Value descriptor, int64_t bytes) {
  assert(bytes % 16 == 0 && "wgmma operands start on 16 bytes");
  if (bytes == 0)
    return descriptor;
  return kb.add(descriptor, kb.i64(bytes / 16));
}

SmallVector<Value> WgmmaOps::mma(Value descA, Value descB, ArrayRef<Value> acc,
                                 int64_t n, bool bf16, bool transposeB) {
  OpBuilder &builder = kb.b;
  MLIRContext *context = builder.getContext();
  Location loc = kb.loc;
  Type f32 = builder.getF32Type();
  auto structType =
      LLVM::LLVMStructType::getLiteral(context, SmallVector<Type>(n / 2, f32));
  Value inout = LLVM::UndefOp::create(builder, loc, structType);
  for (auto [i, value] : llvm::enumerate(acc))
    inout = LLVM::InsertValueOp::create(builder, loc, inout, value,
                                        ArrayRef<int64_t>{int64_t(i)});
  NVVM::WGMMATypes type = bf16 ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16;
  // Without accumulators D = A B (scale-d 0).
  NVVM::WGMMAScaleOut scaleD =
      acc.empty() ? NVVM::WGMMAScaleOut::zero : NVVM::WGMMAScaleOut::one;
  NVVM::MMALayout layoutB =
      transposeB ? NVVM::MMALayout::row : NVVM::MMALayout::col;
  auto shape = NVVM::MMAShapeAttr::get(context, 64, int(n), 16);
  Value d = NVVM::WgmmaMmaAsyncOp::create(
      builder, loc, structType, inout, descA, descB, shape, type, type,
      NVVM::WGMMATypes::f32, scaleD, NVVM::WGMMAScaleIn::one,
      NVVM::WGMMAScaleIn::one, NVVM::MMALayout::row, layoutB,
      NVVM::MMAIntOverflowAttr());
  SmallVector<Value> result;
  for (int64_t i = 0; i < n / 2; ++i)
    result.push_back(LLVM::ExtractValueOp::create(builder, loc, d, i));
  return result;
}

SmallVector<Value> WgmmaOps::mmaRegisterA(ArrayRef<Value> a, Value descB,
                                          ArrayRef<Value> acc, int64_t n,
                                          bool bf16, bool transposeB) {
  assert(a.size() == 4 && int64_t(acc.size()) == n / 2 &&
         "four A pairs and n / 2 accumulators");
  OpBuilder &builder = kb.b;
  Type f32 = builder.getF32Type();
  int64_t count = n / 2;
  // Operands: the accumulators (outputs 0 ... count - 1, tied to inputs
  // count ... 2 count - 1), A's four pairs, B's descriptor; scale-d = 1
  // (D accumulates), scale-a = scale-b = 1.
  std::string text = "wgmma.mma_async.sync.aligned.m64n" + std::to_string(n) +
                     "k16.f32." + (bf16 ? "bf16.bf16" : "f16.f16") + " {";
  std::string constraints;
  for (int64_t i = 0; i < count; ++i) {
    text += (i ? ", $" : "$") + std::to_string(i);
    constraints += (i ? ",=f" : "=f");
  }
  for (int64_t i = 0; i < count; ++i)
    constraints += "," + std::to_string(i);
  text += "}, {";
  for (int64_t i = 0; i < 4; ++i) {
    text += (i ? ", $" : "$") + std::to_string(2 * count + i);
    constraints += ",r";
  }
  text += "}, $" + std::to_string(2 * count + 4) + ", 1, 1, 1, " +
          (transposeB ? "1" : "0") + ";";
  constraints += ",l";
  SmallVector<Value> operands(acc.begin(), acc.end());
  operands.append(a.begin(), a.end());
  operands.push_back(descB);
  auto structType = LLVM::LLVMStructType::getLiteral(
      builder.getContext(), SmallVector<Type>(count, f32));
  Value d = kb.inlinePtx(structType, text, constraints, operands,
                         /*sideEffects=*/true);
  SmallVector<Value> result;
  for (int64_t i = 0; i < count; ++i)
    result.push_back(LLVM::ExtractValueOp::create(builder, kb.loc, d, i));
  return result;
}
