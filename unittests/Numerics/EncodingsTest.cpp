//===- EncodingsTest.cpp - Tests of the row encodings -----------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the unit tests of the element quantizers and row
// codecs of SPEC §2: names and sizes, all 16 int4 codes and their packing,
// i8 and fp8 rows with their scale checks, and nvfp4 groups checked against
// bytes computed by hand.
//
//===----------------------------------------------------------------------===//

#include "pattn/Numerics/Numerics.h"

#include "gtest/gtest.h"

#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

using namespace pattn::numerics;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

/// Poison for output buffers: a call that fails must leave it in place.
constexpr uint8_t kPoison = 0xAB;

constexpr std::array kAllEncodings = {
    Encoding::F16,    Encoding::BF16, Encoding::I8,   Encoding::F8E4M3,
    Encoding::F8E5M2, Encoding::I4,   Encoding::NVFP4};

//===----------------------------------------------------------------------===//
// Names and sizes
//===----------------------------------------------------------------------===//

TEST(EncodingNamesTest, RoundTrip) {
  const std::string_view kNames[] = {"f16",    "bf16", "i8",   "f8e4m3",
                                     "f8e5m2", "i4",   "nvfp4"};
  for (size_t i = 0; i < kAllEncodings.size(); ++i) {
    EXPECT_EQ(stringifyEncoding(kAllEncodings[i]), kNames[i]);
    EXPECT_EQ(parseEncoding(kNames[i]), kAllEncodings[i]);
  }
  EXPECT_EQ(parseEncoding("F16"), std::nullopt);
  EXPECT_EQ(parseEncoding("fp8"), std::nullopt);
  EXPECT_EQ(parseEncoding(""), std::nullopt);
}

TEST(EncodingNamesTest, StatusNames) {
  EXPECT_EQ(stringifyStatus(Status::Ok), "ok");
  EXPECT_EQ(stringifyStatus(Status::NonFiniteInput), "non-finite input");
  EXPECT_EQ(stringifyStatus(Status::NonFiniteScale), "non-finite scale");
  EXPECT_EQ(stringifyStatus(Status::BadSize), "bad size");
}

TEST(RowBytesTest, EveryEncodingAtTheXqaHeadDims) {
  for (int64_t headDim : {64, 128, 256}) {
    EXPECT_EQ(rowBytes(Encoding::F16, headDim), 2 * headDim);
    EXPECT_EQ(rowBytes(Encoding::BF16, headDim), 2 * headDim);
    EXPECT_EQ(rowBytes(Encoding::I8, headDim), headDim);
    EXPECT_EQ(rowBytes(Encoding::F8E4M3, headDim), headDim);
    EXPECT_EQ(rowBytes(Encoding::F8E5M2, headDim), headDim);
    EXPECT_EQ(rowBytes(Encoding::I4, headDim), headDim / 2);
    EXPECT_EQ(rowBytes(Encoding::NVFP4, headDim), headDim / 2);
  }
}

TEST(RowBytesTest, OddInt4RowsRoundUp) {
  EXPECT_EQ(rowBytes(Encoding::I4, 0), 0);
  EXPECT_EQ(rowBytes(Encoding::I4, 1), 1);
  EXPECT_EQ(rowBytes(Encoding::I4, 7), 4);
  EXPECT_EQ(rowBytes(Encoding::I4, 8), 4);
  EXPECT_EQ(rowBytes(Encoding::I4, 129), 65);
}

TEST(RowBytesTest, MaxCodeMagnitudes) {
  EXPECT_EQ(maxCodeMagnitude(Encoding::F16), 0.0f);
  EXPECT_EQ(maxCodeMagnitude(Encoding::BF16), 0.0f);
  EXPECT_EQ(maxCodeMagnitude(Encoding::I8), 127.0f);
  EXPECT_EQ(maxCodeMagnitude(Encoding::I4), 7.0f);
  EXPECT_EQ(maxCodeMagnitude(Encoding::F8E4M3), 448.0f);
  EXPECT_EQ(maxCodeMagnitude(Encoding::F8E5M2), 57344.0f);
  EXPECT_EQ(maxCodeMagnitude(Encoding::NVFP4), 2688.0f);
}

