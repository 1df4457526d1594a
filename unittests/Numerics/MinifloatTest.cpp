//===- MinifloatTest.cpp - Tests of the scalar codecs -----------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the unit tests of the f16, bf16, e4m3fn, e5m2 and e2m1
// codecs. The domains are small, so every code is decoded and re-encoded and
// every midpoint between adjacent codes is probed; hand-picked values pin the
// constants, saturation and subnormal behaviour of each format.
//
//===----------------------------------------------------------------------===//

#include "pattn/Numerics/Numerics.h"

#include "gtest/gtest.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

using namespace pattn::numerics;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

template <typename Code> using Encoder = Code (*)(double);
template <typename Code> using Decoder = float (*)(Code);

/// Every code below `count` decodes to NaN exactly when `isNaN` says so, to
/// infinity exactly when `isInf` does, and otherwise survives decode-then-
/// encode. Infinities are not re-encoded: the saturating formats map them to
/// their largest finite code. Both signed zeros round-trip, since the
/// encoders keep the sign of zero as IEEE conversions do.
template <typename Code>
void expectRoundTrip(unsigned count, Encoder<Code> encode, Decoder<Code> decode,
                     bool (*isNaN)(unsigned), bool (*isInf)(unsigned)) {
  for (unsigned code = 0; code < count; ++code) {
    const float value = decode(Code(code));
    if (isNaN(code)) {
      ASSERT_TRUE(std::isnan(value)) << "code " << code;
      continue;
    }
    ASSERT_FALSE(std::isnan(value)) << "code " << code;
    if (isInf(code)) {
      ASSERT_TRUE(std::isinf(value)) << "code " << code;
      continue;
    }
    ASSERT_TRUE(std::isfinite(value)) << "code " << code;
    ASSERT_EQ(encode(value), Code(code)) << "code " << code << " = " << value;
  }
}

/// For every pair of adjacent non-negative finite codes (c, c + 1): the exact
/// midpoint goes to the even code, the doubles just beside it go to the
/// nearer code, and the negatives mirror this with the sign bit set.
template <typename Code>
void expectNearestEven(unsigned maxFinite, unsigned signBit,
                       Encoder<Code> encode, Decoder<Code> decode) {
  for (unsigned code = 0; code < maxFinite; ++code) {
    const double low = decode(Code(code));
    const double high = decode(Code(code + 1));
    ASSERT_LT(low, high) << "codes must be monotonic at " << code;
    const double midpoint = (low + high) / 2; // exact in double
    const Code even = Code(code % 2 == 0 ? code : code + 1);
    ASSERT_EQ(encode(midpoint), even) << "midpoint above code " << code;
    ASSERT_EQ(encode(-midpoint), Code(even | signBit));
    ASSERT_EQ(encode(std::nextafter(midpoint, 0.0)), Code(code));
    ASSERT_EQ(encode(std::nextafter(midpoint, kInf)), Code(code + 1));
    ASSERT_EQ(encode(-std::nextafter(midpoint, kInf)),
              Code((code + 1) | signBit));
  }
}

/// An independent decoder for the small formats, written from the
/// definition: (-1)^s * 2^(e - bias) * 1.m, or 2^(1 - bias) * 0.m.
double referenceDecode(unsigned code, int exponentBits, int mantissaBits,
                       int bias) {
  const unsigned mantissa = code & ((1u << mantissaBits) - 1);
  const unsigned exponent = (code >> mantissaBits) & ((1u << exponentBits) - 1);
  const double fraction = double(mantissa) / double(1u << mantissaBits);
  const double magnitude =
      exponent == 0 ? std::ldexp(fraction, 1 - bias)
                    : std::ldexp(1.0 + fraction, int(exponent) - bias);
  return (code >> (exponentBits + mantissaBits)) & 1 ? -magnitude : magnitude;
}

//===----------------------------------------------------------------------===//
// e4m3fn
//===----------------------------------------------------------------------===//

bool isE4M3NaN(unsigned code) { return (code & 0x7F) == 0x7F; }
bool isNever(unsigned) { return false; }

TEST(E4M3Test, AllBytesRoundTrip) {
  expectRoundTrip<uint8_t>(256, encodeE4M3, decodeE4M3, isE4M3NaN, isNever);
}

