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

#include "gtest/gtest.h"

#include <cstdint>
#include <random>

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

} // namespace
