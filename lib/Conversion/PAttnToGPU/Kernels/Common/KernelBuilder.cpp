//===- KernelBuilder.cpp - Building blocks of pattn's GPU kernels ---------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the kernel builder. The element codecs use integer
// bit manipulation and the f16 conversion only: no chip-specific conversion
// instruction is reached, so the same IR compiles for every chip from sm_80
// to sm_120a (SPEC §1: the hardware fp8/e2m1 conversions abort the NVPTX
// backend on chips without them).
//
//===----------------------------------------------------------------------===//

#include "Kernels/Common/KernelBuilder.h"

#include <cassert>
#include <cmath>
#include <limits>

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace ::pattn;

//===----------------------------------------------------------------------===//
// Constants and arithmetic
//===----------------------------------------------------------------------===//

Value ScalarBuilder::index(int64_t value) {
  return arith::ConstantIndexOp::create(b, loc, value);
}
Value ScalarBuilder::i32(int32_t value) {
  return arith::ConstantIntOp::create(b, loc, value, 32);
}
Value ScalarBuilder::i64(int64_t value) {
  return arith::ConstantIntOp::create(b, loc, value, 64);
}
Value ScalarBuilder::f32(float value) {
  return arith::ConstantFloatOp::create(b, loc, b.getF32Type(),
                                        llvm::APFloat(value));
}
Value ScalarBuilder::boolean(bool value) {
  return arith::ConstantIntOp::create(b, loc, value, 1);
}

Value ScalarBuilder::add(Value a, Value c) {
  return arith::AddIOp::create(b, loc, a, c);
}
Value ScalarBuilder::sub(Value a, Value c) {
  return arith::SubIOp::create(b, loc, a, c);
}
Value ScalarBuilder::mul(Value a, Value c) {
  return arith::MulIOp::create(b, loc, a, c);
}
Value ScalarBuilder::divs(Value a, Value c) {
  return arith::DivSIOp::create(b, loc, a, c);
}
Value ScalarBuilder::rems(Value a, Value c) {
  return arith::RemSIOp::create(b, loc, a, c);
}
Value ScalarBuilder::andi(Value a, Value c) {
  return arith::AndIOp::create(b, loc, a, c);
}
Value ScalarBuilder::xori(Value a, Value c) {
  return arith::XOrIOp::create(b, loc, a, c);
}
Value ScalarBuilder::ori(Value a, Value c) {
  return arith::OrIOp::create(b, loc, a, c);
}
Value ScalarBuilder::shl(Value a, Value c) {
  return arith::ShLIOp::create(b, loc, a, c);
}
Value ScalarBuilder::shru(Value a, Value c) {
  return arith::ShRUIOp::create(b, loc, a, c);
}
Value ScalarBuilder::mins(Value a, Value c) {
  return arith::MinSIOp::create(b, loc, a, c);
}
Value ScalarBuilder::maxs(Value a, Value c) {
  return arith::MaxSIOp::create(b, loc, a, c);
}
Value ScalarBuilder::cmpi(arith::CmpIPredicate predicate, Value a, Value c) {
  return arith::CmpIOp::create(b, loc, predicate, a, c);
}
Value ScalarBuilder::select(Value condition, Value a, Value c) {
  return arith::SelectOp::create(b, loc, condition, a, c);
}
Value ScalarBuilder::land(Value a, Value c) { return andi(a, c); }
Value ScalarBuilder::lor(Value a, Value c) { return ori(a, c); }

