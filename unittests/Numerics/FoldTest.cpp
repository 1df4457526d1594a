//===- FoldTest.cpp - Tests of the fold arithmetic --------------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the unit tests of the channel-scale fold of SPEC §5:
// the seed example and the overflow it avoids, the normalizer at powers of
// two, zero, subnormal and huge tables, and the per-row renormalized fold:
// its single rounding, its independence of the query's magnitude, signs,
// zeros and flushes.
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

/// foldQueryRow over one row given as doubles (encoded to `bf16` or f16).
struct Row {
  std::vector<uint16_t> query, out;
  int exponent = 0;
  Row(std::vector<double> q, std::span<const float> scales, float normalizer,
      bool bf16 = false) {
    for (double x : q)
      query.push_back(bf16 ? encodeBF16(x) : encodeF16(x));
    out.resize(query.size());
    exponent = foldQueryRow(query, scales, normalizer, bf16, out);
  }
};

TEST(FoldSeedTest, NormalizedFoldStaysFinite) {
  const std::vector<float> scales = {1000.0f};
  const FoldNormalizer n = computeFoldNormalizer(scales, 1.0f);
  ASSERT_EQ(n.status, Status::Ok);
  EXPECT_EQ(n.exponent, 10);
  EXPECT_EQ(n.value, 1024.0f);
  EXPECT_EQ(n.maxMagnitude, 1000.0f);

  // 100 * (1000 / 1024) = 97.65625 = 1.52587890625 * 2^6 exactly; the row
  // exponent is 6 and the folded value a tie between 1.525390625 (mantissa
  // 0x21A, even) and 1.5263671875 in fp16.
  const Row row({100.0}, scales, n.value);
  EXPECT_EQ(row.exponent, 6);
  EXPECT_EQ(row.out[0], 0x3E1A);
  EXPECT_EQ(decodeF16(row.out[0]), 1.525390625f);
  // The logit factor 2^6 * N gives back 99968 (vs 100000 unfolded).
  EXPECT_EQ(std::ldexp(decodeF16(row.out[0]), row.exponent) * n.value,
            99968.0f);
  // A zero K code then contributes a clean zero to the logit.
  EXPECT_EQ(decodeF16(row.out[0]) * 0.0f, 0.0f);
}

TEST(FoldSeedTest, UnnormalizedFoldOverflows) {
  // The hazard the normalizer removes: q * s = 100000 is past fp16's
  // largest finite value. An IEEE conversion (what a kernel's cvt does)
  // makes the folded query inf, and inf * 0 is NaN.
  const _Float16 ieee = static_cast<_Float16>(100.0f * 1000.0f);
  EXPECT_TRUE(std::isinf(static_cast<float>(ieee)));
  EXPECT_TRUE(std::isnan(static_cast<float>(ieee) * 0.0f));
  // The row exponent takes the magnitude out even without N (N = 1):
  // |folded| stays in [1, 2].
  const std::vector<float> scales = {1000.0f};
  const Row row({100.0}, scales, 1.0f);
  EXPECT_EQ(row.exponent, 16);
  EXPECT_EQ(decodeF16(row.out[0]), 1.525390625f);
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

TEST(FoldQueryRowTest, LargestFoldedValueLiesInOneToTwo) {
  std::mt19937 random(5);
  std::uniform_real_distribution<float> logScale(-30.0f, 30.0f);
  std::uniform_int_distribution<unsigned> bits(0, 0x7BFF);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> scales(64);
    for (float &s : scales)
      s = std::exp2(logScale(random)) * (trial % 2 ? -1.0f : 1.0f);
    const FoldNormalizer n = computeFoldNormalizer(scales, 0.125f);
    ASSERT_EQ(n.status, Status::Ok);
    std::vector<uint16_t> query(64), out(64);
    for (uint16_t &q : query)
      q = uint16_t(bits(random) | (trial % 3 ? 0 : 0x8000));
    const int e = foldQueryRow(query, scales, n.value, false, out);
    float largest = 0.0f;
    for (uint16_t folded : out)
      largest = std::max(largest, std::fabs(decodeF16(folded)));
    ASSERT_GE(largest, 1.0f) << trial;
    ASSERT_LE(largest, 2.0f) << trial;
    // Each value is p * 2^-e rounded once to fp16 (half an ulp).
    for (size_t c = 0; c < 64; ++c) {
      const double exact =
          std::ldexp(double(decodeF16(query[c])) * scales[c] / n.value, -e);
      const double ulp = std::fabs(exact) < 0x1p-14
                             ? 0x1p-24
                             : std::ldexp(1.0, std::ilogb(exact) - 10);
      ASSERT_LE(std::fabs(decodeF16(out[c]) - exact), ulp / 2) << c;
    }
  }
}

