//===- XqaMlaWgmma.cpp - The warpgroup (wgmma) MLA decode kernel ----------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the warpgroup kernel of the tensor-core decode of
// pattn.mla_decode (plan heads_per_block = 64, sm_90a only; XqaMlaCommon.h
// has what it shares with the mma.sync kernel). It keeps the mma.sync
// kernel's softmax, value-block exponents and partial results, and moves
// the products to wgmma: two warpgroups serve 64 heads (wgmma's M); each
// tile is decoded once by all 256 threads into a shared operand tile in
// wgmma's core-matrix layout (two slots), which S reads K-major (the
// warpgroups split its k-steps, N = 32 keys) and P V reads MN-major (each
// warpgroup owns half the latent, N = 128 or 256 channels); P V runs while
// the next tile is decoded. docs/Lowering.md, "The warpgroup MLA kernel".
//
//===----------------------------------------------------------------------===//

#include "Kernels/Codecs/Codecs.h"
#include "Kernels/Decode/XqaMlaCommon.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace pattn;
using namespace pattn::xqa_mla;

namespace {

// Two warpgroups of four warps; wgmma reads the query and a decoded copy
// of the tile from shared memory.
class WgmmaBuilder : public XqaMlaBuilder {
public:
  WgmmaBuilder(KernelModule &kernels, MlaDecodeOp op, XqaMlaPlanAttr plan,
               const RecordBuffers &cache)
      : XqaMlaBuilder(kernels, op, plan, cache) {}

private:
  StringRef kernelName() const override { return "pattn_xqa_mla_wgmma_decode"; }
  /// A slot of partial logits per warpgroup.
  int64_t logitSlots() const override { return 2; }
  void layOut() override {
    // A warpgroup owns half the latent in P V.
    divideLatent(latent / 2, xqaMlaWarpgroupBlockChannels(record));
    layout = layoutXqaMlaWarpgroupShared(record, tileKeys);
  }
  Value startBlock(const BlockPosition &block) override {
    assignWarpgroups();
    return cutSplit(block);
  }
  void loadQueryRows(Value token, Value firstHead) override {
    loadQueryWarpgroup(token, firstHead);
  }
  SmallVector<Value> runTiles(ArrayRef<Value> init, Value) override {
    return tileLoopWarpgroup(init);
  }
  void writeRows(ArrayRef<Value> state, Value split, Value firstRow) override {
    writePartialsWarpgroup(state, split, firstRow);
  }

  /// The warp's warpgroup, and the first of its 16 rows (warp % 4).
  Value wgIndex, warpRowBase;
  /// The shared-window address of dynamic shared memory (i64), and the
  /// byte offset of the current tile's decoded slot (index).
  Value smemAddress, decodedBase;
  /// The page slot of the current tile (the softmax masks dead keys).
  Value currentPageSlot;

  /// Rows [16 (warp % 4), + 16) of the 64 are the warp's.
  Value rowOf(int64_t h) override;
  /// The other warpgroup's partial sums added, then the softmax scale and
  /// the mask.
  void finishLogits(Value at, Value key, MutableArrayRef<Value> pair) override;
  /// wgIndex, warpRowBase and smemAddress.
  void assignWarpgroups();
  /// Which channel of an 8-channel piece each position of the decoded
  /// tile (and of the query tile) holds: the decoders' pair order.
  SmallVector<int64_t> decodedOrder(const OperandLane &l) const;
  /// A wgmma descriptor of the core matrices at byte `offset` (index) of
  /// dynamic shared memory (TensorCore.h).
  Value descriptor(Value offset, int64_t leading, int64_t stride) {
    return WgmmaOps(kb).descriptor(smemAddress, offset, leading, stride);
  }
  Value advance(Value descriptor, int64_t bytes) {
    return WgmmaOps(kb).advance(descriptor, bytes);
  }
  SmallVector<Value> wgmma(Value descA, Value descB, ArrayRef<Value> acc,
                           int64_t n, bool bf16, bool transposeB) {
    return WgmmaOps(kb).mma(descA, descB, acc, n, bf16, transposeB);
  }
  /// The 64 query rows into the query tile as wgmma's A (core matrices),
  /// normalized into f16 for quantized lanes, in decoded order.
  void loadQueryWarpgroup(Value token, Value firstHead);
  /// Every thread decodes part of the current raw slot into the decoded
  /// tile: 8-channel pieces of one key, 16 bytes each.
  void decodeTile();

