//===- Minifloat.cpp - Scalar minifloat codecs ------------------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the scalar encoders and decoders of f16, bf16, e4m3fn,
// e5m2 and e2m1. All five go through one routine parametrized by the format,
// which rounds the exact double input once, half to even, so no value is ever
// rounded twice on its way into a cache.
//
//===----------------------------------------------------------------------===//

#include "pattn/Numerics/EncodingTable.h"
#include "pattn/Numerics/Numerics.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace pattn::numerics {

namespace {

/// How a format spends its codes with an all-ones exponent field.
enum class Specials {
  Ieee,       ///< infinity (mantissa zero) or NaN (f16, bf16, e5m2)
  AllOnesNaN, ///< only the all-ones magnitude is NaN, no infinity (e4m3fn)
  None,       ///< every code is a finite number (e2m1)
};

/// A sign-magnitude binary float of 1 + exponentBits + mantissaBits bits.
struct Format {
  int exponentBits;
  int mantissaBits;
  int bias;
  Specials specials;
  uint32_t maxFiniteBits; ///< magnitude bits of the largest finite value
  uint32_t nanBits;       ///< what the encoder returns for a NaN input
};

} // namespace

/// The format of a cache minifloat, its fields from the encoding table (the
/// kernel builders' encoders read the same fields).
static constexpr Format cacheFormat(const MinifloatFields &fields,
                                    Specials specials, uint32_t nanBits) {
  return {fields.exponentBits,
          fields.mantissaBits,
          fields.bias,
          specials,
          fields.maxMagnitudeCode,
          nanBits};
}

// Arguments: exponent bits, mantissa bits, bias, specials, largest
// finite magnitude, canonical NaN.
// clang-format off
static constexpr Format kF16{
    5, 10, 15, Specials::Ieee, 0x7BFF, 0x7E00};
static constexpr Format kBF16{
    8, 7, 127, Specials::Ieee, 0x7F7F, 0x7FC0};
// clang-format on
// e2m1 has no NaN, so a NaN encodes as +0.
static constexpr Format kE4M3 =
    cacheFormat(kE4M3Fields, Specials::AllOnesNaN, 0x7F);
static constexpr Format kE5M2 = cacheFormat(kE5M2Fields, Specials::Ieee, 0x7F);
static constexpr Format kE2M1 = cacheFormat(kE2M1Fields, Specials::None, 0x0);

/// Rounds a non-negative value to the nearest integer, ties to even. Unlike
/// std::nearbyint it does not depend on the current rounding mode.
static double roundHalfToEven(double value) {
  const double below = std::floor(value);
  const double fraction = value - below; // exact for value >= 0 (Sterbenz)
  if (fraction > 0.5 || (fraction == 0.5 && std::fmod(below, 2.0) != 0.0))
    return below + 1.0;
  return below;
}

static double decode(const Format &format, uint32_t bits) {
  const uint32_t exponentMask = (1u << format.exponentBits) - 1;
  const uint32_t mantissaMask = (1u << format.mantissaBits) - 1;
  const bool negative =
      (bits >> (format.exponentBits + format.mantissaBits)) & 1u;
  const uint32_t exponentField = (bits >> format.mantissaBits) & exponentMask;
  const uint32_t mantissa = bits & mantissaMask;

  double magnitude;
  if (format.specials == Specials::Ieee && exponentField == exponentMask) {
    magnitude = mantissa == 0 ? std::numeric_limits<double>::infinity()
                              : std::numeric_limits<double>::quiet_NaN();
  } else if (format.specials == Specials::AllOnesNaN &&
             exponentField == exponentMask && mantissa == mantissaMask) {
    magnitude = std::numeric_limits<double>::quiet_NaN();
  } else if (exponentField == 0) {
    magnitude =
        std::ldexp(double(mantissa), 1 - format.bias - format.mantissaBits);
  } else {
    const uint32_t significand = mantissa | (1u << format.mantissaBits);
    magnitude =
        std::ldexp(double(significand),
                   int(exponentField) - format.bias - format.mantissaBits);
  }
  return negative ? -magnitude : magnitude;
}

static uint32_t encode(const Format &format, double x) {
  if (std::isnan(x))
    return format.nanBits;

  const uint32_t sign =
      std::signbit(x) ? 1u << (format.exponentBits + format.mantissaBits) : 0;
  // Every format saturates: fp8/fp4 by their OCP definitions, f16/bf16
  // because a cache must not turn a finite input into an infinity (SPEC §2).
  const uint32_t overflowBits = format.maxFiniteBits;
  const double magnitude = std::fabs(x);
  if (std::isinf(magnitude))
    return sign | overflowBits;
  if (magnitude == 0.0)
    return sign; // keeps the sign of zero, as IEEE conversions do

  // Count x in quanta of its binade; below the normal range the quantum stays
  // that of the subnormals. Scaling by a power of two is exact, so the only
  // rounding is the one in roundHalfToEven.
  const int minExponent = 1 - format.bias;
  const int exponent = std::max(std::ilogb(magnitude), minExponent);
  const double quanta =
      roundHalfToEven(std::ldexp(magnitude, format.mantissaBits - exponent));

  // Overflow is decided on the rounded value, which makes max + half an ulp
  // (a tie whose even neighbour lies beyond the range) overflow as IEEE says.
  const double maxFinite = decode(format, format.maxFiniteBits);
  if (std::ldexp(quanta, exponent - format.mantissaBits) > maxFinite)
    return sign | overflowBits;

  // `quanta` carries the implicit bit, so adding it to the exponent field
  // counted from the subnormals yields the code of subnormals, normals and a
  // round-up into the next binade alike.
  const uint32_t exponentSteps = uint32_t(exponent - minExponent);
  return sign | ((exponentSteps << format.mantissaBits) + uint32_t(quanta));
}

uint16_t encodeF16(double x) { return uint16_t(encode(kF16, x)); }
float decodeF16(uint16_t bits) { return float(decode(kF16, bits)); }

uint16_t encodeBF16(double x) { return uint16_t(encode(kBF16, x)); }
float decodeBF16(uint16_t bits) { return float(decode(kBF16, bits)); }

uint8_t encodeE4M3(double x) { return uint8_t(encode(kE4M3, x)); }
float decodeE4M3(uint8_t code) { return float(decode(kE4M3, code)); }

uint8_t encodeE5M2(double x) { return uint8_t(encode(kE5M2, x)); }
float decodeE5M2(uint8_t code) { return float(decode(kE5M2, code)); }

uint8_t encodeE2M1(double x) { return uint8_t(encode(kE2M1, x)); }
float decodeE2M1(uint8_t code) { return float(decode(kE2M1, code & 0xFu)); }

} // namespace pattn::numerics
