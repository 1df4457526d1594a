//===- XqaMlaMmaSync.cpp - The mma.sync MLA decode kernel -----------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the mma.sync kernel of the tensor-core decode of
// pattn.mla_decode (plan heads_per_block = 16; XqaMlaCommon.h has what it
// shares with the warpgroup kernel). One block of four warps serves 16
// query heads of one query token (the M rows of mma.sync.m16n8k16, fp32
// accumulation) and one split of the token's keys, a tile of 32 keys at a
// time. The records are never decoded into a shared operand tile: every
// warp builds its mma operands in registers straight from the raw records.
//
//   cp.async: tile i + 1's raw records -> the other slot of a two-slot
//             ring (zero-filled for keys that are masked or unmapped), so
//             the copy lands while tile i is computed
//   S = Q Kᵀ: warp w scores keys [8w, 8w + 8) for all 16 heads. A thread
//             loads one 32-bit word of codes per k-step and decodes it
//             into its B registers. Which channels a register holds is the
//             decoder's choice; the query tile is stored in the same order
//             (a permutation of the k axis leaves the dot product as it
//             is). Each block's scale is applied to its partial sum in fp32
//   softmax:  the logits meet in shared memory; every warp runs the same
//             online softmax over the whole tile
//   O += P V: warp w owns latent channels [w L/4, (w+1) L/4). A thread
//             loads the word of the same channels of two keys, and one
//             prmt pairs them as an mma B register (key 2t with 2t + 1);
//             the n axis is permuted too, and undone when the partial
//             results are written
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

/// Query rows of a block, and per warp while the query is loaded.
constexpr int64_t kRows = kXqaMlaHeadsPerBlock;
constexpr int64_t kRowsPerWarp = kRows / kXqaMlaWarps;

class MmaSyncBuilder : public XqaMlaBuilder {
public:
  MmaSyncBuilder(KernelModule &kernels, MlaDecodeOp op, XqaMlaPlanAttr plan,
                 const RecordBuffers &cache)
      : XqaMlaBuilder(kernels, op, plan, cache) {}

private:
  StringRef kernelName() const override { return "pattn_xqa_mla_decode"; }
  int64_t logitSlots() const override { return 1; }
  void layOut() override {
    int64_t channels = latent / kXqaMlaWarps;
    divideLatent(channels, std::min(latentGroup, channels));
    layout = layoutXqaMlaShared(record, tileKeys);
  }
  Value startBlock(const BlockPosition &block) override {
    return cutSplit(block);
  }
  void loadQueryRows(Value token, Value firstHead) override {
    loadQuery(token, firstHead);
  }
  SmallVector<Value> runTiles(ArrayRef<Value> init, Value nonEmpty) override {
    return tileLoop(init, nonEmpty);
  }
  void writeRows(ArrayRef<Value> state, Value split, Value firstRow) override {
    writePartials(state, split, firstRow);
  }

  /// The warp's 16 rows are the block's.
  Value rowOf(int64_t h) override { return kb.add(groupId, index(8 * h)); }
  /// body(item) for this lane's items lane, lane + 32, ... below `count`
  /// (only the last pass guarded).
  void forLaneItems(int64_t count, function_ref<void(Value)> body);
  /// The 16 query rows into the query tile: raw bf16 for bf16 lanes, times
  /// the row's power of two into f16, in the decoders' channel order, for
  /// the others.
  void loadQuery(Value token, Value firstHead);
  /// The prologue and the tile loop; returns the final loop state.
  SmallVector<Value> tileLoop(ArrayRef<Value> init, Value nonEmpty);