  /// A k-step of S: 16 channels of `lane` from query column `column`, in
  /// its scale block `block`.
  struct ScoreStep {
    const OperandLane *lane;
    int64_t block, column;
  };
  /// A wgmma chain over consecutive k-steps of one (lane, scale block).
  struct ScoreChain {
    const OperandLane *lane;
    int64_t block;
    SmallVector<Value> acc;
  };
  /// S = Q Kᵀ of the 64 rows and the tile's 32 keys with wgmma, the
  /// k-steps split between the warpgroups (one chain per latent scale
  /// block and one for the rope); each writes its partial logits into its
  /// slot, which the softmax adds, scales and masks.
  void scoreTileWarpgroup();
  /// The chains of `steps`, run to completion.
  SmallVector<ScoreChain> runScoreChains(ArrayRef<ScoreStep> steps,
                                         Value queryDesc, Value keyDesc);
  /// The chains' sums times their keys' scales and the lanes' factors.
  SmallVector<Value> chainLogits(ArrayRef<ScoreChain> chains,
                                 Value lowKeyWords);
  /// The warpgroup's partial logits of keys 8j + `keyLow` (+ 1) into its
  /// slot.
  void storePartialLogits(ArrayRef<Value> logit, Value keyLow);
  /// P V of the warpgroup kernel: P times the value scales into the
  /// warpgroup's P tiles, then wgmma over its half of the latent.
  void accumulateWarpgroup(const TileWeights &weights,
                           SmallVectorImpl<Value> &s);
  void writePartialsWarpgroup(ArrayRef<Value> s, Value split, Value firstRow);
  /// Raw reads and the decode at slot `slot` (index) of both rings.
  void useSlot(Value slot);
  /// decodeTile, then the fence that hands its stores to wgmma.
  void decodeAndPublish();
  /// The tile loop of the warpgroup kernel; returns the final state.
  SmallVector<Value> tileLoopWarpgroup(ArrayRef<Value> init);
};

} // namespace

Value WgmmaBuilder::rowOf(int64_t h) {
  Value row = kb.add(warpRowBase, groupId);
  return kb.add(row, index(8 * h));
}

void WgmmaBuilder::finishLogits(Value at, Value key,
                                MutableArrayRef<Value> pair) {
  // The other warpgroup's partial sums, then the softmax scale and the
  // mask (-inf for dead keys: outside the split or the causal range, on an
  // unmapped page).
  Value otherAt = kb.add(at, index(kXqaMlaWarpgroupHeads * layout.logitStride));
  Value other = loadPair(logits, otherAt, builder.getF32Type());
  Value pageAt = kb.mul(currentPageSlot, index(tileKeys));
  pageAt = kb.add(pageAt, key);
  Value pagePair = loadPair(pages, pageAt, builder.getI32Type());
  for (int64_t k = 0; k < 2; ++k) {
    Value part = vector::ExtractOp::create(builder, kb.loc, other, k);
    Value sum = kb.fadd(pair[k], part);
    Value scaled = kb.fmul(sum, softmaxScale);
    Value logit = kb.finiteLogit(scaled);
    Value page = vector::ExtractOp::create(builder, kb.loc, pagePair, k);
    Value isLive = kb.cmpi(arith::CmpIPredicate::sge, page, kb.i32(0));
    pair[k] = kb.select(isLive, logit, negInf);
  }
}

void WgmmaBuilder::assignWarpgroups() {
  wgIndex = kb.divs(warp, index(4));
  Value warpInGroup = kb.rems(warp, index(4));
  warpRowBase = kb.mul(warpInGroup, index(16));
  Value address =
      memref::ExtractAlignedPointerAsIndexOp::create(builder, kb.loc, smem);
  smemAddress = kb.toI64(address);
}

