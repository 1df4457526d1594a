//===- PrefillSteps.cpp - The prefill's tile decode and key steps ---------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the steps of a prefill tile (PrefillPaged.h): the
// decode of a quantized side into shared memory, once per tile for all
// four warps, and a warp's 16-key step: S = Q Kᵀ, the logits and their
// masks, and O += P V, all over 16-bit rows read with ldmatrix.
//
//===----------------------------------------------------------------------===//

#include "Kernels/Codecs/Codecs.h"
#include "Kernels/Prefill/PrefillPaged.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace pattn;
using namespace pattn::prefill;

int64_t PrefillBuilder::channelAt(int64_t position, int64_t n) {
  // Pair j = position / 2 holds channels j (low) and j + n / 2 (high).
  return position / 2 + (position % 2) * (n / 2);
}

Value PrefillBuilder::decodedChannel(Value at, int64_t n) {
  Value word = kb.divs(at, index(n));
  Value position = kb.rems(at, index(n));
  Value pair = kb.divs(position, index(2));
  Value high = kb.mul(kb.rems(position, index(2)), index(n / 2));
  Value wordBase = kb.mul(word, index(n));
  return kb.add(wordBase, kb.add(pair, high));
}

void PrefillBuilder::decodeTile(Value stageBase, Value valueShift) {
  if (keyDecoded)
    decodeSide(key, layout.decodedKeys, layout.keyStride, stageBase, Value());
  if (valueDecoded)
    decodeSide(value, layout.decodedValues, layout.valueStride, stageBase,
               valueShift);
}

Value PrefillBuilder::rawChunkByte(Value rows, Value keyIndex, Value segment,
                                   int64_t stride) {
  if (!wgmma) {
    Value raw = kb.add(rows, kb.mul(keyIndex, index(stride)));
    return kb.add(raw, kb.mul(segment, index(16)));
  }
  // The ring's rows are core matrices (PagedRingLayout::coreMatrices).
  return coreMatrixByte(kb, rows, keyIndex, segment, tileKeys);
}

Value PrefillBuilder::decodedByte(int64_t decodedAt, int64_t stride,
                                  Value keyIndex, Value channel, Value shift) {
  if (!wgmma) {
    Value at = kb.add(index(decodedAt), kb.mul(keyIndex, index(stride)));
    return kb.add(at, kb.mul(channel, index(2)));
  }
  // wgmma's core matrices: K-major for S (channels along K), MN-major for
  // P V (channels along N), one copy serving both.
  // The second V buffer (valueShift bytes on) is a whole tile further.
  Value base = index(decodedAt);
  if (shift)
    base = kb.add(base, shift);
  Value chunk = kb.divs(channel, index(8));
  Value at = coreMatrixByte(kb, base, keyIndex, chunk, tileKeys);
  return kb.add(at, kb.mul(kb.rems(channel, index(8)), index(2)));
}

