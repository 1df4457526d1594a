//===- DecodePlanTest.cpp - XQA shared-memory layouts, residency, rules ---===//
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
// dimension, row count, tile and ring depth the planner can choose. The
// warpgroup MLA kernel's plan rules each name their condition.
//
//===----------------------------------------------------------------------===//

#include "Planning/DecodePlan.h"
#include "pattn/Dialect/PAttn/IR/PAttnDialect.h"
#include "pattn/Dialect/PAttn/Transforms/Eligibility.h"
#include "pattn/Target/TargetDescription.h"

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

// The warpgroup (wgmma) MLA kernel's plan rules: each one rejects with a
// reason that names its condition, and the three record presets pass on
// the H200. pattn-plan-decode-mla-warpgroup.mlir reaches the rules through
// records; the lane and shared-memory rules are reached here directly.
TEST_F(DecodePlanTest, WarpgroupMlaRulesNameTheirCondition) {
  const Chip h200[] = {Chip::SM90a};
  const Chip fleet[] = {Chip::SM90a, Chip::SM100a};
  MlaRecordLayout fp8; // fp8_ds_mla: e4m3 latent per 128, bf16 rope
  EXPECT_EQ(xqaMlaWarpgroupRejection(fp8, 128, h200), "");
  EXPECT_EQ(xqaMlaWarpgroupRejection(fp8, 64, h200), "");
  MlaRecordLayout nvfp4 = fp8;
  nvfp4.latentFormat = MlaLatentFormat::E2M1GroupScaled;
  nvfp4.ropeFormat = MlaRopeFormat::E4M3Scaled;
  nvfp4.recordBytes = 368;
  EXPECT_EQ(xqaMlaWarpgroupRejection(nvfp4, 128, h200), "");

  auto rejects = [&](const MlaRecordLayout &record, int64_t heads,
                     llvm::ArrayRef<Chip> chips, const std::string &part) {
    std::string reason = xqaMlaWarpgroupRejection(record, heads, chips);
    EXPECT_NE(reason.find(part), std::string::npos)
        << "'" << reason << "' does not name '" << part << "'";
  };
  rejects(fp8, 128, fleet, "no wgmma");
  rejects(fp8, 128, {}, "no chip built for has wgmma");
  rejects(fp8, 48, h200, "num_heads 48 not a multiple of 64");

  MlaRecordLayout narrowRope = fp8;
  narrowRope.rope = 32;
  rejects(narrowRope, 128, h200, "rope 32 not multiples of 64");
  MlaRecordLayout wideLatent = fp8;
  wideLatent.latent = 576;
  rejects(wideLatent, 128, h200, "latent 576");

  MlaRecordLayout oddLatent = fp8;
  oddLatent.latentFormat = MlaLatentFormat::Unsupported;
  rejects(oddLatent, 128, h200, "lanes the tensor-core kernels do not read");
  MlaRecordLayout oddRope = fp8;
  oddRope.ropeFormat = MlaRopeFormat::Unsupported;
  rejects(oddRope, 128, h200, "lanes the tensor-core kernels do not read");

  MlaRecordLayout smallBlocks = fp8;
  smallBlocks.latentScaleGroup = 64;
  rejects(smallBlocks, 128, h200, "latent scale blocks of 64 channels");
  MlaRecordLayout straddling = fp8;
  straddling.latentScaleGroup = 384; // neither tiles nor is tiled by 256
  rejects(straddling, 128, h200, "latent scale blocks of 384 channels");

  // A 128-channel bf16 rope next to a bf16 latent: the query tile, two
  // decoded slots and the raw ring outgrow the H200's 227 KiB.
  MlaRecordLayout wideRecord = fp8;
  wideRecord.latentFormat = MlaLatentFormat::BF16;
  wideRecord.rope = 128;
  wideRecord.ropeOffset = 1024;
  wideRecord.recordBytes = 1280;
  int64_t needed = layoutXqaMlaWarpgroupShared(wideRecord, 32).total;
  EXPECT_GT(needed, getTargetDescription(Chip::SM90a).sharedMemoryPerBlock);
  rejects(wideRecord, 128, h200,
          "the tile needs " + std::to_string(needed) +
              " bytes of shared memory");
}