//===----------------------------------------------------------------------===//
// int4
//===----------------------------------------------------------------------===//

TEST(I4Test, AllCodesAtSeveralScales) {
  for (float scale : {1.0f, 0.5f, 0.1f, 3.0f, 0x1p-20f, 1e3f})
    for (int code = -8; code <= 7; ++code)
      EXPECT_EQ(quantizeI4(float(code) * scale, scale), code)
          << "code " << code << " scale " << scale;
}

TEST(I4Test, ClampsAndRoundsHalfToEven) {
  const std::pair<float, int> kCases[] = {
      {-9, -8},  {8, 7},      {100, 7},  {-100, -8},  {0.5f, 0}, {-0.5f, 0},
      {1.5f, 2}, {-1.5f, -2}, {2.5f, 2}, {-2.5f, -2}, {7.5f, 7}, {-8.5f, -8},
  };
  for (auto [x, code] : kCases)
    EXPECT_EQ(quantizeI4(x, 1.0f), code) << x;
  EXPECT_EQ(quantizeI4(5.0f, 0.0f), 0);
  EXPECT_EQ(quantizeI4(1.0f, 0x1p-149f), 7); // x / s overflows to inf
}

TEST(I4Test, PacksLowNibbleFirstWithBias) {
  // -9..8 at scale 1: the ends clamp, the rest are exact. Biased nibbles are
  // 0 0 1 2 ... 15 15, paired low-first.
  std::vector<float> x;
  for (int v = -9; v <= 8; ++v)
    x.push_back(float(v));
  const std::vector<uint8_t> expected = {0x00, 0x21, 0x43, 0x65, 0x87,
                                         0xA9, 0xCB, 0xED, 0xFF};
  std::vector<uint8_t> row(expected.size(), kPoison);
  ASSERT_EQ(encodeRow(Encoding::I4, x, {{1.0f}}, row), Status::Ok);
  EXPECT_EQ(row, expected);

  std::vector<int8_t> codes(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    codes[i] = quantizeI4(x[i], 1.0f);
  std::vector<uint8_t> packed(expected.size(), kPoison);
  packI4(codes, packed);
  EXPECT_EQ(packed, expected);
}

TEST(I4Test, PacksTies) {
  // Codes 0 0 2 -2 2 -2, biased 8 8 10 6 10 6.
  const std::vector<float> x = {0.5f, -0.5f, 1.5f, -1.5f, 2.5f, -2.5f};
  std::vector<uint8_t> row(3, kPoison);
  ASSERT_EQ(encodeRow(Encoding::I4, x, {{1.0f}}, row), Status::Ok);
  EXPECT_EQ(row, (std::vector<uint8_t>{0x88, 0x6A, 0x6A}));
}

TEST(I4Test, OddCountPadsWithBiasedZero) {
  const std::vector<float> x = {1, 2, 3};
  std::vector<uint8_t> row(2, kPoison);
  ASSERT_EQ(encodeRow(Encoding::I4, x, {{1.0f}}, row), Status::Ok);
  EXPECT_EQ(row, (std::vector<uint8_t>{0xA9, 0x8B}));

  const int8_t codes[] = {-8};
  uint8_t packed[1] = {kPoison};
  packI4(codes, packed);
  EXPECT_EQ(packed[0], 0x80);
}

TEST(I4Test, EmptyPageByteIsTwoZeros) {
  EXPECT_EQ(kEmptyI4Byte, 0x88);
  const int8_t zeros[] = {0, 0};
  uint8_t packed[1] = {kPoison};
  packI4(zeros, packed);
  EXPECT_EQ(packed[0], kEmptyI4Byte);

  const uint8_t page[] = {kEmptyI4Byte, kEmptyI4Byte};
  float x[4] = {1, 1, 1, 1};
  ASSERT_EQ(decodeRow(Encoding::I4, page, {{2.0f}}, x), Status::Ok);
  for (float v : x)
    EXPECT_EQ(v, 0.0f);
}

TEST(I4Test, UnpackInvertsPackForEveryByte) {
  for (unsigned byte = 0; byte < 256; ++byte) {
    const uint8_t packed[] = {uint8_t(byte)};
    int8_t codes[2];
    unpackI4(packed, codes);
    EXPECT_EQ(codes[0], int(byte & 0xF) - 8);
    EXPECT_EQ(codes[1], int(byte >> 4) - 8);
    uint8_t repacked[1];
    packI4(codes, repacked);
    EXPECT_EQ(repacked[0], byte);
  }
}

TEST(I4Test, RowRoundTrip) {
  std::vector<float> x(16);
  for (int code = -8; code <= 7; ++code)
    x[code + 8] = float(code) * 0.25f;
  std::vector<uint8_t> row(8);
  ASSERT_EQ(encodeRow(Encoding::I4, x, {{0.25f}}, row), Status::Ok);
  std::vector<float> y(16, kNaN);
  ASSERT_EQ(decodeRow(Encoding::I4, row, {{0.25f}}, y), Status::Ok);
  EXPECT_EQ(y, x);
}

//===----------------------------------------------------------------------===//
// i8
//===----------------------------------------------------------------------===//

TEST(I8Test, ClampsAndRoundsHalfToEven) {
  EXPECT_EQ(quantizeI8(1000.0f, 1.0f), 127);
  EXPECT_EQ(quantizeI8(-1000.0f, 1.0f), -128);
  EXPECT_EQ(quantizeI8(127.5f, 1.0f), 127);
  EXPECT_EQ(quantizeI8(-128.5f, 1.0f), -128);
  EXPECT_EQ(quantizeI8(0.5f, 1.0f), 0);
  EXPECT_EQ(quantizeI8(-0.5f, 1.0f), 0);
  EXPECT_EQ(quantizeI8(1.5f, 1.0f), 2);
  EXPECT_EQ(quantizeI8(2.5f, 1.0f), 2);
  EXPECT_EQ(quantizeI8(-2.5f, 1.0f), -2);
  EXPECT_EQ(quantizeI8(0x1.000002p-1f, 1.0f), 1); // just above a tie
  EXPECT_EQ(quantizeI8(3.0f, 0.5f), 6);
}

TEST(I8Test, ZeroScaleGivesZero) {
  EXPECT_EQ(quantizeI8(1e30f, 0.0f), 0);
  EXPECT_EQ(quantizeI8(-5.0f, 0.0f), 0);
}

TEST(I8Test, QuotientIsRoundedToFp32First) {
  // The exact quotient is just below 1.5, but x / s in fp32 is exactly 1.5,
  // which SPEC §2 rounds to even: 2, where exact arithmetic would give 1.
  const float x = 0x1.800008p+0f, s = 0x1.000006p+0f;
  ASSERT_LT(double(x) / double(s), 1.5);
  ASSERT_EQ(x / s, 1.5f);
  EXPECT_EQ(quantizeI8(x, s), 2);
}

TEST(I8Test, RowWithChannelScales) {
  const std::vector<float> x = {1.0f, -2.0f, 3.0f, 100.0f};
  const std::vector<float> scales = {0.5f, 0.25f, 1.0f, 0.5f};
  std::vector<uint8_t> row(4, kPoison);
  ASSERT_EQ(encodeRow(Encoding::I8, x, scales, row), Status::Ok);
  EXPECT_EQ(row, (std::vector<uint8_t>{2, uint8_t(-8), 3, 127}));

  std::vector<float> y(4, kNaN);
  ASSERT_EQ(decodeRow(Encoding::I8, row, scales, y), Status::Ok);
  EXPECT_EQ(y, (std::vector<float>{1.0f, -2.0f, 3.0f, 63.5f}));
}

TEST(I8Test, RowWithOneScale) {
  const std::vector<float> x = {-1.0f, 0.0f, 0.25f, 1.0f};
  const float scale = tokenScale(Encoding::I8, x);
  EXPECT_EQ(scale, 1.0f / 127.0f);
  std::vector<uint8_t> row(4, kPoison);
  ASSERT_EQ(encodeRow(Encoding::I8, x, {{scale}}, row), Status::Ok);
  EXPECT_EQ(row, (std::vector<uint8_t>{uint8_t(-127), 0, 32, 127}));
}

//===----------------------------------------------------------------------===//
// Row validation
//===----------------------------------------------------------------------===//

/// Runs encodeRow on a poisoned row and checks the status and that the row
/// is untouched unless the call succeeded.
Status encodePoisoned(Encoding encoding, std::span<const float> x,
                      std::span<const float> scales, size_t bytes) {
  std::vector<uint8_t> row(bytes, kPoison);
  const Status status = encodeRow(encoding, x, scales, row);
  if (status != Status::Ok) {
    for (uint8_t byte : row)
      EXPECT_EQ(byte, kPoison) << "a rejected row was written";
  }
  return status;
}

TEST(RowValidationTest, NonFiniteInputWritesNothing) {
  for (Encoding encoding : kAllEncodings) {
    if (encoding == Encoding::NVFP4)
      continue;
    const size_t bytes = size_t(rowBytes(encoding, 4));
    for (float bad : {kNaN, kInf, -kInf}) {
      const std::vector<float> x = {1.0f, 2.0f, bad, 3.0f};
      EXPECT_EQ(encodePoisoned(encoding, x, {{1.0f}}, bytes),
                Status::NonFiniteInput)
          << stringifyEncoding(encoding);
    }
  }
}

TEST(RowValidationTest, BadScaleWritesNothing) {
  const std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f};
  for (Encoding encoding :
       {Encoding::I8, Encoding::F8E4M3, Encoding::F8E5M2, Encoding::I4}) {
    const size_t bytes = size_t(rowBytes(encoding, 4));
    for (float bad : {kNaN, kInf, -1.0f}) {
      EXPECT_EQ(encodePoisoned(encoding, x, {{bad}}, bytes),
                Status::NonFiniteScale);
      const std::vector<float> channel = {1.0f, bad, 1.0f, 1.0f};
      EXPECT_EQ(encodePoisoned(encoding, x, channel, bytes),
                Status::NonFiniteScale);
    }
    // -0 is not negative, and a zero scale is legal (it gives code 0).
    EXPECT_EQ(encodePoisoned(encoding, x, {{-0.0f}}, bytes), Status::Ok);
  }
}