TEST(E4M3Test, AllBytesMatchTheDefinition) {
  for (unsigned code = 0; code < 256; ++code) {
    if (isE4M3NaN(code))
      continue;
    EXPECT_EQ(decodeE4M3(uint8_t(code)), referenceDecode(code, 4, 3, 7))
        << "code " << code;
  }
}

TEST(E4M3Test, KnownValues) {
  EXPECT_EQ(decodeE4M3(0x7E), 448.0f);
  EXPECT_EQ(decodeE4M3(0xFE), -448.0f);
  EXPECT_EQ(decodeE4M3(0x38), 1.0f);
  EXPECT_EQ(decodeE4M3(0x08), 0x1p-6f);   // smallest normal
  EXPECT_EQ(decodeE4M3(0x07), 0x1.cp-7f); // largest subnormal, 7 * 2^-9
  EXPECT_EQ(decodeE4M3(0x01), 0x1p-9f);   // smallest subnormal
  EXPECT_EQ(std::bit_cast<uint32_t>(decodeE4M3(0x80)),
            std::bit_cast<uint32_t>(-0.0f));
  EXPECT_EQ(encodeE4M3(-0.0), 0x80);
  EXPECT_EQ(encodeE4M3(0.0), 0x00);
}

TEST(E4M3Test, RoundsHalfToEven) {
  expectNearestEven<uint8_t>(0x7E, 0x80, encodeE4M3, decodeE4M3);
  // The two ties of the brief, spelled out: 1.0 is 0x38, 1.125 is 0x39.
  EXPECT_EQ(encodeE4M3(0x1.1p+0), 0x38);      // 1.0625 between 1.0 and 1.125
  EXPECT_EQ(encodeE4M3(0x1.3p+0), 0x3A);      // 1.1875 between 1.125 and 1.25
  EXPECT_EQ(encodeE4M3(0x1.100001p+0), 0x39); // just above the first tie
}

TEST(E4M3Test, Saturates) {
  EXPECT_EQ(encodeE4M3(464.0), 0x7E); // the tie between 448 and "480"
  EXPECT_EQ(encodeE4M3(480.0), 0x7E);
  EXPECT_EQ(encodeE4M3(1e6), 0x7E);
  EXPECT_EQ(encodeE4M3(-1e6), 0xFE);
  EXPECT_EQ(encodeE4M3(kInf), 0x7E);
  EXPECT_EQ(encodeE4M3(-kInf), 0xFE);
  EXPECT_EQ(encodeE4M3(std::numeric_limits<double>::max()), 0x7E);
  EXPECT_EQ(encodeE4M3(kNaN), 0x7F);
  EXPECT_EQ(encodeE4M3(-kNaN), 0x7F);
}

TEST(E4M3Test, RoundsSubnormals) {
  EXPECT_EQ(encodeE4M3(0x1p-10), 0x00);   // half the smallest: tie to 0
  EXPECT_EQ(encodeE4M3(0x1.8p-10), 0x01); // three quarters of it
  EXPECT_EQ(encodeE4M3(0x1.8p-9), 0x02);  // 1.5 quanta: tie to 2
  EXPECT_EQ(encodeE4M3(0x1.4p-8), 0x02);  // 2.5 quanta: tie to 2
  EXPECT_EQ(encodeE4M3(0x1.ep-7), 0x08);  // 7.5 quanta: up to the normal
  EXPECT_EQ(encodeE4M3(-0x1p-12), 0x80);  // underflow keeps the sign
  EXPECT_EQ(encodeE4M3(std::numeric_limits<double>::denorm_min()), 0x00);
}

//===----------------------------------------------------------------------===//
// e5m2
//===----------------------------------------------------------------------===//

bool isE5M2NaN(unsigned code) { return (code & 0x7F) > 0x7C; }
bool isE5M2Inf(unsigned code) { return (code & 0x7F) == 0x7C; }

TEST(E5M2Test, AllBytesRoundTrip) {
  expectRoundTrip<uint8_t>(256, encodeE5M2, decodeE5M2, isE5M2NaN, isE5M2Inf);
}