Value ScalarBuilder::fadd(Value a, Value c) {
  return arith::AddFOp::create(b, loc, a, c);
}
Value ScalarBuilder::fsub(Value a, Value c) {
  return arith::SubFOp::create(b, loc, a, c);
}
Value ScalarBuilder::fmul(Value a, Value c) {
  return arith::MulFOp::create(b, loc, a, c);
}
Value ScalarBuilder::fdiv(Value a, Value c) {
  return arith::DivFOp::create(b, loc, a, c);
}
Value ScalarBuilder::fmax(Value a, Value c) {
  return arith::MaxNumFOp::create(b, loc, a, c);
}
Value ScalarBuilder::saturate(Value x, float limit) {
  Value high = arith::MinimumFOp::create(b, loc, x, f32(limit));
  return arith::MaximumFOp::create(b, loc, high, f32(-limit));
}
Value ScalarBuilder::finiteLogit(Value x) {
  float largest = std::numeric_limits<float>::max();
  Value high = arith::MinNumFOp::create(b, loc, x, f32(largest));
  return arith::MaxNumFOp::create(b, loc, high, f32(-largest));
}
Value ScalarBuilder::fabs(Value a) { return math::AbsFOp::create(b, loc, a); }
// llvm.intr.fma rather than math.fma: the latter becomes a libdevice call,
// and this must be the exactly rounded fused instruction
// (roundScaledProductOnce depends on it).
Value ScalarBuilder::fma(Value a, Value c, Value d) {
  return LLVM::FMAOp::create(b, loc, a, c, d);
}
Value ScalarBuilder::exp(Value a) { return math::ExpOp::create(b, loc, a); }
Value ScalarBuilder::tanh(Value a) { return math::TanhOp::create(b, loc, a); }
Value ScalarBuilder::roundEven(Value a) {
  return math::RoundEvenOp::create(b, loc, a);
}
Value ScalarBuilder::cmpf(arith::CmpFPredicate predicate, Value a, Value c) {
  return arith::CmpFOp::create(b, loc, predicate, a, c);
}

//===----------------------------------------------------------------------===//
// Conversions
//===----------------------------------------------------------------------===//

Value ScalarBuilder::toIndex(Value integer) {
  if (integer.getType().isIndex())
    return integer;
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), integer);
}

static Value castInteger(OpBuilder &b, Location loc, Value value,
                         unsigned width) {
  Type target = b.getIntegerType(width);
  if (value.getType() == target)
    return value;
  if (value.getType().isIndex())
    return arith::IndexCastOp::create(b, loc, target, value);
  if (value.getType().getIntOrFloatBitWidth() < width)
    return arith::ExtSIOp::create(b, loc, target, value);
  return arith::TruncIOp::create(b, loc, target, value);
}

Value ScalarBuilder::toI32(Value value) {
  return castInteger(b, loc, value, 32);
}
Value ScalarBuilder::toI64(Value value) {
  return castInteger(b, loc, value, 64);
}

Value ScalarBuilder::toF32(Value number) {
  Type type = number.getType();
  if (type.isF32())
    return number;
  if (isa<FloatType>(type))
    return arith::ExtFOp::create(b, loc, b.getF32Type(), number);
  return arith::SIToFPOp::create(b, loc, b.getF32Type(), number);
}

Value ScalarBuilder::bitcast(Type type, Value value) {
  return arith::BitcastOp::create(b, loc, type, value);
}

Value ScalarBuilder::truncI8(Value integer) {
  return arith::TruncIOp::create(b, loc, b.getI8Type(), integer);
}