TEST(FoldQueryRowTest, QueryMagnitudeOnlyMovesTheExponent) {
  // The report of issue 8: a 24-binade table with |q| ~ 0.02 flushed its
  // small channels. Scaling a row by 2^k now changes only its exponent.
  std::mt19937 random(11);
  std::uniform_real_distribution<double> mantissa(1.0, 2.0);
  std::vector<float> scales(128);
  for (size_t c = 0; c < scales.size(); ++c)
    scales[c] = std::ldexp(1.0f, int(c % 61) - 40); // 60 binades
  const FoldNormalizer n = computeFoldNormalizer(scales, 0.125f);
  std::vector<double> base(128);
  for (double &q : base)
    q = std::ldexp(mantissa(random), -2);
  const Row reference(base, scales, n.value);
  for (int k : {-12, -6, -1, 1, 5, 12}) {
    std::vector<double> scaled(base);
    for (double &q : scaled)
      q = std::ldexp(q, k);
    const Row row(scaled, scales, n.value);
    EXPECT_EQ(row.exponent, reference.exponent + k) << k;
    EXPECT_EQ(row.out, reference.out) << k;
  }
  // Only channels more than 24 binades below the row's largest flush in
  // fp16: of 60 binades of table, the top 25 stay.
  size_t nonzero = 0;
  for (uint16_t folded : reference.out)
    nonzero += (folded & 0x7FFF) != 0;
  EXPECT_GE(nonzero, 128u * 25 / 61);
}

TEST(FoldQueryRowTest, RoundsOnceToF16) {
  // q = 3 and s / N = 0x1.55d554p-2 multiply to 1 + 3 * 2^-11 - 2^-24, just
  // below the fp16 tie between 0x3C01 and 0x3C02: one rounding gives 0x3C01.
  // Rounding to fp32 first lands exactly on the tie (an fp32 tie itself,
  // resolved to the even 1 + 3 * 2^-11), which then goes to 0x3C02.
  const std::vector<float> scales = {0x1.55d554p-3f};
  const double exact = 3.0 * double(scales[0] / 0.5f);
  ASSERT_EQ(exact, 1.0 + 3 * 0x1p-11 - 0x1p-24);
  ASSERT_EQ(encodeF16(3.0f * (scales[0] / 0.5f)), 0x3C02);
  const Row row({3.0}, scales, 0.5f);
  EXPECT_EQ(row.exponent, 0);
  EXPECT_EQ(row.out[0], 0x3C01);
}

TEST(FoldQueryRowTest, RoundsOnceToBF16) {
  // The same construction one bf16 ulp (2^-7) wide.
  const std::vector<float> scales = {0x1.595554p-3f};
  const double exact = 3.0 * double(scales[0] / 0.5f);
  ASSERT_EQ(exact, 1.0 + 3 * 0x1p-8 - 0x1p-24);
  ASSERT_EQ(encodeBF16(3.0f * (scales[0] / 0.5f)), 0x3F82);
  const Row row({3.0}, scales, 0.5f, /*bf16=*/true);
  EXPECT_EQ(row.exponent, 0);
  EXPECT_EQ(row.out[0], 0x3F81);
}