  /// A thread's operand addresses in S.
  struct ScoreThread {
    /// Its ldmatrix row and column offset of the query tile.
    Value aRow, aColumnOffset;
    /// Words of the B key's record from word t, and of key 2t's record.
    Value bWords, lowKeyWords;
    /// The B key's group-scale byte of the thread's word.
    Value bScaleBytes;
  };
  /// S = Q Kᵀ for this warp's 8 keys, scaled and masked, into the logits.
  void scoreTile(Value pageSlot);
  /// Lane `l`'s part of S, its scales and factors applied, added to
  /// `logit` (the mma C layout).
  void addLaneScores(const OperandLane &l, const ScoreThread &thread,
                     MutableArrayRef<Value> logit);
  /// Base-2 logits of keys `keyLow` and + 1, masked per the pages in page
  /// slot `pageSlot`, into the logits.
  void storeLogits(ArrayRef<Value> logit, Value keyLow, Value pageSlot);
  /// O += P V of the warp's channels; `s` is the loop state.
  void accumulateValues(const TileWeights &weights, SmallVectorImpl<Value> &s);
  void writePartials(ArrayRef<Value> s, Value split, Value firstRow);
};

} // namespace

void MmaSyncBuilder::forLaneItems(int64_t count,
                                  function_ref<void(Value)> body) {
  for (int64_t k = 0; k * kWarpThreads < count; ++k) {
    Value item = kb.add(lane, index(k * kWarpThreads));
    if ((k + 1) * kWarpThreads <= count)
      body(item);
    else
      kb.ifThen(kb.cmpi(arith::CmpIPredicate::slt, item, index(count)),
                [&] { body(item); });
  }
}

void MmaSyncBuilder::loadQuery(Value token, Value firstHead) {
  Location loc = kb.loc;
  Type f16 = builder.getF16Type(), bf16 = builder.getBF16Type();
  Type queryElement =
      cast<MemRefType>(op.getQuery().getType()).getElementType();
  int64_t pieces = keyDim / kQueryPiece;
  int64_t latentPieces = latent / kQueryPiece;
  for (int64_t rr = 0; rr < kRowsPerWarp; ++rr) {
    Value row = kb.mul(warp, index(kRowsPerWarp));
    row = kb.add(row, index(rr));
    Value head = kb.add(firstHead, row);
    // The row's raw bits, and the largest magnitude of its f16 lanes.
    Value largest = zero;
    forLaneItems(pieces, [&](Value piece) {
      Value column = kb.mul(piece, index(kQueryPiece));
      Value loaded = vector::LoadOp::create(
          builder, loc, VectorType::get({kQueryPiece}, queryElement), query,
          ValueRange{token, head, column});
      Value halves = vector::BitCastOp::create(
          builder, loc, VectorType::get({kQueryPiece}, f16), loaded);
      vector::StoreOp::create(builder, loc, halves, queryTile,
                              ValueRange{row, column},
                              /*nontemporal=*/false, llvm::MaybeAlign(16));
    });
    if (!anyF16Query())
      continue;
    // The f16 lanes' maximum: reread what this lane stored (its own
    // stores), so that the loads above stay unconditional vectors; a lane
    // past the row rereads its first piece, which the mask then drops.
    for (int64_t k = 0; k * kWarpThreads < pieces; ++k) {
      Value piece = kb.add(lane, index(k * kWarpThreads));
      Value inRange = kb.cmpi(arith::CmpIPredicate::slt, piece, index(pieces));
      Value safePiece = kb.select(inRange, piece, lane);
      Value column = kb.mul(safePiece, index(kQueryPiece));
      Value loaded = vector::LoadOp::create(
          builder, loc, VectorType::get({kQueryPiece}, bf16), queryBf16,
          ValueRange{row, column}, /*nontemporal=*/false, llvm::MaybeAlign(16));
      Value pieceMax = zero;
      for (int64_t e = 0; e < kQueryPiece; ++e) {
        Value x = vector::ExtractOp::create(builder, loc, loaded, e);
        pieceMax = kb.fmax(pieceMax, kb.fabs(kb.toF32(x)));
      }
      Value isLatent =
          kb.cmpi(arith::CmpIPredicate::slt, safePiece, index(latentPieces));
      Value latentCounts = kb.boolean(!latentLane.bf16);
      Value ropeCounts = kb.boolean(!ropeLane.bf16);
      Value counts = kb.select(isLatent, latentCounts, ropeCounts);
      counts = kb.land(counts, inRange);
      largest = kb.fmax(largest, kb.select(counts, pieceMax, zero));
    }
    for (int32_t mask = 16; mask >= 1; mask /= 2)
      largest = kb.fmax(largest, f16Mma.shuffleXor(largest, mask));
    auto [factor, inverse] = normalization(largest);
    kb.ifThen(kb.cmpi(arith::CmpIPredicate::eq, lane, index(0)),
              [&] { kb.store(inverse, queryInverse, {row}); });
    // The row's raw bits, stored by every lane of the warp, are reread by
    // others below (every warp takes the same rows loop, so a block
    // barrier is uniform; it runs once per block).
    kb.barrier();
    // Each f16 lane's groups: normalized, rounded once, permuted into the
    // decoder's order (a group is read and written by one thread).
    for (const OperandLane *l : {&latentLane, &ropeLane}) {
      if (l->bf16)
        continue;
      int64_t width = l->groupChannels();
      int64_t groups = l->count / width;
      SmallVector<int64_t> mask;
      for (int64_t c = 0; c < width; ++c)
        mask.push_back(l->physicalInGroup(c));
      Value splat = vector::BroadcastOp::create(
          builder, loc, VectorType::get({width}, builder.getF32Type()), factor);
      forLaneItems(groups, [&](Value group) {
        Value column = kb.mul(group, index(width));
        column = kb.add(column, index(l->firstColumn));
        Value raw =
            vector::LoadOp::create(builder, loc, VectorType::get({width}, bf16),
                                   queryBf16, ValueRange{row, column},
                                   /*nontemporal=*/false, llvm::MaybeAlign(16));
        Value wide = arith::ExtFOp::create(
            builder, loc, VectorType::get({width}, builder.getF32Type()), raw);
        Value scaled = arith::MulFOp::create(builder, loc, wide, splat);
        Value halves = arith::TruncFOp::create(
            builder, loc, VectorType::get({width}, f16), scaled);
        Value ordered =
            vector::ShuffleOp::create(builder, loc, halves, halves, mask);
        vector::StoreOp::create(builder, loc, ordered, queryTile,
                                ValueRange{row, column},
                                /*nontemporal=*/false, llvm::MaybeAlign(16));
      });
    }
  }
}