Value ScalarBuilder::extUI32(Value integer) {
  if (integer.getType().isInteger(32))
    return integer;
  return arith::ExtUIOp::create(b, loc, b.getI32Type(), integer);
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

Value ScalarBuilder::load(Value memref, ValueRange indices) {
  return memref::LoadOp::create(b, loc, memref, indices);
}

void ScalarBuilder::store(Value value, Value memref, ValueRange indices) {
  memref::StoreOp::create(b, loc, value, memref, indices);
}

// Byte buffers are i8, except nvfp4 group scales, which are typed f8E4M3FN:
// bytes move through them bit for bit.
Value KernelBuilder::loadByte(Value memref, ValueRange indices) {
  Value byte = load(memref, indices);
  if (!byte.getType().isInteger(8))
    byte = bitcast(b.getI8Type(), byte);
  return extUI32(byte);
}

void KernelBuilder::storeByte(Value value, Value memref, ValueRange indices) {
  Value byte = truncI8(value);
  Type element = cast<MemRefType>(memref.getType()).getElementType();
  if (element != byte.getType())
    byte = bitcast(element, byte);
  store(byte, memref, indices);
}

/// `indices` with its last entry advanced by `offset`.
static SmallVector<Value> advanceLast(KernelBuilder &kb, ValueRange indices,
                                      int64_t offset) {
  SmallVector<Value> moved(indices);
  moved.back() = kb.add(moved.back(), kb.index(offset));
  return moved;
}

Value KernelBuilder::loadU16Bytes(Value memref, ValueRange indices) {
  Value low = loadByte(memref, indices);
  Value high = loadByte(memref, advanceLast(*this, indices, 1));
  return ori(low, shl(high, i32(8)));
}

void KernelBuilder::storeU16Bytes(Value value, Value memref,
                                  ValueRange indices) {
  storeByte(value, memref, indices);
  storeByte(shru(value, i32(8)), memref, advanceLast(*this, indices, 1));
}

Value KernelBuilder::elementAddress(Value memref, ValueRange indices,
                                    ValueRange *strides) {
  auto type = cast<MemRefType>(memref.getType());
  int64_t elementBytes = type.getElementTypeBitWidth() / 8;
  Value pointer =
      memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
  auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, memref);
  Value element = metadata.getOffset();
  for (auto [at, stride] : llvm::zip(indices, metadata.getStrides())) {
    Value step = mul(at, stride);
    element = add(element, step);
  }
  if (strides)
    *strides = metadata.getStrides();
  Value byteOffset = mul(element, index(elementBytes));
  return add(pointer, byteOffset);
}

Value KernelBuilder::vectorAligned(Value memref, int64_t bytes) {
  auto type = cast<MemRefType>(memref.getType());
  int64_t elementBytes = type.getElementTypeBitWidth() / 8;
  ValueRange strides;
  Value address = elementAddress(memref, {}, &strides);
  Value misalignment = rems(address, index(bytes));
  for (Value stride : strides.drop_back()) {
    Value strideBytes = mul(stride, index(elementBytes));
    misalignment = ori(misalignment, rems(strideBytes, index(bytes)));
  }
  return cmpi(arith::CmpIPredicate::eq, misalignment, index(0));
}

SmallVector<Value> KernelBuilder::loadGlobalWords(Value memref,
                                                  ValueRange indices,
                                                  int64_t words) {
  assert((words == 1 || words == 2 || words == 4) && "1, 2 or 4 words");
  Value address = elementAddress(memref, indices);
  Value address64 = arith::IndexCastOp::create(b, loc, b.getI64Type(), address);
  std::string registers, constraints;
  for (int64_t w = 0; w < words; ++w) {
    registers += (w ? ", $" : "$") + std::to_string(w);
    constraints += "=r,";
  }
  std::string text = words == 1 ? "ld.global.b32 $0, [$1];"
                                : "ld.global.v" + std::to_string(words) +
                                      ".b32 {" + registers + "}, [$" +
                                      std::to_string(words) + "];";
  Type i32Type = b.getI32Type();
  Type result = words == 1
                    ? i32Type
                    : LLVM::LLVMStructType::getLiteral(
                          b.getContext(), SmallVector<Type>(words, i32Type));
  Value loaded = inlinePtx(result, text, constraints + "l", {address64},
                           /*sideEffects=*/true);
  if (words == 1)
    return {loaded};
  SmallVector<Value> values;
  for (int64_t w = 0; w < words; ++w)
    values.push_back(LLVM::ExtractValueOp::create(b, loc, loaded, w));
  return values;
}

