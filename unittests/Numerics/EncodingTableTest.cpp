//===- EncodingTableTest.cpp - Encoding rows vs. codecs ---------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the unit tests of the encoding table: every row is
// checked against the codecs it describes, so that the compiler, which reads
// the rows, and the numerics library, which runs the codecs, cannot disagree
// about a largest code, a word, a row size, a minifloat or an empty page.
//
//===----------------------------------------------------------------------===//

#include "pattn/Numerics/EncodingTable.h"
#include "pattn/Numerics/Numerics.h"

#include "gtest/gtest.h"

#include <cmath>
#include <optional>
#include <vector>

using namespace pattn::numerics;

namespace {

/// Far beyond every encoding's range, yet finite in fp32.
constexpr float kHuge = 1e30f;

/// What the scalar quantizer of `encoding` makes of x at scale 1, as a
/// value; nullopt where there is none (plain floats, group-scaled codes).
std::optional<float> scalarQuantized(Encoding encoding, float x) {
  switch (encoding) {
  case Encoding::I8:
    return float(quantizeI8(x, 1.0f));
  case Encoding::I4:
    return float(quantizeI4(x, 1.0f));
  case Encoding::F8E4M3:
    return decodeE4M3(quantizeE4M3(x, 1.0f));
  case Encoding::F8E5M2:
    return decodeE5M2(quantizeE5M2(x, 1.0f));
  case Encoding::F16:
  case Encoding::BF16:
  case Encoding::NVFP4:
    return std::nullopt;
  }
  return std::nullopt;
}

/// Element 0 of a row of head_dim = the row's multiple, holding `value` and
/// zeros, after encoding and decoding it at (outer) scale 1.
float rowRoundTrip(const EncodingInfo &row, float value) {
  const size_t count = row.headDimMultiple;
  std::vector<float> x(count, 0.0f), y(count, -1.0f);
  x[0] = value;
  std::vector<uint8_t> bytes(size_t(row.rowBytes(int64_t(count))));
  if (row.hasGroupScales()) {
    std::vector<uint8_t> scales(count / row.groupScales.size);
    EXPECT_EQ(encodeRowNVFP4(x, 1.0f, bytes, scales), Status::Ok);
    EXPECT_EQ(decodeRowNVFP4(bytes, scales, 1.0f, y), Status::Ok);
    return y[0];
  }
  const std::vector<float> scales =
      row.isPlainFloat() ? std::vector<float>{} : std::vector<float>{1.0f};
  EXPECT_EQ(encodeRow(row.encoding, x, scales, bytes), Status::Ok);
  EXPECT_EQ(decodeRow(row.encoding, bytes, scales, y), Status::Ok);
  return y[0];
}

/// The scalar codec of a minifloat row's fields.
struct MinifloatCodec {
  uint8_t (*encode)(double);
  float (*decode)(uint8_t);
};

std::optional<MinifloatCodec> codecOf(const MinifloatFields *fields) {
  if (fields == &kE4M3Fields)
    return MinifloatCodec{encodeE4M3, decodeE4M3};
  if (fields == &kE5M2Fields)
    return MinifloatCodec{encodeE5M2, decodeE5M2};
  if (fields == &kE2M1Fields)
    return MinifloatCodec{encodeE2M1, decodeE2M1};
  return std::nullopt;
}

TEST(EncodingTableTest, OneRowPerEnumeratorInOrder) {
  ASSERT_EQ(encodingTable().size(), 7u);
  for (size_t i = 0; i < encodingTable().size(); ++i) {
    const EncodingInfo &row = encodingTable()[i];
    EXPECT_EQ(row.encoding, Encoding(i));
    EXPECT_EQ(&encodingInfo(row.encoding), &row);
    EXPECT_EQ(stringifyEncoding(row.encoding), row.name);
    EXPECT_EQ(parseEncoding(row.name), row.encoding);
  }
}

TEST(EncodingTableTest, CodesFillA32BitWord) {
  for (const EncodingInfo &row : encodingTable())
    EXPECT_EQ(row.codesPerWord * row.bitsPerCode, 32u) << row.name;
}

TEST(EncodingTableTest, RowBytesAgree) {
  for (const EncodingInfo &row : encodingTable()) {
    for (int64_t headDim : {0, 1, 7, 8, 16, 64, 129, 256, 1024}) {
      const int64_t bits = headDim * int64_t(row.bitsPerCode);
      EXPECT_EQ(rowBytes(row.encoding, headDim), row.rowBytes(headDim))
          << row.name << " " << headDim;
      EXPECT_EQ(row.rowBytes(headDim), (bits + 7) / 8)
          << row.name << " " << headDim;
    }
    // A legal head_dim is whole words, and whole groups where there are any.
    EXPECT_EQ(row.rowBytes(row.headDimMultiple) % 4, 0) << row.name;
    if (row.hasGroupScales()) {
      EXPECT_EQ(row.headDimMultiple % row.groupScales.size, 0u) << row.name;
    }
  }
}

TEST(EncodingTableTest, MaxCodeIsWhatTheQuantizerSaturatesTo) {
  for (const EncodingInfo &row : encodingTable()) {
    EXPECT_EQ(maxCodeMagnitude(row.encoding), row.maxCodeMagnitude) << row.name;
    if (row.isPlainFloat()) {
      // No scale: no largest code, and no per-token scale.
      EXPECT_EQ(row.maxCodeMagnitude, 0.0f) << row.name;
      EXPECT_EQ(tokenScale(row.encoding, std::vector<float>{3.0f}), 0.0f);
      continue;
    }
    EXPECT_EQ(rowRoundTrip(row, kHuge), row.maxCodeMagnitude) << row.name;
    const float lowest =
        row.isInteger() ? float(row.minIntegerCode) : -row.maxCodeMagnitude;
    EXPECT_EQ(rowRoundTrip(row, -kHuge), lowest) << row.name;
    if (std::optional<float> code = scalarQuantized(row.encoding, kHuge)) {
      EXPECT_EQ(*code, row.maxCodeMagnitude) << row.name;
      EXPECT_EQ(scalarQuantized(row.encoding, -kHuge), lowest) << row.name;
    }
    // The largest code itself survives, and a token scale maps the row's
    // amax onto it.
    EXPECT_EQ(rowRoundTrip(row, row.maxCodeMagnitude), row.maxCodeMagnitude)
        << row.name;
    const std::vector<float> x = {-2.0f * row.maxCodeMagnitude, 1.0f};
    EXPECT_EQ(tokenScale(row.encoding, x), 2.0f) << row.name;
  }
}

TEST(EncodingTableTest, MinifloatRowsRoundTripTheirMaxFinite) {
  for (const EncodingInfo &row : encodingTable()) {
    EXPECT_EQ(row.isMinifloat(), row.minifloat != nullptr) << row.name;
    if (!row.minifloat)
      continue;
    const MinifloatFields &fields = *row.minifloat;
    std::optional<MinifloatCodec> codec = codecOf(row.minifloat);
    ASSERT_TRUE(codec) << row.name;
    const uint32_t signBit = 1u << (fields.exponentBits + fields.mantissaBits);
    EXPECT_EQ(1 + fields.exponentBits + fields.mantissaBits,
              int(row.bitsPerCode))
        << row.name;
    EXPECT_EQ(codec->decode(uint8_t(fields.maxMagnitudeCode)), fields.maxFinite)
        << row.name;
    EXPECT_EQ(codec->encode(fields.maxFinite), fields.maxMagnitudeCode)
        << row.name;
    EXPECT_EQ(codec->encode(-fields.maxFinite),
              fields.maxMagnitudeCode | signBit)
        << row.name;
    EXPECT_EQ(codec->encode(4.0 * fields.maxFinite), fields.maxMagnitudeCode)
        << row.name;
    // Nothing above the largest code is a larger finite value.
    const float next = codec->decode(uint8_t(fields.maxMagnitudeCode + 1));
    EXPECT_FALSE(std::isfinite(next) && next > fields.maxFinite) << row.name;
  }
}

TEST(EncodingTableTest, EmptyBytesDecodeToZero) {
  for (const EncodingInfo &row : encodingTable()) {
    const size_t count = row.headDimMultiple;
    const std::vector<uint8_t> bytes(size_t(row.rowBytes(int64_t(count))),
                                     row.emptyByte);
    std::vector<float> y(count, -1.0f);
    if (row.hasGroupScales()) {
      const std::vector<uint8_t> scales(count / row.groupScales.size, 0);
      ASSERT_EQ(decodeRowNVFP4(bytes, scales, 1.0f, y), Status::Ok);
    } else {
      const std::vector<float> scales =
          row.isPlainFloat() ? std::vector<float>{} : std::vector<float>{1.0f};
      ASSERT_EQ(decodeRow(row.encoding, bytes, scales, y), Status::Ok);
    }
    for (float v : y)
      EXPECT_EQ(v, 0.0f) << row.name;
  }
  // int4's bias is the stored zero, which packs into the empty byte.
  const EncodingInfo &i4 = encodingInfo(Encoding::I4);
  EXPECT_EQ(i4.storedCodeBias, 8);
  const int8_t zeros[] = {0, 0};
  uint8_t packed[1] = {0};
  packI4(zeros, packed);
  EXPECT_EQ(packed[0], i4.emptyByte);
  EXPECT_EQ(i4.emptyByte, kEmptyI4Byte);
}

TEST(EncodingTableTest, GroupScales) {
  for (const EncodingInfo &row : encodingTable()) {
    if (!row.hasGroupScales())
      continue;
    // The outer scale's divisor is the largest code times the largest group
    // scale, and a row takes one group scale per group.
    const EncodingInfo &scale = encodingInfo(row.groupScales.scaleEncoding);
    ASSERT_TRUE(row.minifloat) << row.name;
    EXPECT_EQ(row.maxCodeMagnitude,
              row.minifloat->maxFinite * scale.maxCodeMagnitude)
        << row.name;
    const size_t size = row.groupScales.size;
    std::vector<float> x(2 * size, 1.0f);
    std::vector<uint8_t> bytes(size_t(row.rowBytes(int64_t(x.size()))));
    std::vector<uint8_t> scales(2);
    EXPECT_EQ(encodeRowNVFP4(x, 1.0f, bytes, scales), Status::Ok);
    std::vector<uint8_t> tooFew(1);
    EXPECT_EQ(encodeRowNVFP4(x, 1.0f, bytes, tooFew), Status::BadSize);
  }
  const EncodingInfo &nvfp4 = encodingInfo(Encoding::NVFP4);
  EXPECT_EQ(nvfp4.groupScales.size, 16u);
  EXPECT_EQ(nvfp4.groupScales.scaleEncoding, Encoding::F8E4M3);
  EXPECT_EQ(nvfp4.headDimMultiple, 16u);
}

} // namespace
