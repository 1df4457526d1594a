//===- XqaMlaDecodeKernels.cpp - The tensor-core MLA decode ---------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the tensor-core decode of pattn.mla_decode, following
// its #pattn.xqa_mla_plan. One block of four warps serves 16 query heads of
// one query token (the M rows of mma.sync.m16n8k16, bf16 operands, fp32
// accumulation) and one split of the token's keys, a tile of 32 keys at a
// time:
//
//   cp.async: the tile's raw records -> shared memory (zero-filled for keys
//             that are masked or unmapped, so stale bytes never decode)
//   decode:   raw -> one bf16 operand tile [key][latent ‖ rope], exactly
//             (e4m3 codes, e2m1 x e4m3 group scale, bf16 or e4m3 rope), and
//             per key the scales that stay out of it (fp8 block scales, the
//             nvfp4 outer scale, the rope scale); the next tile's copy is
//             then issued and lands while this one is computed
//   S = Q Kᵀ: warp w scores keys [8w, 8w + 8) for all 16 heads (each key
//             once), applying each block's scale to its partial sum in fp32
//   softmax:  the logits meet in shared memory; every warp runs the same
//             online softmax over the whole tile
//   O += P V: warp w owns latent channels [w L/4, (w+1) L/4): the operand
//             tile's latent columns are V, read with ldmatrix.trans, and the
//             per-key value scale rides on P (fp32, rounded once to bf16,
//             whose range is fp32's)
//
// A split ends with the same partial results as the portable kernel, which
// the shared merge kernel combines.
//
//===----------------------------------------------------------------------===//

#include "Codecs.h"
#include "KernelBuilder.h"
#include "Kernels.h"
#include "TensorCore.h"
#include "pattn/Dialect/PAttn/Transforms/DecodePlan.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace pattn;

namespace {

/// Elements of a decode piece: one 16-byte store into the operand tile
/// (consecutive threads store consecutive pieces: no bank conflicts).
constexpr int64_t kPiece = 8;
/// Elements of one 16-byte load of the query.
constexpr int64_t kQueryPiece = 8;
/// Threads of a block.
constexpr int64_t kXqaMlaThreads = kXqaMlaWarps * kWarpThreads;

class XqaMlaBuilder {
public:
  XqaMlaBuilder(KernelModule &kernels, MlaDecodeOp op, XqaMlaPlanAttr plan,
                const RecordBuffers &cache)
      : kernels(kernels), op(op), plan(plan), cache(cache),
        builder(op.getContext()), kb(builder, op.getLoc()),
        tc(kb, /*bf16=*/true) {}

  gpu::GPUFuncOp build(SmallVectorImpl<Value> &hostOperands);

private:
  KernelModule &kernels;
  MlaDecodeOp op;
  XqaMlaPlanAttr plan;
  const RecordBuffers &cache;
  OpBuilder builder;
  KernelBuilder kb;
  MmaBuilder tc;

  // Static facts.
  RecordType recordType;
  MlaRecordLayout record;
  XqaMlaSharedLayout layout;
  LaneAttr latentLane, ropeLane, latentScaleLane, ropeScaleLane, tokenLane;
  int64_t latent = 0, rope = 0, keyDim = 0, recordBytes = 0, numHeads = 0,
          headGroups = 0, tileKeys = 0, blockSize = 0;
  /// Latent channels per post-mma scale (the whole latent when one).
  int64_t latentGroup = 0;
  int64_t warpChannels = 0, warpTiles = 0; ///< of P V, per warp

  // Kernel values.
  Value smem, storage, outerScale, blockTable, sequence, first, last, tileCount,
      tid, warp, lane, groupId, threadInGroup;
  Value queryTile, operandTile, logits, pages, live, scales, words, bytes;
  Value softmaxScale, negInf, zero;

  Value index(int64_t v) { return kb.index(v); }
  /// A typed view of dynamic shared memory at byte `offset`.
  Value view(int64_t offset, ArrayRef<int64_t> shape, Type element) {
    auto type = MemRefType::get(
        shape, element, AffineMap(),
        gpu::AddressSpaceAttr::get(builder.getContext(),
                                   gpu::AddressSpace::Workgroup));
    Value at = index(offset);
    return memref::ViewOp::create(builder, kb.loc, type, smem, at,
                                  ValueRange{});
  }
  Value ceilDiv(Value a, int64_t b) {
    Value rounded = kb.add(a, kb.i32(int32_t(b - 1)));
    return kb.divs(rounded, kb.i32(int32_t(b)));
  }

