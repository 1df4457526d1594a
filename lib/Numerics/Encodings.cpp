//===- Encodings.cpp - Paged-cache row encodings ----------------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the element quantizers and the row codecs of SPEC §2:
// f16/bf16 values, i8 and fp8 codes, packed int4 and nvfp4 with its
// two-level scales. Every encoder validates all of its inputs before it
// writes a byte, so a rejected row is never half-written.
//
//===----------------------------------------------------------------------===//

#include "pattn/Numerics/EncodingTable.h"
#include "pattn/Numerics/Numerics.h"

#include <algorithm>
#include <cmath>

namespace pattn::numerics {

// The rows these routines are written for; the table holds their numbers.
static const EncodingInfo &i4Row() { return encodingInfo(Encoding::I4); }
static const EncodingInfo &nvfp4Row() { return encodingInfo(Encoding::NVFP4); }

std::string_view stringifyStatus(Status status) {
  switch (status) {
  case Status::Ok:
    return "ok";
  case Status::NonFiniteInput:
    return "non-finite input";
  case Status::NonFiniteScale:
    return "non-finite scale";
  case Status::BadSize:
    return "bad size";
  }
  return "unknown status";
}

//===----------------------------------------------------------------------===//
// Encoding names and sizes: the encoding table's rows
//===----------------------------------------------------------------------===//

std::string_view stringifyEncoding(Encoding encoding) {
  // A value outside the enumerators (a cast integer) has no row.
  if (size_t(encoding) >= encodingTable().size())
    return "unknown";
  return encodingInfo(encoding).name;
}

std::optional<Encoding> parseEncoding(std::string_view name) {
  for (const EncodingInfo &row : encodingTable())
    if (row.name == name)
      return row.encoding;
  return std::nullopt;
}

int64_t rowBytes(Encoding encoding, int64_t headDim) {
  return encodingInfo(encoding).rowBytes(headDim);
}

float maxCodeMagnitude(Encoding encoding) {
  return encodingInfo(encoding).maxCodeMagnitude;
}

//===----------------------------------------------------------------------===//
// Element quantizers
//===----------------------------------------------------------------------===//

/// Rounds to the nearest integer, ties to even, independently of the current
/// rounding mode. Rounding the magnitude keeps every step exact.
static float roundHalfToEven(float value) {
  const float magnitude = std::fabs(value);
  const float below = std::floor(magnitude);
  const float fraction = magnitude - below;
  float rounded = below;
  if (fraction > 0.5f || (fraction == 0.5f && std::fmod(below, 2.0f) != 0.0f))
    rounded = below + 1.0f;
  return std::copysign(rounded, value);
}

/// t = x / scale in fp32, clamped to [lowest, highest] and rounded. Clamping
/// before rounding is equivalent (the bounds are integers) and keeps an
/// infinite t, from a tiny scale, in range.
static int8_t quantizeInteger(float x, float scale, float lowest,
                              float highest) {
  if (scale == 0.0f)
    return 0;
  const float t = x / scale;
  if (std::isnan(t))
    return 0;
  return int8_t(roundHalfToEven(std::clamp(t, lowest, highest)));
}

int8_t quantizeI8(float x, float scale) {
  return quantizeInteger(x, scale, -128.0f, 127.0f);
}

int8_t quantizeI4(float x, float scale) {
  return quantizeInteger(x, scale, -8.0f, 7.0f);
}

// The fp8 encoders saturate, which is the clamp. The fp32 quotient widens to
// double exactly, so the encoder rounds it once more and only once.
uint8_t quantizeE4M3(float x, float scale) {
  return scale == 0.0f ? 0 : encodeE4M3(x / scale);
}

uint8_t quantizeE5M2(float x, float scale) {
  return scale == 0.0f ? 0 : encodeE5M2(x / scale);
}

//===----------------------------------------------------------------------===//
// int4 packing
//===----------------------------------------------------------------------===//

/// Element i of a 4-bit packed row: low nibble first.
static uint8_t nibbleAt(std::span<const uint8_t> packed, size_t i) {
  return (packed[i / 2] >> (4 * (i % 2))) & 0xFu;
}

static uint8_t biasI4(int8_t code) {
  return uint8_t(code + i4Row().storedCodeBias) & 0xFu;
}

/// Stores `count` int4 codes, element i given by `codeAt(i)`, biased and two
/// per byte; an odd count pads the last high nibble with the biased zero.
template <typename CodeFn>
static void packBiasedI4(size_t count, std::span<uint8_t> packed,
                         CodeFn codeAt) {
  for (size_t byte = 0; byte < (count + 1) / 2; ++byte) {
    const size_t low = 2 * byte, high = low + 1;
    const uint8_t highNibble =
        high < count ? biasI4(codeAt(high)) : i4Row().storedCodeBias;
    packed[byte] = uint8_t(biasI4(codeAt(low)) | highNibble << 4);
  }
}

void packI4(std::span<const int8_t> codes, std::span<uint8_t> packed) {
  packBiasedI4(codes.size(), packed, [&](size_t i) { return codes[i]; });
}

void unpackI4(std::span<const uint8_t> packed, std::span<int8_t> codes) {
  for (size_t i = 0; i < codes.size(); ++i)
    codes[i] = int8_t(nibbleAt(packed, i) - i4Row().storedCodeBias);
}

//===----------------------------------------------------------------------===//
// Rows
//===----------------------------------------------------------------------===//

static bool allFinite(std::span<const float> values) {
  return std::ranges::all_of(values, [](float v) { return std::isfinite(v); });
}

static bool isValidScale(float scale) {
  return std::isfinite(scale) && scale >= 0.0f;
}

static float amax(std::span<const float> values) {
  float result = 0.0f;
  for (float v : values)
    result = std::max(result, std::fabs(v));
  return result;
}

/// The checks shared by encodeRow and decodeRow: sizes first, then the
/// scales (which f16/bf16 rows ignore). Group-scaled rows (nvfp4) have their
/// own routines and are rejected here as a size error, the only status that
/// fits.
static Status checkRow(Encoding encoding, size_t elements,
                       std::span<const float> scales, size_t bytes) {
  const EncodingInfo &info = encodingInfo(encoding);
  if (info.hasGroupScales() || int64_t(bytes) != info.rowBytes(elements))
    return Status::BadSize;
  if (info.isPlainFloat())
    return Status::Ok;
  if (scales.size() != 1 && scales.size() != elements)
    return Status::BadSize;
  if (!std::ranges::all_of(scales, isValidScale))
    return Status::NonFiniteScale;
  return Status::Ok;
}

/// One scale for the whole row (tensor or token) or one per element.
static float scaleAt(std::span<const float> scales, size_t i) {
  return scales.size() == 1 ? scales[0] : scales[i];
}

Status encodeRow(Encoding encoding, std::span<const float> x,
                 std::span<const float> scales, std::span<uint8_t> row) {
  // A bad size outranks everything, and a bad input outranks a bad scale.
  const Status rowStatus = checkRow(encoding, x.size(), scales, row.size());
  if (rowStatus == Status::BadSize)
    return rowStatus;
  if (!allFinite(x))
    return Status::NonFiniteInput;
  if (rowStatus != Status::Ok)
    return rowStatus;

  switch (encoding) {
  case Encoding::F16:
  case Encoding::BF16:
    for (size_t i = 0; i < x.size(); ++i) {
      const uint16_t bits =
          encoding == Encoding::F16 ? encodeF16(x[i]) : encodeBF16(x[i]);
      row[2 * i] = uint8_t(bits);
      row[2 * i + 1] = uint8_t(bits >> 8);
    }
    break;
  case Encoding::I8:
    for (size_t i = 0; i < x.size(); ++i)
      row[i] = uint8_t(quantizeI8(x[i], scaleAt(scales, i)));
    break;
  case Encoding::F8E4M3:
    for (size_t i = 0; i < x.size(); ++i)
      row[i] = quantizeE4M3(x[i], scaleAt(scales, i));
    break;
  case Encoding::F8E5M2:
    for (size_t i = 0; i < x.size(); ++i)
      row[i] = quantizeE5M2(x[i], scaleAt(scales, i));
    break;
  case Encoding::I4:
    packBiasedI4(x.size(), row, [&](size_t i) {
      return quantizeI4(x[i], scaleAt(scales, i));
    });
    break;
  case Encoding::NVFP4:
    break; // rejected by checkRow
  }
  return Status::Ok;
}

Status decodeRow(Encoding encoding, std::span<const uint8_t> row,
                 std::span<const float> scales, std::span<float> x) {
  if (Status status = checkRow(encoding, x.size(), scales, row.size());
      status != Status::Ok)
    return status;

  for (size_t i = 0; i < x.size(); ++i) {
    switch (encoding) {
    case Encoding::F16:
    case Encoding::BF16: {
      const uint16_t bits = uint16_t(row[2 * i] | row[2 * i + 1] << 8);
      x[i] = encoding == Encoding::F16 ? decodeF16(bits) : decodeBF16(bits);
      break;
    }
    case Encoding::I8:
      x[i] = float(int8_t(row[i])) * scaleAt(scales, i);
      break;
    case Encoding::F8E4M3:
      x[i] = decodeE4M3(row[i]) * scaleAt(scales, i);
      break;
    case Encoding::F8E5M2:
      x[i] = decodeE5M2(row[i]) * scaleAt(scales, i);
      break;
    case Encoding::I4:
      x[i] =
          float(nibbleAt(row, i) - i4Row().storedCodeBias) * scaleAt(scales, i);
      break;
    case Encoding::NVFP4:
      break; // rejected by checkRow
    }
  }
  return Status::Ok;
}

//===----------------------------------------------------------------------===//
// nvfp4 rows
//===----------------------------------------------------------------------===//

static Status checkNvfp4Row(size_t elements, size_t rowSize,
                            size_t groupScaleCount) {
  const size_t groupSize = nvfp4Row().groupScales.size;
  if (elements % groupSize != 0 ||
      int64_t(rowSize) != nvfp4Row().rowBytes(int64_t(elements)) ||
      groupScaleCount != elements / groupSize)
    return Status::BadSize;
  return Status::Ok;
}

Status encodeRowNVFP4(std::span<const float> x, float outerScale,
                      std::span<uint8_t> row, std::span<uint8_t> groupScales) {
  if (Status status = checkNvfp4Row(x.size(), row.size(), groupScales.size());
      status != Status::Ok)
    return status;
  if (!allFinite(x))
    return Status::NonFiniteInput;
  if (!isValidScale(outerScale))
    return Status::NonFiniteScale;

  const size_t groupSize = nvfp4Row().groupScales.size;
  const float maxCode = nvfp4Row().minifloat->maxFinite; // e2m1's 6
  for (size_t group = 0; group < groupScales.size(); ++group) {
    std::span<const float> values = x.subspan(group * groupSize, groupSize);
    std::span<uint8_t> codes =
        row.subspan(group * groupSize / 2, groupSize / 2);

    // Two fp32 divisions in this order, exactly as the GPU writer does them.
    const float groupAmax = amax(values);
    uint8_t scaleCode = 0;
    float denominator = 0.0f;
    if (groupAmax != 0.0f && outerScale != 0.0f) {
      scaleCode = encodeE4M3(groupAmax / maxCode / outerScale);
      denominator = decodeE4M3(scaleCode) * outerScale;
    }
    // A zero denominator (zero group, zero outer scale, or a group scale that
    // underflows e4m3) stores an all-zero group, which decodes to zeros.
    if (denominator == 0.0f) {
      groupScales[group] = 0;
      std::ranges::fill(codes, uint8_t(0));
      continue;
    }
    groupScales[group] = scaleCode;
    for (size_t i = 0; i < codes.size(); ++i) {
      const uint8_t low = encodeE2M1(values[2 * i] / denominator);
      const uint8_t high = encodeE2M1(values[2 * i + 1] / denominator);
      codes[i] = uint8_t((low & 0xFu) | (high & 0xFu) << 4);
    }
  }
  return Status::Ok;
}

Status decodeRowNVFP4(std::span<const uint8_t> row,
                      std::span<const uint8_t> groupScales, float outerScale,
                      std::span<float> x) {
  if (Status status = checkNvfp4Row(x.size(), row.size(), groupScales.size());
      status != Status::Ok)
    return status;
  if (!isValidScale(outerScale))
    return Status::NonFiniteScale;

  const size_t groupSize = nvfp4Row().groupScales.size;
  for (size_t i = 0; i < x.size(); ++i) {
    const float groupScale = decodeE4M3(groupScales[i / groupSize]);
    const float code = decodeE2M1(nibbleAt(row, i));
    x[i] = (code * groupScale) * outerScale;
  }
  return Status::Ok;
}

float tokenScale(Encoding encoding, std::span<const float> x) {
  const float maxCode = maxCodeMagnitude(encoding);
  return maxCode == 0.0f ? 0.0f : amax(x) / maxCode;
}

} // namespace pattn::numerics
