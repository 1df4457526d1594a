//===- Codecs.cpp - Word decoders shared by the decode kernels ------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the word decoders of Codecs.h. Every decoder is
// exact: each code of every encoding is an f16 value (e4m3 subnormals
// included), so the f16x2 arithmetic below never rounds.
//
//===----------------------------------------------------------------------===//

#include "Kernels/Codecs/Codecs.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <algorithm>
#include <cassert>
#include <string>

using namespace mlir;
using namespace pattn;

namespace pattn {

int64_t elementsPerWord(Encoding encoding) {
  return encodingInfo(encoding).codesPerWord;
}

Value f16PairOf(KernelBuilder &kb, Value bits) {
  return vector::BitCastOp::create(
      kb.b, kb.loc, VectorType::get({2}, kb.b.getF16Type()),
      vector::BroadcastOp::create(
          kb.b, kb.loc, VectorType::get({1}, kb.b.getI32Type()), bits));
}

Value f16Splat(KernelBuilder &kb, float value) {
  auto pairType = VectorType::get({2}, kb.b.getF16Type());
  return arith::ConstantOp::create(
      kb.b, kb.loc,
      DenseElementsAttr::get(
          pairType, APFloat(APFloat::IEEEhalf(), std::to_string(value))));
}

/// The low bits of `word` >> `shift`, as `type` (what a conversion
/// instruction takes: an i16 of two e4m3 codes, an i8 of two e2m1 codes).
static Value fieldOf(KernelBuilder &kb, Value word, int64_t shift, Type type) {
  Value shifted = shift ? kb.shru(word, kb.i32(shift)) : word;
  return arith::TruncIOp::create(kb.b, kb.loc, type, shifted);
}

/// (word >> shift & mask) | 0x64006400 as two f16 (1024 + code), minus
/// `bias` in f16x2: exact, the results are small integers.
static Value magicPair(KernelBuilder &kb, Value word, int64_t shift,
                       int32_t mask, float bias) {
  Value shifted = shift ? kb.shru(word, kb.i32(shift)) : word;
  Value bits = kb.maskThenOr(shifted, mask, kb.i32(0x64006400));
  return arith::SubFOp::create(kb.b, kb.loc, f16PairOf(kb, bits),
                               f16Splat(kb, bias));
}

/// `word` shifted left by `by` bits (right when negative).
static Value shiftBy(KernelBuilder &kb, Value word, int64_t by) {
  if (by == 0)
    return word;
  return by > 0 ? kb.shl(word, kb.i32(by)) : kb.shru(word, kb.i32(-by));
}

/// Two minifloat codes at bits [at + 15 : at] and [at + 31 : at + 16] of
/// `word` as one f16 pair: `(code & magnitudeMask) << magnitudeShift |
/// (code & signMask) << signShift` are their f16 bit patterns up to the
/// exponent bias, which one f16x2 multiply by `scale` (a power of two,
/// exact) restores. Each field is one shift of `word` and a mask; the
/// magnitude's mask and the or are one lop3.
static Value minifloatPair(KernelBuilder &kb, Value word, int64_t at,
                           int32_t magnitudeMask, int64_t magnitudeShift,
                           int32_t signMask, int64_t signShift, float scale) {
  Value magnitude = shiftBy(kb, word, magnitudeShift - at);
  int32_t placedMask = int32_t(uint32_t(magnitudeMask) << magnitudeShift);
  Value bits;
  if (signMask) {
    Value sign = shiftBy(kb, word, signShift - at);
    sign = kb.andi(sign, kb.i32(int32_t(uint32_t(signMask) << signShift)));
    bits = kb.maskThenOr(magnitude, placedMask, sign);
  } else {
    bits = kb.andi(magnitude, kb.i32(placedMask));
  }
  Value pair = f16PairOf(kb, bits);
  if (scale != 1.0f)
    pair = arith::MulFOp::create(kb.b, kb.loc, pair, f16Splat(kb, scale));
  return pair;
}

SmallVector<std::pair<int64_t, int64_t>>
wordPairOrder(Encoding encoding, bool hardwareFp8, bool hardwareFp4) {
  int64_t n = elementsPerWord(encoding);
  // The chips' conversions pair adjacent elements; the bit tricks (and
  // e5m2, i8, i4) pair element j with j + n/2.
  bool adjacent = n == 2 || (encoding == Encoding::f8e4m3 && hardwareFp8) ||
                  (encoding == Encoding::nvfp4 && hardwareFp4);
  SmallVector<std::pair<int64_t, int64_t>> order;
  for (int64_t j = 0; j < n / 2; ++j)
    order.push_back(adjacent ? std::pair<int64_t, int64_t>{2 * j, 2 * j + 1}
                             : std::pair<int64_t, int64_t>{j, j + n / 2});
  return order;
}

/// e4m3 pairs by cvt.rn.f16x2.e4m3x2, two bytes at a time: byte 2q is the
/// low half.
static SmallVector<ChannelPair> convertE4M3Pairs(KernelBuilder &kb,
                                                 Value word) {
  MLIRContext *context = kb.b.getContext();
  auto halfPair = VectorType::get({2}, kb.b.getF16Type());
  auto halfType = IntegerType::get(context, 16);
  auto bytePair = VectorType::get({2}, IntegerType::get(context, 8));
  SmallVector<ChannelPair> pairs;
  for (int64_t q = 0; q < 2; ++q) {
    Value bits = fieldOf(kb, word, 16 * q, halfType);
    Value codes = vector::BitCastOp::create(
        kb.b, kb.loc, bytePair,
        vector::BroadcastOp::create(kb.b, kb.loc,
                                    VectorType::get({1}, halfType), bits));
    Value halves = NVVM::ConvertF8x2ToF16x2Op::create(
        kb.b, kb.loc, Type(halfPair), codes, /*relu=*/false,
        Type(Float8E4M3FNType::get(context)));
    pairs.push_back({halves, 2 * q, 2 * q + 1});
  }
  return pairs;
}

/// e2m1 pairs by cvt.rn.f16x2.e2m1x2 per byte: its low nibble is the low
/// half.
static SmallVector<ChannelPair> convertE2M1Pairs(KernelBuilder &kb,
                                                 Value word) {
  MLIRContext *context = kb.b.getContext();
  auto halfPair = VectorType::get({2}, kb.b.getF16Type());
  auto byteType = IntegerType::get(context, 8);
  SmallVector<ChannelPair> pairs;
  for (int64_t q = 0; q < 4; ++q) {
    Value byte = fieldOf(kb, word, 8 * q, byteType);
    Value halves = NVVM::ConvertF4x2ToF16x2Op::create(
        kb.b, kb.loc, Type(halfPair), byte, /*relu=*/false,
        Type(Float4E2M1FNType::get(context)));
    pairs.push_back({halves, 2 * q, 2 * q + 1});
  }
  return pairs;
}

SmallVector<ChannelPair> decodeWordPairs(KernelBuilder &kb, Encoding encoding,
                                         Value word) {
  SmallVector<ChannelPair> pairs;
  switch (encoding) {
  case Encoding::f16:
    pairs.push_back({f16PairOf(kb, word), 0, 1});
    return pairs;
  case Encoding::bf16: {
    Value pair = vector::BitCastOp::create(
        kb.b, kb.loc, VectorType::get({2}, kb.b.getBF16Type()),
        vector::BroadcastOp::create(
            kb.b, kb.loc, VectorType::get({1}, kb.b.getI32Type()), word));
    pairs.push_back({pair, 0, 1});
    return pairs;
  }
  case Encoding::f8e4m3:
    if (kb.hardwareFp8)
      return convertE4M3Pairs(kb, word);
    // Bytes q and q + 2 at once: magnitude bits to f16 bits [14:7], sign to
    // bit 15, then one f16x2 multiply by 2^(15 - 7).
    for (int64_t q = 0; q < 2; ++q)
      pairs.push_back(
          {minifloatPair(kb, word, 8 * q, 0x007F007F, 7, 0x00800080, 8, 256.0f),
           q, q + 2});
    return pairs;
  case Encoding::f8e5m2: {
    // e5m2 is the top byte of an f16: one prmt puts bytes q and q + 2 over
    // zero bytes (selector nibble 4 = a byte of the zero operand).
    Value zero = kb.i32(0);
    for (int64_t q = 0; q < 2; ++q) {
      Value selector = kb.i32(int32_t((q + 2) << 12 | 0x0404 | q << 4));
      Value bits =
          NVVM::PermuteOp::create(kb.b, kb.loc, kb.b.getI32Type(), word, zero,
                                  selector, NVVM::PermuteMode::DEFAULT);
      pairs.push_back({f16PairOf(kb, bits), q, q + 2});
    }
    return pairs;
  }
  case Encoding::nvfp4:
    if (kb.hardwareFp4)
      return convertE2M1Pairs(kb, word);
    // Nibbles p and p + 4 at once: magnitude to f16 bits [11:9], sign to
    // bit 15, times 2^(15 - 1) in f16x2 (0.5 included; left to the caller
    // under fp4Subnormal).
    for (int64_t p = 0; p < 4; ++p)
      pairs.push_back(
          {minifloatPair(kb, word, 4 * p, 0x00070007, 9, 0x00080008, 12,
                         kb.fp4Subnormal ? 1.0f : kFp4SubnormalScale),
           p, p + 4});
    return pairs;
  case Encoding::i8: {
    // Bytes q and q + 2 as 1024 + (b ^ 0x80), minus 1152: one lop3 keeps
    // the low byte of each half (of the word shifted down a byte for q =
    // 1), flips its top bit and sets the 0x64 exponent byte above it
    // (0x64806480 holds both). A prmt under 0x64646464 took its two
    // selectors from registers that ptxas refilled before every use.
    Value flipAndExponents = kb.i32(0x64806480);
    for (int64_t q = 0; q < 2; ++q) {
      Value source = q == 0 ? word : kb.shru(word, kb.i32(8));
      Value bits = kb.maskedXorElse(source, 0x00FF00FF, flipAndExponents);
      Value pair = arith::SubFOp::create(kb.b, kb.loc, f16PairOf(kb, bits),
                                         f16Splat(kb, 1152.0f));
      pairs.push_back({pair, q, q + 2});
    }
    return pairs;
  }
  case Encoding::i4: {
    // Nibbles p and p + 4. Even p: masked in place, 1024 + n, minus 1032.
    // Odd p: masked one nibble up, 1024 + 16 n, times 1/16 minus 72 in one
    // f16x2 fma (exact). One shift serves nibbles 2 and 3.
    Value upper = kb.shru(word, kb.i32(8));
    for (int64_t p = 0; p < 4; ++p) {
      Value source = p < 2 ? word : upper;
      if (p % 2 == 0) {
        pairs.push_back(
            {magicPair(kb, source, 0, 0x000F000F, 1032.0f), p, p + 4});
        continue;
      }
      Value bits = kb.maskThenOr(source, 0x00F000F0, kb.i32(0x64006400));
      Value sixteenths = f16Splat(kb, 1.0f / 16.0f);
      Value bias = f16Splat(kb, -72.0f);
      // llvm.intr.fma is one fma.rn.f16x2; math.fma would become two
      // libdevice fp32 calls and conversions.
      Value pair = kb.fma(f16PairOf(kb, bits), sixteenths, bias);
      pairs.push_back({pair, p, p + 4});
    }
    return pairs;
  }
  }
  llvm_unreachable("unknown encoding");
}

SmallVector<Value> decodeWordHalves(KernelBuilder &kb, Encoding encoding,
                                    Value word) {
  int64_t half = std::max<int64_t>(elementsPerWord(encoding) / 2, 1);
  // The chips' conversions pair adjacent elements: with them the word is
  // first permuted so that adjacent elements are j and j + n/2 (Codecs.h,
  // kHalvesByteOrder). cvt.rn.f16x2.e2m1x2's values are exact, so it
  // serves only callers that want them (not under fp4Subnormal).
  bool hardwareBytes = encoding == Encoding::f8e4m3 && kb.hardwareFp8;
  bool hardwareNibbles =
      encoding == Encoding::nvfp4 && kb.hardwareFp4 && !kb.fp4Subnormal;
  Value source = word;
  if (hardwareBytes || hardwareNibbles) {
    // (prmt's default mode takes two sources; the second is unused here.)
    Value selector = kb.i32(kHalvesByteOrder);
    source =
        NVVM::PermuteOp::create(kb.b, kb.loc, kb.b.getI32Type(), word, word,
                                selector, NVVM::PermuteMode::DEFAULT);
  }
  if (hardwareNibbles) {
    // Nibbles 1 and 2 of each half trade places: byte q = nibbles q, q + 4.
    Value down = kb.shru(source, kb.i32(4));
    Value differs = kb.xori(source, down);
    Value delta = kb.andi(differs, kb.i32(kMiddleNibbles));
    Value up = kb.shl(delta, kb.i32(4));
    source = kb.xori(kb.xori(source, delta), up);
  }
  bool savedFp4 = kb.hardwareFp4;
  kb.hardwareFp4 = hardwareNibbles;
  SmallVector<ChannelPair> pairs = decodeWordPairs(kb, encoding, source);
  kb.hardwareFp4 = savedFp4;
  SmallVector<Value> halves(half);
  for (const ChannelPair &pair : pairs) {
    // After the permutation, the adjacent pairs (0, 1), (2, 3), ... of
    // `source` are the elements (j, j + n/2) of `word`, j = low / 2.
    int64_t j = hardwareBytes || hardwareNibbles ? pair.low / 2 : pair.low;
    assert(j < half && "not a pair across halves");
    halves[j] = pair.pair;
  }
  return halves;
}

SmallVector<Value> decodeWord(KernelBuilder &kb, Encoding encoding,
                              Value word) {
  SmallVector<Value> values(elementsPerWord(encoding));
  if (encodingInfo(encoding).isPlainFloat()) {
    // Two 16-bit fields widened directly (no vector round trip).
    for (int64_t k = 0; k < 2; ++k) {
      Value bits =
          kb.andi(k ? kb.shru(word, kb.i32(16)) : word, kb.i32(0xFFFF));
      values[k] = encoding == Encoding::f16 ? kb.decodeF16Bits(bits)
                                            : kb.decodeBF16Bits(bits);
    }
    return values;
  }
  for (const ChannelPair &pair : decodeWordPairs(kb, encoding, word)) {
    values[pair.low] =
        kb.toF32(vector::ExtractOp::create(kb.b, kb.loc, pair.pair, 0));
    values[pair.high] =
        kb.toF32(vector::ExtractOp::create(kb.b, kb.loc, pair.pair, 1));
  }
  return values;
}

} // namespace pattn

Value pattn::e4m3BytePair(KernelBuilder &kb, Value low, Value high,
                          Value byte) {
  // One prmt puts byte `byte` of `low` and of `high` where the e4m3 pair
  // decoder reads its two halves (bytes 0 and 1 for cvt, 0 and 2 for the
  // bit trick); the scale x code products are exact in f16 (4 significant
  // bits). Both selectors are per thread: LLVM hoists them.
  Value highByte = kb.add(byte, kb.i32(4));
  int32_t highAt = kb.hardwareFp8 ? 4 : 8;
  Value selector = kb.ori(byte, kb.shl(highByte, kb.i32(highAt)));
  Value word =
      NVVM::PermuteOp::create(kb.b, kb.loc, kb.b.getI32Type(), low, high,
                              selector, NVVM::PermuteMode::DEFAULT);
  return decodeWordPairs(kb, Encoding::f8e4m3, word).front().pair;
}
