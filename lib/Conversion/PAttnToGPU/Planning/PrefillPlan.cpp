//===- PrefillPlan.cpp - How the prefill family tiles a prompt ------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the prefill family's plan (#pattn.prefill_plan).
// The choices, and why:
// - rows: an m16 tile per warp, so that every key decoded into shared
//   memory serves all of the block's rows (the XQA prompt tile serves 32
//   and decodes in registers per key warp): 64 (four warps) on mma.sync,
//   128 (two warpgroups of 64-row wgmma chains) on wgmma, which halves the
//   copies and decodes per row and deepens the ring (1 block per SM);
//   query_tile = floor(rows / g) tokens.
// - keys per tile: 64 (four 16-key steps per warp between barriers), 32 or
//   16 where a chip's shared memory per block does not hold two stages;
//   128 on wgmma where both sides are decoded, which halves the block
//   barriers, waits and softmax reductions per key: 2-7% faster on the
//   quantized caches (H100, B4 x 4K prompts: nvfp4 2491 against 2664 µs,
//   i4 3594 against 3736), 2-5% slower on a 16-bit cache read in place
//   (fewer ring stages fit; bench/results/2026-12-07-h100-prefill-direct-
//   output.md).
// - stages: as many as keep the blocks per SM that two stages allow, up to
//   4 (more bytes in flight per block at the same occupancy).
// - kernel: wgmma where every chip built for has it (sm_90a) and both
//   caches are quantized (prefillWgmmaRejection), else mma.sync. wgmma runs
//   a warpgroup's 64 x keys products as one instruction chain
//   from the decoded tiles, where mma.sync re-feeds every m16n8k16 from
//   registers loaded by ldmatrix.
//
//===----------------------------------------------------------------------===//

#include "Planning/DecodePlan.h"

#include "pattn/Numerics/Numerics.h"

#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <array>

using namespace mlir;
using namespace pattn;

PrefillSharedLayout pattn::layoutPrefillShared(CacheType key, CacheType value,
                                               int64_t keysPerTile,
                                               int64_t stages,
                                               TensorCoreKernel kernel) {
  PrefillSharedLayout layout;
  // No key-warp merge (keyWarps = 0): each warp writes its own rows.
  layout.ring =
      layoutXqaShared(key, value, prefillRows(kernel), keysPerTile, stages, 0);
  int64_t offset = layout.ring.total;
  // wgmma's core matrices need no padding against bank conflicts.
  bool wgmma = kernel == TensorCoreKernel::wgmma;
  auto decoded = [&](CacheType side, int64_t &at, int64_t &stride) {
    if (encodingInfo(side.getEncoding()).codesPerWord == 2)
      return;
    stride = (side.getHeadDim() + (wgmma ? 0 : 8)) * 2;
    at = offset;
    offset += llvm::alignTo(keysPerTile * stride, 16);
  };
  decoded(key, layout.decodedKeys, layout.keyStride);
  decoded(value, layout.decodedValues, layout.valueStride);
  // wgmma: tile i's V is decoded while tile i - 1's P V reads the other.
  if (wgmma && layout.decodedValues >= 0) {
    layout.valueBuffer = offset - layout.decodedValues;
    offset += layout.valueBuffer;
  }
  layout.total = offset;
  return layout;
}

std::string pattn::prefillWgmmaRejection(PagedAttentionOp op,
                                         ArrayRef<Chip> chips,
                                         PrefillWgmma choice) {
  if (choice == PrefillWgmma::never)
    return "prompt-kernel=prefill-mma-sync";
  if (llvm::any_of(chips, [](Chip chip) {
        return !getTargetDescription(chip).has(MmaKind::WgmmaM64NNK16);
      }))
    return "a chip built for has no wgmma (sm_90a only)";
  CacheType key = op.getKey().getType(), value = op.getValue().getType();
  for (CacheType side : {key, value})
    if (side.getRowBytes() > 256)
      return "a row of " + std::to_string(side.getRowBytes()) +
             " bytes, more than 256";
  if (choice == PrefillWgmma::wherever)
    return "";
  // A 16-bit cache is read in place by wgmma, which measured slower than
  // mma.sync (H200, B4 x 4K prompts: f16 101.9 TFLOPS against 132.5;
  // bench/results/2026-12-06-h200-prefill-wgmma.md); a quantized one is
  // decoded once per tile either way, and faster on wgmma.
  for (CacheType side : {key, value})
    if (encodingInfo(side.getEncoding()).codesPerWord == 2)
      return "an f16 or bf16 cache, which mma.sync reads faster";
  return "";
}