TEST(RowValidationTest, InputErrorsOutrankScaleErrors) {
  const std::vector<float> x = {kNaN, 1.0f};
  EXPECT_EQ(encodePoisoned(Encoding::I8, x, {{kNaN}}, 2),
            Status::NonFiniteInput);
}

TEST(RowValidationTest, BadSizes) {
  const std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f};
  EXPECT_EQ(encodePoisoned(Encoding::I8, x, {{1.0f}}, 3), Status::BadSize);
  EXPECT_EQ(encodePoisoned(Encoding::F16, x, {}, 4), Status::BadSize);
  EXPECT_EQ(encodePoisoned(Encoding::I4, x, {{1.0f}}, 3), Status::BadSize);
  EXPECT_EQ(encodePoisoned(Encoding::I8, x, {}, 4), Status::BadSize);
  const std::vector<float> twoScales = {1.0f, 1.0f};
  EXPECT_EQ(encodePoisoned(Encoding::I8, x, twoScales, 4), Status::BadSize);
  // nvfp4 rows have their own routine.
  EXPECT_EQ(encodePoisoned(Encoding::NVFP4, x, {{1.0f}}, 2), Status::BadSize);
  // A size error wins over a bad input.
  const std::vector<float> bad = {kNaN, 1.0f};
  EXPECT_EQ(encodePoisoned(Encoding::I8, bad, {{1.0f}}, 3), Status::BadSize);
}

