//===- Records.cpp - Per-token MLA record presets ---------------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the per-token record presets of SPEC §3: their lane
// tables, and the encoder and decoder of one token's latent and rope. The
// latent and rope lanes go through the public row codecs at the offsets the
// tables give, so a record and a cache row of one encoding agree bit for bit.
//
//===----------------------------------------------------------------------===//

#include "pattn/Numerics/Numerics.h"

#include <algorithm>
#include <array>
#include <bit>

namespace pattn::numerics {

// constexpr so that the preset tables can be checked at compile time.
static constexpr unsigned elementBits(LaneElement element) {
  switch (element) {
  case LaneElement::F32:
    return 32;
  case LaneElement::F16:
  case LaneElement::BF16:
    return 16;
  case LaneElement::E4M3:
  case LaneElement::E5M2:
  case LaneElement::I8:
    return 8;
  case LaneElement::E2M1:
    return 4;
  }
  return 0;
}

unsigned laneElementBits(LaneElement element) { return elementBits(element); }

//===----------------------------------------------------------------------===//
// Preset tables
//===----------------------------------------------------------------------===//

static constexpr uint32_t kLatentCount = 512;
static constexpr uint32_t kRopeCount = 64;

// [0,512) latent, [512,528) one scale per 128-value tile, [528,656) rope.
static constexpr LaneDesc kFp8DsMlaLanes[] = {
    {"latent", LaneElement::E4M3, kLatentCount, 0, "latent_scale"},
    {"latent_scale", LaneElement::F32, 4, 512, ""},
    {"rope", LaneElement::BF16, kRopeCount, 528, ""},
};

// [0,256) latent, [256,288) group scales, [288,304) pad, [304,432) rope.
static constexpr LaneDesc kNvfp4DsMlaLanes[] = {
    {"latent", LaneElement::E2M1, kLatentCount, 0, "latent_scale"},
    {"latent_scale", LaneElement::E4M3, 32, 256, ""},
    {"rope", LaneElement::BF16, kRopeCount, 304, ""},
};

// As above up to 288, then the two f32 scales, [296,304) pad, e4m3 rope.
static constexpr LaneDesc kNvfp4DsMlaFp8RopeLanes[] = {
    {"latent", LaneElement::E2M1, kLatentCount, 0, "latent_scale"},
    {"latent_scale", LaneElement::E4M3, 32, 256, ""},
    {"rope_scale", LaneElement::F32, 1, 288, ""},
    {"token_scale", LaneElement::F32, 1, 292, ""},
    {"rope", LaneElement::E4M3, kRopeCount, 304, "rope_scale"},
};

// Indexed by RecordPreset; the names are what IR and parseRecordPreset use.
static constexpr RecordLayout kLayouts[] = {
    {"fp8_ds_mla", 656, kFp8DsMlaLanes, kLatentCount, kRopeCount},
    {"nvfp4_ds_mla", 432, kNvfp4DsMlaLanes, kLatentCount, kRopeCount},
    {"nvfp4_ds_mla_fp8_rope", 368, kNvfp4DsMlaFp8RopeLanes, kLatentCount,
     kRopeCount},
};

static constexpr uint32_t laneByteCount(const LaneDesc &lane) {
  return lane.count * elementBits(lane.element) / 8;
}

/// The rules the IR verifier enforces on any record, checked here at compile
/// time so a typo in a table cannot ship.
static constexpr bool isWellFormed(const RecordLayout &layout) {
  uint32_t end = 0;
  for (const LaneDesc &lane : layout.lanes) {
    const uint32_t alignment = std::max(1u, elementBits(lane.element) / 8);
    if (lane.offset < end || lane.offset % alignment != 0)
      return false;
    end = lane.offset + laneByteCount(lane);
  }
  return end <= layout.bytes;
}

static_assert(std::ranges::all_of(kLayouts, isWellFormed));
static_assert(std::size(kLayouts) ==
              size_t(RecordPreset::NVFP4DsMlaFp8Rope) + 1);

// Scratch space for a record being encoded, so a rejected call writes nothing.
static constexpr uint32_t kMaxRecordBytes = 656;
static_assert(std::ranges::all_of(kLayouts, [](const RecordLayout &layout) {
  return layout.bytes <= kMaxRecordBytes;
}));

const RecordLayout &recordLayout(RecordPreset preset) {
  return kLayouts[size_t(preset)];
}

std::optional<RecordPreset> parseRecordPreset(std::string_view name) {
  for (size_t i = 0; i < std::size(kLayouts); ++i)
    if (kLayouts[i].name == name)
      return RecordPreset(i);
  return std::nullopt;
}

std::string_view stringifyRecordPreset(RecordPreset preset) {
  return recordLayout(preset).name;
}

bool isValidRecordScaleMode(RecordPreset preset, RecordScaleMode mode) {
  switch (preset) {
  case RecordPreset::FP8DsMla:
    return mode == RecordScaleMode::None;
  case RecordPreset::NVFP4DsMla:
    return mode == RecordScaleMode::Tensor;
  case RecordPreset::NVFP4DsMlaFp8Rope:
    return mode == RecordScaleMode::Tensor || mode == RecordScaleMode::Token;
  }
  return false;
}

//===----------------------------------------------------------------------===//
// Lane access
//===----------------------------------------------------------------------===//

static const LaneDesc *findLane(const RecordLayout &layout,
                                std::string_view name) {
  for (const LaneDesc &lane : layout.lanes)
    if (lane.name == name)
      return &lane;
  return nullptr;
}

/// The bytes of lane `name`, which the preset tables guarantee exists.
template <typename Byte>
static std::span<Byte> laneBytes(const RecordLayout &layout,
                                 std::span<Byte> record,
                                 std::string_view name) {
  const LaneDesc *lane = findLane(layout, name);
  return record.subspan(lane->offset, laneByteCount(*lane));
}

static void storeF32(std::span<uint8_t> bytes, float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  for (size_t i = 0; i < 4; ++i)
    bytes[i] = uint8_t(bits >> (8 * i));
}

static float loadF32(std::span<const uint8_t> bytes) {
  uint32_t bits = 0;
  for (size_t i = 0; i < 4; ++i)
    bits |= uint32_t(bytes[i]) << (8 * i);
  return std::bit_cast<float>(bits);
}

/// The rope lane is bf16 (unscaled) or e4m3 with an f32 scale lane.
static Encoding ropeEncoding(const RecordLayout &layout) {
  return findLane(layout, "rope")->element == LaneElement::BF16
             ? Encoding::BF16
             : Encoding::F8E4M3;
}

//===----------------------------------------------------------------------===//
// Encoding
//===----------------------------------------------------------------------===//

static Status encodeFp8Latent(const RecordLayout &layout,
                              std::span<const float> latent,
                              std::span<uint8_t> record) {
  std::span<uint8_t> codes = laneBytes(layout, record, "latent");
  std::span<uint8_t> scales = laneBytes(layout, record, "latent_scale");
  const size_t tiles = scales.size() / sizeof(float);
  const size_t tile = latent.size() / tiles;
  for (size_t i = 0; i < tiles; ++i) {
    std::span<const float> values = latent.subspan(i * tile, tile);
    const float scale = tokenScale(Encoding::F8E4M3, values); // amax_i / 448
    storeF32(scales.subspan(i * sizeof(float)), scale);
    if (Status status = encodeRow(Encoding::F8E4M3, values, {&scale, 1},
                                  codes.subspan(i * tile, tile));
        status != Status::Ok)
      return status;
  }
  return Status::Ok;
}

static Status encodeNvfp4Latent(const RecordLayout &layout,
                                RecordScaleMode mode,
                                std::span<const float> latent, float outerScale,
                                std::span<uint8_t> record) {
  float outer = outerScale;
  if (mode == RecordScaleMode::Token) {
    outer = tokenScale(Encoding::NVFP4, latent); // token_amax / 2688
    storeF32(laneBytes(layout, record, "token_scale"), outer);
  }
  // In Tensor mode a token_scale lane, where the preset has one, stays zero.
  return encodeRowNVFP4(latent, outer, laneBytes(layout, record, "latent"),
                        laneBytes(layout, record, "latent_scale"));
}

static Status encodeRope(const RecordLayout &layout,
                         std::span<const float> rope,
                         std::span<uint8_t> record) {
  std::span<uint8_t> codes = laneBytes(layout, record, "rope");
  if (ropeEncoding(layout) == Encoding::BF16)
    return encodeRow(Encoding::BF16, rope, {}, codes);
  const float scale = tokenScale(Encoding::F8E4M3, rope); // rope_amax / 448
  storeF32(laneBytes(layout, record, "rope_scale"), scale);
  return encodeRow(Encoding::F8E4M3, rope, {&scale, 1}, codes);
}

/// Sizes and a mode the preset cannot be written in are both shape errors of
/// the call; Status has no better fit for the latter, so it is BadSize.
static bool isValidCall(const RecordLayout &layout, RecordPreset preset,
                        RecordScaleMode mode, size_t latentCount,
                        size_t ropeCount, size_t recordBytes) {
  return isValidRecordScaleMode(preset, mode) &&
         latentCount == layout.latentCount && ropeCount == layout.ropeCount &&
         recordBytes == layout.bytes;
}

Status encodeRecord(RecordPreset preset, RecordScaleMode mode,
                    std::span<const float> latent, std::span<const float> rope,
                    float outerScale, std::span<uint8_t> record) {
  const RecordLayout &layout = recordLayout(preset);
  if (!isValidCall(layout, preset, mode, latent.size(), rope.size(),
                   record.size()))
    return Status::BadSize;

  // The lanes go into a zeroed scratch record that is copied out only once
  // every lane succeeded: pads end up zero and a rejected call (the row
  // codecs report non-finite inputs and scales) leaves `record` untouched.
  // The rope goes first: it can only fail on a non-finite input, so input
  // errors outrank a bad outer scale, as they do in encodeRow.
  std::array<uint8_t, kMaxRecordBytes> scratch{};
  std::span<uint8_t> out(scratch.data(), layout.bytes);
  Status status = encodeRope(layout, rope, out);
  if (status == Status::Ok)
    status = preset == RecordPreset::FP8DsMla
                 ? encodeFp8Latent(layout, latent, out)
                 : encodeNvfp4Latent(layout, mode, latent, outerScale, out);
  if (status == Status::Ok)
    std::ranges::copy(out, record.begin());
  return status;
}

//===----------------------------------------------------------------------===//
// Decoding
//===----------------------------------------------------------------------===//

static Status decodeFp8Latent(const RecordLayout &layout,
                              std::span<const uint8_t> record,
                              std::span<float> latent) {
  std::span<const uint8_t> codes = laneBytes(layout, record, "latent");
  std::span<const uint8_t> scales = laneBytes(layout, record, "latent_scale");
  const size_t tiles = scales.size() / sizeof(float);
  const size_t tile = latent.size() / tiles;
  for (size_t i = 0; i < tiles; ++i) {
    const float scale = loadF32(scales.subspan(i * sizeof(float)));
    if (Status status =
            decodeRow(Encoding::F8E4M3, codes.subspan(i * tile, tile),
                      {&scale, 1}, latent.subspan(i * tile, tile));
        status != Status::Ok)
      return status;
  }
  return Status::Ok;
}

static Status decodeNvfp4Latent(const RecordLayout &layout,
                                RecordScaleMode mode,
                                std::span<const uint8_t> record,
                                float outerScale, std::span<float> latent) {
  const float outer = mode == RecordScaleMode::Token
                          ? loadF32(laneBytes(layout, record, "token_scale"))
                          : outerScale;
  return decodeRowNVFP4(laneBytes(layout, record, "latent"),
                        laneBytes(layout, record, "latent_scale"), outer,
                        latent);
}

static Status decodeRope(const RecordLayout &layout,
                         std::span<const uint8_t> record,
                         std::span<float> rope) {
  std::span<const uint8_t> codes = laneBytes(layout, record, "rope");
  if (ropeEncoding(layout) == Encoding::BF16)
    return decodeRow(Encoding::BF16, codes, {}, rope);
  const float scale = loadF32(laneBytes(layout, record, "rope_scale"));
  return decodeRow(Encoding::F8E4M3, codes, {&scale, 1}, rope);
}

Status decodeRecord(RecordPreset preset, RecordScaleMode mode,
                    std::span<const uint8_t> record, float outerScale,
                    std::span<float> latent, std::span<float> rope) {
  const RecordLayout &layout = recordLayout(preset);
  if (!isValidCall(layout, preset, mode, latent.size(), rope.size(),
                   record.size()))
    return Status::BadSize;

  // Decoded into scratch for the same reason as encoding: a scale stored in
  // the record may be corrupt, and the caller must then see no output.
  std::array<float, kLatentCount> latentOut;
  std::array<float, kRopeCount> ropeOut;
  Status status =
      preset == RecordPreset::FP8DsMla
          ? decodeFp8Latent(layout, record, latentOut)
          : decodeNvfp4Latent(layout, mode, record, outerScale, latentOut);
  if (status == Status::Ok)
    status = decodeRope(layout, record, ropeOut);
  if (status == Status::Ok) {
    std::ranges::copy(latentOut, latent.begin());
    std::ranges::copy(ropeOut, rope.begin());
  }
  return status;
}

} // namespace pattn::numerics
