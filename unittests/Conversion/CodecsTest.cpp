//===- CodecsTest.cpp - The decoders' host-side permutations --------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// decodeWordHalves hands the chips' pair conversions a permuted word
// (Codecs.h): these tests pin the permutation's constants to what the
// fragments need, since no chip that runs cvt.rn.f16x2.e2m1x2 is here.
//
//===----------------------------------------------------------------------===//

#include "Kernels/Codecs/Codecs.h"
#include "pattn/Numerics/Numerics.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace {

uint32_t nibble(uint32_t word, int index) { return word >> (4 * index) & 0xF; }

// Byte q of the permuted word holds nibble q of the original (low, the low
// half of cvt's pair) and nibble q + 4 (high): the pair (j, j + 4) that
// the fragment layout of every other nvfp4 decoder pairs.
TEST(Codecs, NibblesForHalvesPairAcrossHalves) {
  std::mt19937 random(29);
  for (int trial = 0; trial < 10000; ++trial) {
    uint32_t word = random();
    uint32_t permuted = pattn::nibblesForHalves(word);
    for (int q = 0; q < 4; ++q) {
      EXPECT_EQ(nibble(permuted, 2 * q), nibble(word, q)) << std::hex << word;
      EXPECT_EQ(nibble(permuted, 2 * q + 1), nibble(word, q + 4))
          << std::hex << word;
    }
  }
}

// The byte order alone pairs e4m3 bytes j and j + 2 (cvt.rn.f16x2.e4m3x2
// takes bytes 0 and 1, then 2 and 3).
TEST(Codecs, HalvesByteOrderPairsBytesAcrossHalves) {
  uint32_t word = 0x44332211u;
  uint32_t bytes = 0;
  for (int position = 0; position < 4; ++position) {
    int from = pattn::kHalvesByteOrder >> (4 * position) & 0x7;
    bytes |= (word >> (8 * from) & 0xFFu) << (8 * position);
  }
  EXPECT_EQ(bytes, 0x44223311u);
}

// KernelBuilder::encodeE2M1 counts the rounding thresholds |x| passes; that
// count (with the sign in bit 3) is the numerics library's e2m1 code for
// every value around each threshold, across the binades, and beyond 6.
TEST(Codecs, E2M1ThresholdsRoundLikeTheLibrary) {
  llvm::SmallVector<pattn::RoundingThreshold> thresholds =
      pattn::roundingThresholds(pattn::MinifloatFormat::e2m1());
  ASSERT_EQ(thresholds.size(), 7u);
  auto counted = [&](float x) {
    uint32_t code = 0;
    float magnitude = std::fabs(x);
    for (const pattn::RoundingThreshold &t : thresholds)
      code += t.inclusive ? magnitude >= t.value : magnitude > t.value;
    return code | (std::signbit(x) ? 8u : 0u);
  };
  std::vector<float> values = {0.0f,
                               -0.0f,
                               1e-40f,
                               -1e-40f,
                               6.0f,
                               7.0f,
                               1e30f,
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity()};
  for (const pattn::RoundingThreshold &t : thresholds) {
    float below = t.value, above = t.value;
    for (int step = 0; step < 4; ++step) {
      values.insert(values.end(), {below, above, -below, -above});
      below = std::nextafter(below, 0.0f);
      above = std::nextafter(above, 100.0f);
    }
  }
  std::mt19937 random(7);
  std::uniform_real_distribution<float> exponent(-30.0f, 10.0f);
  for (int trial = 0; trial < 100000; ++trial) {
    float x = std::exp2(exponent(random));
    values.push_back(trial % 2 ? -x : x);
  }
  for (float x : values)
    EXPECT_EQ(counted(x), pattn::numerics::encodeE2M1(x) & 0xFu) << x;
}

} // namespace
