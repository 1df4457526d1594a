//===- DecodePlan.cpp - How each backend tiles a decode -------------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the decode planner. The XQA choices, and why:
// - rows: g x max_query_len padded to one or two m16 tiles.
// - value warps: each warp keeps rows x (value_dim / value_warps) fp32
//   output accumulators; at most 64 per thread leaves registers for the
//   fragments, so wide outputs are split over 2 or 4 warps (which then
//   compute the same logits: cheap on tensor cores, the tile is decoded
//   once into shared memory for all of them).
// - keys per tile and stages: 64-key tiles (smaller only where they do not
//   fit), and the ring depth (2 to 4 stages) that keeps the most cache bytes
//   in flight per SM, resident blocks x (stages - 1) x stage bytes, on the
//   chip with the least shared memory (PERF.md: ≥ 32 KiB in flight per SM
//   reached the read ceiling for f16; the 4-bit decode stops at 64% of it,
//   waiting on its block-table lookups with 4 warps a block, and 5 to 8
//   stages did not move it: bench/results/2026-12-06-h100-decode-breakdown.md).
//   Ties go to more resident blocks, which hide the softmax and merge
//   latency of each other.
// - scores ahead (asked for; rows = 8): the loop holds two landed tiles,
//   so the ring gets one stage more where that keeps the resident blocks,
//   and needs 3 stages at least.
//
//===----------------------------------------------------------------------===//

#include "Planning/DecodePlan.h"
#include "Planning/DecodeFamilies.h"

#include "llvm/ADT/StringExtras.h"

#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using ::pattn::Backend;
using ::pattn::CacheType;
using ::pattn::Encoding;
using ::pattn::LaneAttr;
using ::pattn::MlaDecodeOp;
using ::pattn::PagedAttentionOp;
using ::pattn::PortablePlanAttr;
using ::pattn::RecordType;
using ::pattn::ScaleGranularity;
using ::pattn::XqaMlaPlanAttr;
using ::pattn::XqaPlanAttr;