TEST(E5M2Test, AllBytesMatchTheDefinition) {
  for (unsigned code = 0; code < 256; ++code) {
    if (isE5M2NaN(code) || isE5M2Inf(code))
      continue;
    EXPECT_EQ(decodeE5M2(uint8_t(code)), referenceDecode(code, 5, 2, 15))
        << "code " << code;
  }
}

TEST(E5M2Test, KnownValues) {
  EXPECT_EQ(decodeE5M2(0x7B), 57344.0f);
  EXPECT_EQ(decodeE5M2(0x7C), std::numeric_limits<float>::infinity());
  EXPECT_EQ(decodeE5M2(0xFC), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(decodeE5M2(0x3C), 1.0f);
  EXPECT_EQ(decodeE5M2(0x04), 0x1p-14f); // smallest normal
  EXPECT_EQ(decodeE5M2(0x01), 0x1p-16f); // smallest subnormal
  EXPECT_EQ(encodeE5M2(-0.0), 0x80);
}

TEST(E5M2Test, RoundsHalfToEven) {
  expectNearestEven<uint8_t>(0x7B, 0x80, encodeE5M2, decodeE5M2);
  EXPECT_EQ(encodeE5M2(0x1.2p+0), 0x3C); // 1.125 between 1.0 and 1.25
  EXPECT_EQ(encodeE5M2(0x1.6p+0), 0x3E); // 1.375 between 1.25 and 1.5
}

TEST(E5M2Test, Saturates) {
  EXPECT_EQ(encodeE5M2(61440.0), 0x7B); // max + half an ulp
  EXPECT_EQ(encodeE5M2(1e9), 0x7B);
  EXPECT_EQ(encodeE5M2(-1e9), 0xFB);
  EXPECT_EQ(encodeE5M2(kInf), 0x7B);
  EXPECT_EQ(encodeE5M2(-kInf), 0xFB);
  EXPECT_EQ(encodeE5M2(kNaN), 0x7F);
}

TEST(E5M2Test, RoundsSubnormals) {
  EXPECT_EQ(encodeE5M2(0x1p-17), 0x00);   // tie to 0
  EXPECT_EQ(encodeE5M2(0x1.8p-16), 0x02); // 1.5 quanta: tie to 2
  EXPECT_EQ(encodeE5M2(0x1.cp-15), 0x04); // 3.5 quanta: up to the normal
}

//===----------------------------------------------------------------------===//
// e2m1
//===----------------------------------------------------------------------===//

TEST(E2M1Test, AllCodesDecode) {
  constexpr float kMagnitudes[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (unsigned code = 0; code < 16; ++code) {
    const float expected =
        code & 8 ? -kMagnitudes[code & 7] : kMagnitudes[code & 7];
    EXPECT_EQ(decodeE2M1(uint8_t(code)), expected) << "code " << code;
    EXPECT_EQ(decodeE2M1(uint8_t(code)), referenceDecode(code, 2, 1, 1));
    // Only the low nibble is read, so a packed byte can be passed as is.
    EXPECT_EQ(decodeE2M1(uint8_t(code | 0xA0)), expected);
  }
}

TEST(E2M1Test, AllCodesRoundTrip) {
  expectRoundTrip<uint8_t>(16, encodeE2M1, decodeE2M1, isNever, isNever);
}

TEST(E2M1Test, RoundsHalfToEven) {
  expectNearestEven<uint8_t>(7, 8, encodeE2M1, decodeE2M1);
  const std::pair<double, float> kTies[] = {
      {0.25, 0}, {0.75, 1}, {1.25, 1}, {1.75, 2}, {2.5, 2}, {3.5, 4}, {5.0, 4},
  };
  for (auto [input, expected] : kTies) {
    EXPECT_EQ(decodeE2M1(encodeE2M1(input)), expected) << input;
    EXPECT_EQ(decodeE2M1(encodeE2M1(-input)), -expected) << -input;
  }
}

TEST(E2M1Test, Saturates) {
  EXPECT_EQ(encodeE2M1(7.0), 0x7);
  EXPECT_EQ(encodeE2M1(-7.0), 0xF);
  EXPECT_EQ(encodeE2M1(1e30), 0x7);
  EXPECT_EQ(encodeE2M1(kInf), 0x7);
  EXPECT_EQ(encodeE2M1(-kInf), 0xF);
  EXPECT_EQ(encodeE2M1(kNaN), 0x0); // no NaN in e2m1; documented as +0
}

//===----------------------------------------------------------------------===//
// f16
//===----------------------------------------------------------------------===//

bool isF16NaN(unsigned bits) {
  return (bits & 0x7C00) == 0x7C00 && (bits & 0x3FF) != 0;
}
bool isF16Inf(unsigned bits) { return (bits & 0x7FFF) == 0x7C00; }

TEST(F16Test, AllBitPatternsRoundTrip) {
  expectRoundTrip<uint16_t>(1u << 16, encodeF16, decodeF16, isF16NaN, isF16Inf);
  // The infinity codes still decode to infinities, but nothing encodes to
  // them: a cache saturates (SPEC §2).
  EXPECT_EQ(encodeF16(kInf), 0x7BFF);
  EXPECT_EQ(encodeF16(-kInf), 0xFBFF);
}

TEST(F16Test, RoundsHalfToEven) {
  expectNearestEven<uint16_t>(0x7BFF, 0x8000, encodeF16, decodeF16);
}

TEST(F16Test, KnownValues) {
  EXPECT_EQ(encodeF16(1.0), 0x3C00);
  EXPECT_EQ(encodeF16(-2.0), 0xC000);
  EXPECT_EQ(encodeF16(65504.0), 0x7BFF);
  EXPECT_EQ(encodeF16(0x1p-14), 0x0400); // smallest normal
  EXPECT_EQ(encodeF16(kNaN), 0x7E00);
  EXPECT_TRUE(std::isnan(decodeF16(0x7E00)));
  EXPECT_TRUE(std::isnan(decodeF16(0xFC01)));
}

TEST(F16Test, SaturatesBeyondTheLargestFinite) {
  // 65520 = 65504 + half an ulp: a tie whose even neighbour is 2^16, where an
  // IEEE conversion overflows to infinity; pattn keeps the largest finite.
  EXPECT_EQ(encodeF16(65520.0), 0x7BFF);
  EXPECT_EQ(encodeF16(-65520.0), 0xFBFF);
  EXPECT_EQ(encodeF16(65519.99), 0x7BFF);
  EXPECT_EQ(encodeF16(std::nextafter(65520.0, 0.0)), 0x7BFF);
  EXPECT_EQ(encodeF16(1e10), 0x7BFF);
  EXPECT_EQ(encodeF16(-1e30), 0xFBFF);
  EXPECT_EQ(encodeF16(std::numeric_limits<double>::max()), 0x7BFF);
}

TEST(F16Test, Subnormals) {
  EXPECT_EQ(encodeF16(0x1p-24), 0x0001); // exact
  EXPECT_EQ(encodeF16(0x1p-25), 0x0000); // tie to even zero
  EXPECT_EQ(encodeF16(-0x1p-25), 0x8000);
  EXPECT_EQ(encodeF16(0x1.8p-25), 0x0001);    // 3 * 2^-26
  EXPECT_EQ(encodeF16(0x1.8p-24), 0x0002);    // 1.5 quanta: tie to 2
  EXPECT_EQ(decodeF16(0x03FF), 0x1.ff8p-15f); // largest subnormal
}

TEST(F16Test, RoundsOnceFromDouble) {
  // 1 + 2^-11 + 2^-40 is above the tie between 0x3C00 and 0x3C01; rounding
  // it to fp32 first would land on the tie and then on 0x3C00.
  const double x = 1.0 + 0x1p-11 + 0x1p-40;
  EXPECT_EQ(encodeF16(x), 0x3C01);
  EXPECT_EQ(encodeF16(float(x)), 0x3C00);
}

#ifdef __FLT16_MAX__
// Where the compiler has a native binary16, it is an independent oracle for
// every value inside the finite range (beyond it, IEEE overflows to infinity
// and pattn saturates: see SaturatesBeyondTheLargestFinite).
TEST(F16Test, MatchesNativeFloat16) {
  for (unsigned bits = 0; bits < (1u << 16); ++bits) {
    const auto native = std::bit_cast<_Float16>(uint16_t(bits));
    if (isF16NaN(bits))
      continue;
    ASSERT_EQ(decodeF16(uint16_t(bits)), float(native)) << bits;
  }
  std::mt19937_64 random(16);
  std::uniform_real_distribution<double> exponent(-30.0, 17.0);
  for (int i = 0; i < 200000; ++i) {
    const double x = std::exp2(exponent(random)) * (i % 2 ? -1 : 1);
    const auto native = _Float16(x);
    if (std::isinf(float(native))) {
      ASSERT_EQ(encodeF16(x), std::signbit(x) ? 0xFBFF : 0x7BFF) << x;
      continue;
    }
    ASSERT_EQ(encodeF16(x), std::bit_cast<uint16_t>(native)) << x;
  }
}
#endif

//===----------------------------------------------------------------------===//
// bf16
//===----------------------------------------------------------------------===//

bool isBF16NaN(unsigned bits) {
  return (bits & 0x7F80) == 0x7F80 && (bits & 0x7F) != 0;
}
bool isBF16Inf(unsigned bits) { return (bits & 0x7FFF) == 0x7F80; }

/// bf16 is the top half of an fp32, and RNE from fp32 is the classic
/// add-and-truncate; both serve as independent oracles. Where that carries
/// into the infinity exponent, pattn saturates to the largest finite code.
uint16_t referenceBF16(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const auto code = uint16_t((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
  return isBF16Inf(code) ? uint16_t((code & 0x8000) | 0x7F7F) : code;
}

TEST(BF16Test, AllBitPatternsRoundTrip) {
  expectRoundTrip<uint16_t>(1u << 16, encodeBF16, decodeBF16, isBF16NaN,
                            isBF16Inf);
}

TEST(BF16Test, AllBitPatternsAreTheTopHalfOfAnFp32) {
  for (unsigned bits = 0; bits < (1u << 16); ++bits) {
    if (isBF16NaN(bits))
      continue;
    ASSERT_EQ(decodeBF16(uint16_t(bits)), std::bit_cast<float>(bits << 16))
        << bits;
  }
}

TEST(BF16Test, RoundsHalfToEven) {
  expectNearestEven<uint16_t>(0x7F7F, 0x8000, encodeBF16, decodeBF16);
  std::mt19937 random(1607);
  for (int i = 0; i < 200000; ++i) {
    const float x = std::bit_cast<float>(uint32_t(random()));
    if (std::isnan(x))
      continue;
    ASSERT_EQ(encodeBF16(x), referenceBF16(x)) << x;
  }
}

TEST(BF16Test, KnownValues) {
  EXPECT_EQ(encodeBF16(1.0), 0x3F80);
  EXPECT_EQ(encodeBF16(-2.0), 0xC000);
  EXPECT_EQ(encodeBF16(0x1.fep+127), 0x7F7F); // largest finite
  EXPECT_EQ(encodeBF16(0x1.ffp+127), 0x7F7F); // max + half an ulp saturates
  EXPECT_EQ(encodeBF16(-0x1p+200), 0xFF7F);
  EXPECT_EQ(encodeBF16(0x1.fefffp+127), 0x7F7F);
  EXPECT_EQ(encodeBF16(kInf), 0x7F7F);
  EXPECT_EQ(encodeBF16(-kInf), 0xFF7F);
  EXPECT_EQ(encodeBF16(kNaN), 0x7FC0);
  EXPECT_EQ(encodeBF16(0x1p-133), 0x0001); // smallest subnormal
  EXPECT_EQ(encodeBF16(0x1p-134), 0x0000); // tie to even zero
  EXPECT_EQ(encodeBF16(0x1.8p-134), 0x0001);
  EXPECT_EQ(encodeBF16(0x1.02p+0), 0x3F81); // 1 + 2^-7, exact
  EXPECT_EQ(encodeBF16(0x1.01p+0), 0x3F80); // tie to even
  EXPECT_EQ(encodeBF16(0x1.03p+0), 0x3F82); // tie to even, upwards
}

TEST(BF16Test, RoundsOnceFromDouble) {
  const double x = 1.0 + 0x1p-8 + 0x1p-40; // just above a tie
  EXPECT_EQ(encodeBF16(x), 0x3F81);
  EXPECT_EQ(encodeBF16(float(x)), 0x3F80);
}

} // namespace