void KernelBuilder::storeWordBytes(ArrayRef<Value> words, int64_t bytes,
                                   Value aligned, Value memref,
                                   ValueRange indices) {
  auto byteByByte = [&]() -> SmallVector<Value> {
    for (int64_t k = 0; k < bytes; ++k) {
      Value word = words[k / 4];
      if (k % 4)
        word = shru(word, i32(8 * (k % 4)));
      storeByte(word, memref, advanceLast(*this, indices, k));
    }
    return {};
  };
  if (bytes == 1 || !aligned) {
    byteByByte();
    return;
  }
  auto vectorStore = [&]() -> SmallVector<Value> {
    Value packed;
    if (bytes == 2) {
      Value half = arith::TruncIOp::create(b, loc, b.getI16Type(), words[0]);
      packed = vector::BroadcastOp::create(
          b, loc, VectorType::get({1}, b.getI16Type()), half);
    } else {
      packed = vector::FromElementsOp::create(
          b, loc, VectorType::get({bytes / 4}, b.getI32Type()),
          words.take_front(bytes / 4));
    }
    Type element = cast<MemRefType>(memref.getType()).getElementType();
    Value vector = vector::BitCastOp::create(
        b, loc, VectorType::get({bytes}, element), packed);
    vector::StoreOp::create(b, loc, vector, memref, indices,
                            /*nontemporal=*/false, llvm::MaybeAlign(bytes));
    return {};
  };
  ifElse(aligned, {}, vectorStore, byteByByte);
}

Value KernelBuilder::loadF32Bytes(Value memref, ValueRange indices) {
  Value bits = i32(0);
  for (int byte = 0; byte < 4; ++byte)
    bits = ori(bits, shl(loadByte(memref, advanceLast(*this, indices, byte)),
                         i32(8 * byte)));
  return bitcast(b.getF32Type(), bits);
}

void KernelBuilder::storeF32Bytes(Value value, Value memref,
                                  ValueRange indices) {
  Value bits = bitcast(b.getI32Type(), value);
  for (int byte = 0; byte < 4; ++byte)
    storeByte(shru(bits, i32(8 * byte)), memref,
              advanceLast(*this, indices, byte));
}

//===----------------------------------------------------------------------===//
// GPU
//===----------------------------------------------------------------------===//

Value KernelBuilder::threadId() {
  return gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
}

Value KernelBuilder::blockId(gpu::Dimension dimension) {
  return gpu::BlockIdOp::create(b, loc, dimension);
}

void KernelBuilder::barrier() { gpu::BarrierOp::create(b, loc); }

Value KernelBuilder::shuffleXor(Value v, int32_t mask) {
  Value offset = i32(mask);
  Value width = i32(32);
  return gpu::ShuffleOp::create(b, loc, v, offset, width, gpu::ShuffleMode::XOR)
      .getShuffleResult();
}

Value KernelBuilder::laneReduce(Value v, int64_t lanes,
                                function_ref<Value(Value, Value)> combine) {
  for (int64_t mask = lanes / 2; mask >= 1; mask /= 2) {
    Value other = shuffleXor(v, int32_t(mask));
    v = combine(v, other);
  }
  return v;
}

void KernelBuilder::syncWarp() {
  Value everyLane = i32(-1);
  NVVM::SyncWarpOp::create(b, loc, everyLane);
}

Value KernelBuilder::inlinePtx(Type result, StringRef text,
                               StringRef constraints, ValueRange operands,
                               bool sideEffects) {
  SmallVector<Type> results;
  if (result)
    results.push_back(result);
  UnitAttr keep = sideEffects ? UnitAttr::get(b.getContext()) : UnitAttr();
  auto asmOp = LLVM::InlineAsmOp::create(
      b, loc, results, operands, b.getStringAttr(text),
      b.getStringAttr(constraints), /*has_side_effects=*/keep,
      /*is_align_stack=*/UnitAttr(), LLVM::TailCallKindAttr(),
      /*asm_dialect=*/LLVM::AsmDialectAttr(),
      /*operand_attrs=*/ArrayAttr());
  return result ? asmOp.getResult(0) : Value();
}

Value KernelBuilder::maskThenOr(Value a, int32_t mask, Value bits) {
  // lop3's table 0xEA is (x & y) | z for x = 0xF0, y = 0xCC, z = 0xAA.
  // No side effects: LLVM may merge or hoist it like any arithmetic.
  return inlinePtx(b.getI32Type(), "lop3.b32 $0, $1, $2, $3, 0xEA;", "=r,r,n,r",
                   ValueRange{a, i32(mask), bits},
                   /*sideEffects=*/false);
}

