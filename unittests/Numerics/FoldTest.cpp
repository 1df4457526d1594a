//===- FoldTest.cpp - Tests of the fold arithmetic --------------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the unit tests of the channel-scale fold of SPEC §5:
// the seed example and the overflow it avoids, the normalizer at powers of
// two, zero, subnormal and huge tables, the binade budget, and the single
// rounding of the folded query.
//
//===----------------------------------------------------------------------===//

#include "pattn/Numerics/Numerics.h"

#include "gtest/gtest.h"

#include <cfloat>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

using namespace pattn::numerics;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(FoldSeedTest, NormalizedFoldStaysFinite) {
  const std::vector<float> scales = {1000.0f};
  const FoldNormalizer n = computeFoldNormalizer(scales, 1.0f);
  ASSERT_EQ(n.status, Status::Ok);
  EXPECT_EQ(n.exponent, 10);
  EXPECT_EQ(n.value, 1024.0f);
  EXPECT_EQ(n.maxMagnitude, 1000.0f);

  // 100 * (1000 / 1024) = 97.65625 exactly, a tie between 97.625 (mantissa
  // 0x21A, even) and 97.6875 in fp16.
  const uint16_t q = encodeF16(100.0);
  const uint16_t folded = foldQueryF16(q, 1000.0f, n.value);
  EXPECT_EQ(folded, 0x561A);
  EXPECT_EQ(decodeF16(0x561A), 97.625f);
  EXPECT_EQ(decodeF16(folded) * n.value, 99968.0f); // vs 100000 unfolded

  // A zero K code then contributes a clean zero to the logit.
  EXPECT_EQ(decodeF16(folded) * 0.0f, 0.0f);
}

TEST(FoldSeedTest, UnnormalizedFoldOverflows) {
  // The hazard the normalizer removes: q * s = 100000 is past fp16's
  // largest finite value. An IEEE conversion (what a kernel's cvt does)
  // makes the folded query inf, and inf * 0 is NaN.
  const _Float16 ieee = static_cast<_Float16>(100.0f * 1000.0f);
  EXPECT_TRUE(std::isinf(static_cast<float>(ieee)));
  EXPECT_TRUE(std::isnan(static_cast<float>(ieee) * 0.0f));
  // pattn's encoder saturates instead (SPEC §2), which is finite but 34%
  // off: without the normalizer the fold is wrong either way.
  const uint16_t unnormalized = foldQueryF16(encodeF16(100.0), 1000.0f, 1.0f);
  EXPECT_EQ(unnormalized, 0x7BFF);
  EXPECT_EQ(decodeF16(unnormalized), 65504.0f);
}

TEST(FoldNormalizerTest, PowerOfTwoMaximumGoesStrictlyAbove) {
  for (int k : {-20, -1, 0, 1, 7, 100}) {
    const std::vector<float> scales = {std::ldexp(1.0f, k),
                                       0.5f * std::ldexp(1.0f, k)};
    const FoldNormalizer n = computeFoldNormalizer(scales, 1.0f);
    EXPECT_EQ(n.exponent, k + 1) << k;
    EXPECT_EQ(n.value, std::ldexp(1.0f, k + 1)) << k;
  }
  // Just below a power of two stays in the binade below.
  const std::vector<float> scales = {0x1.fffffep+3f};
  EXPECT_EQ(computeFoldNormalizer(scales, 1.0f).exponent, 4);
}

TEST(FoldNormalizerTest, AllZeroTableGivesOne) {
  const std::vector<float> zeros = {0.0f, -0.0f, 0.0f};
  for (std::span<const float> scales :
       {std::span<const float>(zeros), std::span<const float>()}) {
    const FoldNormalizer n = computeFoldNormalizer(scales, 1.0f);
    EXPECT_EQ(n.status, Status::Ok);
    EXPECT_EQ(n.exponent, 0);
    EXPECT_EQ(n.value, 1.0f);
    EXPECT_EQ(n.maxMagnitude, 0.0f);
  }
}

TEST(FoldNormalizerTest, UsesMagnitudes) {
  const std::vector<float> scales = {0.5f, -3.0f, 2.0f};
  const FoldNormalizer n = computeFoldNormalizer(scales, 1.0f);
  EXPECT_EQ(n.maxMagnitude, 3.0f);
  EXPECT_EQ(n.exponent, 2);
  EXPECT_EQ(n.value, 4.0f);
  EXPECT_EQ(n.badIndex, scales.size()); // none: one past the end
}

TEST(FoldNormalizerTest, SubnormalTableClampsToMinExponent) {
  const std::vector<float> scales = {1e-40f, -3e-41f};
  const FoldNormalizer n = computeFoldNormalizer(scales, 1.0f);
  EXPECT_EQ(minFoldExponent(), -126);
  EXPECT_EQ(n.exponent, -126);
  EXPECT_EQ(n.value, 0x1p-126f);
  EXPECT_GT(n.value, n.maxMagnitude); // still strictly above m
}

