//===- DecodePlanTest.cpp - The XQA shared-memory layout and residency ----===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// The XQA kernel addresses its dynamic shared memory by the offsets
// layoutXqaShared computes, with 16-byte cp.async copies, ldmatrix rows and
// 8-byte token-scale pairs: every region must be 16-byte aligned, inside
// the total, and disjoint from the others; the key-warp merge reuses the
// ring and must fit in the total. Tested over every encoding pair, head
// dimension, row count, tile and ring depth the planner can choose.
//
//===----------------------------------------------------------------------===//

#include "pattn/Dialect/PAttn/Transforms/DecodePlan.h"
#include "pattn/Dialect/PAttn/IR/PAttnDialect.h"

#include "mlir/IR/MLIRContext.h"
#include "gtest/gtest.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

using namespace pattn;
using pattn::CacheType;
using pattn::Encoding;
using pattn::Layout;
using pattn::ScaleGranularity;

namespace {
class DecodePlanTest : public ::testing::Test {
protected:
  DecodePlanTest() { context.loadDialect<pattn::PAttnDialect>(); }
  mlir::MLIRContext context;

  CacheType cache(Encoding encoding, ScaleGranularity scale, int64_t dim) {
    return CacheType::get(&context, 16, 8, dim, encoding, scale, Layout::nhd);
  }
};

/// [begin, end) byte ranges of one stage that must not overlap.
using Ranges = std::vector<std::pair<int64_t, int64_t>>;

void expectDisjoint(Ranges ranges, const std::string &what) {
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    EXPECT_LE(ranges[i - 1].second, ranges[i].first) << what;
}
} // namespace

TEST_F(DecodePlanTest, EveryRegionIsAlignedDisjointAndInside) {
  const std::pair<Encoding, ScaleGranularity> sides[] = {
      {Encoding::f16, ScaleGranularity::none},
      {Encoding::bf16, ScaleGranularity::none},
      {Encoding::i8, ScaleGranularity::tensor},
      {Encoding::f8e4m3, ScaleGranularity::token},
      {Encoding::f8e5m2, ScaleGranularity::token},
      {Encoding::i4, ScaleGranularity::token},
      {Encoding::nvfp4, ScaleGranularity::token},
      {Encoding::nvfp4, ScaleGranularity::tensor}};
  int checked = 0;
  for (auto [keyEncoding, keyScale] : sides)
    for (auto [valueEncoding, valueScale] : sides)
      for (int64_t dim : {64, 128, 256})
        for (int64_t rows : {16, 32})
          for (int64_t keyWarps : {1, 2, 4})
            for (int64_t tile : {16, 32, 64})
              for (int64_t stages : {2, 3, 4}) {
                if (tile % (16 * keyWarps) != 0)
                  continue;
                CacheType key = cache(keyEncoding, keyScale, dim);
                CacheType value = cache(valueEncoding, valueScale, dim);
                XqaSharedLayout l =
                    layoutXqaShared(key, value, rows, tile, stages, keyWarps);
                std::string what = std::to_string(checked);
                for (int64_t offset :
                     {l.query, l.queryStride, l.ring, l.stageBytes, l.keyRows,
                      l.valueRows, l.keyRowStride, l.valueRowStride, l.merge})
                  EXPECT_EQ(offset % 16, 0) << what;
                // Query tile, the key-liveness flags, then the ring; the
                // merge reuses the ring. All of it in the one planned window.
                EXPECT_EQ(l.liveKeys % 16, 0) << what;
                EXPECT_LE(l.query + rows * l.queryStride, l.liveKeys) << what;
                EXPECT_LE(l.liveKeys + stages * tile * 4, l.ring) << what;
                EXPECT_LE(l.ring + stages * l.stageBytes, l.total) << what;
                EXPECT_GE(l.merge, l.liveKeys + stages * tile * 4) << what;
                EXPECT_LE(l.merge +
                              keyWarps * rows * (value.getHeadDim() + 2) * 4,
                          l.total)
                    << what;
                // ldmatrix reads rows of at least the row's bytes.
                EXPECT_GE(l.keyRowStride, key.getRowBytes()) << what;
                EXPECT_GE(l.valueRowStride, value.getRowBytes()) << what;
                Ranges stage = {
                    {l.keyRows, l.keyRows + tile * l.keyRowStride},
                    {l.valueRows, l.valueRows + tile * l.valueRowStride}};
                if (l.keyGroupScales >= 0) {
                  EXPECT_EQ(l.keyGroupScales % 16, 0) << what;
                  stage.push_back({l.keyGroupScales,
                                   l.keyGroupScales + tile * l.keyGroupStride});
                }
                if (l.valueGroupScales >= 0) {
                  EXPECT_EQ(l.valueGroupScales % 16, 0) << what;
                  stage.push_back(
                      {l.valueGroupScales,
                       l.valueGroupScales + tile * l.valueGroupStride});
                }
                for (int64_t tokens : {l.keyTokenScales, l.valueTokenScales})
                  if (tokens >= 0) {
                    EXPECT_EQ(tokens % 16, 0) << what;
                    stage.push_back({tokens, tokens + tile * 4});
                  }
                for (auto [begin, end] : stage)
                  EXPECT_LE(end, l.stageBytes) << what;
                expectDisjoint(stage, what);
                EXPECT_EQ(l.keyGroupScales >= 0,
                          keyEncoding == Encoding::nvfp4);
                EXPECT_EQ(l.valueTokenScales >= 0,
                          valueScale == ScaleGranularity::token);
                ++checked;
              }
  EXPECT_EQ(checked, 8 * 8 * 3 * 2 * 18);
}

// Residency: at most 4 blocks (the kernel's registers), at least 1, and
// bounded by the chip with the least shared memory per SM.
TEST_F(DecodePlanTest, ResidentBlocksFollowTheSmallestChip) {
  const Chip h200[] = {Chip::SM90a};
  const Chip withAda[] = {Chip::SM90a, Chip::SM89};
  EXPECT_EQ(xqaResidentBlocks(16 * 1024, h200), 4);
  EXPECT_EQ(xqaResidentBlocks(60 * 1024, h200), 3);
  EXPECT_EQ(xqaResidentBlocks(108800, h200), 2);
  EXPECT_EQ(xqaResidentBlocks(200 * 1024, h200), 1);
  EXPECT_LE(xqaResidentBlocks(60 * 1024, withAda),
            xqaResidentBlocks(60 * 1024, h200));
  EXPECT_EQ(xqaResidentBlocks(99 * 1024, withAda), 1);
}