TEST(RowValidationTest, DecodeRejectsBadScalesAndSizes) {
  const std::vector<uint8_t> row = {1, 2, 3, 4};
  std::vector<float> x(4, 7.0f);
  EXPECT_EQ(decodeRow(Encoding::I8, row, {{kNaN}}, x), Status::NonFiniteScale);
  EXPECT_EQ(decodeRow(Encoding::I8, row, {{-1.0f}}, x), Status::NonFiniteScale);
  EXPECT_EQ(decodeRow(Encoding::F16, row, {}, x), Status::BadSize);
  EXPECT_EQ(decodeRow(Encoding::NVFP4, row, {{1.0f}}, x), Status::BadSize);
  for (float v : x)
    EXPECT_EQ(v, 7.0f);
}

//===----------------------------------------------------------------------===//
// f16, bf16 and fp8 rows
//===----------------------------------------------------------------------===//

TEST(FloatRowTest, LittleEndianTwoBytesPerElement) {
  const std::vector<float> x = {1.0f, -2.0f, 0x1.004p+0f};
  std::vector<uint8_t> row(6, kPoison);
  ASSERT_EQ(encodeRow(Encoding::F16, x, {}, row), Status::Ok);
  EXPECT_EQ(row, (std::vector<uint8_t>{0x00, 0x3C, 0x00, 0xC0, 0x01, 0x3C}));
  ASSERT_EQ(encodeRow(Encoding::BF16, x, {}, row), Status::Ok);
  // 1 + 2^-10 is below bf16's half ulp, so it rounds to 1.0.
  EXPECT_EQ(row, (std::vector<uint8_t>{0x80, 0x3F, 0x00, 0xC0, 0x80, 0x3F}));

  std::vector<float> y(3, kNaN);
  ASSERT_EQ(decodeRow(Encoding::BF16, row, {}, y), Status::Ok);
  EXPECT_EQ(y, (std::vector<float>{1.0f, -2.0f, 1.0f}));
}