TEST(FoldNormalizerTest, HugeTableClampsSoSoftmaxScaleTimesNIsFinite) {
  const std::vector<float> scales = {FLT_MAX};
  const FoldNormalizer n = computeFoldNormalizer(scales, 2.0f);
  EXPECT_EQ(n.exponent, 125);
  EXPECT_EQ(n.value, 0x1p125f);
  EXPECT_TRUE(std::isfinite(2.0f * n.value));
  EXPECT_EQ(computeFoldNormalizer(scales, 1.0f).exponent, 126);
  EXPECT_EQ(computeFoldNormalizer(scales, 0.125f).exponent, 126);
  EXPECT_EQ(computeFoldNormalizer(scales, 0x1.fffffep+1f).exponent, 125);
  EXPECT_EQ(computeFoldNormalizer(scales, FLT_MAX).exponent, -1);
  EXPECT_TRUE(std::isfinite(FLT_MAX * 0x1p-1f));
}

TEST(FoldNormalizerTest, ExponentBounds) {
  EXPECT_EQ(maxFoldExponent(1.0f), 126);
  EXPECT_EQ(maxFoldExponent(0.088f), 126); // 1 / sqrt(128)
  EXPECT_EQ(maxFoldExponent(2.0f), 125);
  EXPECT_EQ(maxFoldExponent(3.0f), 125);
  EXPECT_EQ(maxFoldExponent(4.0f), 124);
  EXPECT_EQ(maxFoldExponent(FLT_MAX), -1);
  // The bound stays sane on a softmax scale no caller should pass.
  EXPECT_EQ(maxFoldExponent(kNaN), 126);
  EXPECT_EQ(maxFoldExponent(kInf), minFoldExponent());
}

TEST(FoldNormalizerTest, NonFiniteEntryIsReported) {
  for (float bad : {kNaN, kInf, -kInf}) {
    const std::vector<float> scales = {1.0f, 8.0f, bad, 2.0f, kNaN};
    const FoldNormalizer n = computeFoldNormalizer(scales, 1.0f);
    EXPECT_EQ(n.status, Status::NonFiniteScale);
    EXPECT_EQ(n.badIndex, 2u); // the first one
    EXPECT_EQ(n.exponent, 0);
    EXPECT_EQ(n.value, 1.0f);
    EXPECT_EQ(n.maxMagnitude, 8.0f); // over the finite entries, as in SPEC
  }
}

TEST(FoldNormalizerTest, FoldNeverGrowsTheQuery) {
  std::mt19937 random(5);
  std::uniform_real_distribution<float> logScale(-30.0f, 30.0f);
  std::uniform_int_distribution<unsigned> bits(0, 0x7BFF);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<float> scales(64);
    for (float &s : scales)
      s = std::exp2(logScale(random)) * (trial % 2 ? -1.0f : 1.0f);
    const FoldNormalizer n = computeFoldNormalizer(scales, 0.125f);
    ASSERT_EQ(n.status, Status::Ok);
    ASSERT_GT(n.value, n.maxMagnitude);
    ASSERT_LE(n.value, 2.0f * n.maxMagnitude);
    for (float s : scales) {
      const uint16_t q = uint16_t(bits(random));
      const float folded = decodeF16(foldQueryF16(q, s, n.value));
      ASSERT_LE(std::fabs(folded), decodeF16(q)) << q << " " << s;
    }
  }
}

TEST(BinadeSpanTest, CountsBinadesBetweenExtremes) {
  EXPECT_EQ(binadeSpan(std::vector<float>{1.0f, 0x1p-24f}), 24);
  EXPECT_EQ(binadeSpan(std::vector<float>{1.0f, 0x1p-25f}), 25);
  EXPECT_EQ(binadeSpan(std::vector<float>{0x1.fffffep0f, 0x1p-24f}), 24);
  EXPECT_EQ(binadeSpan(std::vector<float>{-4.0f, 0.5f}), 3);
  EXPECT_EQ(binadeSpan(std::vector<float>{3.0f}), 0);
  EXPECT_EQ(kFoldBinadeBudget, 24);
}

TEST(BinadeSpanTest, IgnoresZerosAndNonFinite) {
  EXPECT_EQ(binadeSpan(std::vector<float>{0.0f, 0.0f}), std::nullopt);
  EXPECT_EQ(binadeSpan(std::vector<float>{}), std::nullopt);
  EXPECT_EQ(binadeSpan(std::vector<float>{kNaN, kInf}), std::nullopt);
  EXPECT_EQ(binadeSpan(std::vector<float>{0.0f, 4.0f, -0.0f, 0.5f}), 3);
  EXPECT_EQ(binadeSpan(std::vector<float>{kInf, 1.0f, 2.0f, kNaN}), 1);
  EXPECT_EQ(binadeSpan(std::vector<float>{1e-40f, 1.0f}), 133);
}