void PrefillBuilder::decodeSide(const PagedSide &side, int64_t decodedAt,
                                int64_t stride, Value stageBase, Value shift) {
  // Chunk c (16 raw bytes: 4 words of n codes) is key c / segments,
  // segment c % segments (wgmma: key c % keys, segment c / keys, so that
  // consecutive threads read and write consecutive core-matrix rows); its
  // word w covers channels (4 segment + w) n ... and becomes n / 2 pairs,
  // stored in order as n / 2 words.
  Encoding encoding = side.type.getEncoding();
  int64_t n = side.perWord;
  int64_t chunks = tileKeys * side.segments;
  Type i32 = builder.getI32Type();
  Value words = view(0, {layout.total / 4}, i32);
  auto wordType = VectorType::get({4}, i32);
  auto pairWords = VectorType::get({n / 2}, i32);
  auto f32Pair = VectorType::get({2}, builder.getF32Type());
  auto operandPair = VectorType::get({2}, tc.operandType());
  auto decodeChunk = [&](Value chunk) {
    Value keyIndex, segment;
    if (wgmma) {
      keyIndex = kb.rems(chunk, index(tileKeys));
      segment = kb.divs(chunk, index(tileKeys));
    } else {
      keyIndex = kb.divs(chunk, index(side.segments));
      segment = kb.rems(chunk, index(side.segments));
    }
    Value rows = kb.add(stageBase, index(side.rows));
    Value raw = rawChunkByte(rows, keyIndex, segment, side.rowStride);
    Value loaded = vector::LoadOp::create(builder, kb.loc, wordType, words,
                                          ValueRange{kb.divs(raw, index(4))});
    Value tokenScales;
    if (side.tokenOffset >= 0 && &side == &value) {
      Value at = kb.add(stageBase, index(side.tokenOffset));
      at = kb.add(at, kb.mul(keyIndex, index(4)));
      Value scales = view(0, {layout.total / 4}, builder.getF32Type());
      Value scale = kb.load(scales, {kb.divs(at, index(4))});
      tokenScales =
          vector::BroadcastOp::create(builder, kb.loc, f32Pair, scale);
    }
    for (int64_t w = 0; w < 4; ++w) {
      Value word = vector::ExtractOp::create(builder, kb.loc, loaded, w);
      Value scale;
      if (side.groupOffset >= 0) {
        // nvfp4: the word's 8 codes share group (8 (4 segment + w)) / 16,
        // byte group % 4 of scale word group / 4 of the key.
        Value group = kb.add(kb.mul(segment, index(2)), index(w / 2));
        Value at = kb.add(stageBase, index(side.groupOffset));
        at = kb.add(at, kb.mul(keyIndex, index(side.groupStride)));
        Value scaleWordAt = kb.divs(at, index(4));
        at = kb.add(scaleWordAt, kb.divs(group, index(4)));
        Value scaleWord = kb.load(words, {at});
        Value byte = kb.toI32(kb.rems(group, index(4)));
        scale = e4m3BytePair(kb, scaleWord, scaleWord, byte);
      }
      SmallVector<Value> pairs = decodeWordHalves(kb, encoding, word);
      SmallVector<Value> stored;
      for (Value pair : pairs) {
        if (scale)
          pair = arith::MulFOp::create(builder, kb.loc, pair, scale);
        Value rounded = pair;
        if (tokenScales || pair.getType() != operandPair) {
          // Per-token V scales multiply in fp32, rounded once.
          Value wide = arith::ExtFOp::create(builder, kb.loc, f32Pair, pair);
          if (tokenScales)
            wide = arith::MulFOp::create(builder, kb.loc, wide, tokenScales);
          rounded = arith::TruncFOp::create(builder, kb.loc, operandPair, wide);
        }
        Value bits = vector::BitCastOp::create(
            builder, kb.loc, VectorType::get({1}, i32), rounded);
        stored.push_back(vector::ExtractOp::create(builder, kb.loc, bits, 0));
      }
      Value packed =
          vector::FromElementsOp::create(builder, kb.loc, pairWords, stored);
      Value channel = kb.add(kb.mul(segment, index(4 * n)), index(w * n));
      Value at = decodedByte(decodedAt, stride, keyIndex, channel, shift);
      vector::StoreOp::create(builder, kb.loc, packed, words,
                              ValueRange{kb.divs(at, index(4))});
    }
  };
  for (int64_t pass = 0; pass * blockThreads < chunks; ++pass) {
    Value chunk = kb.add(tid, index(pass * blockThreads));
    if ((pass + 1) * blockThreads <= chunks) {
      decodeChunk(chunk);
      continue;
    }
    Value inTile = kb.cmpi(arith::CmpIPredicate::slt, chunk, index(chunks));
    kb.ifThen(inTile, [&] { decodeChunk(chunk); });
  }
}

Value PrefillBuilder::operandOf(Value word, bool decoded, Encoding encoding) {
  // A decoded tile holds the operand type; a 16-bit side its own.
  Type element =
      decoded ? tc.operandType()
              : (encoding == Encoding::bf16 ? Type(builder.getBF16Type())
                                            : Type(builder.getF16Type()));
  Value wide = vector::BroadcastOp::create(
      builder, kb.loc, VectorType::get({1}, builder.getI32Type()), word);
  Value pair = vector::BitCastOp::create(builder, kb.loc,
                                         VectorType::get({2}, element), wide);
  return tc.operand(pair);
}

SmallVector<Value> PrefillBuilder::scoreStep(const TileViews &tile, Value n0) {
  // Two 8-channel segments per ldmatrix.x4, keys-major: words 0 and 1 are
  // n-tile 0's B registers (keys n0 ... n0 + 7), words 2 and 3 n-tile 1's.
  SmallVector<Value> scores(8, zeroF32);
  Encoding encoding = key.type.getEncoding();
  for (int64_t a = 0; a < headDim / 8; a += 2) {
    SmallVector<Value> words = tc.loadSegmentsKeysMajor(
        tile.keyRows, lane, n0, index(a), /*transpose=*/false);
    SmallVector<Value> fragment = queryFragment(a / 2);
    for (int64_t nt = 0; nt < 2; ++nt) {
      Value b0 = operandOf(words[2 * nt], keyDecoded, encoding);
      Value b1 = operandOf(words[2 * nt + 1], keyDecoded, encoding);
      SmallVector<Value> c(scores.begin() + nt * 4,
                           scores.begin() + nt * 4 + 4);
      SmallVector<Value> d = tc.mma(fragment, {b0, b1}, c);
      std::copy(d.begin(), d.end(), scores.begin() + nt * 4);
    }
  }
  return scores;
}