TEST(FloatRowTest, F16RowRoundsOnceAndSaturates) {
  // 65520 rounds past the largest finite value: the cache stores 65504
  // (SPEC §2), not an infinity that would make every later attention NaN.
  const std::vector<float> x = {65520.0f, 0x1p-25f, 0x1.8p-25f, -1e30f};
  std::vector<uint8_t> row(8);
  ASSERT_EQ(encodeRow(Encoding::F16, x, {}, row), Status::Ok);
  EXPECT_EQ(row, (std::vector<uint8_t>{0xFF, 0x7B, 0x00, 0x00, 0x01, 0x00, 0xFF,
                                       0xFB}));
}

TEST(FloatRowTest, BF16RowSaturates) {
  const std::vector<float> x = {3.4e38f, -3.4e38f};
  std::vector<uint8_t> row(4);
  ASSERT_EQ(encodeRow(Encoding::BF16, x, {}, row), Status::Ok);
  EXPECT_EQ(row, (std::vector<uint8_t>{0x7F, 0x7F, 0x7F, 0xFF}));
  EXPECT_EQ(encodeBF16(1e39), 0x7F7F);
  EXPECT_EQ(encodeF16(-std::numeric_limits<double>::infinity()), 0xFBFF);
}

TEST(Fp8Test, QuantizersSaturateAndHonourZeroScale) {
  EXPECT_EQ(quantizeE4M3(1e30f, 1.0f), 0x7E);
  EXPECT_EQ(quantizeE4M3(-1e30f, 1.0f), 0xFE);
  EXPECT_EQ(quantizeE4M3(1.0f, 0x1p-149f), 0x7E); // quotient overflows
  EXPECT_EQ(quantizeE4M3(5.0f, 0.0f), 0x00);
  EXPECT_EQ(quantizeE5M2(1e30f, 1.0f), 0x7B);
  EXPECT_EQ(quantizeE5M2(5.0f, 0.0f), 0x00);
  EXPECT_EQ(quantizeE4M3(896.0f, 2.0f), 0x7E);
  EXPECT_EQ(quantizeE5M2(-114688.0f, 2.0f), 0xFB);
}