void MmaSyncBuilder::scoreTile(Value pageSlot) {
  // Warp w scores keys n0 + g (B operand columns), n0 = 8w; element e of
  // the result is row g + 8 (e / 2), key n0 + 2t + (e % 2). Two accumulator
  // chains (even and odd k-steps) per scale block keep two mma in flight.
  Value n0 = kb.mul(warp, index(8));
  Value bKey = kb.add(n0, groupId);
  Value keyLow = kb.add(n0, kb.mul(threadInGroup, index(2)));
  ScoreThread thread;
  thread.aRow = kb.rems(lane, index(16));
  Value aColumnOffset = kb.divs(lane, index(16));
  thread.aColumnOffset = kb.mul(aColumnOffset, index(8));
  int64_t stride = strideWords();
  // Words of the B key's record from word t, and of key 2t's record.
  Value bKeyWords = kb.mul(bKey, index(stride));
  thread.bWords = kb.add(bKeyWords, threadInGroup);
  thread.lowKeyWords = kb.mul(keyLow, index(stride));
  // The B key's group-scale byte of the thread's word: group t / 2 of the
  // word's 32 channels.
  Value bScaleBytes = kb.mul(bKey, index(layout.rawStride));
  thread.bScaleBytes = kb.add(bScaleBytes, kb.divs(threadInGroup, index(2)));

  SmallVector<Value> logit(4, zero);
  for (const OperandLane *l : {&latentLane, &ropeLane})
    addLaneScores(*l, thread, logit);
  storeLogits(logit, keyLow, pageSlot);
}