SmallVector<int64_t> WgmmaBuilder::decodedOrder(const OperandLane &l) const {
  SmallVector<int64_t> order;
  if (l.bf16) {
    for (int64_t c = 0; c < 8; ++c)
      order.push_back(c);
    return order;
  }
  for (int64_t w = 0; w < 8 / l.wordChannels; ++w)
    for (auto [low, high] : l.pairs) {
      order.push_back(w * l.wordChannels + low);
      order.push_back(w * l.wordChannels + high);
    }
  return order;
}

void WgmmaBuilder::loadQueryWarpgroup(Value token, Value firstHead) {
  // Warp w loads rows [8w, 8w + 8): lane l takes row 8w + l % 8 and the
  // 8-channel pieces l / 8 + 4q, so the 8 lanes of a quarter-warp store
  // the 8 rows of one core matrix (128 contiguous bytes). The element at
  // (row, column) is at byte ((column / 8) 8 + row / 8) 128 + (row % 8) 16
  // + position 2 (as wgmma's K-major A: K core matrices 1024 bytes apart,
  // M core matrices 128).
  Location loc = kb.loc;
  Type f16 = builder.getF16Type(), f32 = builder.getF32Type();
  Type queryElement =
      cast<MemRefType>(op.getQuery().getType()).getElementType();
  auto pieceType = VectorType::get({kQueryPiece}, queryElement);
  int64_t pieceSets = keyDim / kQueryPiece / 4;
  int64_t latentSets = latent / kQueryPiece / 4;
  Value rowInWarp = kb.rems(lane, index(8));
  Value row = kb.mul(warp, index(8));
  row = kb.add(row, rowInWarp);
  Value head = kb.add(firstHead, row);
  Value pieceOfLane = kb.divs(lane, index(8));
  auto pieceAt = [&](int64_t q) {
    Value piece = kb.add(pieceOfLane, index(4 * q));
    Value column = kb.mul(piece, index(kQueryPiece));
    return vector::LoadOp::create(builder, loc, pieceType, query,
                                  ValueRange{token, head, column})
        .getResult();
  };
  // The row's largest magnitude over its f16 lanes, across its 4 lanes.
  Value largest = zero;
  for (int64_t q = 0; q < pieceSets; ++q) {
    const OperandLane &l = q < latentSets ? latentLane : ropeLane;
    if (l.bf16)
      continue;
    Value loaded = pieceAt(q);
    for (int64_t e = 0; e < kQueryPiece; ++e) {
      Value x = vector::ExtractOp::create(builder, loc, loaded, e);
      largest = kb.fmax(largest, kb.fabs(kb.toF32(x)));
    }
  }
  largest = kb.fmax(largest, f16Mma.shuffleXor(largest, 8));
  largest = kb.fmax(largest, f16Mma.shuffleXor(largest, 16));
  auto [factor, inverse] = normalization(largest);
  Value storesInverse =
      kb.cmpi(arith::CmpIPredicate::eq, pieceOfLane, index(0));
  kb.ifThen(storesInverse, [&] { kb.store(inverse, queryInverse, {row}); });

  Value rowGroup = kb.divs(row, index(8));
  Value threadBytes = kb.mul(pieceOfLane, index(8 * 128));
  threadBytes = kb.add(threadBytes, kb.mul(rowGroup, index(128)));
  threadBytes = kb.add(threadBytes, kb.mul(rowInWarp, index(16)));
  Value threadWords = kb.divs(threadBytes, index(4));
  threadWords = kb.add(threadWords, index(layout.query / 4));
  auto splat = vector::BroadcastOp::create(
      builder, loc, VectorType::get({kQueryPiece}, f32), factor);
  for (int64_t q = 0; q < pieceSets; ++q) {
    const OperandLane &l = q < latentSets ? latentLane : ropeLane;
    Value loaded = pieceAt(q);
    Value halves;
    if (l.bf16) {
      halves = vector::BitCastOp::create(
          builder, loc, VectorType::get({kQueryPiece}, f16), loaded);
    } else {
      Value wide = arith::ExtFOp::create(
          builder, loc, VectorType::get({kQueryPiece}, f32), loaded);
      Value scaled = arith::MulFOp::create(builder, loc, wide, splat);
      Value rounded = arith::TruncFOp::create(
          builder, loc, VectorType::get({kQueryPiece}, f16), scaled);
      halves = vector::ShuffleOp::create(builder, loc, rounded, rounded,
                                         decodedOrder(l));
    }
    Value bits = vector::BitCastOp::create(
        builder, loc, VectorType::get({4}, builder.getI32Type()), halves);
    Value at = kb.add(threadWords, index(4 * q * 8 * 128 / 4));
    vector::StoreOp::create(builder, loc, bits, words, ValueRange{at},
                            /*nontemporal=*/false, llvm::MaybeAlign(16));
  }
}