TEST(Fp8Test, QuotientIsRoundedToFp32First) {
  // x / s in fp32 is the tie 1.0625 (to 1.0); the exact quotient is above it.
  const float x = 0x1.100014p+0f, s = 0x1.000012p+0f;
  ASSERT_GT(double(x) / double(s), 1.0625);
  ASSERT_EQ(x / s, 1.0625f);
  EXPECT_EQ(quantizeE4M3(x, s), 0x38);
}

TEST(Fp8Test, EveryCodeRoundTripsThroughAScaledRow) {
  for (Encoding encoding : {Encoding::F8E4M3, Encoding::F8E5M2}) {
    std::vector<uint8_t> codes;
    for (unsigned code = 0; code < 256; ++code) {
      const float v = encoding == Encoding::F8E4M3 ? decodeE4M3(uint8_t(code))
                                                   : decodeE5M2(uint8_t(code));
      if (std::isfinite(v))
        codes.push_back(uint8_t(code));
    }
    // A power-of-two scale keeps x = code * s exact, so x / s is the code.
    const float scale = 0x1p-3f;
    std::vector<float> x(codes.size());
    ASSERT_EQ(decodeRow(encoding, codes, {{scale}}, x), Status::Ok);
    std::vector<uint8_t> row(codes.size());
    ASSERT_EQ(encodeRow(encoding, x, {{scale}}, row), Status::Ok);
    EXPECT_EQ(row, codes) << stringifyEncoding(encoding);
  }
}

TEST(TokenScaleTest, AmaxOverMaxCode) {
  const std::vector<float> x = {0.5f, -3.0f, 2.0f};
  EXPECT_EQ(tokenScale(Encoding::F16, x), 0.0f);
  EXPECT_EQ(tokenScale(Encoding::BF16, x), 0.0f);
  EXPECT_EQ(tokenScale(Encoding::I8, x), 3.0f / 127.0f);
  EXPECT_EQ(tokenScale(Encoding::I4, x), 3.0f / 7.0f);
  EXPECT_EQ(tokenScale(Encoding::F8E4M3, x), 3.0f / 448.0f);
  EXPECT_EQ(tokenScale(Encoding::F8E5M2, x), 3.0f / 57344.0f);
  EXPECT_EQ(tokenScale(Encoding::NVFP4, x), 3.0f / 2688.0f);
  const std::vector<float> zeros(8, 0.0f);
  EXPECT_EQ(tokenScale(Encoding::I8, zeros), 0.0f);
  EXPECT_EQ(tokenScale(Encoding::I8, {}), 0.0f);
}

//===----------------------------------------------------------------------===//
// nvfp4
//===----------------------------------------------------------------------===//

/// A group with amax 10 at outer scale 0.5: sf = e4m3(10 / 6 / 0.5) =
/// e4m3(3.33) = 3.25 (0x45), so the divisor is 3.25 * 0.5 = 1.625. Each value
/// is annotated with x / 1.625, the e2m1 value it rounds to and its code.
constexpr std::array<float, 16> kHandGroup = {
    10.0f,    // 6.15 -> saturates to 6 (7)
    -10.0f,   // -6 (0xF)
    1.625f,   // 1 (2)
    0.8125f,  // 0.5 (1)
    0.4f,     // 0.246 -> 0 (0)
    2.4375f,  // 1.5 (3)
    4.0625f,  // 2.5: tie between 2 (4) and 3 (5) -> 2 (4)
    5.6875f,  // 3.5: tie between 3 (5) and 4 (6) -> 4 (6)
    8.125f,   // 5: tie between 4 (6) and 6 (7) -> 4 (6)
    -2.4375f, // -1.5 (0xB)
    0.0f,     // 0 (0)
    -0.8125f, // -0.5 (9)
    3.25f,    // 2 (4)
    6.5f,     // 4 (6)
    9.75f,    // 6 (7)
    -4.875f,  // -3 (0xD)
};
constexpr uint8_t kHandGroupScale = 0x45;
constexpr std::array<uint8_t, 8> kHandGroupCodes = {0xF7, 0x12, 0x30, 0x64,
                                                    0xB6, 0x90, 0x64, 0xD7};