void MmaSyncBuilder::addLaneScores(const OperandLane &l,
                                   const ScoreThread &thread,
                                   MutableArrayRef<Value> logit) {
  int64_t stride = strideWords();
  MmaBuilder &tc = mmaOf(l);
  bool isLatent = &l == &latentLane;
  int64_t steps = l.count / 16;
  auto blockOf = [&](int64_t step) -> int64_t {
    return isLatent ? step * 16 / latentGroup : 0;
  };
  SmallVector<Value> laneTotal(4, zero);
  SmallVector<Value> chains[2] = {SmallVector<Value>(4, zero),
                                  SmallVector<Value>(4, zero)};
  auto flush = [&](int64_t block) {
    // The scales of keys 2t and 2t + 1 (none: 1).
    Value low, high;
    if (isLatent) {
      low = latentScale(thread.lowKeyWords, block);
      high = latentScale(thread.lowKeyWords, stride + block);
    } else if (ropeScaleLane) {
      low = rawF32(thread.lowKeyWords, ropeScaleLane.getOffset() / 4);
      high = rawF32(thread.lowKeyWords, stride + ropeScaleLane.getOffset() / 4);
    }
    for (int64_t e = 0; e < 4; ++e) {
      Value sum = kb.fadd(chains[0][e], chains[1][e]);
      laneTotal[e] = low ? kb.fma(sum, e % 2 ? high : low, laneTotal[e])
                         : kb.fadd(sum, laneTotal[e]);
      chains[0][e] = chains[1][e] = zero;
    }
  };
  int64_t current = blockOf(0);
  SmallVector<ChannelPair> decoded;
  for (int64_t step = 0; step < steps; ++step) {
    if (blockOf(step) != current) {
      flush(current);
      current = blockOf(step);
    }
    SmallVector<Value> b(2);
    if (l.bf16) {
      // Channels 16 step + 8 r + 2t, + 1: the raw words are operands.
      for (int64_t r = 0; r < 2; ++r)
        b[r] =
            rawWord(thread.bWords, l.lane.getOffset() / 4 + 8 * step + 4 * r);
    } else {
      int64_t perWord = l.stepsPerWord();
      if (step % perWord == 0) {
        // Channels 4 w (step / perWord) + w t .. of the B key, w the word's
        // channels: one word serves perWord k-steps.
        Value word = rawWord(thread.bWords,
                             l.lane.getOffset() / 4 + 4 * (step / perWord));
        decoded = decodeWordPairs(kb, l.encoding, word);
        for (auto [pair, expected] : llvm::zip_equal(decoded, l.pairs)) {
          (void)expected;
          assert(pair.low == expected.first && pair.high == expected.second &&
                 "the query tile is laid out for another pair order");
        }
        if (l.encoding == Encoding::nvfp4) {
          // One e4m3 group scale covers the word's 8 channels.
          Value code = rawByte(thread.bScaleBytes, latentScaleLane.getOffset() +
                                                       2 * (step / perWord));
          Value scale = scalePair(code, code);
          for (ChannelPair &pair : decoded)
            pair.pair =
                arith::MulFOp::create(builder, kb.loc, pair.pair, scale);
        }
      }
      int64_t p0 = 2 * (step % perWord);
      b = {decoded[p0].pair, decoded[p0 + 1].pair};
    }
    Value aColumn =
        kb.add(thread.aColumnOffset, index(l.firstColumn + 16 * step));
    SmallVector<Value> a;
    for (Value word :
         tc.ldmatrix(queryTile, thread.aRow, aColumn, 4, /*transpose=*/false))
      a.push_back(l.bf16 ? word : f16PairOf(kb, word));
    SmallVector<Value> &chain = chains[step % 2];
    chain = tc.mma(a, b, chain);
  }
  flush(current);
  // The bit trick's e2m1 pairs are short of 2^14 (KernelBuilder::
  // fp4Subnormal); the chips' cvt is not.
  bool subnormalCodes = l.encoding == Encoding::nvfp4 && !kb.hardwareFp4;
  for (int64_t e = 0; e < 4; ++e) {
    Value total = laneTotal[e];
    if (subnormalCodes)
      total = kb.fmul(total, kb.f32(kFp4SubnormalScale));
    if (!l.bf16)
      total = kb.fmul(total, rowInverse[e / 2]);
    logit[e] = kb.fadd(logit[e], total);
  }
}