Value KernelBuilder::maskedXorElse(Value a, int32_t mask, Value bits) {
  // y ? (x ^ z) : z for x = 0xF0, y = 0xCC, z = 0xAA: table 0x6A.
  return inlinePtx(b.getI32Type(), "lop3.b32 $0, $1, $2, $3, 0x6A;", "=r,r,n,r",
                   ValueRange{a, i32(mask), bits},
                   /*sideEffects=*/false);
}

//===----------------------------------------------------------------------===//
// Element formats
//===----------------------------------------------------------------------===//

Value KernelBuilder::encodeMinifloat(Value x, const MinifloatFormat &format) {
  Value bits = bitcast(b.getI32Type(), x);
  Value sign = andi(shru(bits, i32(31)), i32(1));
  // |x|, with NaN sent to zero (callers never pass NaN; this keeps the code
  // defined) and values beyond the range saturated before rounding, which
  // gives the same code as rounding first and saturating after.
  Value magnitude = fabs(x);
  Value isNaN = cmpf(arith::CmpFPredicate::UNO, magnitude, magnitude);
  magnitude = select(isNaN, f32(0.0f), magnitude);
  magnitude =
      arith::MinNumFOp::create(b, loc, magnitude, f32(format.maxFinite));

  // The binade, clamped to the subnormal one: exponent field - 127 is below
  // the clamp for zero and fp32 subnormals, so they need no special case.
  Value magnitudeBits = bitcast(b.getI32Type(), magnitude);
  Value exponent = sub(andi(shru(magnitudeBits, i32(23)), i32(0xFF)), i32(127));
  int minExponent = 1 - format.bias;
  exponent = maxs(exponent, i32(minExponent));

  // Count quanta of 2^(e - M): scaling by a power of two is exact, so the
  // round-to-even here is the only rounding, as in the numerics library.
  Value scaleBits =
      shl(add(sub(i32(format.mantissaBits), exponent), i32(127)), i32(23));
  Value quanta = roundEven(fmul(magnitude, bitcast(b.getF32Type(), scaleBits)));
  Value quantaInt = arith::FPToSIOp::create(b, loc, b.getI32Type(), quanta);
  Value code =
      add(shl(sub(exponent, i32(minExponent)), i32(format.mantissaBits)),
          quantaInt);
  code = mins(code, i32(format.maxCode));
  return ori(code, shl(sign, i32(format.exponentBits + format.mantissaBits)));
}

SmallVector<RoundingThreshold>
pattn::roundingThresholds(const MinifloatFormat &format) {
  int mantissaCodes = 1 << format.mantissaBits;
  auto magnitude = [&](int code) {
    int exponent = code / mantissaCodes, mantissa = code % mantissaCodes;
    if (exponent == 0) // subnormal
      return std::ldexp(float(mantissa), 1 - format.bias - format.mantissaBits);
    return std::ldexp(float(mantissaCodes + mantissa),
                      exponent - format.bias - format.mantissaBits);
  };
  SmallVector<RoundingThreshold> thresholds;
  for (int code = 0; code < format.maxCode; ++code) {
    // The midpoint is exact in fp32; a tie rounds to the even code, so
    // past an odd code it already belongs to the next one.
    float midpoint = (magnitude(code) + magnitude(code + 1)) / 2;
    thresholds.push_back({midpoint, code % 2 == 1});
  }
  return thresholds;
}

Value KernelBuilder::encodeE2M1(Value x) {
  Value bits = bitcast(b.getI32Type(), x);
  Value signBit = shru(bits, i32(31));
  Value magnitude = fabs(x);
  Value code = i32(0);
  // Ordered compares: a NaN passes none (encodeMinifloat's zero).
  for (RoundingThreshold threshold :
       roundingThresholds(MinifloatFormat::e2m1())) {
    auto predicate = threshold.inclusive ? arith::CmpFPredicate::OGE
                                         : arith::CmpFPredicate::OGT;
    Value passes = cmpf(predicate, magnitude, f32(threshold.value));
    code = add(code, extUI32(passes));
  }
  Value sign = shl(signBit, i32(3));
  return ori(code, sign);
}