SmallVector<Value> PrefillBuilder::logitStep(ArrayRef<Value> scores,
                                             const TileViews &tile, Value n0) {
  // Element e of n-tile nt: key n0 + 8 nt + 2t + (e & 1), row g + 8 (e >> 1)
  // of the warp. A step whose keys are all live, before the warp's first
  // token and (with a window) after the block's last token's window start
  // needs no mask: a warp-uniform branch, the common case.
  Value stepStart = kb.add(tile.tileStart, kb.toI32(n0));
  Value allLive = copies->stepAllLive(tile.slot, n0, lane);
  Value stepLast = kb.add(stepStart, kb.i32(15));
  Value unmasked = kb.land(
      allLive, kb.cmpi(arith::CmpIPredicate::sle, stepLast, warpFirstQueryPos));
  if (window > 0) {
    Value windowEnd = kb.sub(keys.lastQueryPos, kb.i32(int32_t(window)));
    unmasked = kb.land(
        unmasked, kb.cmpi(arith::CmpIPredicate::sgt, stepStart, windowEnd));
  }
  // The scale of each column (its key's per-token scale) or row (a folded
  // query's exponent).
  SmallVector<Value> columnScales(4, softmaxScale);
  if (key.tokenOffset >= 0)
    for (int64_t nt = 0; nt < 2; ++nt)
      for (int64_t e2 = 0; e2 < 2; ++e2) {
        Value n = kb.add(n0, index(8 * nt + e2));
        n = kb.add(n, kb.mul(threadInGroup, index(2)));
        Value at = kb.add(tile.stageBase, index(key.tokenOffset));
        at = kb.add(at, kb.mul(n, index(4)));
        Value scales = view(0, {layout.total / 4}, builder.getF32Type());
        Value tokenScale = kb.load(scales, {kb.divs(at, index(4))});
        columnScales[nt * 2 + e2] = kb.fmul(softmaxScale, tokenScale);
      }
  auto logitOf = [&](int64_t at) {
    Value scale = rowScales.empty() ? columnScales[(at / 4) * 2 + at % 2]
                                    : rowScales[at % 4 / 2];
    return scaledLogit(kb, scores[at], scale, softcap, log2e);
  };
  SmallVector<Type> logitTypes(8, builder.getF32Type());
  return kb.ifElse(
      unmasked, logitTypes,
      [&]() -> SmallVector<Value> {
        SmallVector<Value> plain;
        for (int64_t at = 0; at < 8; ++at)
          plain.push_back(logitOf(at));
        return plain;
      },
      [&]() -> SmallVector<Value> {
        SmallVector<Value> masked(8, negInf);
        for (int64_t nt = 0; nt < 2; ++nt)
          for (int64_t e2 = 0; e2 < 2; ++e2) {
            Value n = kb.add(n0, index(8 * nt + e2));
            n = kb.add(n, kb.mul(threadInGroup, index(2)));
            Value keyPos = kb.add(tile.tileStart, kb.toI32(n));
            Value liveAt = kb.add(kb.mul(tile.slot, index(tileKeys)), n);
            Value flag = kb.load(liveKeys, {liveAt});
            Value live = kb.cmpi(arith::CmpIPredicate::ne, flag, kb.i32(0));
            for (int64_t h = 0; h < 2; ++h) {
              Value row = kb.add(warpRow, kb.add(groupId, index(8 * h)));
              Value token = kb.toI32(kb.divs(row, index(group)));
              Value queryPos = kb.add(keys.firstQueryPos, token);
              Value visible = kb.land(
                  live, kb.cmpi(arith::CmpIPredicate::sle, keyPos, queryPos));
              if (window > 0) {
                Value windowEnd = kb.sub(queryPos, kb.i32(int32_t(window)));
                visible = kb.land(visible, kb.cmpi(arith::CmpIPredicate::sgt,
                                                   keyPos, windowEnd));
              }
              int64_t at = nt * 4 + 2 * h + e2;
              masked[at] = kb.select(visible, logitOf(at), negInf);
            }
          }
        return masked;
      });
}

void PrefillBuilder::valueStep(const TileViews &tile, Value n0,
                               ArrayRef<Value> pOperands,
                               SmallVectorImpl<Value> &state) {
  // ldmatrix.trans of keys n0 ... n0 + 15 times two 8-channel segments:
  // word 2σ + h holds keys n0 + 8h + 2t, + 1 of segment a + σ, one B
  // register of n-tile a + σ each.
  MmaBuilder::SoftmaxTiles tiles = softmaxTiles();
  Encoding encoding = value.type.getEncoding();
  int64_t segments = valueDim / 8;
  for (int64_t a = 0; a < segments; a += 2) {
    bool pair = a + 1 < segments;
    SmallVector<Value> words =
        tc.loadSegments(tile.valueRows, lane, n0, index(a), pair,
                        /*transpose=*/true);
    for (int64_t sigma = 0; sigma < (pair ? 2 : 1); ++sigma) {
      Value b0 = operandOf(words[2 * sigma], valueDecoded, encoding);
      Value b1 = operandOf(words[2 * sigma + 1], valueDecoded, encoding);
      int64_t nt = a + sigma;
      SmallVector<Value> c;
      for (int64_t e = 0; e < 4; ++e)
        c.push_back(state[tiles.accAt(0, nt, e)]);
      SmallVector<Value> d = tc.mma(pOperands, {b0, b1}, c);
      for (int64_t e = 0; e < 4; ++e)
        state[tiles.accAt(0, nt, e)] = d[e];
    }
  }
}
