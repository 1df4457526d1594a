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
// - keys per tile and stages: a 3-stage ring of 64-key tiles where the
//   smallest shared memory among the chips allows, else fewer stages or
//   smaller tiles. Each SM then keeps ≥ 32 KiB of cache bytes in flight
//   (PERF.md: that is what reaches the read ceiling).
//
//===----------------------------------------------------------------------===//

#include "pattn/Dialect/PAttn/Transforms/DecodePlan.h"

#include "llvm/Support/MathExtras.h"

#include <algorithm>

using namespace mlir;
using ::mlir::pattn::Backend;
using ::mlir::pattn::CacheType;
using ::mlir::pattn::Encoding;
using ::mlir::pattn::MlaDecodeOp;
using ::mlir::pattn::PagedAttentionOp;
using ::mlir::pattn::PortablePlanAttr;
using ::mlir::pattn::ScaleGranularity;
using ::mlir::pattn::XqaPlanAttr;

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

bool xqaReadsRaw(CacheType side, bool bf16) {
  return side.getEncoding() == (bf16 ? Encoding::bf16 : Encoding::f16);
}

XqaSharedLayout layoutXqaShared(CacheType key, CacheType value,
                                       bool bf16, int64_t rows,
                                       int64_t keysPerTile, int64_t stages,
                                       int64_t keyWarps) {
  XqaSharedLayout layout;
  int64_t headDim = key.getHeadDim(), valueDim = value.getHeadDim();
  auto align16 = [](int64_t bytes) -> int64_t { return llvm::alignTo(bytes, 16); };
  int64_t offset = 0;
  layout.query = offset;
  layout.queryStride = (headDim + 8) * 2;
  offset += align16(rows * layout.queryStride);

  // One stage of the ring.
  int64_t stage = 0;
  layout.keyRowStride = key.getRowBytes() + 16;
  layout.keyRows = stage;
  stage += align16(keysPerTile * layout.keyRowStride);
  layout.valueRowStride = value.getRowBytes() + 16;
  layout.valueRows = stage;
  stage += align16(keysPerTile * layout.valueRowStride);
  if (key.getEncoding() == Encoding::nvfp4) {
    layout.keyGroupStride = headDim / 16;
    layout.keyGroupScales = stage;
    stage += align16(keysPerTile * layout.keyGroupStride);
  }
  if (value.getEncoding() == Encoding::nvfp4) {
    layout.valueGroupStride = valueDim / 16;
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

  if (!xqaReadsRaw(key, bf16)) {
    layout.keyTileStride = (headDim + 8) * 2;
    layout.keyTile = offset;
    offset += align16(keysPerTile * layout.keyTileStride);
  }
  if (!xqaReadsRaw(value, bf16)) {
    layout.valueTileStride = (valueDim + 8) * 2;
    layout.valueTile = offset;
    offset += align16(keysPerTile * layout.valueTileStride);
  }
  // The merge reuses everything after the query tile.
  layout.merge = layout.ring;
  int64_t mergeBytes = keyWarps * rows * (valueDim + 2) * 4;
  layout.total = std::max(offset, layout.merge + align16(mergeBytes));
  return layout;
}

XqaPlanAttr planXqaDecode(PagedAttentionOp op, ArrayRef<Chip> chips,
                                 int64_t maxKeysPerSplit) {
  CacheType key = op.getKey().getType(), value = op.getValue().getType();
  int64_t group = static_cast<int64_t>(op.getNumHeads()) / key.getKvHeads();
  int64_t rows =
      group * static_cast<int64_t>(op.getMaxQueryLen()) <= 16 ? 16 : 32;
  int64_t valueDim = value.getHeadDim();
  int64_t valueWarps = 1;
  while (valueWarps < 4 && (rows / 16) * (valueDim / valueWarps) / 2 > 64)
    valueWarps *= 2;
  int64_t keyWarps = 4 / valueWarps;
  bool bf16 = xqaUsesBf16(
      cast<MemRefType>(op.getQuery().getType()).getElementType(), key, value);

  int64_t sharedLimit = INT64_MAX;
  for (Chip chip : chips)
    sharedLimit =
        std::min(sharedLimit, getTargetDescription(chip).sharedMemoryPerBlock);

  // Largest tile first, then the deepest ring that fits.
  int64_t minTile = 16 * keyWarps;
  for (int64_t tile : {int64_t(64), int64_t(32), int64_t(16)}) {
    if (tile < minTile || tile % minTile != 0)
      continue;
    for (int64_t stages : {int64_t(3), int64_t(2)}) {
      XqaSharedLayout layout =
          layoutXqaShared(key, value, bf16, rows, tile, stages, keyWarps);
      if (layout.total > sharedLimit)
        continue;
      int64_t split = std::max(tile, maxKeysPerSplit / tile * tile);
      return XqaPlanAttr::get(op.getContext(), rows, tile, stages, keyWarps,
                              valueWarps, split, layout.total);
    }
  }
  // The smallest configuration: every eligible shape fits 99 KiB with it.
  XqaSharedLayout layout =
      layoutXqaShared(key, value, bf16, rows, minTile, 2, keyWarps);
  int64_t split = std::max(minTile, maxKeysPerSplit / minTile * minTile);
  return XqaPlanAttr::get(op.getContext(), rows, minTile, 2, keyWarps,
                          valueWarps, split, layout.total);
}

PortablePlanAttr planPortableDecode(Operation *op,
                                           int64_t keysPerSplit) {
  int64_t group = 1;
  if (auto attention = dyn_cast<PagedAttentionOp>(op))
    group = static_cast<int64_t>(attention.getNumHeads()) /
            attention.getKey().getType().getKvHeads();
  else if (auto mla = dyn_cast<MlaDecodeOp>(op))
    group = static_cast<int64_t>(mla.getNumHeads());
  return PortablePlanAttr::get(op->getContext(), portableHeadsPerBlock(group),
                               keysPerSplit);
}

} // namespace pattn