void MmaSyncBuilder::storeLogits(ArrayRef<Value> logit, Value keyLow,
                                 Value pageSlot) {
  // Base-2 logits, -inf for dead keys (outside the split or the causal
  // range, on an unmapped page), as float2 per row.
  Value pageAt = kb.add(kb.mul(pageSlot, index(tileKeys)), keyLow);
  auto pagePair = vector::LoadOp::create(
      builder, kb.loc, VectorType::get({2}, builder.getI32Type()), pages,
      ValueRange{pageAt}, /*nontemporal=*/false, llvm::MaybeAlign(8));
  SmallVector<Value> isLive(2);
  for (int64_t k = 0; k < 2; ++k) {
    Value page = vector::ExtractOp::create(builder, kb.loc, pagePair, k);
    isLive[k] = kb.cmpi(arith::CmpIPredicate::sge, page, kb.i32(0));
  }
  for (int64_t h = 0; h < 2; ++h) {
    SmallVector<Value> pair(2);
    for (int64_t k = 0; k < 2; ++k) {
      Value scaled = kb.fmul(logit[2 * h + k], softmaxScale);
      Value x = kb.finiteLogit(scaled);
      pair[k] = kb.select(isLive[k], x, negInf);
    }
    Value row = kb.add(groupId, index(8 * h));
    Value at = kb.mul(row, index(layout.logitStride));
    at = kb.add(at, keyLow);
    storeLogitPair(at, pair);
  }
}