  /// Threads 0 .. T-1 write the pages of tile `tileIndex` (i32) into page
  /// slot `slot` (index): -1 for keys outside [first, last) or unmapped.
  void lookupPages(Value tileIndex, Value slot);
  /// cp.async of tile `tileIndex`'s records (pages in slot `slot`) into the
  /// raw buffer; dead keys are zero-filled.
  void issueTile(Value tileIndex, Value slot);
  /// Raw records -> the operand tile, the live flags and the key scales.
  void decodeTile(Value slot);
  /// 8 elements of `lane` (a piece starting at element `element`) of key
  /// `key`, dequantized into bf16 (exact), as a vector<8xf16> of bits.
  Value decodePiece(LaneAttr lane, LaneAttr groupScales, Value key,
                    Value element);
  /// S = Q Kᵀ for this warp's 8 keys, scaled and masked, into the logits.
  void scoreTile();
  /// The online softmax over the tile and O += P V; `s` is the loop state.
  void accumulateTile(SmallVectorImpl<Value> &s);
  /// The post-mma scales `column` of keys `key` and `key` + 1 (index, even),
  /// as a vector<2xf32>: the table is [column][key].
  Value keyScales(Value key, int64_t column) {
    Value at = kb.add(key, index(column * tileKeys));
    return vector::LoadOp::create(
        builder, kb.loc, VectorType::get({2}, builder.getF32Type()), scales,
        ValueRange{at}, /*nontemporal=*/false, llvm::MaybeAlign(8));
  }
  Value keyScales(Value key, Value column) {
    Value at = kb.mul(column, index(tileKeys));
    at = kb.add(at, key);
    return vector::LoadOp::create(
        builder, kb.loc, VectorType::get({2}, builder.getF32Type()), scales,
        ValueRange{at}, /*nontemporal=*/false, llvm::MaybeAlign(8));
  }
  /// The value block (post-mma latent scale column) of this warp's n-tile
  /// `nTile` of P V.
  Value valueBlock(int64_t nTile) {
    Value channel = kb.mul(warp, index(warpChannels));
    channel = kb.add(channel, index(8 * nTile));
    return kb.divs(channel, index(latentGroup));
  }
  void writePartials(ArrayRef<Value> s, Value split, Value firstRow,
                     Value partialOut, Value partialStats);

