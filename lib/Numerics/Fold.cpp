//===- Fold.cpp - Channel-scale fold arithmetic -----------------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the arithmetic of --pattn-fold-channel-scales (SPEC
// §5): the power-of-two normalizer of a per-channel K scale table, the
// per-row renormalized query fold, and the output channel scale, exactly as
// the compiled kernels compute them.
//
//===----------------------------------------------------------------------===//

#include "pattn/Numerics/Numerics.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <optional>
#include <vector>

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
  FoldLegality result{FoldLegality::Verdict::Legal,
                      binadeSpan(scales).value_or(0), normalizer.exponent,
                      normalizer.badIndex};
  if (normalizer.status != Status::Ok)
    result.verdict = FoldLegality::Verdict::NonFinite;
  // A clamped N is harmless (the row exponents absorb |s / N| > 1); a
  // table wider than the budget is not (numerics.h, docs/Passes.md).
  else if (result.binadeSpan > kFoldBinadeBudget)
    result.verdict = FoldLegality::Verdict::TooWide;
  return result;
}

/// The binade of a nonzero x rounded to 24 significant bits (RN, any
/// exponent): what the kernel reads off its fp32 mantissa product.
static int roundedBinade(double x) {
  const int binade = std::ilogb(x);
  const double mantissa = std::nearbyint(std::ldexp(std::fabs(x), 23 - binade));
  return mantissa == 0x1p24 ? binade + 1 : binade;
}

int foldQueryRow(std::span<const uint16_t> query, std::span<const float> scales,
                 float normalizer, bool bf16, std::span<uint16_t> out) {
  const int normalizerExponent = std::ilogb(normalizer);
  // q * s is exact in double (11 or 8 bits times 24), and so is the
  // power-of-two division by N.
  std::vector<double> products(query.size());
  std::optional<int> rowExponent;
  for (size_t c = 0; c < query.size(); ++c) {
    const double q = bf16 ? decodeBF16(query[c]) : decodeF16(query[c]);
    products[c] = std::ldexp(q * double(scales[c]), -normalizerExponent);
    if (products[c] != 0.0)
      rowExponent =
          std::max(rowExponent.value_or(INT_MIN), roundedBinade(products[c]));
  }
  const int e = rowExponent.value_or(0);
  for (size_t c = 0; c < query.size(); ++c) {
    double folded = std::copysign(0.0, products[c]);
    if (products[c] != 0.0 &&
        roundedBinade(products[c]) - e >= -kFoldRowFlushBinades)
      folded = std::ldexp(products[c], -e);
    out[c] = bf16 ? encodeBF16(folded) : encodeF16(folded);
  }
  return e;
}

float applyOutputChannelScale(float o, float scale) { return o * scale; }

} // namespace pattn::numerics
