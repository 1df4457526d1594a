//===- PrefillWgmma.cpp - The prefill's tile products on wgmma ------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements a prefill tile's products on sm_90a's wgmma
// (#pattn.prefill_plan<kernel = wgmma, ...>). The block's four warps are
// one warpgroup and its 64 rows the M of wgmma.mma_async.m64nNk16, whose
// operands come from shared memory as 8 x 16-byte core matrices (no
// swizzle): the query tile, K and V (the ring's 16-bit rows in place, or
// the decoded tiles of a quantized side) and P.
//
//   S = Q Kᵀ   one chain of head_dim / 16 k-steps, N = the tile's keys;
//              the accumulators are, n8 chunk by chunk, the mma.sync C
//              fragments of the warp's 16 rows, so the logits, masks and
//              online softmax are the mma.sync kernel's (PrefillSteps,
//              MmaBuilder::softmaxSteps)
//   P          the softmax's A registers stored as a K-major A tile
//   O += P V   one chain of keys / 16 k-steps, N = the value channels, V
//              read MN-major (imm-trans-b): the same core matrices as K's
//
// Layouts (bytes; c a channel, r a row, k a key of the tile, T its keys):
//   query  ((c / 8)  8 + r / 8) 128 + (r % 8) 16 + (c % 8) 2
//   K, V   ((c / 8) T/8 + k / 8) 128 + (k % 8) 16 + (c % 8) 2
//   P      ((k / 8)  8 + r / 8) 128 + (r % 8) 16 + (k % 8) 2
// Descriptors give the byte distances between core matrices along K
// (leading) and along M or N (stride): the query and P (K-major A)
// 1024 and 128; K (K-major B) T/8 x 128 and 128; V (MN-major B) 128 along
// the keys and T/8 x 128 along the channels.
//
// Stores through the generic proxy (the query tile, decoded tiles, P) and
// cp.async's copies of a side read in place are handed to wgmma's async
// proxy by fence.proxy.async before the block barrier that publishes them.
// Both chains are waited for before the accumulators are read again, so
// ptxas sees no accumulator register touched inside a wgmma pipeline.
//
//===----------------------------------------------------------------------===//

#include "Kernels/Prefill/PrefillPaged.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace pattn;
using namespace pattn::prefill;

void PrefillBuilder::publishToAsyncProxy() {
  NVVM::FenceProxyOp::create(
      builder, kb.loc, NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(builder.getContext(),
                                 NVVM::SharedSpace::shared_cta));
}

void PrefillBuilder::landForAsyncProxy(int32_t newerPending) {
  NVVM::CpAsyncWaitGroupOp::create(builder, kb.loc, newerPending);
  publishToAsyncProxy();
  kb.barrier();
}

SmallVector<Value> PrefillBuilder::scoresWgmma(Value keyRows) {
  WgmmaOps wg(kb);
  int64_t keyGroups = tileKeys / 8;
  Value queryAt = index(layout.ring.query);
  Value queryDesc = wg.descriptor(smemAddress, queryAt, (rows / 8) * 128, 128);
  Value keyDesc = wg.descriptor(smemAddress, keyRows, keyGroups * 128, 128);
  NVVM::WgmmaFenceAlignedOp::create(builder, kb.loc);
  SmallVector<Value> scores;
  for (int64_t step = 0; step < headDim / 16; ++step) {
    // Two 8-channel core matrices per k16 step.
    Value a = wg.advance(queryDesc, 2 * step * (rows / 8) * 128);
    Value b = wg.advance(keyDesc, 2 * step * keyGroups * 128);
    scores = wg.mma(a, b, scores, tileKeys, tc.bf16, /*transposeB=*/false);
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(builder, kb.loc);
  NVVM::WgmmaWaitGroupSyncOp::create(builder, kb.loc, 0);
  return scores;
}

void PrefillBuilder::storeP(ArrayRef<SmallVector<Value>> pSteps) {
  // A register a of step j holds row warpRow + g + 8 (a % 2), keys 16 j +
  // 8 (a / 2) + 2t (+ 1): byte ((2j + a / 2) 8 + 2 warp + a % 2) 128 +
  // 16 g + 4t of the P tile.
  Type i32 = builder.getI32Type();
  Value words = view(0, {layout.total / 4}, i32);
  Value threadBytes = kb.mul(warp, index(2 * 128));
  threadBytes = kb.add(threadBytes, kb.mul(groupId, index(16)));
  threadBytes = kb.add(threadBytes, kb.mul(threadInGroup, index(4)));
  threadBytes = kb.add(threadBytes, index(layout.pTile));
  Value threadWords = kb.divs(threadBytes, index(4));
  for (auto [j, registers] : llvm::enumerate(pSteps))
    for (int64_t a = 0; a < 4; ++a) {
      int64_t matrix = (2 * int64_t(j) + a / 2) * 8 + a % 2;
      Value at = kb.add(threadWords, index(matrix * 128 / 4));
      kb.store(pairBits(kb, registers[a]), words, {at});
    }
}

void PrefillBuilder::accumulateWgmma(Value valueRows,
                                     SmallVectorImpl<Value> &s) {
  WgmmaOps wg(kb);
  int64_t keyGroups = tileKeys / 8;
  Value pAt = index(layout.pTile);
  Value pDesc = wg.descriptor(smemAddress, pAt, (rows / 8) * 128, 128);
  Value valueDesc = wg.descriptor(smemAddress, valueRows, 128, keyGroups * 128);
  MmaBuilder::SoftmaxTiles tiles = softmaxTiles();
  int64_t first = tiles.accAt(0, 0, 0);
  SmallVector<Value> acc(s.begin() + first, s.begin() + first + nTiles * 4);
  NVVM::WgmmaFenceAlignedOp::create(builder, kb.loc);
  for (int64_t step = 0; step < tileKeys / 16; ++step) {
    Value a = wg.advance(pDesc, 2 * step * (rows / 8) * 128);
    Value b = wg.advance(valueDesc, 2 * step * 128);
    acc = wg.mma(a, b, acc, valueDim, tc.bf16, /*transposeB=*/true);
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(builder, kb.loc);
  NVVM::WgmmaWaitGroupSyncOp::create(builder, kb.loc, 0);
  std::copy(acc.begin(), acc.end(), s.begin() + first);
}

void PrefillBuilder::tileWgmma(const TileViews &tile,
                               SmallVectorImpl<Value> &s) {
  auto rowsOf = [&](const PagedSide &side, bool decoded, int64_t at) {
    return decoded ? index(at) : kb.add(tile.stageBase, index(side.rows));
  };
  Value keyRows = rowsOf(key, keyDecoded, layout.decodedKeys);
  Value valueRows = rowsOf(value, valueDecoded, layout.decodedValues);
  SmallVector<Value> scores = scoresWgmma(keyRows);
  SmallVector<SmallVector<Value>> logits;
  for (int64_t step = 0; step < tileKeys / 16; ++step) {
    ArrayRef<Value> stepScores = ArrayRef<Value>(scores).slice(8 * step, 8);
    logits.push_back(logitStep(stepScores, tile, index(step * 16)));
  }
  SmallVector<SmallVector<SmallVector<Value>>> p =
      tc.softmaxSteps(softmaxTiles(), logits, s, negInf, zeroF32);
  SmallVector<SmallVector<Value>> pSteps;
  for (auto &step : p)
    pSteps.push_back(step.front());
  storeP(pSteps);
  publishToAsyncProxy();
  kb.barrier();
  accumulateWgmma(valueRows, s);
}
