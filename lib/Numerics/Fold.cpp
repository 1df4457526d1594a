//===- Fold.cpp - Channel-scale fold arithmetic -----------------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the arithmetic of --pattn-fold-channel-scales (SPEC
// §5): the power-of-two normalizer of a per-channel K scale table, the binade
// span that decides whether a table may be folded, and the single-rounding
// query fold and output channel scale that the compiled kernels reproduce.
//
//===----------------------------------------------------------------------===//

#include "pattn/Numerics/Numerics.h"

#include <algorithm>
#include <cmath>

namespace pattn::numerics {

int minFoldExponent() { return -126; }

int maxFoldExponent(float softmaxScale) {
  // ilogb(s) <= 127 for any finite s, so this stays >= -1 on valid input;
  // the outer clamp only keeps an infinite softmaxScale from inverting the
  // range (fmax already maps NaN to 1).
  const int bound = 126 - std::ilogb(std::fmax(softmaxScale, 1.0f));
  return std::max(bound, minFoldExponent());
}

FoldNormalizer computeFoldNormalizer(std::span<const float> scales,
                                     float softmaxScale) {
  // badIndex is scales.size() (one past the end) when every entry is finite.
  FoldNormalizer result{Status::Ok, scales.size(), 0, 1.0f, 0.0f};
  for (size_t i = 0; i < scales.size(); ++i) {
    if (!std::isfinite(scales[i])) {
      if (result.status == Status::Ok) {
        result.status = Status::NonFiniteScale;
        result.badIndex = i;
      }
      continue;
    }
    result.maxMagnitude = std::max(result.maxMagnitude, std::fabs(scales[i]));
  }
  // A table that cannot be trusted gets the neutral N = 1.
  if (result.status != Status::Ok || result.maxMagnitude == 0.0f)
    return result;

  // The power of two strictly above m, so that |s / N| < 1 and |q'| <= |q|,
  // clamped so that N and softmaxScale * N stay finite fp32 values.
  result.exponent =
      std::clamp(std::ilogb(result.maxMagnitude) + 1, minFoldExponent(),
                 maxFoldExponent(softmaxScale));
  result.value = std::ldexp(1.0f, result.exponent);
  return result;
}

std::optional<int> binadeSpan(std::span<const float> scales) {
  std::optional<int> largest, smallest;
  for (float scale : scales) {
    if (!std::isfinite(scale) || scale == 0.0f)
      continue;
    const int binade = std::ilogb(scale); // ilogb ignores the sign
    largest = std::max(largest.value_or(binade), binade);
    smallest = std::min(smallest.value_or(binade), binade);
  }
  if (!largest)
    return std::nullopt;
  return *largest - *smallest;
}

FoldLegality checkFoldLegality(std::span<const float> scales,
                               float softmaxScale) {
  const FoldNormalizer normalizer = computeFoldNormalizer(scales, softmaxScale);
  FoldLegality result{FoldLegality::Verdict::Legal, binadeSpan(scales).value_or(0),
                      normalizer.exponent, normalizer.exponent,
                      normalizer.badIndex};
  if (normalizer.status != Status::Ok) {
    result.verdict = FoldLegality::Verdict::NonFinite;
    return result;
  }
  if (normalizer.maxMagnitude != 0.0f)
    result.wantedExponent = std::ilogb(normalizer.maxMagnitude) + 1;
  // Channels more than 24 binades below the largest would lose their low
  // bits (and flush to zero) in the folded fp16 query.
  if (result.binadeSpan > kFoldBinadeBudget)
    result.verdict = FoldLegality::Verdict::TooWide;
  // Clamped from above, N no longer bounds |s|, so |q'| may exceed |q|.
  else if (result.wantedExponent > result.exponent)
    result.verdict = FoldLegality::Verdict::Clamped;
  return result;
}

/// q * (scale / normalizer) with the ratio rounded to fp32 as the kernel
/// computes it; a 24-bit by 11- or 8-bit product is exact in double, so the
/// encoder's rounding is the only one after the ratio.
static double foldedProduct(float q, float scale, float normalizer) {
  const float ratio = scale / normalizer;
  return double(q) * double(ratio);
}

uint16_t foldQueryF16(uint16_t q, float scale, float normalizer) {
  return encodeF16(foldedProduct(decodeF16(q), scale, normalizer));
}

uint16_t foldQueryBF16(uint16_t q, float scale, float normalizer) {
  return encodeBF16(foldedProduct(decodeBF16(q), scale, normalizer));
}

float applyOutputChannelScale(float o, float scale) { return o * scale; }

} // namespace pattn::numerics