void MmaSyncBuilder::accumulateValues(const TileWeights &weights,
                                      SmallVectorImpl<Value> &s) {
  // P V, one value block of this warp at a time (eligibility row M5: a
  // warp's channels are one block, inside one, or whole blocks).
  Location loc = kb.loc;
  const OperandLane &v = latentLane;
  MmaBuilder &tc = mmaOf(v);
  int64_t width = v.wordChannels;
  int64_t chunkChannels = 8 * width; ///< n-tile column g is word g
  int64_t chunksPerBlock = blockChannels / chunkChannels;
  int64_t tilesPerBlock = chunksPerBlock * width;
  int64_t keySteps = tileKeys / 16;
  int64_t stride = strideWords();
  Value twoT = weights.twoT;

  // Words of two keys -> B registers: one prmt gathers the same channels
  // of both (low half key 2t, high half key 2t + 1). The chips' e4m3
  // conversion pairs adjacent bytes, the others the two halves.
  bool adjacentBytes = v.encoding == Encoding::f8e4m3 && kb.hardwareFp8;
  int32_t lowSelector = adjacentBytes ? 0x5140 : 0x5410;
  int32_t highSelector = adjacentBytes ? 0x7362 : 0x7632;
  // The thread's words: key 2t's record, word g of each chunk of the
  // warp's channels; the rest (key, chunk) is compile-time.
  Value pairWords = kb.mul(twoT, index(stride));
  pairWords = kb.add(pairWords, groupId);
  pairWords = kb.add(pairWords, kb.mul(warp, index(warpChannels / width)));
  // Its group-scale bytes (e2m1: word g of a chunk is group g / 2).
  Value pairScaleBytes = kb.mul(twoT, index(layout.rawStride));
  pairScaleBytes = kb.add(pairScaleBytes, kb.divs(groupId, index(2)));
  pairScaleBytes =
      kb.add(pairScaleBytes, kb.mul(warp, index(warpChannels / 16)));
  // Key 2t + `key` (compile-time) and key + 1, chunk channel `channel`.
  auto keyPairRegisters = [&](int64_t key, int64_t channel) {
    int64_t constant = key * stride + v.lane.getOffset() / 4 + channel / width;
    Value wordA = rawWord(pairWords, constant);
    Value wordB = rawWord(pairWords, constant + stride);
    SmallVector<Value> registers(width);
    for (int64_t half = 0; half < 2; ++half) {
      Value selector = kb.i32(half ? highSelector : lowSelector);
      Value gathered =
          NVVM::PermuteOp::create(builder, loc, builder.getI32Type(), wordA,
                                  wordB, selector, NVVM::PermuteMode::DEFAULT);
      if (adjacentBytes) {
        for (const ChannelPair &pair :
             decodeWordPairs(kb, v.encoding, gathered))
          registers[half * width / 2 + pair.low / 2] = pair.pair;
      } else {
        SmallVector<Value> halves = decodeWordHalves(kb, v.encoding, gathered);
        for (auto [j, pair] : llvm::enumerate(halves))
          registers[half * width / 2 + int64_t(j)] = pair;
      }
    }
    if (v.encoding == Encoding::nvfp4) {
      int64_t at =
          key * layout.rawStride + latentScaleLane.getOffset() + channel / 16;
      Value lowScale = rawByte(pairScaleBytes, at);
      Value highScale = rawByte(pairScaleBytes, at + layout.rawStride);
      Value scale = scalePair(lowScale, highScale);
      for (Value &reg : registers)
        reg = arith::MulFOp::create(builder, loc, reg, scale);
    }
    for (Value &reg : registers)
      reg = tc.bitsOperand(reg);
    return registers;
  };

  for (int64_t bw = 0; bw < valueBlocks; ++bw) {
    SmallVector<Value> scaled =
        valueOperand(weights.p, weights.keyScales[bw], s, bw);
    // A operands per k-step (16 keys: key tiles 2 ks, 2 ks + 1): a0 = row
    // g, a1 = row g + 8 of the first key tile, a2, a3 of the second.
    SmallVector<SmallVector<Value>> a(keySteps);
    for (int64_t ks = 0; ks < keySteps; ++ks) {
      int64_t lo = 2 * ks * 4, hi = (2 * ks + 1) * 4;
      a[ks] = {tc.packPair(scaled[lo], scaled[lo + 1]),
               tc.packPair(scaled[lo + 2], scaled[lo + 3]),
               tc.packPair(scaled[hi], scaled[hi + 1]),
               tc.packPair(scaled[hi + 2], scaled[hi + 3])};
    }
    // n-tile j of chunk c, column n: channel chunk + width n + j; the
    // products accumulate straight into the (block-exponent) accumulators.
    for (int64_t c = 0; c < chunksPerBlock; ++c) {
      int64_t channel = bw * blockChannels + c * chunkChannels;
      int64_t firstTile = bw * tilesPerBlock + c * width;
      for (int64_t ks = 0; ks < keySteps; ++ks) {
        SmallVector<Value> registers[2];
        for (int64_t r = 0; r < 2; ++r)
          registers[r] = keyPairRegisters(16 * ks + 8 * r, channel);
        for (int64_t j = 0; j < width; ++j) {
          SmallVector<Value> acc(4);
          for (int64_t e = 0; e < 4; ++e)
            acc[e] = s[accAt(firstTile + j, e)];
          acc = tc.mma(a[ks], {registers[0][j], registers[1][j]}, acc);
          for (int64_t e = 0; e < 4; ++e)
            s[accAt(firstTile + j, e)] = acc[e];
        }
      }
    }
  }
}