namespace pattn {

int64_t portableHeadsPerBlock(int64_t group) {
  for (int64_t heads = std::min<int64_t>(group, 8); heads > 1; --heads)
    if (group % heads == 0)
      return heads;
  return 1;
}

bool xqaUsesBf16(Type activation, CacheType key, CacheType value) {
  return activation.isBF16() || key.getEncoding() == Encoding::bf16 ||
         value.getEncoding() == Encoding::bf16;
}

XqaSharedLayout layoutXqaShared(CacheType key, CacheType value, int64_t rows,
                                int64_t keysPerTile, int64_t stages,
                                int64_t keyWarps, bool copyWarp) {
  XqaSharedLayout layout;
  int64_t headDim = key.getHeadDim(), valueDim = value.getHeadDim();
  auto align16 = [](int64_t bytes) -> int64_t {
    return llvm::alignTo(bytes, 16);
  };
  int64_t offset = 0;
  layout.query = offset;
  layout.queryStride = (headDim + 8) * 2;
  offset += align16(rows * layout.queryStride);
  // In the one budget with the rest: static shared arrays would count
  // against the same per-block limit without the planner seeing them.
  layout.liveKeys = offset;
  offset += align16(stages * keysPerTile * 4);
  if (copyWarp) {
    layout.barriers = offset;
    offset += align16(stages * 16);
  }

  // One stage of the ring.
  int64_t stage = 0;
  layout.keyRowStride = key.getRowBytes() + 16;
  layout.keyRows = stage;
  stage += align16(keysPerTile * layout.keyRowStride);
  layout.valueRowStride = value.getRowBytes() + 16;
  layout.valueRows = stage;
  stage += align16(keysPerTile * layout.valueRowStride);
  if (key.needsGroupScales()) {
    layout.keyGroupStride =
        headDim / encodingInfo(key.getEncoding()).groupScales.size;
    layout.keyGroupScales = stage;
    stage += align16(keysPerTile * layout.keyGroupStride);
  }
  if (value.needsGroupScales()) {
    layout.valueGroupStride =
        valueDim / encodingInfo(value.getEncoding()).groupScales.size;
    layout.valueGroupScales = stage;
    stage += align16(keysPerTile * layout.valueGroupStride);
  }
  if (key.getScale() == ScaleGranularity::token) {
    layout.keyTokenScales = stage;
    stage += align16(keysPerTile * 4);
  }
  if (value.getScale() == ScaleGranularity::token) {
    layout.valueTokenScales = stage;
    stage += align16(keysPerTile * 4);
  }
  layout.stageBytes = stage;
  layout.ring = offset;
  offset += stages * stage;

  // The merge reuses everything after the query tile.
  layout.merge = layout.ring;
  int64_t mergeBytes = keyWarps * rows * (valueDim + 2) * 4;
  layout.total = std::max(offset, layout.merge + align16(mergeBytes));
  return layout;
}

int64_t xqaResidentBlocks(int64_t sharedBytes, ArrayRef<Chip> chips) {
  // Every block also takes 1 KiB of shared memory reserved by the system.
  // The kernel asks ptxas for this many blocks per SM (nvvm.minctasm), so
  // that each of its 128 threads keeps at least 128 registers: 4 on every
  // chip pattn targets (65536 registers per SM).
  constexpr int64_t kThreads = 128, kLeastRegisters = 128;
  int64_t blocks = std::numeric_limits<int64_t>::max();
  for (Chip chip : chips) {
    const TargetDescription &target = getTargetDescription(chip);
    blocks =
        std::min(blocks, target.registersPerSM / (kThreads * kLeastRegisters));
    blocks = std::min(blocks, target.sharedMemoryPerSM / (sharedBytes + 1024));
  }
  return std::max<int64_t>(blocks, 1);
}

int64_t xqaMlaResidentBlocks(TensorCoreKernel kernel, int64_t sharedBytes,
                             ArrayRef<Chip> chips) {
  if (kernel == TensorCoreKernel::wgmma)
    return 1;
  return std::min<int64_t>(3, xqaResidentBlocks(sharedBytes, chips));
}

/// The 16-bit type of the XQA kernel's mma operands.
static Type xqaOperandType(PagedAttentionOp op) {
  Type activation = cast<MemRefType>(op.getQuery().getType()).getElementType();
  Builder builder(op.getContext());
  if (xqaUsesBf16(activation, op.getKey().getType(), op.getValue().getType()))
    return builder.getBF16Type();
  return builder.getF16Type();
}

int64_t splitDecodeTokens(int64_t group) {
  return std::clamp<int64_t>(16 / group, 1, kMaxSpeculativeTokens);
}

/// The XQA blocks per SM that a plan of `rows` promises: as many as
/// shared memory allows, but at most 3 with two m-tiles (32 rows), whose
/// 64 accumulators, 16 scores and two query tiles spilled 160 bytes a
/// thread under the 128 registers of a fourth block (i4, 8 query tokens),
/// and with a copy warp (160 threads) at most 3 (136 registers), 2 with
/// two m-tiles (which spilled 228-340 bytes under 136).
static int64_t xqaPlannedBlocks(int64_t rows, int64_t sharedBytes,
                                ArrayRef<Chip> chips, bool copyWarp) {
  int64_t blocks = xqaResidentBlocks(sharedBytes, chips);
  int64_t most = copyWarp ? (rows > 16 ? 2 : 3) : (rows > 16 ? 3 : 4);
  return std::min(blocks, most);
}

/// The query tokens per block of a prompt's XQA plan (0 for a decode): as
/// many as fill the 32 rows of two m-tiles.
static int64_t xqaQueryTile(PagedAttentionOp op) {
  if (static_cast<int64_t>(op.getMaxQueryLen()) <= kMaxSpeculativeTokens)
    return 0;
  int64_t group = static_cast<int64_t>(op.getNumHeads()) /
                  op.getKey().getType().getKvHeads();
  return 32 / group;
}

/// How an XQA plan's blocks group and merge: thread-block clusters of KV
/// heads' blocks or of a (sequence, KV head)'s splits (1: none), and
/// whether a lone split merges its own rows.
struct XqaClusters {
  int64_t heads = 1, splits = 1;
  bool mergesUnsplit = false;
};

/// An XQA plan of `op` for `chips` with the given tiling; the schedule's
/// split bounds are the defaults (DecodePlan.h).
static XqaPlanAttr makeXqaPlan(PagedAttentionOp op, ArrayRef<Chip> chips,
                               int64_t rows, int64_t tile, int64_t stages,
                               int64_t keyWarps, int64_t valueWarps,
                               int64_t split, int64_t sharedBytes,
                               int64_t queryTile, bool copyWarp,
                               bool scoresAhead, XqaClusters clusters) {
  SmallVector<int64_t> resident;
  for (Chip chip : chips)
    resident.push_back(xqaPlannedBlocks(rows, sharedBytes, chip, copyWarp));
  int64_t threads = copyWarp ? kBlockThreads + 32 : kBlockThreads;
  return XqaPlanAttr::get(
      op.getContext(), xqaOperandType(op), rows, tile, stages, keyWarps,
      valueWarps, split, sharedBytes, resident, threads, kXqaLeastTilesPerSplit,
      kXqaMostSplits, queryTile, scoresAhead, clusters.heads, clusters.splits,
      clusters.mergesUnsplit, chips);
}

XqaPlanAttr planXqaDecode(PagedAttentionOp op, ArrayRef<Chip> chips,
                          int64_t maxKeysPerSplit, XqaPlanRequest request,
                          int64_t decodeTokens) {
  CacheType key = op.getKey().getType(), value = op.getValue().getType();
  int64_t group = static_cast<int64_t>(op.getNumHeads()) / key.getKvHeads();
  // A decode's rows are g x its query tokens; a prompt fills two m-tiles
  // with query tiles of floor(32 / g) tokens; a split's decode plan serves
  // sequences of up to `decodeTokens`.
  int64_t queryTile = decodeTokens ? 0 : xqaQueryTile(op);
  int64_t queryTokens = decodeTokens ? decodeTokens : queryTile;
  if (!queryTokens)
    queryTokens = static_cast<int64_t>(op.getMaxQueryLen());
  // A decode of at most 8 rows takes keys as the mma's M (rows = 8: no
  // padding rows in any mma).
  int64_t rows = group * queryTokens <= 16 ? 16 : 32;
  if (!queryTile && group * queryTokens <= 8)
    rows = 8;
  int64_t valueDim = value.getHeadDim();
  // At most 64 output accumulators per thread with 16 rows (rows = 8 has
  // half as many, but keeps the warps, tiles and ring of 16 rows).
  int64_t mTiles = std::max<int64_t>(rows, 16) / 16;
  int64_t valueWarps = 1;
  while (valueWarps < 4 && mTiles * (valueDim / valueWarps) / 2 > 64)
    valueWarps *= 2;
  int64_t keyWarps = 4 / valueWarps;
  bool copyWarp = request.copyWarp && !queryTile;
  XqaClusters clusters;
  bool clustersFit =
      !queryTile && !copyWarp && llvm::all_of(chips, [](Chip chip) {
        return getTargetDescription(chip).capability >= 90;
      });
  if (clustersFit && request.clusterHeads > 1 &&
      key.getKvHeads() % request.clusterHeads == 0)
    clusters.heads = request.clusterHeads;
  // A cluster of splits merges its rows into the output itself: not where
  // a guard may hand the op's rows to another op's merge, nor for a split
  // prompt's decode side (its rows are the merge's compact token slots).
  bool ownsOutput = !queryTile && !copyWarp && !op.getGuard() && !decodeTokens;
  if (clustersFit && request.clusterSplits > 1 && clusters.heads == 1 &&
      ownsOutput)
    clusters.splits = request.clusterSplits;
  clusters.mergesUnsplit = request.mergesUnsplit && ownsOutput;

  int64_t sharedLimit = INT64_MAX;
  for (Chip chip : chips)
    sharedLimit =
        std::min(sharedLimit, getTargetDescription(chip).sharedMemoryPerBlock);

  // The tile and ring depth with the most cache bytes in flight per SM;
  // ties go to more resident blocks (they hide each other's softmax and
  // merge), then to the larger tile, then to fewer stages.
  int64_t minTile = 16 * keyWarps;
  auto fitsWarps = [&](int64_t tile) {
    return tile >= minTile && tile % minTile == 0;
  };
  auto fitsShared = [&](int64_t tile, int64_t stages) {
    return layoutXqaShared(key, value, rows, tile, stages, keyWarps, copyWarp)
               .total <= sharedLimit;
  };
  // A tile or a depth that was asked for replaces the candidates where it
  // fits.
  int64_t keysPerTile = request.keysPerTile;
  SmallVector<int64_t> tiles = {64, 32, 16};
  if (keysPerTile && fitsWarps(keysPerTile) && fitsShared(keysPerTile, 2))
    tiles.assign({keysPerTile});
  SmallVector<int64_t> depths = {2, 3, 4};
  if (request.stages && llvm::any_of(tiles, [&](int64_t tile) {
        return fitsWarps(tile) && fitsShared(tile, request.stages);
      }))
    depths.assign({request.stages});
  int64_t bestTile = 0, bestStages = 0, bestInFlight = -1, bestBlocks = 0,
          bestBytes = 0;
  for (int64_t tile : tiles) {
    if (!fitsWarps(tile))
      continue;
    for (int64_t stages : depths) {
      XqaSharedLayout layout =
          layoutXqaShared(key, value, rows, tile, stages, keyWarps, copyWarp);
      if (layout.total > sharedLimit)
        continue;
      int64_t blocks = xqaPlannedBlocks(rows, layout.total, chips, copyWarp);
      int64_t inFlight = blocks * (stages - 1) * layout.stageBytes;
      if (inFlight > bestInFlight ||
          (inFlight == bestInFlight && blocks > bestBlocks)) {
        bestTile = tile;
        bestStages = stages;
        bestInFlight = inFlight;
        bestBlocks = blocks;
        bestBytes = layout.total;
      }
    }
  }
  if (bestTile) {
    // Scoring a tile ahead holds two landed tiles, so it takes one stage
    // more than the ring above where that keeps the resident blocks (the
    // same tiles in flight), and needs 3 stages at least.
    bool scoresAhead = request.scoresAhead && rows == 8 && !copyWarp;
    if (scoresAhead && !request.stages) {
      XqaSharedLayout deeper = layoutXqaShared(
          key, value, rows, bestTile, bestStages + 1, keyWarps, copyWarp);
      if (deeper.total <= sharedLimit &&
          xqaPlannedBlocks(rows, deeper.total, chips, copyWarp) == bestBlocks) {
        ++bestStages;
        bestBytes = deeper.total;
      }
    }
    scoresAhead &= bestStages >= 3;
    int64_t split = std::max(bestTile, maxKeysPerSplit / bestTile * bestTile);
    return makeXqaPlan(op, chips, rows, bestTile, bestStages, keyWarps,
                       valueWarps, split, bestBytes, queryTile, copyWarp,
                       scoresAhead, clusters);
  }
  // The smallest configuration: every eligible shape fits 99 KiB with it.
  XqaSharedLayout layout =
      layoutXqaShared(key, value, rows, minTile, 2, keyWarps, copyWarp);
  int64_t split = std::max(minTile, maxKeysPerSplit / minTile * minTile);
  return makeXqaPlan(op, chips, rows, minTile, 2, keyWarps, valueWarps, split,
                     layout.total, queryTile, copyWarp, /*scoresAhead=*/false,
                     clusters);
}

MlaRecordLayout describeMlaRecord(RecordType record) {
  MlaRecordLayout layout;
  LaneAttr latent = record.getLane("latent"), rope = record.getLane("rope");
  layout.latent = latent.getCount();
  layout.rope = rope.getCount();
  layout.recordBytes = record.getBytes();
  layout.latentOffset = latent.getOffset();
  layout.ropeOffset = rope.getOffset();
  auto text = [&](LaneAttr lane) {
    std::string result;
    llvm::raw_string_ostream os(result);
    os << lane.getCount() << " x " << lane.getElementType();
    if (lane.isScaled()) {
      LaneAttr scale = record.getLane(lane.getScaleLane());
      os << " scaled_by " << scale.getCount() << " x "
         << scale.getElementType();
    }
    return result;
  };
  layout.latentText = text(latent);
  layout.ropeText = text(rope);

  Type latentType = latent.getElementType();
  LaneAttr latentScale =
      latent.isScaled() ? record.getLane(latent.getScaleLane()) : LaneAttr();
  layout.latentFormat = MlaLatentFormat::Unsupported;
  if (latentType.isBF16() && !latentScale)
    layout.latentFormat = MlaLatentFormat::BF16;
  else if (isa<Float8E4M3FNType>(latentType) && !latentScale)
    layout.latentFormat = MlaLatentFormat::E4M3;
  else if (isa<Float8E4M3FNType>(latentType) &&
           latentScale.getElementType().isF32()) {
    layout.latentFormat = MlaLatentFormat::E4M3BlockScaled;
    layout.latentScaleGroup = latent.getCount() / latentScale.getCount();
  } else if (isa<Float4E2M1FNType>(latentType) && latentScale &&
             isa<Float8E4M3FNType>(latentScale.getElementType()) &&
             latent.getCount() / latentScale.getCount() ==
                 encodingInfo(Encoding::nvfp4).groupScales.size)
    layout.latentFormat = MlaLatentFormat::E2M1GroupScaled;

  Type ropeType = rope.getElementType();
  LaneAttr ropeScale =
      rope.isScaled() ? record.getLane(rope.getScaleLane()) : LaneAttr();
  layout.ropeFormat = MlaRopeFormat::Unsupported;
  if (ropeType.isBF16() && !ropeScale)
    layout.ropeFormat = MlaRopeFormat::BF16;
  else if (isa<Float8E4M3FNType>(ropeType) && !ropeScale)
    layout.ropeFormat = MlaRopeFormat::E4M3;
  else if (isa<Float8E4M3FNType>(ropeType) && ropeScale.getCount() == 1 &&
           ropeScale.getElementType().isF32())
    layout.ropeFormat = MlaRopeFormat::E4M3Scaled;
  return layout;
}

/// The bytes between two raw records in the MLA kernels' ring: an odd
/// multiple of 16, so that the 8 keys or 8 words a quad reads fall in
/// different banks.
static int64_t rawRecordStride(const MlaRecordLayout &record) {
  int64_t stride = llvm::alignTo(record.recordBytes, 16);
  return stride / 4 % 8 == 0 ? stride + 16 : stride;
}

XqaMlaSharedLayout layoutXqaMlaShared(const MlaRecordLayout &record,
                                      int64_t keysPerTile) {
  auto align16 = [](int64_t bytes) -> int64_t {
    return llvm::alignTo(bytes, 16);
  };
  XqaMlaSharedLayout layout;
  int64_t keyDim = record.latent + record.rope;
  layout.rowStride = keyDim + 8;
  int64_t offset = 0;
  layout.query = offset;
  offset += align16(kXqaMlaHeadsPerBlock * layout.rowStride * 2);
  layout.raw = offset;
  layout.rawStride = rawRecordStride(record);
  offset += 2 * keysPerTile * layout.rawStride;
  layout.logits = offset;
  layout.logitStride = keysPerTile + 8;
  offset += align16(kXqaMlaHeadsPerBlock * layout.logitStride * 4);
  layout.pages = offset;
  offset += align16(3 * keysPerTile * 4);
  layout.queryScales = offset;
  offset += align16(kXqaMlaHeadsPerBlock * 4);
  layout.total = offset;
  return layout;
}

XqaMlaSharedLayout layoutXqaMlaWarpgroupShared(const MlaRecordLayout &record,
                                               int64_t keysPerTile) {
  auto align16 = [](int64_t bytes) -> int64_t {
    return llvm::alignTo(bytes, 16);
  };
  const int64_t rows = kXqaMlaWarpgroupHeads;
  XqaMlaSharedLayout layout;
  int64_t keyDim = record.latent + record.rope;
  layout.rowStride = keyDim;
  int64_t offset = 0;
  layout.query = offset;
  offset += rows * keyDim * 2;
  // Two decoded slots: tile i + 1 is decoded while P V reads tile i.
  layout.decoded = offset;
  offset += 2 * keysPerTile * keyDim * 2;
  layout.raw = offset;
  layout.rawStride = rawRecordStride(record);
  offset += 2 * keysPerTile * layout.rawStride;
  // Two slots of logits: each warpgroup's partial sums.
  layout.logits = offset;
  layout.logitStride = keysPerTile + 8;
  offset += 2 * align16(rows * layout.logitStride * 4);
  layout.pTiles = offset;
  int64_t blocks = record.latent / 2 / xqaMlaWarpgroupBlockChannels(record);
  offset += 2 * blocks * rows * keysPerTile * 2;
  layout.pages = offset;
  offset += align16(3 * keysPerTile * 4);
  layout.queryScales = offset;
  offset += align16(rows * 4);
  layout.total = offset;
  return layout;
}

int64_t xqaMlaWarpgroupBlockChannels(const MlaRecordLayout &record) {
  int64_t half = record.latent / 2;
  if (record.latentFormat != MlaLatentFormat::E4M3BlockScaled)
    return half;
  return std::min(half, record.latentScaleGroup);
}

std::string xqaMlaWarpgroupRejection(const MlaRecordLayout &record,
                                     int64_t numHeads, ArrayRef<Chip> chips) {
  std::string reason;
  llvm::raw_string_ostream os(reason);
  if (chips.empty()) {
    os << "no chip built for has wgmma (sm_90a only)";
    return reason;
  }
  if (llvm::any_of(chips, [](Chip chip) {
        return !getTargetDescription(chip).has(MmaKind::WgmmaM64NNK16);
      })) {
    os << "a chip built for has no wgmma (sm_90a only)";
    return reason;
  }
  if (numHeads % kXqaMlaWarpgroupHeads != 0) {
    os << "num_heads " << numHeads << " not a multiple of "
       << kXqaMlaWarpgroupHeads;
    return reason;
  }
  // The decode passes cover 64-channel stripes of the latent and the rope;
  // a warpgroup's half of the latent is one wgmma N (<= 256).
  if (record.latent % 64 != 0 || record.latent > 512 || record.rope <= 0 ||
      record.rope % 64 != 0) {
    os << "latent " << record.latent << " and rope " << record.rope
       << " not multiples of 64 with latent <= 512";
    return reason;
  }
  if (record.latentFormat == MlaLatentFormat::Unsupported ||
      record.ropeFormat == MlaRopeFormat::Unsupported) {
    os << "record lanes the tensor-core kernels do not read";
    return reason;
  }
  // Each latent block is a separate S chain (at most 4), and a
  // warpgroup's channels are whole blocks or inside one.
  if (record.latentFormat == MlaLatentFormat::E4M3BlockScaled) {
    int64_t group = record.latentScaleGroup, half = record.latent / 2;
    if (group % 128 != 0 || (half % group != 0 && group % half != 0)) {
      os << "latent scale blocks of " << group
         << " channels, not a multiple of 128 that tiles half the latent";
      return reason;
    }
  }
  int64_t shared =
      layoutXqaMlaWarpgroupShared(record, kXqaMlaKeysPerTile).total;
  for (Chip chip : chips)
    if (shared > getTargetDescription(chip).sharedMemoryPerBlock) {
      os << "the tile needs " << shared << " bytes of shared memory > "
         << getTargetDescription(chip).sharedMemoryPerBlock << " on "
         << stringifyChip(chip);
      return reason;
    }
  return reason;
}

XqaMlaPlanAttr planTensorCoreKernel(MlaDecodeOp op, TensorCoreKernel kernel,
                                    ArrayRef<Chip> chips) {
  MlaRecordLayout record =
      describeMlaRecord(op.getCache().getType().getRecord());
  bool wgmma = kernel == TensorCoreKernel::wgmma;
  int64_t shared =
      wgmma ? layoutXqaMlaWarpgroupShared(record, kXqaMlaKeysPerTile).total
            : layoutXqaMlaShared(record, kXqaMlaKeysPerTile).total;
  SmallVector<int64_t> resident;
  for (Chip chip : chips)
    resident.push_back(xqaMlaResidentBlocks(kernel, shared, chip));
  return XqaMlaPlanAttr::get(
      op.getContext(), kernel,
      wgmma ? kXqaMlaWarpgroupHeads : kXqaMlaHeadsPerBlock, kXqaMlaKeysPerTile,
      shared, resident, wgmma ? kXqaMlaWarpgroupThreads : kXqaMlaThreads,
      kXqaMlaLeastTilesPerSplit, kXqaMlaMostSplits, chips);
}

XqaMlaPlans planXqaMlaDecode(MlaDecodeOp op, ArrayRef<Chip> chips) {
  MLIRContext *context = op.getContext();
  XqaMlaPlans plans;
  plans.plan = planTensorCoreKernel(op, TensorCoreKernel::mma_sync, chips);
  // The warpgroup kernel serves the chips with wgmma or none of them; in a
  // build for chips with and without it, the former take it in a kernel
  // module of their own.
  SmallVector<Chip> wgmmaChips;
  for (Chip chip : chips)
    if (getTargetDescription(chip).has(MmaKind::WgmmaM64NNK16))
      wgmmaChips.push_back(chip);
  plans.notWarpgroup = llvm::join(
      decodeFamily(DecodeFamilyKind::XqaMlaWgmma).rejections(op, wgmmaChips),
      "; ");
  if (!plans.notWarpgroup.empty())
    return plans;
  XqaMlaPlanAttr warpgroup =
      planTensorCoreKernel(op, TensorCoreKernel::wgmma, wgmmaChips);
  if (wgmmaChips.size() == chips.size()) {
    plans.plan = warpgroup;
    return plans;
  }
  plans.notWarpgroup = "no wgmma";
  SmallVector<NamedAttribute> entries;
  for (Chip chip : wgmmaChips)
    entries.push_back(NamedAttribute(
        StringAttr::get(context, stringifyChip(chip)), warpgroup));
  plans.chipPlans = DictionaryAttr::get(context, entries);
  return plans;
}

/// Keys per split of a prompt's portable plan.
constexpr int64_t kPromptKeysPerSplit = 32768;

PortablePlanAttr planPortableDecode(Operation *op, int64_t keysPerSplit,
                                    ArrayRef<Chip> chips) {
  int64_t group = 1;
  bool prompt = false;
  if (auto attention = dyn_cast<PagedAttentionOp>(op)) {
    group = static_cast<int64_t>(attention.getNumHeads()) /
            attention.getKey().getType().getKvHeads();
    prompt = static_cast<int64_t>(attention.getMaxQueryLen()) >
             kMaxSpeculativeTokens;
  } else if (auto mla = dyn_cast<MlaDecodeOp>(op)) {
    group = static_cast<int64_t>(mla.getNumHeads());
  }
  // A prompt has a block per (token, head group) already, as many as the
  // splits of a long decode would give: one split (up to 32768 keys) keeps
  // its workspace to one partial output per row.
  if (prompt)
    keysPerSplit = std::max(keysPerSplit, kPromptKeysPerSplit);
  return PortablePlanAttr::get(op->getContext(), portableHeadsPerBlock(group),
                               keysPerSplit, kBlockThreads, prompt, chips);
}

} // namespace pattn