void WgmmaBuilder::decodeTile() {
  // Thread (warp w, lane l) decodes key k = 8 (w % 4) + l % 8 and the
  // pieces 8 j + r, r = 4 (w / 4) + l / 8, of every pass j: a quarter-warp
  // stores one core matrix (8 keys x 16 bytes), and a warp's raw reads fall
  // in different banks. The decoded element (key, channel) is at byte
  // ((channel / 8) K8 + key / 8) 128 + (key % 8) 16 + position 2, K8 the
  // tile's 8-key groups: a K-major B for S (K core matrices K8 128 bytes
  // apart, N 128) and an MN-major B for P V (K 128, N K8 128).
  assert(tileKeys == 32 && blockThreads == 256 &&
         "the decode's thread mapping is for 32 keys and 8 warps");
  Location loc = kb.loc;
  Type i32 = builder.getI32Type();
  int64_t keyGroups = tileKeys / 8;
  int64_t passes = keyDim / 64;
  int64_t latentPasses = latent / 64;
  Value keyInGroup = kb.rems(lane, index(8));
  Value keyGroup = kb.rems(warp, index(4));
  Value key = kb.mul(keyGroup, index(8));
  key = kb.add(key, keyInGroup);
  Value r = kb.mul(wgIndex, index(4));
  r = kb.add(r, kb.divs(lane, index(8)));
  Value keyWords = kb.mul(key, index(strideWords()));
  Value keyBytes = kb.mul(key, index(layout.rawStride));
  Value storeBytes = kb.mul(r, index(keyGroups * 128));
  storeBytes = kb.add(storeBytes, kb.mul(keyGroup, index(128)));
  storeBytes = kb.add(storeBytes, kb.mul(keyInGroup, index(16)));
  storeBytes = kb.add(storeBytes, decodedBase);
  Value storeWords = kb.divs(storeBytes, index(4));
  for (int64_t j = 0; j < passes; ++j) {
    bool isLatent = j < latentPasses;
    const OperandLane &l = isLatent ? latentLane : ropeLane;
    // The piece within its lane: 8 j' + r.
    int64_t jInLane = isLatent ? j : j - latentPasses;
    int64_t pieceWords = 8 / l.wordChannels; // 32-bit words of codes
    Value first = kb.mul(r, index(pieceWords));
    first = kb.add(first, keyWords);
    int64_t constant = l.lane.getOffset() / 4 + 8 * jInLane * pieceWords;
    SmallVector<Value> out;
    if (l.bf16) {
      for (int64_t w = 0; w < 4; ++w)
        out.push_back(rawWord(first, constant + w));
    } else {
      Value scale;
      if (l.encoding == Encoding::nvfp4) {
        // Group 16 covers pieces 2m, 2m + 1: byte 4 j' + r / 2.
        Value scaleByte = kb.add(keyBytes, kb.divs(r, index(2)));
        Value code =
            rawByte(scaleByte, latentScaleLane.getOffset() + 4 * jInLane);
        scale = scalePair(code, code);
      }
      for (int64_t w = 0; w < pieceWords; ++w) {
        Value word = rawWord(first, constant + w);
        for (ChannelPair &pair : decodeWordPairs(kb, l.encoding, word)) {
          Value halves = pair.pair;
          if (scale)
            halves = arith::MulFOp::create(builder, loc, halves, scale);
          out.push_back(pairBits(kb, halves));
        }
      }
    }
    Value bits = vector::FromElementsOp::create(builder, loc,
                                                VectorType::get({4}, i32), out);
    Value at = kb.add(storeWords, index(j * 8 * keyGroups * 128 / 4));
    vector::StoreOp::create(builder, loc, bits, words, ValueRange{at},
                            /*nontemporal=*/false, llvm::MaybeAlign(16));
  }
}