  /// Loop state: max and sum of rows g and g + 8, then the accumulators
  /// (n-tile nt, element e).
  static int64_t maxAt(int64_t h) { return h; }
  static int64_t sumAt(int64_t h) { return 2 + h; }
  static int64_t accAt(int64_t nt, int64_t e) { return 4 + nt * 4 + e; }
};

void XqaMlaBuilder::lookupPages(Value tileIndex, Value slot) {
  Value isKeyThread = kb.cmpi(arith::CmpIPredicate::slt, tid, index(tileKeys));
  kb.ifThen(isKeyThread, [&] {
    Value tileStart =
        kb.add(first, kb.mul(tileIndex, kb.i32(int32_t(tileKeys))));
    Value keyPos = kb.add(tileStart, kb.toI32(tid));
    Value inRange = kb.cmpi(arith::CmpIPredicate::slt, keyPos, last);
    // Clamped into the table, so the load is in bounds for every key.
    Value width =
        kb.toI32(memref::DimOp::create(builder, kb.loc, blockTable, 1));
    Value blockIndex = kb.divs(keyPos, kb.i32(int32_t(blockSize)));
    blockIndex = kb.mins(blockIndex, kb.sub(width, kb.i32(1)));
    Value page = kb.load(blockTable, {sequence, kb.toIndex(blockIndex)});
    Value mapped = kb.cmpi(arith::CmpIPredicate::sge, page, kb.i32(0));
    Value isLive = kb.land(inRange, mapped);
    Value entry = kb.select(isLive, page, kb.i32(-1));
    Value at = kb.add(kb.mul(slot, index(tileKeys)), tid);
    kb.store(entry, pages, {at});
  });
}

void XqaMlaBuilder::issueTile(Value tileIndex, Value slot) {
  // 16 bytes per cp.async, consecutive threads on consecutive chunks of a
  // record (coalesced).
  int64_t chunksPerRecord = recordBytes / 16;
  int64_t chunks = tileKeys * chunksPerRecord;
  Value tileStart = kb.add(first, kb.mul(tileIndex, kb.i32(int32_t(tileKeys))));
  Value rawBytes = view(0, {layout.total}, builder.getIntegerType(8));
  for (int64_t pass = 0; pass * kXqaMlaThreads < chunks; ++pass) {
    Value chunk = kb.add(tid, index(pass * kXqaMlaThreads));
    auto copy = [&] {
      Value key = kb.divs(chunk, index(chunksPerRecord));
      Value byte = kb.rems(chunk, index(chunksPerRecord));
      byte = kb.mul(byte, index(16));
      Value at = kb.add(kb.mul(slot, index(tileKeys)), key);
      Value page = kb.load(pages, {at});
      Value isLive = kb.cmpi(arith::CmpIPredicate::sge, page, kb.i32(0));
      Value keyPos = kb.add(tileStart, kb.toI32(key));
      Value offset = kb.rems(keyPos, kb.i32(int32_t(blockSize)));
      Value safePage = kb.toIndex(kb.maxs(page, kb.i32(0)));
      Value copied = kb.select(isLive, index(16), index(0));
      Value dst = kb.mul(key, index(recordBytes));
      dst = kb.add(dst, index(layout.raw));
      dst = kb.add(dst, byte);
      nvgpu::DeviceAsyncCopyOp::create(
          builder, kb.loc, rawBytes, ValueRange{dst}, storage,
          ValueRange{safePage, kb.toIndex(offset), byte},
          builder.getIndexAttr(16), copied, builder.getUnitAttr());
    };
    if ((pass + 1) * kXqaMlaThreads <= chunks)
      copy();
    else
      kb.ifThen(kb.cmpi(arith::CmpIPredicate::slt, chunk, index(chunks)), copy);
  }
}

Value XqaMlaBuilder::decodePiece(LaneAttr lane, LaneAttr groupScales, Value key,
                                 Value element) {
  Type type = lane.getElementType();
  int64_t bits = lane.getElementBits();
  // The piece's bytes in the raw record, as 32-bit words.
  Value recordBase = kb.mul(key, index(recordBytes));
  recordBase = kb.add(recordBase, index(layout.raw));
  Value byte = kb.add(recordBase, index(lane.getOffset()));
  Value within = kb.mul(element, index(bits));
  within = kb.divs(within, index(8));
  byte = kb.add(byte, within);
  int64_t pieceWords = kPiece * bits / 32;
  auto wordsType = VectorType::get({pieceWords}, builder.getI32Type());
  Value firstWord = kb.divs(byte, index(4));
  Value loaded = vector::LoadOp::create(
      builder, kb.loc, wordsType, words, ValueRange{firstWord},
      /*nontemporal=*/false,
      llvm::MaybeAlign(std::min<int64_t>(16, pieceWords * 4)));
  auto halvesType = VectorType::get({kPiece}, builder.getF16Type());
  if (type.isBF16()) // already operands: the words are the piece
    return vector::BitCastOp::create(builder, kb.loc, halvesType, loaded);

  Encoding encoding =
      isa<Float4E2M1FNType>(type) ? Encoding::nvfp4 : Encoding::f8e4m3;
  // The e4m3 group scale of an e2m1 piece (8 elements of one 16-group), as
  // an f16 pair: code x scale is exact in f16 (at most 6 significant bits,
  // within [2^-10, 2688]) and then in bf16.
  Value groupScale;
  if (groupScales) {
    Value group = kb.divs(element, index(16));
    Value scaleByte = kb.add(recordBase, index(groupScales.getOffset()));
    scaleByte = kb.add(scaleByte, group);
    Value code = kb.loadByte(bytes, {scaleByte});
    Value high = kb.shl(code, kb.i32(16));
    Value both = kb.ori(code, high);
    groupScale = decodeWordHalves(kb, Encoding::f8e4m3, both)[0];
  }
  // f16 -> bf16 without a round trip through f32: every value here is a
  // normal f16 (or zero) with at most 6 significant bits, so its exponent
  // and top mantissa bits, shifted into bf16's fields, are the value times
  // 2^-112, and one exact bf16 multiply by 2^112 restores it.
  Value restore = arith::ConstantOp::create(
      builder, kb.loc,
      DenseElementsAttr::get(VectorType::get({2}, builder.getBF16Type()),
                             APFloat(APFloat::BFloat(), "0x1p112")));
  auto toBf16Word = [&](Value halves) {
    Value word = vector::BitCastOp::create(
        builder, kb.loc, VectorType::get({1}, builder.getI32Type()), halves);
    word = vector::ExtractOp::create(builder, kb.loc, word, 0);
    Value shifted = kb.shru(word, kb.i32(3));
    Value magnitude = kb.andi(shifted, kb.i32(0x0FFF0FFF));
    Value sign = kb.andi(word, kb.i32(int32_t(0x80008000u)));
    Value bits = kb.ori(magnitude, sign);
    Value pair = vector::BitCastOp::create(
        builder, kb.loc, VectorType::get({2}, builder.getBF16Type()),
        vector::BroadcastOp::create(
            builder, kb.loc, VectorType::get({1}, builder.getI32Type()), bits));
    Value scaled = arith::MulFOp::create(builder, kb.loc, pair, restore);
    Value result = vector::BitCastOp::create(
        builder, kb.loc, VectorType::get({1}, builder.getI32Type()), scaled);
    return vector::ExtractOp::create(builder, kb.loc, result, 0).getResult();
  };
  // Pairs of adjacent elements (the chips' conversions) are output words
  // as they are; other pairs (the bit tricks: elements j, j + n/2) are
  // split into their halves and re-paired.
  int64_t perWord = elementsPerWord(encoding);
  SmallVector<Value> outWords(kPiece / 2);
  SmallVector<Value> halves(kPiece);
  for (int64_t w = 0; w < pieceWords; ++w) {
    Value word = vector::ExtractOp::create(builder, kb.loc, loaded, w);
    for (const ChannelPair &pair : decodeWordPairs(kb, encoding, word)) {
      Value values = pair.pair;
      if (groupScale)
        values = arith::MulFOp::create(builder, kb.loc, values, groupScale);
      Value bf16Word = toBf16Word(values);
      int64_t low = w * perWord + pair.low, high = w * perWord + pair.high;
      if (high == low + 1 && low % 2 == 0) {
        outWords[low / 2] = bf16Word;
        continue;
      }
      halves[low] = kb.andi(bf16Word, kb.i32(0xFFFF));
      halves[high] = kb.shru(bf16Word, kb.i32(16));
    }
  }
  for (int64_t k = 0; k < kPiece / 2; ++k)
    if (!outWords[k]) {
      Value high = kb.shl(halves[2 * k + 1], kb.i32(16));
      outWords[k] = kb.ori(halves[2 * k], high);
    }
  Value piece = vector::FromElementsOp::create(
      builder, kb.loc, VectorType::get({kPiece / 2}, builder.getI32Type()),
      outWords);
  return vector::BitCastOp::create(builder, kb.loc, halvesType, piece);
}

void XqaMlaBuilder::decodeTile(Value slot) {
  // The live flags and post-mma scales of the tile's keys (0 for dead keys,
  // whose zero-filled codes decode to 0, so P V never sees a stale value).
  Value isKeyThread = kb.cmpi(arith::CmpIPredicate::slt, tid, index(tileKeys));
  kb.ifThen(isKeyThread, [&] {
    Value at = kb.add(kb.mul(slot, index(tileKeys)), tid);
    Value page = kb.load(pages, {at});
    Value isLive = kb.cmpi(arith::CmpIPredicate::sge, page, kb.i32(0));
    Value liveOne = kb.i32(1);
    Value flag = kb.select(isLive, liveOne, kb.i32(0));
    kb.store(flag, live, {tid});
    Value recordBase = kb.mul(tid, index(recordBytes));
    recordBase = kb.add(recordBase, index(layout.raw));
    auto rawF32 = [&](LaneAttr lane, int64_t element) {
      Value byte = kb.add(recordBase, index(lane.getOffset() + 4 * element));
      Value value = kb.load(words, {kb.divs(byte, index(4))});
      return kb.bitcast(builder.getF32Type(), value);
    };
    Value one = kb.f32(1.0f);
    SmallVector<Value> keyScales;
    int64_t blocks = record.latentBlocks();
    for (int64_t b = 0; b < blocks; ++b) {
      Value scale = one;
      if (record.latentFormat == MlaLatentFormat::E4M3BlockScaled)
        scale = rawF32(latentScaleLane, b);
      else if (record.latentFormat == MlaLatentFormat::E2M1GroupScaled)
        scale =
            tokenLane ? rawF32(tokenLane, 0) : kb.load(outerScale, {index(0)});
      keyScales.push_back(scale);
    }
    keyScales.push_back(ropeScaleLane ? rawF32(ropeScaleLane, 0) : one);
    for (auto [column, scale] : llvm::enumerate(keyScales)) {
      Value kept = kb.select(isLive, scale, zero);
      Value to = kb.add(tid, index(int64_t(column) * tileKeys));
      kb.store(kept, scales, {to});
    }
  });

  // The operand tile, a piece of 8 elements per item. Where a pass of the
  // block's threads covers whole keys, a thread keeps its piece of every
  // key it decodes, and the passes are unrolled.
  auto decodeLane = [&](LaneAttr lane, LaneAttr groupScales,
                        int64_t firstColumn) {
    int64_t piecesPerKey = lane.getCount() / kPiece;
    auto decodeItem = [&](Value key, Value element) {
      Value piece = decodePiece(lane, groupScales, key, element);
      Value column = kb.add(element, index(firstColumn));
      vector::StoreOp::create(builder, kb.loc, piece, operandTile,
                              ValueRange{key, column},
                              /*nontemporal=*/false, llvm::MaybeAlign(16));
    };
    if (kXqaMlaThreads % piecesPerKey == 0) {
      int64_t keysPerPass = kXqaMlaThreads / piecesPerKey;
      Value firstKey = kb.divs(tid, index(piecesPerKey));
      Value element = kb.rems(tid, index(piecesPerKey));
      element = kb.mul(element, index(kPiece));
      for (int64_t pass = 0; pass * keysPerPass < tileKeys; ++pass) {
        Value key = kb.add(firstKey, index(pass * keysPerPass));
        if ((pass + 1) * keysPerPass <= tileKeys)
          decodeItem(key, element);
        else
          kb.ifThen(kb.cmpi(arith::CmpIPredicate::slt, key, index(tileKeys)),
                    [&] { decodeItem(key, element); });
      }
      return;
    }
    Value items = index(tileKeys * piecesPerKey);
    Value stride = index(kXqaMlaThreads);
    kb.forLoop(tid, items, stride, {},
               [&](Value item, ValueRange) -> SmallVector<Value> {
                 Value key = kb.divs(item, index(piecesPerKey));
                 Value element = kb.rems(item, index(piecesPerKey));
                 element = kb.mul(element, index(kPiece));
                 decodeItem(key, element);
                 return {};
               });
  };
  LaneAttr latentGroups =
      record.latentFormat == MlaLatentFormat::E2M1GroupScaled ? latentScaleLane
                                                              : LaneAttr();
  decodeLane(latentLane, latentGroups, 0);
  decodeLane(ropeLane, LaneAttr(), latent);
}

void XqaMlaBuilder::scoreTile() {
  // Warp w scores keys n0 + g (B operand columns), n0 = 8w; element e of
  // the result is row g + 8 (e / 2), key n0 + 2t + (e % 2). Two accumulator
  // chains (even and odd k-steps) per scale block keep two mma in flight.
  Value n0 = kb.mul(warp, index(8));
  int64_t steps = keyDim / 16;
  int64_t latentSteps = latent / 16;
  int64_t blocks = record.latentBlocks();
  auto blockOf = [&](int64_t step) {
    return step < latentSteps ? step * 16 / latentGroup : blocks;
  };
  Value keyLow = kb.mul(threadInGroup, index(2));
  keyLow = kb.add(n0, keyLow);
  Value bRow = kb.rems(lane, index(8));
  bRow = kb.add(n0, bRow);
  Value bColumnOffset = kb.divs(lane, index(8));
  bColumnOffset = kb.mul(bColumnOffset, index(8));
  Value aRow = kb.rems(lane, index(16));
  Value aColumnOffset = kb.divs(lane, index(16));
  aColumnOffset = kb.mul(aColumnOffset, index(8));

  SmallVector<Value> total(4, zero);
  SmallVector<Value> chains[2] = {SmallVector<Value>(4, zero),
                                  SmallVector<Value>(4, zero)};
  int64_t current = blockOf(0);
  auto flush = [&](int64_t block) {
    // The block scales of keys 2t and 2t + 1, side by side.
    Value pair = keyScales(keyLow, block);
    Value low = vector::ExtractOp::create(builder, kb.loc, pair, 0);
    Value high = vector::ExtractOp::create(builder, kb.loc, pair, 1);
    for (int64_t e = 0; e < 4; ++e) {
      Value sum = kb.fadd(chains[0][e], chains[1][e]);
      total[e] = kb.fma(sum, e % 2 ? high : low, total[e]);
      chains[0][e] = chains[1][e] = zero;
    }
  };
  SmallVector<Value> b;
  for (int64_t step = 0; step < steps; ++step) {
    if (step % 2 == 0) {
      Value column = kb.add(bColumnOffset, index(16 * step));
      b = tc.ldmatrix(operandTile, bRow, column, step + 1 < steps ? 4 : 2,
                      /*transpose=*/false);
    }
    if (blockOf(step) != current) {
      flush(current);
      current = blockOf(step);
    }
    Value aColumn = kb.add(aColumnOffset, index(16 * step));
    SmallVector<Value> a =
        tc.ldmatrix(queryTile, aRow, aColumn, 4, /*transpose=*/false);
    SmallVector<Value> &chain = chains[step % 2];
    chain = tc.mma(a, {b[2 * (step % 2)], b[2 * (step % 2) + 1]}, chain);
  }
  flush(current);

  // Base-2 logits, -inf for dead keys (outside the split or the causal
  // range, on an unmapped page), as float2 per row.
  auto livePair = vector::LoadOp::create(
      builder, kb.loc, VectorType::get({2}, builder.getI32Type()), live,
      ValueRange{keyLow}, /*nontemporal=*/false, llvm::MaybeAlign(8));
  SmallVector<Value> isLive(2);
  for (int64_t k = 0; k < 2; ++k) {
    Value flag = vector::ExtractOp::create(builder, kb.loc, livePair, k);
    isLive[k] = kb.cmpi(arith::CmpIPredicate::ne, flag, kb.i32(0));
  }
  for (int64_t h = 0; h < 2; ++h) {
    SmallVector<Value> pair(2);
    for (int64_t k = 0; k < 2; ++k) {
      Value scaled = kb.fmul(total[2 * h + k], softmaxScale);
      Value x = kb.finiteLogit(scaled);
      pair[k] = kb.select(isLive[k], x, negInf);
    }
    Value row = kb.add(groupId, index(8 * h));
    Value at = kb.mul(row, index(layout.logitStride));
    at = kb.add(at, keyLow);
    Value both = vector::FromElementsOp::create(
        builder, kb.loc, VectorType::get({2}, builder.getF32Type()), pair);
    vector::StoreOp::create(builder, kb.loc, both, logits, ValueRange{at},
                            /*nontemporal=*/false, llvm::MaybeAlign(8));
  }
}

void XqaMlaBuilder::accumulateTile(SmallVectorImpl<Value> &s) {
  Location loc = kb.loc;
  int64_t keyTiles = tileKeys / 8;
  // x[nt * 4 + e]: row g + 8 (e / 2), key 8 nt + 2t + (e % 2).
  SmallVector<Value> x(keyTiles * 4);
  auto keyOf = [&](int64_t nt, int64_t e) {
    Value key = kb.mul(threadInGroup, index(2));
    return kb.add(key, index(8 * nt + e % 2));
  };
  for (int64_t nt = 0; nt < keyTiles; ++nt)
    for (int64_t h = 0; h < 2; ++h) {
      Value row = kb.add(groupId, index(8 * h));
      Value rowStart = kb.mul(row, index(layout.logitStride));
      Value key = keyOf(nt, 0);
      Value at = kb.add(rowStart, key);
      Value pair = vector::LoadOp::create(
          builder, kb.loc, VectorType::get({2}, builder.getF32Type()), logits,
          ValueRange{at}, /*nontemporal=*/false, llvm::MaybeAlign(8));
      for (int64_t k = 0; k < 2; ++k)
        x[nt * 4 + 2 * h + k] =
            vector::ExtractOp::create(builder, kb.loc, pair, k);
    }

  // The online softmax (as the paged XQA kernel: a finite maximum, so that
  // ex2.approx(-inf) = +0 covers masked keys and a row's first maximum).
  SmallVector<Value> p(keyTiles * 4), alphas(2);
  Value rescale = kb.boolean(false);
  for (int64_t h = 0; h < 2; ++h) {
    Value rowMax = negInf;
    for (int64_t nt = 0; nt < keyTiles; ++nt)
      for (int64_t e = 2 * h; e < 2 * h + 2; ++e)
        rowMax = kb.fmax(rowMax, x[nt * 4 + e]);
    rowMax = kb.fmax(rowMax, tc.shuffleXor(rowMax, 1));
    rowMax = kb.fmax(rowMax, tc.shuffleXor(rowMax, 2));
    Value oldMax = s[maxAt(h)];
    Value newMax = kb.fmax(oldMax, rowMax);
    Value noKey = kb.cmpf(arith::CmpFPredicate::OEQ, newMax, negInf);
    Value finiteMax = kb.select(noKey, zero, newMax);
    Value alpha = tc.exp2(kb.fsub(oldMax, finiteMax));
    Value sum = kb.fmul(s[sumAt(h)], alpha);
    for (int64_t nt = 0; nt < keyTiles; ++nt)
      for (int64_t e = 2 * h; e < 2 * h + 2; ++e) {
        Value w = tc.exp2(kb.fsub(x[nt * 4 + e], finiteMax));
        sum = kb.fadd(sum, w);
        p[nt * 4 + e] = w;
      }
    rescale =
        kb.lor(rescale, kb.cmpf(arith::CmpFPredicate::OGT, newMax, oldMax));
    alphas[h] = alpha;
    s[maxAt(h)] = newMax;
    s[sumAt(h)] = sum;
  }
  Value anyRescale =
      NVVM::VoteSyncOp::create(builder, loc, builder.getI1Type(), kb.i32(-1),
                               rescale, NVVM::VoteSyncKind::any);
  SmallVector<Type> accTypes(warpTiles * 4, builder.getF32Type());
  SmallVector<Value> decayed = kb.ifElse(
      anyRescale, accTypes,
      [&]() -> SmallVector<Value> {
        SmallVector<Value> result;
        for (int64_t nt = 0; nt < warpTiles; ++nt)
          for (int64_t e = 0; e < 4; ++e)
            result.push_back(kb.fmul(s[accAt(nt, e)], alphas[e / 2]));
        return result;
      },
      [&]() -> SmallVector<Value> {
        return SmallVector<Value>(s.begin() + accAt(0, 0), s.end());
      });
  std::copy(decayed.begin(), decayed.end(), s.begin() + accAt(0, 0));

  // P times each key's value scale, as the A operands of P V: per k-step
  // (16 keys: key tiles 2 ks, 2 ks + 1) a0 = row g, a1 = row g + 8 of the
  // first key tile, a2, a3 of the second. One set per value block this
  // warp's channels touch.
  int64_t keySteps = tileKeys / 16;
  SmallVector<Value> keys(keyTiles * 2);
  for (int64_t nt = 0; nt < keyTiles; ++nt)
    for (int64_t e = 0; e < 2; ++e)
      keys[nt * 2 + e] = keyOf(nt, e);
  auto pOperands = [&](Value block) {
    SmallVector<Value> scaled(keyTiles * 4);
    for (int64_t nt = 0; nt < keyTiles; ++nt) {
      Value pair = keyScales(keys[nt * 2], block);
      for (int64_t e = 0; e < 2; ++e) {
        Value scale = vector::ExtractOp::create(builder, kb.loc, pair, e);
        scaled[nt * 4 + e] = kb.fmul(p[nt * 4 + e], scale);
        scaled[nt * 4 + e + 2] = kb.fmul(p[nt * 4 + e + 2], scale);
      }
    }
    SmallVector<SmallVector<Value>> steps(keySteps);
    for (int64_t ks = 0; ks < keySteps; ++ks) {
      int64_t lo = 2 * ks * 4, hi = (2 * ks + 1) * 4;
      steps[ks] = {tc.packPair(scaled[lo], scaled[lo + 1]),
                   tc.packPair(scaled[lo + 2], scaled[lo + 3]),
                   tc.packPair(scaled[hi], scaled[hi + 1]),
                   tc.packPair(scaled[hi + 2], scaled[hi + 3])};
    }
    return steps;
  };
  // Warps own whole value blocks or lie inside one (eligibility row M5).
  int64_t tilesPerBlock = std::max<int64_t>(latentGroup / 8, 1);
  Value channelBase = kb.mul(warp, index(warpChannels));
  Value matrix = kb.divs(lane, index(8));
  Value vRowOffset = kb.rems(matrix, index(2));
  vRowOffset = kb.mul(vRowOffset, index(8));
  Value laneRow = kb.rems(lane, index(8));
  vRowOffset = kb.add(vRowOffset, laneRow);
  Value vColumnOffset = kb.divs(lane, index(16));
  vColumnOffset = kb.mul(vColumnOffset, index(8));
  SmallVector<SmallVector<Value>> a;
  for (int64_t nt = 0; nt < warpTiles; nt += 2) {
    if (nt % tilesPerBlock == 0 || a.empty())
      a = pOperands(valueBlock(nt));
    for (int64_t ks = 0; ks < keySteps; ++ks) {
      // Matrices: keys 16 ks + 8 (m % 2) .., channels of n-tile nt + m / 2.
      Value row = kb.add(vRowOffset, index(16 * ks));
      Value column = kb.add(vColumnOffset, index(8 * nt));
      column = kb.add(channelBase, column);
      SmallVector<Value> v =
          tc.ldmatrix(operandTile, row, column, 4, /*transpose=*/true);
      for (int64_t j = 0; j < 2; ++j) {
        SmallVector<Value> c;
        for (int64_t e = 0; e < 4; ++e)
          c.push_back(s[accAt(nt + j, e)]);
        SmallVector<Value> d = tc.mma(a[ks], {v[2 * j], v[2 * j + 1]}, c);
        for (int64_t e = 0; e < 4; ++e)
          s[accAt(nt + j, e)] = d[e];
      }
    }
  }
}

void XqaMlaBuilder::writePartials(ArrayRef<Value> s, Value split,
                                  Value firstRow, Value partialOut,
                                  Value partialStats) {
  // Rows g and g + 8: unnormalized outputs of this warp's channels; warp 0
  // writes the (natural) max and the sum.
  Value channelBase = kb.mul(warp, index(warpChannels));
  Value firstOfQuad =
      kb.cmpi(arith::CmpIPredicate::eq, threadInGroup, index(0));
  Value writesStats =
      kb.land(firstOfQuad, kb.cmpi(arith::CmpIPredicate::eq, warp, index(0)));
  for (int64_t h = 0; h < 2; ++h) {
    Value outRow = kb.add(firstRow, kb.add(groupId, index(8 * h)));
    Value sum = s[sumAt(h)];
    sum = kb.fadd(sum, tc.shuffleXor(sum, 1));
    sum = kb.fadd(sum, tc.shuffleXor(sum, 2));
    kb.ifThen(writesStats, [&] {
      Value naturalMax = kb.fmul(s[maxAt(h)], kb.f32(float(M_LN2)));
      kb.store(naturalMax, partialStats, {split, outRow, index(0)});
      kb.store(sum, partialStats, {split, outRow, index(1)});
    });
    for (int64_t nt = 0; nt < warpTiles; ++nt) {
      Value channel = kb.add(channelBase, index(8 * nt));
      channel = kb.add(channel, kb.mul(threadInGroup, index(2)));
      Value pair = vector::FromElementsOp::create(
          builder, kb.loc, VectorType::get({2}, builder.getF32Type()),
          ValueRange{s[accAt(nt, 2 * h)], s[accAt(nt, 2 * h + 1)]});
      vector::StoreOp::create(builder, kb.loc, pair, partialOut,
                              ValueRange{split, outRow, channel},
                              /*nontemporal=*/false, llvm::MaybeAlign(8));
    }
  }
}

gpu::GPUFuncOp XqaMlaBuilder::build(SmallVectorImpl<Value> &hostOperands) {
  MLIRContext *context = op.getContext();
  Location loc = op.getLoc();
  recordType = cache.type.getRecord();
  record = describeMlaRecord(recordType);
  latentLane = recordType.getLane("latent");
  ropeLane = recordType.getLane("rope");
  if (latentLane.isScaled())
    latentScaleLane = recordType.getLane(latentLane.getScaleLane());
  if (ropeLane.isScaled())
    ropeScaleLane = recordType.getLane(ropeLane.getScaleLane());
  if (record.latentFormat == MlaLatentFormat::E2M1GroupScaled &&
      recordType.getMode() == ScaleGranularity::token)
    tokenLane = recordType.getLane("token_scale");
  latent = record.latent;
  rope = record.rope;
  keyDim = latent + rope;
  recordBytes = record.recordBytes;
  numHeads = static_cast<int64_t>(op.getNumHeads());
  headGroups = numHeads / plan.getHeadsPerBlock();
  tileKeys = plan.getKeysPerTile();
  blockSize = cache.type.getBlockSize();
  latentGroup = record.latentFormat == MlaLatentFormat::E4M3BlockScaled
                    ? record.latentScaleGroup
                    : latent;
  warpChannels = latent / kXqaMlaWarps;
  warpTiles = warpChannels / 8;
  layout = layoutXqaMlaShared(record, tileKeys);
  kb.hardwareFp8 = kernels.hardwareFp8;
  kb.hardwareFp4 = kernels.hardwareFp4;

  // Kernel arguments: the op's buffers, the records, then the workspace.
  hostOperands.assign({op.getQuery(), op.getBlockTable(), op.getSeqLens()});
  if (op.getQueryStart())
    hostOperands.push_back(op.getQueryStart());
  if (op.getOuterScale())
    hostOperands.push_back(op.getOuterScale());
  hostOperands.push_back(cache.storage);
  SmallVector<Type> argTypes = llvm::to_vector(
      llvm::map_range(hostOperands, [](Value v) { return v.getType(); }));
  Type f32 = builder.getF32Type();
  argTypes.push_back(workspaceOutputType(context, latent));
  argTypes.push_back(workspaceStatsType(context));

  gpu::GPUFuncOp kernel =
      kernels.create(builder, loc, "pattn_xqa_mla_decode", argTypes, {});
  setLaunchBounds(kernel, kXqaMlaThreads,
                  xqaResidentBlocks(plan.getSharedBytes(), kernels.chips));
  unsigned next = 0;
  Value query = kernel.getArgument(next++);
  blockTable = kernel.getArgument(next++);
  Value seqLens = kernel.getArgument(next++);
  Value queryStart = op.getQueryStart() ? kernel.getArgument(next++) : Value();
  outerScale = op.getOuterScale() ? kernel.getArgument(next++) : Value();
  storage = kernel.getArgument(next++);
  Value partialOut = kernel.getArgument(next++);
  Value partialStats = kernel.getArgument(next++);

  smem = gpu::DynamicSharedMemoryOp::create(
      builder, loc,
      MemRefType::get(
          {ShapedType::kDynamic}, builder.getIntegerType(8), AffineMap(),
          gpu::AddressSpaceAttr::get(context, gpu::AddressSpace::Workgroup)));
  Type f16 = builder.getF16Type(), i32 = builder.getI32Type();
  queryTile = view(layout.query, {16, layout.rowStride}, f16);
  operandTile = view(layout.operands, {tileKeys, layout.rowStride}, f16);
  logits = view(layout.logits, {16 * layout.logitStride}, f32);
  pages = view(layout.pages, {2 * tileKeys}, i32);
  live = view(layout.live, {tileKeys}, i32);
  scales = view(layout.scales, {tileKeys * layout.scaleStride}, f32);
  words = view(0, {layout.total / 4}, i32);
  bytes = view(0, {layout.total}, builder.getIntegerType(8));

  tid = kb.threadId();
  warp = kb.divs(tid, index(kWarpThreads));
  lane = kb.rems(tid, index(kWarpThreads));
  groupId = kb.divs(lane, index(4));
  threadInGroup = kb.rems(lane, index(4));
  zero = kb.f32(0.0f);
  negInf = kb.f32(-std::numeric_limits<float>::infinity());
  Value split = kb.blockId(gpu::Dimension::x);
  Value row = kb.blockId(gpu::Dimension::y);
  Value token = kb.divs(row, index(headGroups));
  Value headGroup = kb.rems(row, index(headGroups));
  Value firstHead = kb.mul(headGroup, index(16));

  // The token's keys, cut to this split: splits of ceil(max keys /
  // gridDim.x) keys rounded up to whole tiles (host-known sizes only).
  auto [seq, queryTokens, position] =
      findQuerySequence(kb, token, queryStart, blockTable);
  sequence = seq;
  Value length = kb.load(seqLens, {sequence});
  Value queryPos = kb.add(kb.sub(length, queryTokens), position);
  Value end = kb.mins(length, kb.add(queryPos, kb.i32(1)));
  Value tableWidth =
      kb.toI32(memref::DimOp::create(builder, loc, blockTable, 1));
  Value maxKeys = kb.mul(tableWidth, kb.i32(int32_t(blockSize)));
  Value splits =
      kb.toI32(gpu::GridDimOp::create(builder, loc, gpu::Dimension::x));
  Value perSplit = kb.divs(kb.add(maxKeys, kb.sub(splits, kb.i32(1))), splits);
  perSplit = kb.mul(ceilDiv(perSplit, tileKeys), kb.i32(int32_t(tileKeys)));
  first = kb.mul(kb.toI32(split), perSplit);
  last = kb.mins(end, kb.add(first, perSplit));
  Value nonEmpty = kb.cmpi(arith::CmpIPredicate::sgt, last, first);
  Value span = kb.sub(last, first);
  Value tiles = ceilDiv(span, tileKeys);
  tileCount = kb.select(nonEmpty, tiles, kb.i32(0));

  // The 16 query rows as bf16 operands, 8 elements per load.
  Type queryElement = cast<MemRefType>(query.getType()).getElementType();
  Value queryItems = index(16 * keyDim / kQueryPiece);
  Value itemStride = index(kXqaMlaThreads);
  kb.forLoop(tid, queryItems, itemStride, {},
             [&](Value item, ValueRange) -> SmallVector<Value> {
               Value r = kb.divs(item, index(keyDim / kQueryPiece));
               Value column = kb.rems(item, index(keyDim / kQueryPiece));
               column = kb.mul(column, index(kQueryPiece));
               Value head = kb.add(firstHead, r);
               Value loaded = vector::LoadOp::create(
                   builder, loc, VectorType::get({kQueryPiece}, queryElement),
                   query, ValueRange{token, head, column});
               Value halves = vector::BitCastOp::create(
                   builder, loc, VectorType::get({kQueryPiece}, f16), loaded);
               vector::StoreOp::create(
                   builder, loc, halves, queryTile, ValueRange{r, column},
                   /*nontemporal=*/false, llvm::MaybeAlign(16));
               return {};
             });

  std::optional<APFloat> scale = op.getSoftmaxScale();
  float softmax =
      scale ? scale->convertToFloat() : 1.0f / std::sqrt(float(keyDim));
  // Logits in base 2: every exponential is one ex2.approx.
  softmaxScale = kb.f32(softmax * float(M_LOG2E));

  // Prologue: tile 0's pages, its copy, then tile 1's pages.
  Value zeroI32 = kb.i32(0), oneI32 = kb.i32(1);
  lookupPages(zeroI32, index(0));
  kb.barrier();
  kb.ifThen(nonEmpty, [&] { issueTile(zeroI32, index(0)); });
  NVVM::CpAsyncCommitGroupOp::create(builder, loc);
  lookupPages(oneI32, index(1));

  SmallVector<Value> init = {negInf, negInf, zero, zero};
  for (int64_t i = 0; i < warpTiles * 4; ++i)
    init.push_back(zero);
  Value loopBegin = index(0), loopStep = index(1);
  Value loopEnd = kb.toIndex(tileCount);
  SmallVector<Value> state = kb.forLoop(
      loopBegin, loopEnd, loopStep, init,
      [&](Value iteration, ValueRange carried) -> SmallVector<Value> {
        SmallVector<Value> s(carried.begin(), carried.end());
        Value i = kb.toI32(iteration);
        Value slot = kb.toIndex(kb.rems(i, kb.i32(2)));
        NVVM::CpAsyncWaitGroupOp::create(builder, loc, 0);
        kb.barrier();
        decodeTile(slot);
        kb.barrier();
        // The raw buffer is free: the next tile's copy lands while this one
        // is computed; its pages were looked up a tile ago.
        Value nextTile = kb.add(i, oneI32);
        Value more = kb.cmpi(arith::CmpIPredicate::slt, nextTile, tileCount);
        Value nextSlot = kb.toIndex(kb.rems(nextTile, kb.i32(2)));
        kb.ifThen(more, [&] { issueTile(nextTile, nextSlot); });
        NVVM::CpAsyncCommitGroupOp::create(builder, loc);
        lookupPages(kb.add(i, kb.i32(2)), slot);
        scoreTile();
        kb.barrier();
        accumulateTile(s);
        return s;
      });

  Value firstRow = kb.add(kb.mul(token, index(numHeads)), firstHead);
  writePartials(state, split, firstRow, partialOut, partialStats);
  gpu::ReturnOp::create(builder, loc);
  return kernel;
}

} // namespace

auto ::pattn::buildXqaMlaDecodeKernels(KernelModule &kernels, MlaDecodeOp op,
                                       XqaMlaPlanAttr plan,
                                       const RecordBuffers &cache)
    -> DecodeKernels {
  DecodeKernels result;
  XqaMlaBuilder builder(kernels, op, plan, cache);
  result.decode = builder.build(result.decodeOperands);
  result.merge = buildMlaMergeKernel(kernels, op, result.mergeOperands);
  result.numHeads = static_cast<int64_t>(op.getNumHeads());
  result.valueDim = cache.type.getRecord().getLane("latent").getCount();
  result.blockSize = cache.type.getBlockSize();
  result.decodeBlocksPerToken = result.numHeads / plan.getHeadsPerBlock();
  result.sharedBytes = plan.getSharedBytes();
  result.blockThreads = kXqaMlaThreads;
  return result;
}