TEST(Nvfp4Test, HandComputedGroup) {
  ASSERT_EQ(decodeE4M3(kHandGroupScale), 3.25f);
  // Group 0 is the hand group, group 1 all zeros.
  std::vector<float> x(kHandGroup.begin(), kHandGroup.end());
  x.resize(32, 0.0f);
  std::vector<uint8_t> row(16, kPoison), scales(2, kPoison);
  ASSERT_EQ(encodeRowNVFP4(x, 0.5f, row, scales), Status::Ok);
  EXPECT_EQ(scales, (std::vector<uint8_t>{kHandGroupScale, 0x00}));
  std::vector<uint8_t> expected(kHandGroupCodes.begin(), kHandGroupCodes.end());
  expected.resize(16, 0x00);
  EXPECT_EQ(row, expected);

  std::vector<float> y(32, kNaN);
  ASSERT_EQ(decodeRowNVFP4(row, scales, 0.5f, y), Status::Ok);
  const float kMultiples[16] = {6, -6,    1, 0.5f,  0, 1.5f, 2, 4,
                                4, -1.5f, 0, -0.5f, 2, 4,    6, -3};
  for (size_t i = 0; i < 16; ++i)
    EXPECT_EQ(y[i], kMultiples[i] * 1.625f) << i;
  for (size_t i = 16; i < 32; ++i)
    EXPECT_EQ(y[i], 0.0f) << i;
}

TEST(Nvfp4Test, ZeroOuterScaleWritesZeros) {
  std::vector<float> x(kHandGroup.begin(), kHandGroup.end());
  std::vector<uint8_t> row(8, kPoison), scales(1, kPoison);
  ASSERT_EQ(encodeRowNVFP4(x, 0.0f, row, scales), Status::Ok);
  EXPECT_EQ(row, std::vector<uint8_t>(8, 0));
  EXPECT_EQ(scales[0], 0);
}

TEST(Nvfp4Test, GroupScaleRoundingToZeroWritesZeros) {
  // amax / 6 / outer = 2^-10, half the smallest e4m3 subnormal: ties to 0.
  std::vector<float> x(16, 0.0f);
  x[3] = 6 * 0x1p-10f;
  x[5] = -0x1p-11f;
  std::vector<uint8_t> row(8, kPoison), scales(1, kPoison);
  ASSERT_EQ(encodeRowNVFP4(x, 1.0f, row, scales), Status::Ok);
  EXPECT_EQ(row, std::vector<uint8_t>(8, 0));
  EXPECT_EQ(scales[0], 0);

  // Twice that is the smallest subnormal, which is kept.
  x[3] = 6 * 0x1p-9f;
  ASSERT_EQ(encodeRowNVFP4(x, 1.0f, row, scales), Status::Ok);
  EXPECT_EQ(scales[0], 0x01);
  EXPECT_EQ(row[1], 0x70); // element 3 (high nibble of byte 1) is 6
}

TEST(Nvfp4Test, ScaleSaturatesAt448) {
  // amax / 6 / outer = 1000 > 448: sf saturates and codes saturate at 6.
  std::vector<float> x(16, 6000.0f);
  std::vector<uint8_t> row(8), scales(1);
  ASSERT_EQ(encodeRowNVFP4(x, 1.0f, row, scales), Status::Ok);
  EXPECT_EQ(scales[0], 0x7E);
  EXPECT_EQ(row, std::vector<uint8_t>(8, 0x77));
}

