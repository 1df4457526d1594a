//===- PrefillWgmma.cpp - The prefill's tile products on wgmma ------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements a prefill tile's products on sm_90a's wgmma
// (#pattn.prefill_plan<kernel = wgmma, ...>). The block's four warps are
// one warpgroup and its 64 rows the M of wgmma.mma_async.m64nNk16, whose
// B operands come from shared memory as 8 x 16-byte core matrices (no
// swizzle): K and V (the ring's 16-bit rows in place, or the decoded tiles
// of a quantized side); the query is A from shared memory, P is A from
// registers.
//
//   S = Q Kᵀ   one chain of head_dim / 16 k-steps, N = the tile's keys;
//              the accumulators are, n8 chunk by chunk, the mma.sync C
//              fragments of the warp's 16 rows, so the logits, masks and
//              online softmax are the mma.sync kernel's (PrefillSteps,
//              MmaBuilder::softmaxWeights)
//   O += P V   one chain of keys / 16 k-steps, N = the value channels, V
//              read MN-major (imm-trans-b): the same core matrices as K's;
//              P is the softmax's A registers, wgmma's register-A fragment
//              (WgmmaOps::mmaRegisterA, inline PTX)
//
// Layouts (bytes; c a channel, r a row, k a key of the tile, T its keys):
//   query  ((c / 8)  8 + r / 8) 128 + (r % 8) 16 + (c % 8) 2
//   K, V   ((c / 8) T/8 + k / 8) 128 + (k % 8) 16 + (c % 8) 2
// Descriptors give the byte distances between core matrices along K
// (leading) and along M or N (stride): the query (K-major A) 1024 and 128;
// K (K-major B) T/8 x 128 and 128; V (MN-major B) 128 along the keys and
// T/8 x 128 along the channels.
//
// Stores through the generic proxy (the query tile, decoded tiles) and
// cp.async's copies of a side read in place are handed to wgmma's async
// proxy by fence.proxy.async before the block barrier that publishes them.
//
// The loop is software-pipelined by one tile (FlashAttention-3's order):
// iteration i lands tile i and decodes its K, issues S(i) and then P V of
// tile i - 1, decodes tile i's V (into the other of two decoded V
// buffers) under both, waits for S(i) alone, runs tile i's softmax while
// P V runs, then waits for P V and decays the accumulators. Nothing a
// chain is writing is read or carried around the loop while it is in
// flight (ptxas would serialize every wgmma); P is carried instead.
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

TileViews PrefillBuilder::tileViews(Value tile) {
  TileViews views;
  views.slot = kb.toIndex(kb.rems(tile, kb.i32(int32_t(stages))));
  Value stageBytes = kb.mul(views.slot, index(layout.ring.stageBytes));
  views.stageBase = kb.add(stageBytes, index(layout.ring.ring));
  views.tileStart = copies->tileBase(tile);
  return views;
}

Value PrefillBuilder::keyRowsOf(const TileViews &tile) {
  if (keyDecoded)
    return index(layout.decodedKeys);
  return kb.add(tile.stageBase, index(key.rows));
}

Value PrefillBuilder::valueRowsOf(const TileViews &tile, Value tile32) {
  if (!valueDecoded)
    return kb.add(tile.stageBase, index(value.rows));
  Value parity = kb.toIndex(kb.rems(tile32, kb.i32(2)));
  Value shift = kb.mul(parity, index(layout.valueBuffer));
  return kb.add(index(layout.decodedValues), shift);
}

SmallVector<Value> PrefillBuilder::landKeys(CpAsyncRing &ring, Value tile,
                                            ValueRange pages,
                                            bool deferCopies) {
  // Tile `tile` has landed (with stages - 2 younger tiles in flight).
  NVVM::CpAsyncWaitGroupOp::create(builder, kb.loc, int32_t(stages - 2));
  if (!keyDecoded || !valueDecoded)
    publishToAsyncProxy();
  kb.barrier();
  SmallVector<Value> nextPages(pages.begin(), pages.end());
  if (!deferCopies)
    nextPages =
        copies->copyAhead(ring, tile, kb.i32(int32_t(stages)), stages, pages);
  if (keyDecoded) {
    decodeSide(key, layout.decodedKeys, layout.keyStride,
               tileViews(tile).stageBase, Value());
    publishToAsyncProxy();
    kb.barrier();
  }
  return nextPages;
}

