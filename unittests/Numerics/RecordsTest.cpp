//===- RecordsTest.cpp - Tests of the record presets ------------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the unit tests of the per-token record presets of
// SPEC §3: their byte layouts lane by lane, the bytes encodeRecord writes at
// each offset (scales, codes, rope and zero pads), round trips within each
// format's quantization error, and the rejected calls that write nothing.
//
//===----------------------------------------------------------------------===//

#include "pattn/Numerics/Numerics.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

using namespace pattn::numerics;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr uint8_t kPoison = 0xAB;

constexpr RecordPreset kAllPresets[] = {RecordPreset::FP8DsMla,
                                        RecordPreset::NVFP4DsMla,
                                        RecordPreset::NVFP4DsMlaFp8Rope};

float loadF32(const std::vector<uint8_t> &bytes, size_t offset) {
  uint32_t bits = 0;
  for (size_t i = 0; i < 4; ++i)
    bits |= uint32_t(bytes[offset + i]) << (8 * i);
  return std::bit_cast<float>(bits);
}

uint16_t loadU16(const std::vector<uint8_t> &bytes, size_t offset) {
  return uint16_t(bytes[offset] | bytes[offset + 1] << 8);
}

float amax(std::span<const float> values) {
  float result = 0.0f;
  for (float v : values)
    result = std::max(result, std::fabs(v));
  return result;
}

/// A token whose four 128-value latent tiles span different magnitudes, so
/// that per-tile and per-group scales all differ.
struct Token {
  std::vector<float> latent = std::vector<float>(512);
  std::vector<float> rope = std::vector<float>(64);
};