void WgmmaBuilder::scoreTileWarpgroup() {
  // S = Q Kᵀ over all the tile's keys (wgmma N = 32), the k-steps split
  // between the warpgroups: each reads half of the query tile per tile
  // (the k-steps' A, the larger share of S's shared-memory traffic) and
  // runs half the dependent chain. Element i of a chain is row 16 (w % 4)
  // + g + 8 (i / 2 % 2), key 8 (i / 4) + 2t + i % 2 (the mma.sync C layout
  // per n8 chunk). Each warpgroup writes its partial sums, times the keys'
  // scales and the lanes' factors, into its slot of the logits; the
  // softmax adds the slots, scales and masks.
  int64_t keyGroups = tileKeys / 8;
  Value queryDesc = descriptor(index(layout.query), 8 * 128, 128);
  Value keyDesc = descriptor(decodedBase, keyGroups * 128, 128);
  int64_t stride = strideWords();
  Value keyLow = kb.mul(threadInGroup, index(2));
  Value lowKeyWords = kb.mul(keyLow, index(stride));
  SmallVector<ScoreStep> steps;
  for (const OperandLane *l : {&latentLane, &ropeLane}) {
    int64_t group = l == &latentLane ? latentGroup : l->count;
    for (int64_t column = 0; column < l->count; column += 16)
      steps.push_back({l, column / group, l->firstColumn + column});
  }
  int64_t half = int64_t(steps.size() + 1) / 2;
  int64_t values = tileKeys / 2; // accumulators per thread

  // Warpgroup g's k-steps [from, to): one chain per (lane, scale block).
  auto partial = [&](int64_t from, int64_t to) -> SmallVector<Value> {
    ArrayRef<ScoreStep> range(steps.begin() + from, steps.begin() + to);
    SmallVector<ScoreChain> chains = runScoreChains(range, queryDesc, keyDesc);
    return chainLogits(chains, lowKeyWords);
  };
  SmallVector<Type> types(values, builder.getF32Type());
  Value isFirst = kb.cmpi(arith::CmpIPredicate::eq, wgIndex, index(0));
  SmallVector<Value> logit = kb.ifElse(
      isFirst, types, [&] { return partial(0, half); },
      [&] { return partial(half, int64_t(steps.size())); });
  storePartialLogits(logit, keyLow);
}