/// fp32 of the f16 whose bits are the low 16 bits of `bits`.
Value KernelBuilder::decodeF16Bits(Value bits) {
  Value half = bitcast(b.getF16Type(),
                       arith::TruncIOp::create(b, loc, b.getI16Type(), bits));
  return toF32(half);
}

Value KernelBuilder::decodeBF16Bits(Value bits) {
  Value half = bitcast(b.getBF16Type(),
                       arith::TruncIOp::create(b, loc, b.getI16Type(), bits));
  return toF32(half);
}

// f16 and bf16 caches saturate (SPEC §2): a value beyond the largest finite
// one is stored as that value, never as an infinity that would make every
// later attention over the row NaN.
Value KernelBuilder::encodeF16Bits(Value x) {
  x = saturate(x, 65504.0f);
  Value half = arith::TruncFOp::create(b, loc, b.getF16Type(), x);
  return extUI32(bitcast(b.getI16Type(), half));
}

// bf16 is the top half of fp32, so round-to-nearest-even is integer
// arithmetic on the bits (values are finite here). Doing it by hand also
// keeps the canonicalizer from folding extf(f16 -> f32) + truncf(f32 -> bf16)
// into a conversion that is not one.
Value KernelBuilder::encodeBF16Bits(Value x) {
  x = saturate(x, 3.38953139e38f); // bf16 0x7F7F
  Value bits = bitcast(b.getI32Type(), x);
  Value lsb = andi(shru(bits, i32(16)), i32(1));
  Value rounded = add(add(bits, i32(0x7FFF)), lsb);
  return shru(rounded, i32(16));
}

// The fp8 and fp4 codes map onto f16 bit patterns by a shift: the exponent
// lands in the low bits of f16's exponent field, so the f16 value is the
// code's value times a power of two that a final multiply removes exactly.
Value KernelBuilder::decodeE4M3(Value code) {
  Value bits = ori(shl(andi(code, i32(0x7F)), i32(7)),
                   shl(andi(code, i32(0x80)), i32(8)));
  return fmul(decodeF16Bits(bits), f32(256.0f)); // 2^(15 - 7)
}

Value KernelBuilder::decodeE5M2(Value code) {
  return decodeF16Bits(shl(andi(code, i32(0xFF)), i32(8)));
}

Value KernelBuilder::decodeE2M1(Value code) {
  Value bits = ori(shl(andi(code, i32(0x7)), i32(9)),
                   shl(andi(code, i32(0x8)), i32(12)));
  return fmul(decodeF16Bits(bits), f32(16384.0f)); // 2^(15 - 1)
}

MinifloatFormat MinifloatFormat::of(pattn::Encoding encoding) {
  const numerics::EncodingInfo &info = encodingInfo(encoding);
  assert(info.isMinifloat() && "not a minifloat encoding");
  return of(*info.minifloat);
}

Value KernelBuilder::quantize(pattn::Encoding encoding, Value x, Value scale) {
  return quantizeQuotient(encoding, fdiv(x, scale), scale);
}