void PrefillBuilder::decodeValues(Value tile) {
  if (!valueDecoded)
    return;
  Value stageBase = tileViews(tile).stageBase;
  Value parity = kb.toIndex(kb.rems(tile, kb.i32(2)));
  Value shift = kb.mul(parity, index(layout.valueBuffer));
  decodeSide(value, layout.decodedValues, layout.valueStride, stageBase, shift);
  // Published by the block barrier of the next tile's landing (or the
  // last P V's).
  publishToAsyncProxy();
}

SmallVector<Value> PrefillBuilder::issueScores(Value keyRows) {
  WgmmaOps wg(kb);
  int64_t keyGroups = tileKeys / 8;
  // The warpgroup's 64 rows: core matrices 8 warpgroup ... along M.
  Value warpgroupRows = kb.mul(warpgroup, index(8 * 128));
  Value queryAt = kb.add(index(layout.ring.query), warpgroupRows);
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
  return scores;
}

void PrefillBuilder::issueValues(Value valueRows, ArrayRef<Value> pBits,
                                 SmallVectorImpl<Value> &s) {
  WgmmaOps wg(kb);
  int64_t keyGroups = tileKeys / 8;
  Value valueDesc = wg.descriptor(smemAddress, valueRows, 128, keyGroups * 128);
  MmaBuilder::SoftmaxTiles tiles = softmaxTiles();
  int64_t first = tiles.accAt(0, 0, 0);
  SmallVector<Value> acc(s.begin() + first, s.begin() + first + nTiles * 4);
  NVVM::WgmmaFenceAlignedOp::create(builder, kb.loc);
  for (int64_t step = 0; step < tileKeys / 16; ++step) {
    Value b = wg.advance(valueDesc, 2 * step * 128);
    acc = wg.mmaRegisterA(pBits.slice(4 * step, 4), b, acc, valueDim, tc.bf16,
                          /*transposeB=*/true);
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(builder, kb.loc);
  std::copy(acc.begin(), acc.end(), s.begin() + first);
}

SmallVector<Value> PrefillBuilder::softmaxOfTile(ArrayRef<Value> scores,
                                                 Value tile,
                                                 SmallVectorImpl<Value> &s,
                                                 bool accumulatorsInFlight) {
  TileViews views = tileViews(tile);
  SmallVector<SmallVector<Value>> logits;
  for (int64_t step = 0; step < tileKeys / 16; ++step)
    logits.push_back(
        logitStep(scores.slice(8 * step, 8), views, index(step * 16)));
  MmaBuilder::SoftmaxWeights weights =
      tc.softmaxWeights(softmaxTiles(), logits, s, negInf, zeroF32);
  // P V of the previous tile lands under the softmax; the accumulators
  // decay once it has (nothing to decay before the first tile's).
  if (accumulatorsInFlight) {
    NVVM::WgmmaWaitGroupSyncOp::create(builder, kb.loc, 0);
    tc.decayAccumulators(softmaxTiles(), weights, s);
  }
  SmallVector<Value> pBits;
  for (auto &step : weights.pOperands)
    for (Value pair : step.front())
      pBits.push_back(pairBits(kb, pair));
  return pBits;
}

SmallVector<Value> PrefillBuilder::runTilesWgmma() {
  // Carried: the softmax state (maxima, sums, accumulators), the previous
  // tile's P (wgmma A registers, i32 pairs), then the block-table entries
  // of the next tile to copy.
  SmallVector<Value> state{negInf, negInf, zeroF32, zeroF32};
  for (int64_t i = 0; i < nTiles * 4; ++i)
    state.push_back(zeroF32);
  size_t softmaxState = state.size();
  int64_t pCount = (tileKeys / 16) * 4;
  // A ring slot is refilled as soon as its tile has landed unless P V
  // reads it in place (a 16-bit V), which it does one iteration later.
  bool deferCopies = !valueDecoded;

  // Prologue: tile 0 landed and decoded, its S waited for, its P formed (a
  // block without tiles, a split op's short sequence, skips it).
  CpAsyncRing ring(kb, keys.tileCount);
  SmallVector<Value> pages = copies->startRing(ring, stages);
  Value zeroI32 = kb.i32(0);
  SmallVector<Type> types(softmaxState, builder.getF32Type());
  types.append(pCount, builder.getI32Type());
  for (Value page : pages)
    types.push_back(page.getType());
  Value nonEmpty = kb.cmpi(arith::CmpIPredicate::sgt, keys.tileCount, zeroI32);
  SmallVector<Value> prologue = kb.ifElse(
      nonEmpty, types,
      [&]() -> SmallVector<Value> {
        SmallVector<Value> next =
            landKeys(ring, zeroI32, pages, /*deferCopies=*/false);
        SmallVector<Value> scores = issueScores(keyRowsOf(tileViews(zeroI32)));
        decodeValues(zeroI32);
        NVVM::WgmmaWaitGroupSyncOp::create(builder, kb.loc, 0);
        SmallVector<Value> out(state);
        SmallVector<Value> pBits = softmaxOfTile(scores, zeroI32, out, false);
        out.append(pBits.begin(), pBits.end());
        out.append(next.begin(), next.end());
        return out;
      },
      [&]() -> SmallVector<Value> {
        SmallVector<Value> out(state);
        out.append(pCount, zeroI32);
        out.append(pages.begin(), pages.end());
        return out;
      });

  SmallVector<Value> result = kb.forLoop(
      index(1), kb.toIndex(keys.tileCount), index(1), prologue,
      [&](Value iteration, ValueRange carried) -> SmallVector<Value> {
        SmallVector<Value> s(carried.take_front(softmaxState));
        ValueRange previousP = carried.slice(softmaxState, pCount);
        ValueRange carriedPages = carried.drop_front(softmaxState + pCount);
        Value tile = kb.toI32(iteration);
        Value previous = kb.sub(tile, kb.i32(1));
        // S of tile i, then P V of tile i - 1 under it and under tile i's
        // V decode and softmax.
        SmallVector<Value> nextPages =
            landKeys(ring, tile, carriedPages, deferCopies);
        SmallVector<Value> scores = issueScores(keyRowsOf(tileViews(tile)));
        issueValues(valueRowsOf(tileViews(previous), previous),
                    SmallVector<Value>(previousP), s);
        decodeValues(tile);
        NVVM::WgmmaWaitGroupSyncOp::create(builder, kb.loc, 1);
        SmallVector<Value> pBits = softmaxOfTile(scores, tile, s, true);
        if (deferCopies)
          nextPages = copies->copyAhead(ring, tile, kb.i32(int32_t(stages)),
                                        stages, carriedPages);
        s.append(pBits.begin(), pBits.end());
        s.append(nextPages.begin(), nextPages.end());
        return s;
      });

  // The last tile's P V.
  SmallVector<Value> s(ArrayRef<Value>(result).take_front(softmaxState));
  SmallVector<Value> lastP(ArrayRef<Value>(result).slice(softmaxState, pCount));
  SmallVector<Type> stateTypes(softmaxState, builder.getF32Type());
  s = kb.ifElse(
      nonEmpty, stateTypes,
      [&]() -> SmallVector<Value> {
        SmallVector<Value> out(s);
        Value last = kb.sub(keys.tileCount, kb.i32(1));
        kb.barrier();
        issueValues(valueRowsOf(tileViews(last), last), lastP, out);
        NVVM::WgmmaWaitGroupSyncOp::create(builder, kb.loc, 0);
        return out;
      },
      [&]() -> SmallVector<Value> { return s; });
  // No copy may be in flight when the block exits.
  ring.land(0);
  return s;
}