TEST(Nvfp4Test, FollowsTheFp32OperationOrder) {
  // amax / 6 / outer is exactly 3.125, the e4m3 tie between 3 (0x44) and
  // 3.25 (0x45); amax / (6 * outer) would land just above it.
  const float amaxG = 1.125f, outer = 0.06f;
  ASSERT_EQ(amaxG / 6.0f / outer, 3.125f);
  ASSERT_EQ(encodeE4M3(amaxG / (6.0f * outer)), 0x45);
  std::vector<float> x(16, 0.0f);
  x[0] = amaxG;
  std::vector<uint8_t> row(8), scales(1);
  ASSERT_EQ(encodeRowNVFP4(x, outer, row, scales), Status::Ok);
  EXPECT_EQ(scales[0], 0x44);

  // Decoding multiplies (e2m1 * sf) first: with sf = 0x03 and code 1.5 at
  // outer 0.001 the two association orders differ in the last bit.
  const std::vector<uint8_t> codes = {0x03, 0, 0, 0, 0, 0, 0, 0};
  const std::vector<uint8_t> groupScale = {0x03};
  std::vector<float> y(16);
  ASSERT_EQ(decodeRowNVFP4(codes, groupScale, 0.001f, y), Status::Ok);
  EXPECT_EQ(y[0], 0x1.26e97ap-17f);
  EXPECT_NE(y[0], 1.5f * (decodeE4M3(0x03) * 0.001f));
}

/// Half the distance between the e2m1 grid points around magnitude t.
float halfStepE2M1(float t) {
  if (t < 2.0f)
    return 0.25f;
  if (t < 4.0f)
    return 0.5f;
  return 1.0f;
}

TEST(Nvfp4Test, RoundTripErrorIsWithinHalfAGridStep) {
  std::mt19937 random(4);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  constexpr size_t kHeadDim = 128;
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> x(kHeadDim);
    for (size_t i = 0; i < kHeadDim; ++i)
      x[i] = normal(random) * std::exp2(float(int(i / 16) - 4));
    const float outer = tokenScale(Encoding::NVFP4, x);
    std::vector<uint8_t> row(kHeadDim / 2), scales(kHeadDim / 16);
    ASSERT_EQ(encodeRowNVFP4(x, outer, row, scales), Status::Ok);
    std::vector<float> y(kHeadDim);
    ASSERT_EQ(decodeRowNVFP4(row, scales, outer, y), Status::Ok);
    for (size_t i = 0; i < kHeadDim; ++i) {
      const float divisor = decodeE4M3(scales[i / 16]) * outer;
      ASSERT_GT(divisor, 0.0f);
      // Slack for the fp32 roundings of the divisor and the decode.
      const float bound =
          halfStepE2M1(std::fabs(x[i]) / divisor) * divisor * (1 + 0x1p-20f);
      ASSERT_LE(std::fabs(x[i] - y[i]), bound) << "element " << i;
    }
  }
}

TEST(Nvfp4Test, Validation) {
  std::vector<float> x(32, 1.0f);
  std::vector<uint8_t> row(16, kPoison), scales(2, kPoison);
  std::vector<uint8_t> shortRow(15, kPoison), oneScale(1, kPoison);
  EXPECT_EQ(encodeRowNVFP4(x, 1.0f, shortRow, scales), Status::BadSize);
  EXPECT_EQ(encodeRowNVFP4(x, 1.0f, row, oneScale), Status::BadSize);
  std::vector<float> ragged(24, 1.0f);
  EXPECT_EQ(encodeRowNVFP4(ragged, 1.0f, shortRow, oneScale), Status::BadSize);
  EXPECT_EQ(encodeRowNVFP4(x, kNaN, row, scales), Status::NonFiniteScale);
  EXPECT_EQ(encodeRowNVFP4(x, -1.0f, row, scales), Status::NonFiniteScale);
  EXPECT_EQ(encodeRowNVFP4(x, kInf, row, scales), Status::NonFiniteScale);
  x[17] = kInf;
  EXPECT_EQ(encodeRowNVFP4(x, 1.0f, row, scales), Status::NonFiniteInput);
  for (const auto *buffer : {&row, &scales, &shortRow, &oneScale})
    for (uint8_t byte : *buffer)
      EXPECT_EQ(byte, kPoison);

  std::vector<float> y(32, 7.0f);
  EXPECT_EQ(decodeRowNVFP4(row, scales, kNaN, y), Status::NonFiniteScale);
  EXPECT_EQ(decodeRowNVFP4(shortRow, scales, 1.0f, y), Status::BadSize);
  for (float v : y)
    EXPECT_EQ(v, 7.0f);
}

} // namespace