Value KernelBuilder::quantizeQuotient(pattn::Encoding encoding, Value t,
                                      Value scale) {
  const numerics::EncodingInfo &info = encodingInfo(encoding);
  // Plain floats have no code, and group-scaled codes need their group's
  // scale first (the nvfp4 writer builds those itself).
  if (info.isPlainFloat() || info.hasGroupScales())
    llvm_unreachable("quantize: not an integer or fp8 encoding");
  Value code;
  if (info.isInteger()) {
    float low = float(info.minIntegerCode), high = info.maxCodeMagnitude;
    Value raised = arith::MaxNumFOp::create(b, loc, t, f32(low));
    Value clamped = arith::MinNumFOp::create(b, loc, raised, f32(high));
    // Round to nearest even and convert in one cvt.rni.s32.f32 (the
    // conversion pipe runs at a quarter of the fp32 rate: roundeven then
    // fptosi would be two conversions). Exact: the value is clamped.
    code = inlinePtx(b.getI32Type(), "cvt.rni.s32.f32 $0, $1;", "=r,f",
                     {clamped}, /*sideEffects=*/false);
    // Biased codes (i4) are stored as code + bias, the others as the low
    // bits of their two's complement (i8).
    if (info.storedCodeBias)
      code = add(code, i32(info.storedCodeBias));
    else
      code = andi(code, i32(int32_t((1u << info.bitsPerCode) - 1)));
  } else {
    code = encodeMinifloat(t, MinifloatFormat::of(*info.minifloat));
  }
  Value zeroScale = cmpf(arith::CmpFPredicate::OEQ, scale, f32(0.0f));
  // A zero scale stores the zero code: 0 for i8/fp8, the biased 8 for i4.
  Value zeroCode = i32(info.storedCodeBias);
  return select(zeroScale, zeroCode, code);
}

std::pair<Value, Value> KernelBuilder::quantizeFp8Pair(pattn::Encoding encoding,
                                                       Value t0, Value s0,
                                                       Value t1, Value s1) {
  assert((encoding == pattn::Encoding::f8e4m3 ||
          encoding == pattn::Encoding::f8e5m2) &&
         "an fp8 encoding");
  if (!hardwareFp8) {
    Value code0 = quantizeQuotient(encoding, t0, s0);
    Value code1 = quantizeQuotient(encoding, t1, s1);
    return {code0, code1};
  }
  Type format = encoding == pattn::Encoding::f8e4m3
                    ? Type(b.getType<Float8E4M3FNType>())
                    : Type(b.getType<Float8E5M2Type>());
  // a lands in the high byte, b in the low one. Both saturate to the
  // largest finite code and round to nearest even, as encodeMinifloat.
  Value packed = NVVM::ConvertF32x2ToF8x2Op::create(
      b, loc, b.getI16Type(), t1, t0, NVVM::FPRoundingMode::RN,
      NVVM::SaturationMode::SATFINITE, /*relu=*/false, format);
  Value pair = extUI32(packed);
  auto finish = [&](Value code, Value t, Value scale) {
    // encodeMinifloat's NaN is the zero of its sign bit; a zero scale
    // stores the zero code (quantize).
    Value isNaN = cmpf(arith::CmpFPredicate::UNO, t, t);
    Value bits = bitcast(b.getI32Type(), t);
    Value top = shru(bits, i32(24));
    Value sign = andi(top, i32(0x80));
    code = select(isNaN, sign, code);
    Value zeroScale = cmpf(arith::CmpFPredicate::OEQ, scale, f32(0.0f));
    return select(zeroScale, i32(0), code);
  };
  Value low = andi(pair, i32(0xFF));
  Value code0 = finish(low, t0, s0);
  Value high = shru(pair, i32(8));
  Value code1 = finish(high, t1, s1);
  return {code0, code1};
}

Value KernelBuilder::roundScaledProductOnce(Value a, Value c, Value scale,
                                            Type type) {
  // p = RN(a * c) and its exact error e = a * c - p (fma is exact here);
  // a power-of-two scale moves p exactly and leaves e's sign alone.
  Value product = fmul(a, c);
  Value error = fma(a, c, arith::NegFOp::create(b, loc, product));
  if (scale)
    product = fmul(product, scale);
  Value bits = bitcast(b.getI32Type(), product);
  Value inexact = cmpf(arith::CmpFPredicate::ONE, error, f32(0.0f));
  Value nonzero = cmpf(arith::CmpFPredicate::ONE, product, f32(0.0f));
  // Round to odd: truncate toward zero, then set the lowest bit when inexact.
  Value errorNegative = cmpf(arith::CmpFPredicate::OLT, error, f32(0.0f));
  Value productNegative = cmpf(arith::CmpFPredicate::OLT, product, f32(0.0f));
  Value roundedAway =
      arith::XOrIOp::create(b, loc, errorNegative, productNegative);
  Value truncated = select(land(inexact, roundedAway), sub(bits, i32(1)), bits);
  Value odd = select(land(inexact, nonzero), ori(truncated, i32(1)), bits);
  Value rounded = bitcast(b.getF32Type(), odd);
  return arith::TruncFOp::create(b, loc, type, rounded);
}