/// The smallest opt-in shared memory per block among `chips`.
static int64_t sharedLimitOf(ArrayRef<Chip> chips) {
  int64_t limit = INT64_MAX;
  for (Chip chip : chips)
    limit = std::min(limit, getTargetDescription(chip).sharedMemoryPerBlock);
  return limit;
}

/// The largest tile of two stages that fits `limit` (0 if none does):
/// 128 keys only on wgmma with both sides decoded (see the file comment).
static int64_t prefillTile(CacheType key, CacheType value, int64_t limit,
                           TensorCoreKernel kernel) {
  bool bothDecoded =
      llvm::all_of(std::array<CacheType, 2>{key, value}, [](CacheType side) {
        return encodingInfo(side.getEncoding()).codesPerWord != 2;
      });
  bool wideTiles = kernel == TensorCoreKernel::wgmma && bothDecoded;
  for (int64_t tile : {int64_t(128), int64_t(64), int64_t(32), int64_t(16)})
    if ((tile < 128 || wideTiles) &&
        layoutPrefillShared(key, value, tile, 2, kernel).total <= limit)
      return tile;
  return 0;
}

PrefillPlanAttr pattn::planPrefill(PagedAttentionOp op, ArrayRef<Chip> chips,
                                   int64_t maxKeysPerSplit,
                                   PrefillWgmma choice) {
  CacheType key = op.getKey().getType(), value = op.getValue().getType();
  int64_t group = static_cast<int64_t>(op.getNumHeads()) / key.getKvHeads();
  int64_t limit = sharedLimitOf(chips);
  TensorCoreKernel kernel = prefillWgmmaRejection(op, chips, choice).empty()
                                ? TensorCoreKernel::wgmma
                                : TensorCoreKernel::mma_sync;
  int64_t tile = prefillTile(key, value, limit, kernel);
  // Every shape the XQA rows of the eligibility table take fits: at
  // head_dim 256 (the largest), 16-key tiles of two stages need 68 KB, and
  // every chip has at least 99 KB per block.
  assert(tile && "an XQA-eligible prompt fits 16-key prefill tiles");
  // A warp holds 64 accumulators, 32 query registers (mma.sync) and a
  // step's scores and operands: up to 241 registers on sm_90a (i4 K and
  // nvfp4 V), which 128 (4 blocks of 128 threads) would spill. So at most
  // 2 blocks of 128 threads per SM, or 1 of 256 (wgmma's two warpgroups).
  int64_t rows = prefillRows(kernel), threads = 2 * rows;
  int64_t mostBlocks = 2 * kBlockThreads / threads;
  auto blocksOf = [&](int64_t bytes, ArrayRef<Chip> on) {
    return std::min<int64_t>(mostBlocks, xqaResidentBlocks(bytes, on));
  };
  int64_t stages = 2;
  int64_t bytes = layoutPrefillShared(key, value, tile, 2, kernel).total;
  int64_t blocks = blocksOf(bytes, chips);
  for (int64_t more : {int64_t(3), int64_t(4)}) {
    int64_t moreBytes =
        layoutPrefillShared(key, value, tile, more, kernel).total;
    if (moreBytes > limit || blocksOf(moreBytes, chips) < blocks)
      break;
    stages = more;
    bytes = moreBytes;
  }
  SmallVector<int64_t> resident;
  for (Chip chip : chips)
    resident.push_back(blocksOf(bytes, chip));
  Type activation = cast<MemRefType>(op.getQuery().getType()).getElementType();
  Builder builder(op.getContext());
  Type operand = xqaUsesBf16(activation, key, value) ? builder.getBF16Type()
                                                     : builder.getF16Type();
  int64_t split = std::max(tile, maxKeysPerSplit / tile * tile);
  return PrefillPlanAttr::get(
      op.getContext(), kernel, operand, rows, rows / group, tile, stages, split,
      bytes, resident, threads, kXqaLeastTilesPerSplit, kXqaMostSplits, chips);
}