TEST(FoldQueryRowTest, ExponentFromTheRoundedProduct) {
  // (2 - 2^-10) * (8392706 * 2^-23) = 2 - 2^-32 exactly, which rounds to 2
  // at fp32's 24 bits (the kernel's mantissa product): binade 1, and the
  // folded value 1 - 2^-33 rounds to 1.
  const std::vector<float> scales = {std::ldexp(8392706.0f, -23)};
  ASSERT_EQ((2.0 - 0x1p-10) * double(scales[0]), 2.0 - 0x1p-32);
  const Row row({2.0 - 0x1p-10}, scales, 1.0f);
  EXPECT_EQ(row.exponent, 1);
  EXPECT_EQ(decodeF16(row.out[0]), 1.0f);
}

TEST(FoldQueryRowTest, SignsZerosAndFlushes) {
  const std::vector<float> scales = {0.75f, -3.0f, 0.75f, 0.0f};
  const Row row({-2.0, 5.0, -0.0, 7.0}, scales, 4.0f);
  // Products -0.375, -3.75, -0, 0: the largest is in binade 1.
  EXPECT_EQ(row.exponent, 1);
  EXPECT_EQ(row.out[0], encodeF16(-0.1875));
  EXPECT_EQ(row.out[1], encodeF16(-1.875));
  EXPECT_EQ(row.out[2], 0x8000);
  EXPECT_EQ(row.out[3], 0x0000);
  // A zero row folds to zeros with exponent 0.
  const Row zeros({0.0, -0.0}, std::vector<float>{1.0f, 1.0f}, 1.0f);
  EXPECT_EQ(zeros.exponent, 0);
  EXPECT_EQ(zeros.out, (std::vector<uint16_t>{0x0000, 0x8000}));
  // bf16 keeps products 126 binades below the largest and zeroes smaller
  // ones (f16 flushes them anyway).
  const std::vector<float> ones = {1.0f, 1.0f, 1.0f};
  const Row wide({1.0, 0x1p-126, -0x1p-127}, ones, 1.0f, /*bf16=*/true);
  EXPECT_EQ(wide.exponent, 0);
  EXPECT_EQ(wide.out[1], encodeBF16(0x1p-126));
  EXPECT_EQ(wide.out[2], 0x8000);
}

TEST(FoldQueryRowTest, ExtremeTablesAndQueriesStayFinite) {
  // FLT_MAX scales under a clamped N, huge and tiny bf16 queries: every
  // folded value is finite and the largest lies in [1, 2].
  const std::vector<float> scales = {FLT_MAX, 0x1p-149f, 1.0f};
  for (float softmaxScale : {1.0f, 2.0f, FLT_MAX}) {
    const FoldNormalizer n = computeFoldNormalizer(scales, softmaxScale);
    for (double q : {3e38, 1e-38, 1.0}) {
      const Row row({q, q, -q}, scales, n.value, /*bf16=*/true);
      float largest = 0.0f;
      for (uint16_t folded : row.out) {
        ASSERT_TRUE(std::isfinite(decodeBF16(folded)));
        largest = std::max(largest, std::fabs(decodeBF16(folded)));
      }
      EXPECT_GE(largest, 1.0f);
      EXPECT_LE(largest, 2.0f);
    }
  }
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

namespace {

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

TEST(FoldLegalityTest, ClampedNormalizerFolds) {
  // FLT_MAX wants N = 2^128; softmax_scale 2 clamps the exponent to 125.
  // |s / N| then reaches 8, which the row exponents absorb: the table folds.
  const std::vector<float> scales = {FLT_MAX, 1e38f};
  const FoldLegality clamped = checkFoldLegality(scales, 2.0f);
  EXPECT_EQ(clamped.verdict, FoldLegality::Verdict::Legal);
  EXPECT_EQ(clamped.exponent, 125);
  std::vector<uint16_t> query = {encodeF16(65504.0), encodeF16(-3.0)}, out(2);
  foldQueryRow(query, scales, std::ldexp(1.0f, clamped.exponent), false, out);
  EXPECT_GE(std::fabs(decodeF16(out[0])), 1.0f);
  for (uint16_t folded : out)
    EXPECT_LE(std::fabs(decodeF16(folded)), 2.0f);
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

} // namespace