Value KernelBuilder::powerOfTwo(Value exponent) {
  Value biased = add(exponent, i32(127));
  Value field = shl(biased, i32(23));
  return bitcast(b.getF32Type(), field);
}

Value KernelBuilder::ldexpSaturating(Value x, Value exponent) {
  // Three factors 2^a 2^b 2^c of one sign, each a normal fp32: the running
  // product moves monotonically toward the result, so it overflows (then
  // saturates) or underflows only when the result does. Beyond ±378 the
  // result is saturated or zero for every finite x anyway.
  Value e = maxs(exponent, i32(-378));
  e = mins(e, i32(378));
  Value third = arith::DivSIOp::create(b, loc, e, i32(3));
  Value rest = sub(e, third);
  Value half = arith::DivSIOp::create(b, loc, rest, i32(2));
  Value last = sub(rest, half);
  Value scaled = fmul(x, powerOfTwo(third));
  scaled = fmul(scaled, powerOfTwo(half));
  scaled = fmul(scaled, powerOfTwo(last));
  return finiteLogit(scaled);
}

//===----------------------------------------------------------------------===//
// Control flow
//===----------------------------------------------------------------------===//

SmallVector<Value> ScalarBuilder::forLoop(
    Value lower, Value upper, Value step, ValueRange init,
    function_ref<SmallVector<Value>(Value, ValueRange)> body) {
  auto loop = scf::ForOp::create(b, loc, lower, upper, step, init);
  OpBuilder::InsertionGuard guard(b);
  Block *block = loop.getBody();
  if (init.empty()) {
    // The builder added an empty yield; emit the body before it.
    b.setInsertionPoint(block->getTerminator());
    body(loop.getInductionVar(), {});
  } else {
    b.setInsertionPointToEnd(block);
    SmallVector<Value> next =
        body(loop.getInductionVar(), loop.getRegionIterArgs());
    scf::YieldOp::create(b, loc, next);
  }
  return SmallVector<Value>(loop.getResults());
}

void ScalarBuilder::ifThen(Value condition, function_ref<void()> then) {
  auto ifOp = scf::IfOp::create(b, loc, TypeRange(), condition,
                                /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  then();
}

SmallVector<Value>
ScalarBuilder::ifElse(Value condition, TypeRange types,
                      function_ref<SmallVector<Value>()> then,
                      function_ref<SmallVector<Value>()> otherwise) {
  auto ifOp = scf::IfOp::create(b, loc, types, condition,
                                /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  // Without results the builder has added empty yields: emit before them.
  auto emit = [&](Block *block, function_ref<SmallVector<Value>()> body) {
    if (types.empty()) {
      b.setInsertionPoint(block->getTerminator());
      body();
      return;
    }
    b.setInsertionPointToEnd(block);
    scf::YieldOp::create(b, loc, body());
  };
  emit(ifOp.thenBlock(), then);
  emit(ifOp.elseBlock(), otherwise);
  return SmallVector<Value>(ifOp.getResults());
}

MemRefType pattn::workgroupMemRefType(ArrayRef<int64_t> shape, Type element) {
  return MemRefType::get(
      shape, element, AffineMap(),
      gpu::AddressSpaceAttr::get(element.getContext(),
                                 gpu::AddressSpace::Workgroup));
}

Value pattn::sharedView(KernelBuilder &kb, Value smem, Value offset,
                        ArrayRef<int64_t> shape, Type element) {
  return memref::ViewOp::create(kb.b, kb.loc,
                                workgroupMemRefType(shape, element), smem,
                                offset, ValueRange{});
}