SmallVector<Value> MmaSyncBuilder::tileLoop(ArrayRef<Value> init,
                                            Value nonEmpty) {
  // Prologue: tile 0's pages, its copy, then tile 1's pages. The barrier
  // also publishes the query tile.
  Value zeroI32 = kb.i32(0), oneI32 = kb.i32(1), twoI32 = kb.i32(2),
        threeI32 = kb.i32(3);
  CpAsyncRing ring(kb, tileCount);
  lookupPages(zeroI32, index(0));
  kb.barrier();
  ring.issueIf(nonEmpty, [&] { issueTile(zeroI32, index(0), index(0)); });
  lookupPages(oneI32, index(1));
  loadRowInverses();

  return forEachTile(init, [&](Value i, SmallVectorImpl<Value> &s) {
    // Tile i is in raw slot i % 2 with its pages in slot i % 3.
    ring.land(0);
    // Every warp is past tile i - 1: its raw slot takes tile i + 1,
    // whose pages were looked up a tile ago.
    Value nextTile = kb.add(i, oneI32);
    Value nextRaw = kb.toIndex(kb.rems(nextTile, twoI32));
    Value nextPages = kb.toIndex(kb.rems(nextTile, threeI32));
    ring.issue(nextTile, [&] { issueTile(nextTile, nextRaw, nextPages); });
    Value afterNext = kb.add(i, twoI32);
    lookupPages(afterNext, kb.toIndex(kb.rems(afterNext, threeI32)));
    useRawSlot(kb.toIndex(kb.rems(i, twoI32)));
    scoreTile(kb.toIndex(kb.rems(i, threeI32)));
    kb.barrier();
    TileWeights weights = softmaxTile(s, warp);
    accumulateValues(weights, s);
  });
}

void MmaSyncBuilder::writePartials(ArrayRef<Value> s, Value split,
                                   Value firstRow) {
  // Rows g and g + 8: unnormalized outputs of this warp's channels; warp 0
  // writes the (natural) max and the sum. Element e of n-tile j of chunk c
  // is channel c C + w (2t + e % 2) + j (C = 8 w, w the latent's channels
  // per word): a thread's 2w channels of a chunk are contiguous.
  int64_t width = latentLane.wordChannels;
  int64_t chunkChannels = 8 * width;
  int64_t chunks = warpChannels / chunkChannels;
  Value channelBase = kb.mul(warp, index(warpChannels));
  Value firstOfQuad =
      kb.cmpi(arith::CmpIPredicate::eq, threadInGroup, index(0));
  Value writesStats =
      kb.land(firstOfQuad, kb.cmpi(arith::CmpIPredicate::eq, warp, index(0)));
  Value threadChannels = kb.mul(threadInGroup, index(2 * width));
  int64_t chunksPerBlock = chunks / valueBlocks;
  SmallVector<SmallVector<Value>> undo;
  for (int64_t bw = 0; bw < valueBlocks; ++bw)
    undo.push_back(undoFactors(s, bw));
  for (int64_t h = 0; h < 2; ++h) {
    Value outRow = kb.add(firstRow, kb.add(groupId, index(8 * h)));
    writeRowStats(s, h, split, outRow, writesStats);
    for (int64_t c = 0; c < chunks; ++c) {
      SmallVector<Value> values;
      for (int64_t k = 0; k < 2 * width; ++k) {
        Value value = s[accAt(c * width + k % width, 2 * h + k / width)];
        for (Value factor : undo[c / chunksPerBlock])
          value = kb.fmul(value, factor);
        values.push_back(value);
      }
      Value channel = kb.add(channelBase, index(c * chunkChannels));
      channel = kb.add(channel, threadChannels);
      for (int64_t q = 0; q < 2 * width; q += 4) {
        Value quad = vector::FromElementsOp::create(
            builder, kb.loc, VectorType::get({4}, builder.getF32Type()),
            ArrayRef<Value>(values).slice(q, 4));
        Value at = kb.add(channel, index(q));
        vector::StoreOp::create(builder, kb.loc, quad, partialOut,
                                ValueRange{split, outRow, at},
                                /*nontemporal=*/false, llvm::MaybeAlign(16));
      }
    }
  }
}

gpu::GPUFuncOp
pattn::buildXqaMlaMmaSyncKernel(KernelModule &kernels, MlaDecodeOp op,
                                XqaMlaPlanAttr plan, const RecordBuffers &cache,
                                SmallVectorImpl<Value> &hostOperands) {
  MmaSyncBuilder builder(kernels, op, plan, cache);
  return builder.build(hostOperands);
}