TEST(FoldQueryTest, RoundsOnceToF16) {
  // q = 3 and s / N = 0x1.55d554p-2 multiply to 1 + 3 * 2^-11 - 2^-24, just
  // below the fp16 tie between 0x3C01 and 0x3C02: one rounding gives 0x3C01.
  // Rounding to fp32 first lands exactly on the tie (an fp32 tie itself,
  // resolved to the even 1 + 3 * 2^-11), which then goes to 0x3C02.
  const uint16_t q = encodeF16(3.0);
  const float scale = 0x1.55d554p-3f, normalizer = 0.5f;
  const double exact = 3.0 * double(scale / normalizer);
  ASSERT_EQ(exact, 1.0 + 3 * 0x1p-11 - 0x1p-24);
  ASSERT_EQ(encodeF16(3.0f * (scale / normalizer)), 0x3C02);
  EXPECT_EQ(foldQueryF16(q, scale, normalizer), 0x3C01);
}

TEST(FoldQueryTest, RoundsOnceToBF16) {
  // The same construction one bf16 ulp (2^-7) wide.
  const uint16_t q = encodeBF16(3.0);
  const float scale = 0x1.595554p-3f, normalizer = 0.5f;
  const double exact = 3.0 * double(scale / normalizer);
  ASSERT_EQ(exact, 1.0 + 3 * 0x1p-8 - 0x1p-24);
  ASSERT_EQ(encodeBF16(3.0f * (scale / normalizer)), 0x3F82);
  EXPECT_EQ(foldQueryBF16(q, scale, normalizer), 0x3F81);
}

TEST(FoldQueryTest, ExactProductsAndSigns) {
  EXPECT_EQ(foldQueryF16(encodeF16(-2.0), 0.75f, 1.0f), encodeF16(-1.5));
  EXPECT_EQ(foldQueryBF16(encodeBF16(-2.0), 0.75f, 1.0f), encodeBF16(-1.5));
  EXPECT_EQ(foldQueryF16(encodeF16(5.0), -3.0f, 4.0f), encodeF16(-3.75));
  EXPECT_EQ(foldQueryF16(encodeF16(-0.0), 0.75f, 1.0f), 0x8000);
  EXPECT_EQ(foldQueryF16(encodeF16(7.0), 0.0f, 1.0f), 0x0000);
}

TEST(OutputChannelScaleTest, OneFp32Rounding) {
  EXPECT_EQ(applyOutputChannelScale(3.0f, 0.5f), 1.5f);
  EXPECT_EQ(applyOutputChannelScale(-2.0f, 0.0f), -0.0f);
  // (1 + 2^-23)^2 = 1 + 2^-22 + 2^-46: fp32 drops the last term.
  const float o = 0x1.000002p+0f;
  EXPECT_EQ(applyOutputChannelScale(o, o), 0x1.000004p+0f);
  EXPECT_NE(double(applyOutputChannelScale(o, o)), double(o) * double(o));
}

} // namespace

TEST(FoldLegalityTest, TwentyFourBinadesFoldTwentyFiveDoNot) {
  const std::vector<float> inside = {1.0f, 0x1p-24f, 0.0f};
  const FoldLegality legal = checkFoldLegality(inside, 1.0f);
  EXPECT_EQ(legal.verdict, FoldLegality::Verdict::Legal);
  EXPECT_EQ(legal.binadeSpan, 24);
  EXPECT_EQ(legal.exponent, 1);

  const std::vector<float> outside = {1.0f, 0x1.fffffep-25f};
  const FoldLegality wide = checkFoldLegality(outside, 1.0f);
  EXPECT_EQ(wide.verdict, FoldLegality::Verdict::TooWide);
  EXPECT_EQ(wide.binadeSpan, 25);
}

TEST(FoldLegalityTest, ClampedNormalizerIsNotLegal) {
  // FLT_MAX wants N = 2^128; softmax_scale 2 clamps the exponent to 125.
  const std::vector<float> scales = {FLT_MAX, 1e38f};
  const FoldLegality clamped = checkFoldLegality(scales, 2.0f);
  EXPECT_EQ(clamped.verdict, FoldLegality::Verdict::Clamped);
  EXPECT_EQ(clamped.wantedExponent, 128);
  EXPECT_EQ(clamped.exponent, 125);
  // The largest table that still folds: max just below 2^125.
  const std::vector<float> edge = {0x1.fffffep124f};
  EXPECT_EQ(checkFoldLegality(edge, 2.0f).verdict,
            FoldLegality::Verdict::Legal);
}

TEST(FoldLegalityTest, NonFiniteAndEmptyTables) {
  const std::vector<float> bad = {1.0f, std::nanf(""), 2.0f};
  const FoldLegality nan = checkFoldLegality(bad, 1.0f);
  EXPECT_EQ(nan.verdict, FoldLegality::Verdict::NonFinite);
  EXPECT_EQ(nan.badIndex, 1u);
  const std::vector<float> zeros = {0.0f, -0.0f};
  const FoldLegality zero = checkFoldLegality(zeros, 1.0f);
  EXPECT_EQ(zero.verdict, FoldLegality::Verdict::Legal);
  EXPECT_EQ(zero.exponent, 0);
  EXPECT_EQ(zero.binadeSpan, 0);
}