SmallVector<WgmmaBuilder::ScoreChain>
WgmmaBuilder::runScoreChains(ArrayRef<ScoreStep> steps, Value queryDesc,
                             Value keyDesc) {
  int64_t keyGroups = tileKeys / 8;
  SmallVector<ScoreChain> chains;
  NVVM::WgmmaFenceAlignedOp::create(builder, kb.loc);
  for (const ScoreStep &step : steps) {
    if (chains.empty() || chains.back().lane != step.lane ||
        chains.back().block != step.block)
      chains.push_back({step.lane, step.block, {}});
    ScoreChain &chain = chains.back();
    Value a = advance(queryDesc, step.column / 8 * 8 * 128);
    Value b = advance(keyDesc, step.column / 8 * keyGroups * 128);
    chain.acc = wgmma(a, b, chain.acc, tileKeys, step.lane->bf16,
                      /*transposeB=*/false);
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(builder, kb.loc);
  NVVM::WgmmaWaitGroupSyncOp::create(builder, kb.loc, 0);
  return chains;
}

SmallVector<Value> WgmmaBuilder::chainLogits(ArrayRef<ScoreChain> chains,
                                             Value lowKeyWords) {
  // Each chain's sums times its keys' scales (none: 1), then the lane's
  // factors, as scoreTile does.
  int64_t keyGroups = tileKeys / 8;
  int64_t values = tileKeys / 2;
  int64_t stride = strideWords();

  SmallVector<Value> logit(values, zero);
  for (const OperandLane *l : {&latentLane, &ropeLane}) {
    SmallVector<Value> laneTotal(values, zero);
    bool any = false;
    for (const ScoreChain &chain : chains) {
      if (chain.lane != l)
        continue;
      any = true;
      for (int64_t j = 0; j < keyGroups; ++j) {
        // Keys 8j + 2t and + 1.
        Value low, high;
        int64_t keyConstant = 8 * j * stride;
        if (l == &latentLane) {
          low = latentScale(lowKeyWords, keyConstant + chain.block);
          high = latentScale(lowKeyWords, keyConstant + stride + chain.block);
        } else if (ropeScaleLane) {
          int64_t at = keyConstant + ropeScaleLane.getOffset() / 4;
          low = rawF32(lowKeyWords, at);
          high = rawF32(lowKeyWords, at + stride);
        }
        for (int64_t e = 0; e < 4; ++e) {
          int64_t i = 4 * j + e;
          laneTotal[i] =
              low ? kb.fma(chain.acc[i], e % 2 ? high : low, laneTotal[i])
                  : kb.fadd(chain.acc[i], laneTotal[i]);
        }
      }
    }
    if (!any)
      continue;
    bool subnormalCodes = l->encoding == Encoding::nvfp4 && !kb.hardwareFp4;
    for (int64_t i = 0; i < values; ++i) {
      Value total = laneTotal[i];
      if (subnormalCodes)
        total = kb.fmul(total, kb.f32(kFp4SubnormalScale));
      if (!l->bf16)
        total = kb.fmul(total, rowInverse[i / 2 % 2]);
      logit[i] = kb.fadd(logit[i], total);
    }
  }
  return logit;
}

void WgmmaBuilder::storePartialLogits(ArrayRef<Value> logit, Value keyLow) {
  int64_t keyGroups = tileKeys / 8;
  // The warpgroup's slot of partial logits, [row][key], as float2.
  Value slotStart =
      kb.mul(wgIndex, index(kXqaMlaWarpgroupHeads * layout.logitStride));
  for (int64_t j = 0; j < keyGroups; ++j)
    for (int64_t h = 0; h < 2; ++h) {
      Value row = rowOf(h);
      Value at = kb.mul(row, index(layout.logitStride));
      at = kb.add(at, slotStart);
      at = kb.add(at, keyLow);
      at = kb.add(at, index(8 * j));
      SmallVector<Value> pair = {logit[4 * j + 2 * h],
                                 logit[4 * j + 2 * h + 1]};
      storeLogitPair(at, pair);
    }
}

void WgmmaBuilder::accumulateWarpgroup(const TileWeights &weights,
                                       SmallVectorImpl<Value> &s) {
  // The warpgroup's P tiles (one per value block): A = P times the key's
  // value scale times the warp's 2^e of the block (P 2^10 where the keys
  // share a scale), rows 16 (w % 4) + g (+ 8), keys 8 nt + 2t (+ 1), as
  // wgmma's K-major A: element (row, key) at byte ((key / 8) 8 + row / 8)
  // 128 + (row % 8) 16 + (key % 8) 2.
  Location loc = kb.loc;
  MmaBuilder &tc = mmaOf(latentLane);
  int64_t keyTiles = tileKeys / 8;
  int64_t tileBytes = kXqaMlaWarpgroupHeads * tileKeys * 2;
  Value tileOffset = kb.mul(wgIndex, index(valueBlocks * tileBytes));
  tileOffset = kb.add(tileOffset, index(layout.pTiles));
  Value rowGroup = kb.divs(warpRowBase, index(8));
  Value threadBytes = kb.mul(rowGroup, index(128));
  threadBytes = kb.add(threadBytes, kb.mul(groupId, index(16)));
  threadBytes = kb.add(threadBytes, kb.mul(threadInGroup, index(4)));
  threadBytes = kb.add(threadBytes, tileOffset);
  Value threadWords = kb.divs(threadBytes, index(4));
  for (int64_t bw = 0; bw < valueBlocks; ++bw) {
    SmallVector<Value> scaled =
        valueOperand(weights.p, weights.keyScales[bw], s, bw);
    for (int64_t nt = 0; nt < keyTiles; ++nt)
      for (int64_t h = 0; h < 2; ++h) {
        Value packed =
            tc.packPair(scaled[nt * 4 + 2 * h], scaled[nt * 4 + 2 * h + 1]);
        Value bits = pairBits(kb, packed);
        int64_t constant = (bw * tileBytes + (nt * 8 + h) * 128) / 4;
        Value at = kb.add(threadWords, index(constant));
        kb.store(bits, words, {at});
      }
  }
  // Every warp of the warpgroup wrote its rows: publish them to the async
  // proxy and wait for the warpgroup alone (named barrier 1 + g).
  NVVM::FenceProxyOp::create(
      builder, loc, NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(builder.getContext(),
                                 NVVM::SharedSpace::shared_cta));
  Value barrierId = kb.toI32(kb.add(wgIndex, index(1)));
  Value groupThreads = kb.i32(int32_t(kXqaMlaWarpgroupThreads / 2));
  NVVM::BarrierOp::create(builder, loc, Type(), barrierId, groupThreads,
                          NVVM::BarrierReductionAttr(), Value());

  // O += A V over the warpgroup's channels: V is the decoded tile read
  // MN-major (K = keys: core matrices 128 bytes apart; N = channels:
  // K8 128 bytes apart).
  int64_t keyGroups = tileKeys / 8;
  Value pDesc = descriptor(tileOffset, 8 * 128, 128);
  Value channelOffset =
      kb.mul(wgIndex, index(warpChannels / 8 * keyGroups * 128));
  channelOffset = kb.add(channelOffset, decodedBase);
  Value valueDesc = descriptor(channelOffset, 128, keyGroups * 128);
  int64_t tilesPerBlock = blockChannels / 8;
  NVVM::WgmmaFenceAlignedOp::create(builder, loc);
  for (int64_t bw = 0; bw < valueBlocks; ++bw) {
    SmallVector<Value> acc;
    for (int64_t i = 0; i < tilesPerBlock * 4; ++i)
      acc.push_back(s[accAt(bw * tilesPerBlock, 0) + i]);
    for (int64_t ks = 0; ks < tileKeys / 16; ++ks) {
      Value a = advance(pDesc, bw * tileBytes + 2 * ks * 8 * 128);
      Value b = advance(valueDesc, bw * blockChannels / 8 * keyGroups * 128 +
                                       2 * ks * 128);
      acc = wgmma(a, b, acc, blockChannels, latentLane.bf16,
                  /*transposeB=*/true);
    }
    for (int64_t i = 0; i < tilesPerBlock * 4; ++i)
      s[accAt(bw * tilesPerBlock, 0) + i] = acc[i];
  }
  // Left in flight: tileLoopWarpgroup decodes the next tile under it.
  NVVM::WgmmaGroupSyncAlignedOp::create(builder, loc);
}

void WgmmaBuilder::useSlot(Value slot) {
  useRawSlot(slot);
  decodedBase = kb.mul(slot, index(tileKeys * keyDim * 2));
  decodedBase = kb.add(decodedBase, index(layout.decoded));
}

void WgmmaBuilder::decodeAndPublish() {
  decodeTile();
  // Written through the generic proxy, read by wgmma through the async
  // proxy (the query tile too, before the first tile's decode).
  NVVM::FenceProxyOp::create(
      builder, kb.loc, NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(builder.getContext(),
                                 NVVM::SharedSpace::shared_cta));
}

SmallVector<Value> WgmmaBuilder::tileLoopWarpgroup(ArrayRef<Value> init) {
  Location loc = kb.loc;
  Value zeroI32 = kb.i32(0), oneI32 = kb.i32(1), twoI32 = kb.i32(2),
        threeI32 = kb.i32(3);
  // Prologue: the pages of tiles 0, 1 and 2, the raw copies of tiles 0 and
  // 1, tile 0 decoded (slot 0). The block barrier also publishes the query
  // tile's row scales.
  Value nonEmpty = kb.cmpi(arith::CmpIPredicate::sgt, tileCount, zeroI32);
  Value twoTiles = kb.cmpi(arith::CmpIPredicate::sgt, tileCount, oneI32);
  CpAsyncRing ring(kb, tileCount);
  lookupPages(zeroI32, index(0));
  lookupPages(oneI32, index(1));
  kb.barrier();
  ring.issueIf(nonEmpty, [&] { issueTile(zeroI32, index(0), index(0)); });
  ring.issueIf(twoTiles, [&] { issueTile(oneI32, index(1), index(1)); });
  lookupPages(twoI32, index(2));
  loadRowInverses();
  ring.land(1);
  kb.ifThen(nonEmpty, [&] {
    useSlot(index(0));
    decodeAndPublish();
  });

  // Tile i: raw slot, decoded slot i % 2, pages i % 3. Its P V runs while
  // tile i + 1 (copied a tile ago) is decoded into the other slot and tile
  // i + 2 is copied into tile i's raw slot; the accumulators are touched
  // only after the wait at the end.
  return forEachTile(init, [&](Value i, SmallVectorImpl<Value> &s) {
    kb.barrier();
    Value slot = kb.toIndex(kb.rems(i, twoI32));
    useSlot(slot);
    currentPageSlot = kb.toIndex(kb.rems(i, threeI32));
    scoreTileWarpgroup();
    kb.barrier();
    TileWeights weights = softmaxTile(s, wgIndex);
    accumulateWarpgroup(weights, s);
    Value nextTile = kb.add(i, oneI32);
    Value more = kb.cmpi(arith::CmpIPredicate::slt, nextTile, tileCount);
    kb.ifThen(more, [&] {
      // Every warp is past tile i's raw records (scales included).
      ring.land(0);
      Value afterNext = kb.add(i, twoI32);
      Value afterNextPages = kb.toIndex(kb.rems(afterNext, threeI32));
      ring.issue(afterNext,
                 [&] { issueTile(afterNext, slot, afterNextPages); });
      Value later = kb.add(i, threeI32);
      lookupPages(later, kb.toIndex(kb.rems(later, threeI32)));
      Value nextSlot = kb.toIndex(kb.rems(nextTile, twoI32));
      useSlot(nextSlot);
      decodeAndPublish();
    });
    NVVM::WgmmaWaitGroupSyncOp::create(builder, loc, 0);
  });
}

void WgmmaBuilder::writePartialsWarpgroup(ArrayRef<Value> s, Value split,
                                          Value firstRow) {
  // Rows 16 (w % 4) + g (+ 8): accumulator 4 j + 2h + e of value block bw
  // is decoded position channelBase + bw B + 8 j + 2t + e, which holds
  // channel (position / 8) 8 + order[position % 8]; warpgroup 0 writes the
  // (natural) max and the sum.
  SmallVector<int64_t> order = decodedOrder(latentLane);
  Value channelBase = kb.mul(wgIndex, index(warpChannels));
  Value firstOfQuad =
      kb.cmpi(arith::CmpIPredicate::eq, threadInGroup, index(0));
  Value writesStats = kb.land(
      firstOfQuad, kb.cmpi(arith::CmpIPredicate::eq, wgIndex, index(0)));
  // order[2t + e] for this thread, e = 0, 1.
  SmallVector<Value> within(2);
  for (int64_t e = 0; e < 2; ++e) {
    Value value = index(order[e]);
    for (int64_t t = 1; t < 4; ++t) {
      Value isT = kb.cmpi(arith::CmpIPredicate::eq, threadInGroup, index(t));
      Value candidate = index(order[2 * t + e]);
      value = kb.select(isT, candidate, value);
    }
    within[e] = kb.add(channelBase, value);
  }
  int64_t tilesPerBlock = blockChannels / 8;
  SmallVector<SmallVector<Value>> undo;
  for (int64_t bw = 0; bw < valueBlocks; ++bw)
    undo.push_back(undoFactors(s, bw));
  for (int64_t h = 0; h < 2; ++h) {
    Value outRow = kb.add(firstRow, rowOf(h));
    writeRowStats(s, h, split, outRow, writesStats);
    for (int64_t nt = 0; nt < warpTiles; ++nt)
      for (int64_t e = 0; e < 2; ++e) {
        Value value = s[accAt(nt, 2 * h + e)];
        for (Value factor : undo[nt / tilesPerBlock])
          value = kb.fmul(value, factor);
        Value channel = kb.add(within[e], index(8 * nt));
        kb.store(value, partialOut, {split, outRow, channel});
      }
  }
}

gpu::GPUFuncOp
pattn::buildXqaMlaWgmmaKernel(KernelModule &kernels, MlaDecodeOp op,
                              XqaMlaPlanAttr plan, const RecordBuffers &cache,
                              SmallVectorImpl<Value> &hostOperands) {
  WgmmaBuilder builder(kernels, op, plan, cache);
  return builder.build(hostOperands);
}