Token makeToken(unsigned seed) {
  std::mt19937 random(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Token token;
  for (size_t i = 0; i < token.latent.size(); ++i)
    token.latent[i] = normal(random) * std::exp2(float(int(i / 128) * 3 - 4));
  for (float &v : token.rope)
    v = normal(random) * 8.0f;
  return token;
}

std::vector<uint8_t> encode(RecordPreset preset, RecordScaleMode mode,
                            const Token &token, float outerScale = 0.0f) {
  std::vector<uint8_t> record(recordLayout(preset).bytes, kPoison);
  EXPECT_EQ(
      encodeRecord(preset, mode, token.latent, token.rope, outerScale, record),
      Status::Ok);
  return record;
}

//===----------------------------------------------------------------------===//
// Layouts
//===----------------------------------------------------------------------===//

struct ExpectedLane {
  std::string_view name;
  LaneElement element;
  uint32_t count;
  uint32_t offset;
  uint32_t bytes;
  std::string_view scaleLane;
};

void expectLayout(RecordPreset preset, std::string_view name, uint32_t bytes,
                  std::span<const ExpectedLane> expected) {
  const RecordLayout &layout = recordLayout(preset);
  EXPECT_EQ(layout.name, name);
  EXPECT_EQ(layout.bytes, bytes);
  EXPECT_EQ(layout.latentCount, 512u);
  EXPECT_EQ(layout.ropeCount, 64u);
  ASSERT_EQ(layout.lanes.size(), expected.size()) << name;
  for (size_t i = 0; i < expected.size(); ++i) {
    const LaneDesc &lane = layout.lanes[i];
    EXPECT_EQ(lane.name, expected[i].name);
    EXPECT_EQ(lane.element, expected[i].element) << lane.name;
    EXPECT_EQ(lane.count, expected[i].count) << lane.name;
    EXPECT_EQ(lane.offset, expected[i].offset) << lane.name;
    EXPECT_EQ(lane.count * laneElementBits(lane.element) / 8, expected[i].bytes)
        << lane.name;
    EXPECT_EQ(lane.scaleLane, expected[i].scaleLane) << lane.name;
  }
}

TEST(RecordLayoutTest, Fp8DsMla) {
  const ExpectedLane kLanes[] = {
      {"latent", LaneElement::E4M3, 512, 0, 512, "latent_scale"},
      {"latent_scale", LaneElement::F32, 4, 512, 16, ""},
      {"rope", LaneElement::BF16, 64, 528, 128, ""},
  };
  expectLayout(RecordPreset::FP8DsMla, "fp8_ds_mla", 656, kLanes);
}

TEST(RecordLayoutTest, Nvfp4DsMla) {
  const ExpectedLane kLanes[] = {
      {"latent", LaneElement::E2M1, 512, 0, 256, "latent_scale"},
      {"latent_scale", LaneElement::E4M3, 32, 256, 32, ""},
      {"rope", LaneElement::BF16, 64, 304, 128, ""},
  };
  expectLayout(RecordPreset::NVFP4DsMla, "nvfp4_ds_mla", 432, kLanes);
}

TEST(RecordLayoutTest, Nvfp4DsMlaFp8Rope) {
  const ExpectedLane kLanes[] = {
      {"latent", LaneElement::E2M1, 512, 0, 256, "latent_scale"},
      {"latent_scale", LaneElement::E4M3, 32, 256, 32, ""},
      {"rope_scale", LaneElement::F32, 1, 288, 4, ""},
      {"token_scale", LaneElement::F32, 1, 292, 4, ""},
      {"rope", LaneElement::E4M3, 64, 304, 64, "rope_scale"},
  };
  expectLayout(RecordPreset::NVFP4DsMlaFp8Rope, "nvfp4_ds_mla_fp8_rope", 368,
               kLanes);
}

TEST(RecordLayoutTest, LanesAreSortedDisjointAlignedAndInBounds) {
  for (RecordPreset preset : kAllPresets) {
    const RecordLayout &layout = recordLayout(preset);
    uint32_t end = 0;
    for (const LaneDesc &lane : layout.lanes) {
      const unsigned bits = laneElementBits(lane.element);
      EXPECT_GE(lane.offset, end) << layout.name << "." << lane.name;
      EXPECT_EQ(lane.offset % std::max(1u, bits / 8), 0u) << lane.name;
      end = lane.offset + lane.count * bits / 8;
      if (lane.scaleLane.empty())
        continue;
      // A scale lane exists and splits its data lane into equal blocks.
      const auto scale =
          std::ranges::find(layout.lanes, lane.scaleLane, &LaneDesc::name);
      ASSERT_NE(scale, layout.lanes.end()) << lane.scaleLane;
      EXPECT_EQ(lane.count % scale->count, 0u) << lane.name;
    }
    EXPECT_LE(end, layout.bytes) << layout.name;
  }
}

TEST(RecordLayoutTest, ElementBits) {
  EXPECT_EQ(laneElementBits(LaneElement::F32), 32u);
  EXPECT_EQ(laneElementBits(LaneElement::F16), 16u);
  EXPECT_EQ(laneElementBits(LaneElement::BF16), 16u);
  EXPECT_EQ(laneElementBits(LaneElement::E4M3), 8u);
  EXPECT_EQ(laneElementBits(LaneElement::E5M2), 8u);
  EXPECT_EQ(laneElementBits(LaneElement::E2M1), 4u);
  EXPECT_EQ(laneElementBits(LaneElement::I8), 8u);
}

TEST(RecordLayoutTest, NamesRoundTrip) {
  for (RecordPreset preset : kAllPresets)
    EXPECT_EQ(parseRecordPreset(stringifyRecordPreset(preset)), preset);
  EXPECT_EQ(stringifyRecordPreset(RecordPreset::NVFP4DsMlaFp8Rope),
            "nvfp4_ds_mla_fp8_rope");
  EXPECT_EQ(parseRecordPreset("nvfp4"), std::nullopt);
  EXPECT_EQ(parseRecordPreset(""), std::nullopt);
}

TEST(RecordLayoutTest, ValidScaleModes) {
  using enum RecordScaleMode;
  EXPECT_TRUE(isValidRecordScaleMode(RecordPreset::FP8DsMla, None));
  EXPECT_FALSE(isValidRecordScaleMode(RecordPreset::FP8DsMla, Tensor));
  EXPECT_FALSE(isValidRecordScaleMode(RecordPreset::FP8DsMla, Token));
  EXPECT_FALSE(isValidRecordScaleMode(RecordPreset::NVFP4DsMla, None));
  EXPECT_TRUE(isValidRecordScaleMode(RecordPreset::NVFP4DsMla, Tensor));
  EXPECT_FALSE(isValidRecordScaleMode(RecordPreset::NVFP4DsMla, Token));
  EXPECT_FALSE(isValidRecordScaleMode(RecordPreset::NVFP4DsMlaFp8Rope, None));
  EXPECT_TRUE(isValidRecordScaleMode(RecordPreset::NVFP4DsMlaFp8Rope, Tensor));
  EXPECT_TRUE(isValidRecordScaleMode(RecordPreset::NVFP4DsMlaFp8Rope, Token));
}

//===----------------------------------------------------------------------===//
// Bytes written
//===----------------------------------------------------------------------===//

TEST(EncodeRecordTest, Fp8DsMlaBytes) {
  const Token token = makeToken(1);
  const std::vector<uint8_t> record =
      encode(RecordPreset::FP8DsMla, RecordScaleMode::None, token);
  for (size_t tile = 0; tile < 4; ++tile) {
    std::span<const float> values =
        std::span(token.latent).subspan(tile * 128, 128);
    const float scale = amax(values) / 448.0f;
    EXPECT_EQ(std::bit_cast<uint32_t>(loadF32(record, 512 + 4 * tile)),
              std::bit_cast<uint32_t>(scale))
        << "tile " << tile;
    for (size_t i = 0; i < 128; ++i)
      ASSERT_EQ(record[tile * 128 + i], quantizeE4M3(values[i], scale))
          << "tile " << tile << " element " << i;
  }
  for (size_t i = 0; i < 64; ++i)
    ASSERT_EQ(loadU16(record, 528 + 2 * i), encodeBF16(token.rope[i])) << i;
}

/// Checks the nvfp4 latent lanes against encodeRowNVFP4 at `outer`.
void expectNvfp4Latent(const std::vector<uint8_t> &record, const Token &token,
                       float outer) {
  std::vector<uint8_t> codes(256), scales(32);
  ASSERT_EQ(encodeRowNVFP4(token.latent, outer, codes, scales), Status::Ok);
  EXPECT_TRUE(std::equal(codes.begin(), codes.end(), record.begin()));
  EXPECT_TRUE(std::equal(scales.begin(), scales.end(), record.begin() + 256));
  // A real token must not degenerate into zero groups.
  EXPECT_TRUE(std::ranges::none_of(scales, [](uint8_t s) { return s == 0; }));
}

TEST(EncodeRecordTest, Nvfp4DsMlaBytes) {
  const Token token = makeToken(2);
  const float outer = 0x1.8p-6f;
  const std::vector<uint8_t> record =
      encode(RecordPreset::NVFP4DsMla, RecordScaleMode::Tensor, token, outer);
  expectNvfp4Latent(record, token, outer);
  for (size_t i = 288; i < 304; ++i)
    EXPECT_EQ(record[i], 0) << "pad byte " << i;
  for (size_t i = 0; i < 64; ++i)
    ASSERT_EQ(loadU16(record, 304 + 2 * i), encodeBF16(token.rope[i])) << i;
}

/// Checks everything after the latent lanes of an nvfp4_ds_mla_fp8_rope
/// record; [292, 296) must hold `storedTokenScale`.
void expectFp8RopeTail(const std::vector<uint8_t> &record, const Token &token,
                       float storedTokenScale) {
  const float ropeScale = amax(token.rope) / 448.0f;
  EXPECT_EQ(std::bit_cast<uint32_t>(loadF32(record, 288)),
            std::bit_cast<uint32_t>(ropeScale));
  EXPECT_EQ(std::bit_cast<uint32_t>(loadF32(record, 292)),
            std::bit_cast<uint32_t>(storedTokenScale));
  for (size_t i = 296; i < 304; ++i)
    EXPECT_EQ(record[i], 0) << "pad byte " << i;
  for (size_t i = 0; i < 64; ++i)
    ASSERT_EQ(record[304 + i], quantizeE4M3(token.rope[i], ropeScale)) << i;
}

TEST(EncodeRecordTest, Nvfp4DsMlaFp8RopeTokenModeBytes) {
  const Token token = makeToken(3);
  const std::vector<uint8_t> record = encode(
      RecordPreset::NVFP4DsMlaFp8Rope, RecordScaleMode::Token, token, kNaN);
  const float tokenOuter = amax(token.latent) / 2688.0f;
  expectNvfp4Latent(record, token, tokenOuter);
  expectFp8RopeTail(record, token, tokenOuter);
}

TEST(EncodeRecordTest, Nvfp4DsMlaFp8RopeTensorModeBytes) {
  const Token token = makeToken(4);
  const float outer = 0x1p-7f;
  const std::vector<uint8_t> record = encode(
      RecordPreset::NVFP4DsMlaFp8Rope, RecordScaleMode::Tensor, token, outer);
  expectNvfp4Latent(record, token, outer);
  expectFp8RopeTail(record, token, 0.0f);
}

TEST(EncodeRecordTest, AllZeroToken) {
  const Token zero{std::vector<float>(512, 0.0f), std::vector<float>(64, 0.0f)};
  const std::pair<RecordPreset, RecordScaleMode> kCases[] = {
      {RecordPreset::FP8DsMla, RecordScaleMode::None},
      {RecordPreset::NVFP4DsMla, RecordScaleMode::Tensor},
      {RecordPreset::NVFP4DsMlaFp8Rope, RecordScaleMode::Tensor},
      {RecordPreset::NVFP4DsMlaFp8Rope, RecordScaleMode::Token},
  };
  for (auto [preset, mode] : kCases) {
    // Zero scales everywhere must not turn into 0 / 0.
    const std::vector<uint8_t> record = encode(preset, mode, zero, 1.0f);
    EXPECT_TRUE(std::ranges::all_of(record, [](uint8_t b) { return b == 0; }))
        << stringifyRecordPreset(preset);
    std::vector<float> latent(512, kNaN), rope(64, kNaN);
    ASSERT_EQ(decodeRecord(preset, mode, record, 1.0f, latent, rope),
              Status::Ok);
    EXPECT_EQ(latent, zero.latent);
    EXPECT_EQ(rope, zero.rope);
  }
}

//===----------------------------------------------------------------------===//
// Round trips
//===----------------------------------------------------------------------===//

/// |x - y| <= half an e4m3 step at x / scale, times the scale: 2^-4 of |x|
/// among normals, 2^-10 * scale among subnormals.
float e4m3Bound(float x, float scale) {
  return std::max(std::fabs(x) * 0x1p-4f, scale * 0x1p-10f) * (1 + 0x1p-20f);
}

/// Half the e2m1 grid step around |x| / divisor, times the divisor.
float e2m1Bound(float x, float divisor) {
  const float t = std::fabs(x) / divisor;
  const float halfStep = t < 2.0f ? 0.25f : t < 4.0f ? 0.5f : 1.0f;
  return halfStep * divisor * (1 + 0x1p-20f);
}

/// Half a bf16 ulp: 2^-8 of the binade, so at most 2^-8 of |x|.
float bf16Bound(float x) { return std::fabs(x) * 0x1p-8f; }

TEST(DecodeRecordTest, Fp8DsMlaRoundTrip) {
  const Token token = makeToken(5);
  const std::vector<uint8_t> record =
      encode(RecordPreset::FP8DsMla, RecordScaleMode::None, token);
  std::vector<float> latent(512), rope(64);
  ASSERT_EQ(decodeRecord(RecordPreset::FP8DsMla, RecordScaleMode::None, record,
                         0.0f, latent, rope),
            Status::Ok);
  for (size_t i = 0; i < 512; ++i) {
    const float scale = loadF32(record, 512 + 4 * (i / 128));
    EXPECT_EQ(latent[i], decodeE4M3(record[i]) * scale);
    ASSERT_LE(std::fabs(latent[i] - token.latent[i]),
              e4m3Bound(token.latent[i], scale))
        << i;
  }
  for (size_t i = 0; i < 64; ++i)
    ASSERT_LE(std::fabs(rope[i] - token.rope[i]), bf16Bound(token.rope[i]));
}

/// Decodes an nvfp4 record and checks the latent against the e2m1 bound and
/// the rope against its format's bound.
void expectNvfp4RoundTrip(RecordPreset preset, RecordScaleMode mode,
                          const Token &token, float outerScale) {
  const std::vector<uint8_t> record = encode(preset, mode, token, outerScale);
  std::vector<float> latent(512), rope(64);
  ASSERT_EQ(decodeRecord(preset, mode, record, outerScale, latent, rope),
            Status::Ok);
  const float outer =
      mode == RecordScaleMode::Token ? loadF32(record, 292) : outerScale;
  for (size_t i = 0; i < 512; ++i) {
    const float divisor = decodeE4M3(record[256 + i / 16]) * outer;
    ASSERT_LE(std::fabs(latent[i] - token.latent[i]),
              e2m1Bound(token.latent[i], divisor))
        << i;
  }
  const bool fp8Rope = preset == RecordPreset::NVFP4DsMlaFp8Rope;
  for (size_t i = 0; i < 64; ++i) {
    const float bound = fp8Rope ? e4m3Bound(token.rope[i], loadF32(record, 288))
                                : bf16Bound(token.rope[i]);
    ASSERT_LE(std::fabs(rope[i] - token.rope[i]), bound) << i;
  }
}

TEST(DecodeRecordTest, Nvfp4RoundTrips) {
  const Token token = makeToken(6);
  const float outer = amax(token.latent) / 2688.0f;
  expectNvfp4RoundTrip(RecordPreset::NVFP4DsMla, RecordScaleMode::Tensor, token,
                       outer);
  expectNvfp4RoundTrip(RecordPreset::NVFP4DsMlaFp8Rope, RecordScaleMode::Tensor,
                       token, outer);
  expectNvfp4RoundTrip(RecordPreset::NVFP4DsMlaFp8Rope, RecordScaleMode::Token,
                       token, 0.0f);
}

//===----------------------------------------------------------------------===//
// Rejected calls
//===----------------------------------------------------------------------===//

/// Runs encodeRecord on a poisoned record and checks that a rejection leaves
/// every byte in place.
Status encodePoisoned(RecordPreset preset, RecordScaleMode mode,
                      const Token &token, float outerScale, size_t bytes = 0) {
  std::vector<uint8_t> record(bytes ? bytes : recordLayout(preset).bytes,
                              kPoison);
  const Status status =
      encodeRecord(preset, mode, token.latent, token.rope, outerScale, record);
  if (status != Status::Ok) {
    EXPECT_TRUE(std::ranges::all_of(record, [](uint8_t b) {
      return b == kPoison;
    })) << "a rejected record was written";
  }
  return status;
}

TEST(RejectedRecordTest, InvalidModes) {
  const Token token = makeToken(7);
  EXPECT_EQ(encodePoisoned(RecordPreset::FP8DsMla, RecordScaleMode::Tensor,
                           token, 1.0f),
            Status::BadSize);
  EXPECT_EQ(encodePoisoned(RecordPreset::NVFP4DsMla, RecordScaleMode::Token,
                           token, 1.0f),
            Status::BadSize);
  EXPECT_EQ(encodePoisoned(RecordPreset::NVFP4DsMlaFp8Rope,
                           RecordScaleMode::None, token, 1.0f),
            Status::BadSize);

  const std::vector<uint8_t> record(432, 0);
  std::vector<float> latent(512, 7.0f), rope(64, 7.0f);
  EXPECT_EQ(decodeRecord(RecordPreset::NVFP4DsMla, RecordScaleMode::None,
                         record, 1.0f, latent, rope),
            Status::BadSize);
  EXPECT_EQ(latent, std::vector<float>(512, 7.0f));
}

TEST(RejectedRecordTest, BadSizes) {
  const Token token = makeToken(8);
  EXPECT_EQ(encodePoisoned(RecordPreset::FP8DsMla, RecordScaleMode::None, token,
                           0.0f, 655),
            Status::BadSize);
  Token shortRope = token;
  shortRope.rope.pop_back();
  EXPECT_EQ(encodePoisoned(RecordPreset::NVFP4DsMla, RecordScaleMode::Tensor,
                           shortRope, 1.0f),
            Status::BadSize);
}

TEST(RejectedRecordTest, NonFiniteInputs) {
  for (RecordPreset preset : kAllPresets) {
    const RecordScaleMode mode = preset == RecordPreset::FP8DsMla
                                     ? RecordScaleMode::None
                                     : RecordScaleMode::Tensor;
    for (float bad : {kNaN, kInf}) {
      Token token = makeToken(9);
      token.latent[300] = bad;
      EXPECT_EQ(encodePoisoned(preset, mode, token, 1.0f),
                Status::NonFiniteInput);
      token = makeToken(9);
      token.rope[63] = -bad;
      EXPECT_EQ(encodePoisoned(preset, mode, token, 1.0f),
                Status::NonFiniteInput);
    }
  }
}

TEST(RejectedRecordTest, BadOuterScaleInTensorModeOnly) {
  const Token token = makeToken(10);
  for (float bad : {kNaN, kInf, -1.0f}) {
    EXPECT_EQ(encodePoisoned(RecordPreset::NVFP4DsMla, RecordScaleMode::Tensor,
                             token, bad),
              Status::NonFiniteScale);
    EXPECT_EQ(encodePoisoned(RecordPreset::NVFP4DsMlaFp8Rope,
                             RecordScaleMode::Tensor, token, bad),
              Status::NonFiniteScale);
    // A bad input outranks the bad scale, whichever lane holds it.
    Token badRope = token;
    badRope.rope[0] = kNaN;
    EXPECT_EQ(encodePoisoned(RecordPreset::NVFP4DsMla, RecordScaleMode::Tensor,
                             badRope, bad),
              Status::NonFiniteInput);
    // Token mode derives its own outer scale and ignores the argument.
    EXPECT_EQ(encodePoisoned(RecordPreset::NVFP4DsMlaFp8Rope,
                             RecordScaleMode::Token, token, bad),
              Status::Ok);
  }
}

TEST(RejectedRecordTest, CorruptStoredScaleDecodesNothing) {
  const Token token = makeToken(11);
  std::vector<uint8_t> record =
      encode(RecordPreset::NVFP4DsMlaFp8Rope, RecordScaleMode::Token, token);
  const uint32_t nanBits = std::bit_cast<uint32_t>(kNaN);
  for (size_t i = 0; i < 4; ++i)
    record[292 + i] = uint8_t(nanBits >> (8 * i));
  std::vector<float> latent(512, 7.0f), rope(64, 7.0f);
  EXPECT_EQ(decodeRecord(RecordPreset::NVFP4DsMlaFp8Rope,
                         RecordScaleMode::Token, record, 1.0f, latent, rope),
            Status::NonFiniteScale);
  EXPECT_EQ(latent, std::vector<float>(512, 7.0f));
  EXPECT_EQ(rope, std::vector<float>(64, 7.0f));
}

} // namespace
