//===- XqaPaged.cpp - The tensor-core split-KV decode ---------------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the XQA decode of pattn.paged_attention: one block of
// four warps per (sequence, KV head, split), following its #pattn.xqa_plan.
// The g heads times the sequence's query tokens are the M rows of
// mma.sync.m16n8k16 (fp32 accumulation), so every key is read and
// dequantized once for all of them:
//
//   cp.async ring (raw cache rows, stages deep)
//     -> ldmatrix of raw bytes -> decode in registers (Codecs.h)
//     -> S = Q Kᵀ (mma) -> online softmax in registers
//     -> P (registers, re-packed as the A operand) x ldmatrix.trans(V) (mma)
//
// ldmatrix moves 16-bit elements and does not care what they hold. On a
// quantized K row a thread receives one 32-bit word of consecutive codes of
// one key; decodeWordHalves turns it into f16x2 pairs of channels (j,
// j + n/2), which become the B registers of one or two k-steps. The
// channels of a k-step are therefore a fixed permutation of the row's, and
// the query tile is stored in the same permutation (loadQueryTile), so
// Q Kᵀ is unchanged. On V, ldmatrix.trans gives a thread the same 16 bits
// of two consecutive keys, so every decoded pair is one channel of two keys:
// exactly a B register of P V. Its n-tiles cover channels with a stride
// (valueChannel), which only the final write-out needs to know.
//
// Warps form `key_warps` groups over a tile's keys times `value_warps`
// groups over the value channels; after the last tile the key groups merge
// through shared memory and the block writes the same partial results as
// the portable kernel, which the shared merge kernel combines.
//
// What moves into shared memory (the key range, the query tile, the page
// lookups and the cp.async ring) is in XqaPagedCopies.cpp.
//
//===----------------------------------------------------------------------===//

#include "Kernels/Decode/XqaPaged.h"
#include "Kernels/Codecs/Codecs.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <array>
#include <cmath>
#include <limits>

using namespace mlir;
using namespace pattn;
using namespace pattn::xqa;

Value XqaBuilder::rawPair(Value word, Encoding encoding) {
  Type element = encoding == Encoding::bf16 ? Type(builder.getBF16Type())
                                            : Type(builder.getF16Type());
  Value wide = vector::BroadcastOp::create(
      builder, kb.loc, VectorType::get({1}, builder.getI32Type()), word);
  return vector::BitCastOp::create(builder, kb.loc,
                                   VectorType::get({2}, element), wide);
}

Value XqaBuilder::ringRows(const XqaSide &side, Value slot) {
  Value stage = kb.mul(slot, index(layout.stageBytes));
  Value offset = kb.add(stage, index(layout.ring + side.rows));
  return view(offset, {tileKeys, side.rowStride / 2}, builder.getF16Type());
}

SmallVector<Value> XqaBuilder::decodeHalves(const XqaSide &side, Value word,
                                            Value groupScale) {
  SmallVector<Value> pairs =
      decodeWordHalves(kb, side.type.getEncoding(), word);
  if (groupScale)
    for (Value &pair : pairs)
      pair = arith::MulFOp::create(builder, kb.loc, pair, groupScale);
  return pairs;
}

float XqaBuilder::decodedScale(const XqaSide &side) const {
  bool subnormal =
      side.type.getEncoding() == Encoding::nvfp4 && kb.fp4Subnormal;
  return subnormal ? kFp4SubnormalScale : 1.0f;
}

Value XqaBuilder::groupScaleWord(const XqaSide &side, Value stageBase,
                                 Value keyIndex, Value word) {
  // head_dim / 16 bytes per key, a multiple of 4 on XQA (head_dim 64, 128
  // or 256): word `word` holds groups 4 word ... 4 word + 3.
  Value scales = view(0, {layout.total / 4}, builder.getI32Type());
  Value at = kb.add(stageBase, index(side.groupOffset));
  at = kb.add(at, kb.mul(keyIndex, index(side.groupStride)));
  at = kb.add(kb.divs(at, index(4)), word);
  return kb.load(scales, {at});
}

Value XqaBuilder::tokenScalePair(const XqaSide &side, Value stageBase,
                                 Value keyLow) {
  Value scales = view(0, {layout.total / 4}, builder.getF32Type());
  Value at = kb.add(stageBase, index(side.tokenOffset));
  at = kb.add(at, kb.mul(keyLow, index(4)));
  at = kb.divs(at, index(4));
  return vector::LoadOp::create(
      builder, kb.loc, VectorType::get({2}, builder.getF32Type()), scales,
      ValueRange{at}, /*nontemporal=*/false, llvm::MaybeAlign(8));
}

Value XqaBuilder::scaledPair(Value pair, Value scales) {
  auto wideType = VectorType::get({2}, builder.getF32Type());
  Value wide = arith::ExtFOp::create(builder, kb.loc, wideType, pair);
  Value scaled = arith::MulFOp::create(builder, kb.loc, wide, scales);
  return arith::TruncFOp::create(builder, kb.loc,
                                 VectorType::get({2}, operandType()), scaled);
}

Value XqaBuilder::valueChannel(int64_t nTile, Value n) {
  int64_t half = std::max<int64_t>(value.perWord / 2, 1);
  int64_t segmentsPerWarp = value.segments / valueWarps;
  Value segment =
      kb.add(kb.mul(valueGroup, index(segmentsPerWarp)), index(nTile / half));
  Value base = kb.mul(segment, index(8 * half));
  Value within = kb.add(kb.mul(n, index(half)), index(nTile % half));
  return kb.add(base, within);
}

void XqaBuilder::forEachKeyStep(Value keyRows, Value stageBase, Value n0,
                                function_ref<void(const KeyStep &)> use) {
  // Two K segments (16 to 64 channels) per ldmatrix. 16-bit keys as B
  // keys-major (each n-tile's B pair in consecutive registers); as the A
  // operand (keys as rows) and packed codes segment-major (A's registers
  // in order; each segment's two n-tiles decode together).
  bool keysMajor = key.perWord == 2 && !keysAsRows;
  for (int64_t a = 0; a < key.segments; a += 2) {
    Value segment = index(a);
    SmallVector<Value> words =
        keysMajor ? tc.loadSegmentsKeysMajor(keyRows, lane, n0, segment,
                                             /*transpose=*/false)
                  : tc.loadSegments(keyRows, lane, n0, segment, /*pair=*/true,
                                    /*transpose=*/false);
    // The k-steps of the two segments: B registers per n-tile and
    // the step's index among the query tile's 16-column blocks.
    SmallVector<std::array<Value, 4>> steps;
    SmallVector<int64_t> stepIndices;
    if (key.perWord == 2) {
      Encoding encoding = key.type.getEncoding();
      std::array<Value, 4> b;
      for (int64_t i = 0; i < 4; ++i) {
        // Segment-major word i is segment i / 2 of key half i % 2.
        int64_t word = keysMajor ? i : (i % 2) * 2 + i / 2;
        b[i] = tc.operand(rawPair(words[word], encoding));
      }
      steps.push_back(b);
      stepIndices.push_back(a / 2);
    } else {
      int64_t stepsPerSegment = key.perWord / 4;
      for (int64_t sigma = 0; sigma < 2; ++sigma) {
        SmallVector<Value> pairs[2];
        for (int64_t nt = 0; nt < 2; ++nt) {
          Value scale;
          if (key.groupOffset >= 0) {
            // Key n0 + 8 nt + g, channels from 8t of segment s = a + sigma:
            // group 2 s + t / 2, byte 2 (s % 2) + t / 2 of word s / 2.
            int64_t s = a + sigma;
            Value byte = kb.toI32(kb.divs(threadInGroup, index(2)));
            byte = kb.add(byte, kb.i32(int32_t(2 * (s % 2))));
            Value keyIndex = kb.add(n0, kb.add(groupId, index(8 * nt)));
            Value word = groupScaleWord(key, stageBase, keyIndex, index(s / 2));
            scale = e4m3BytePair(kb, word, word, byte);
          }
          pairs[nt] = decodeHalves(key, words[2 * sigma + nt], scale);
        }
        for (int64_t st = 0; st < stepsPerSegment; ++st) {
          steps.push_back(
              {tc.operand(pairs[0][2 * st]), tc.operand(pairs[0][2 * st + 1]),
               tc.operand(pairs[1][2 * st]), tc.operand(pairs[1][2 * st + 1])});
          stepIndices.push_back((a + sigma) * stepsPerSegment + st);
        }
      }
    }
    for (auto [b, step] : llvm::zip(steps, stepIndices))
      use(KeyStep{b, step});
  }
}

SmallVector<Value> XqaBuilder::scoreStep(Value keyRows, Value stageBase,
                                         Value n0) {
  // S = Q Kᵀ: the query's A fragments times each k-step's two n-tiles.
  SmallVector<Value> scores(mTiles * 8, zeroF32);
  forEachKeyStep(keyRows, stageBase, n0, [&](const KeyStep &k) {
    for (int64_t mt = 0; mt < mTiles; ++mt) {
      ArrayRef<Value> a = queryFragment(k.index, mt);
      for (int64_t nt = 0; nt < 2; ++nt) {
        int64_t at = (mt * 2 + nt) * 4;
        SmallVector<Value> c(scores.begin() + at, scores.begin() + at + 4);
        SmallVector<Value> d = tc.mma(a, {k.b[2 * nt], k.b[2 * nt + 1]}, c);
        std::copy(d.begin(), d.end(), scores.begin() + at);
      }
    }
  });
  return scores;
}

Value XqaBuilder::stepUnmasked(Value slot, Value tileStart, Value n0) {
  // Steps whose 16 keys are all live, and visible to every real row
  // (causal for the first token, in the window of the last), skip the
  // masks: a warp-uniform branch, the common case.
  Value stepStart = kb.add(tileStart, kb.toI32(n0));
  Value allLive = copies->stepAllLive(slot, n0, lane);
  Value stepLast = kb.add(stepStart, kb.i32(15));
  Value unmasked = kb.land(
      allLive, kb.cmpi(arith::CmpIPredicate::sle, stepLast, firstQueryPos));
  if (window > 0) {
    // The last real token is at length - 1 (a prompt tile's: computed
    // with the key range).
    Value lastPos = tileTokens ? lastQueryPos : kb.sub(length, kb.i32(1));
    Value windowEnd = kb.sub(lastPos, kb.i32(int32_t(window)));
    Value inWindow = kb.cmpi(arith::CmpIPredicate::sgt, stepStart, windowEnd);
    unmasked = kb.land(unmasked, inWindow);
  }
  return unmasked;
}

Value XqaBuilder::keyVisible(Value live, Value keyPos, Value row) {
  Value token = kb.toI32(kb.divs(row, index(group)));
  Value queryPos = kb.add(firstQueryPos, token);
  Value causal = kb.cmpi(arith::CmpIPredicate::sle, keyPos, queryPos);
  Value visible = kb.land(live, causal);
  if (window > 0) {
    Value windowEnd = kb.sub(queryPos, kb.i32(int32_t(window)));
    Value inWindow = kb.cmpi(arith::CmpIPredicate::sgt, keyPos, windowEnd);
    visible = kb.land(visible, inWindow);
  }
  return visible;
}

SmallVector<Value> XqaBuilder::logitStep(ArrayRef<Value> scores, Value slot,
                                         Value tileStart, Value stageBase,
                                         Value n0) {
  // Logits: scales, softcap, masks. Element e of n-tile nt holds
  // key n0 + 8 nt + 2t + (e & 1), row g + 8 (e >> 1).
  Value unmasked = stepUnmasked(slot, tileStart, n0);
  SmallVector<Value> elementScales(4);
  for (int64_t nt = 0; nt < 2; ++nt)
    for (int64_t e2 = 0; e2 < 2; ++e2) {
      Value scale = softmaxScale;
      if (key.tokenOffset >= 0) {
        Value n = kb.add(n0, index(8 * nt + e2));
        n = kb.add(n, kb.mul(threadInGroup, index(2)));
        Value scales = view(0, {layout.total / 4}, builder.getF32Type());
        Value at = kb.add(stageBase, index(key.tokenOffset));
        at = kb.add(at, kb.mul(n, index(4)));
        Value tokenScale = kb.load(scales, {kb.divs(at, index(4))});
        scale = kb.fmul(scale, tokenScale);
      }
      elementScales[nt * 2 + e2] = scale;
    }
  auto logitOf = [&](int64_t at, Value scale) {
    return scaledLogit(kb, scores[at], scale, softcap, log2e);
  };
  SmallVector<Type> logitTypes(mTiles * 8, builder.getF32Type());
  SmallVector<Value> logits = kb.ifElse(
      unmasked, logitTypes,
      [&]() -> SmallVector<Value> {
        SmallVector<Value> plain(mTiles * 8, negInf);
        for (int64_t at = 0; at < mTiles * 8; ++at)
          if (at % 4 / 2 < rowHalves)
            plain[at] = logitOf(
                at, logitScaleAt(at, elementScales[(at / 4 % 2) * 2 + at % 2]));
        return plain;
      },
      [&]() -> SmallVector<Value> {
        SmallVector<Value> masked(mTiles * 8, negInf);
        for (int64_t nt = 0; nt < 2; ++nt)
          for (int64_t e2 = 0; e2 < 2; ++e2) {
            Value n = kb.add(n0, index(8 * nt + e2));
            n = kb.add(n, kb.mul(threadInGroup, index(2)));
            Value keyPos = kb.add(tileStart, kb.toI32(n));
            Value liveAt = kb.add(kb.mul(slot, index(tileKeys)), n);
            Value flag = kb.load(liveKeys, {liveAt});
            Value live = kb.cmpi(arith::CmpIPredicate::ne, flag, kb.i32(0));
            for (int64_t mt = 0; mt < mTiles; ++mt)
              for (int64_t h = 0; h < rowHalves; ++h) {
                Value row = kb.add(groupId, index(mt * 16 + 8 * h));
                Value visible = keyVisible(live, keyPos, row);
                int64_t at = (mt * 2 + nt) * 4 + 2 * h + e2;
                Value x =
                    logitOf(at, logitScaleAt(at, elementScales[nt * 2 + e2]));
                masked[at] = kb.select(visible, x, negInf);
              }
          }
        return masked;
      });
  return logits;
}

void XqaBuilder::forEachValueTile(
    Value valueRows, Value stageBase, Value n0,
    function_ref<void(int64_t nTile, Value b0, Value b1)> use) {
  int64_t valueHalf = std::max<int64_t>(value.perWord / 2, 1);
  int64_t valueSegments = value.segments / valueWarps;
  // This warp's value segments, two per ldmatrix.trans (one for an odd
  // last segment).
  for (int64_t a = 0; a < valueSegments; a += 2) {
    bool pair = a + 1 < valueSegments;
    Value segment = kb.add(valueSegmentBase, index(a));
    SmallVector<Value> words =
        tc.loadSegments(valueRows, lane, n0, segment, pair,
                        /*transpose=*/true);
    for (int64_t sigma = 0; sigma < (pair ? 2 : 1); ++sigma) {
      // words[2 sigma + h]: keys n0 + 8h + 2t, + 1 of segment
      // a + sigma, at the lane's column group.
      SmallVector<Value> halves[2];
      for (int64_t h = 0; h < 2; ++h) {
        Value word = words[2 * sigma + h];
        if (value.perWord == 2) {
          halves[h] = {rawPair(word, value.type.getEncoding())};
          continue;
        }
        Value scale;
        if (value.groupOffset >= 0) {
          // Channels 32 s + 4g + j of segment s = segment + sigma: group
          // 2 s + g / 4, byte 2 (s % 2) + g / 4 of word s / 2.
          Value s = kb.add(segment, index(sigma));
          Value parity = kb.rems(s, index(2));
          Value byte = kb.mul(parity, index(2));
          byte = kb.toI32(kb.add(byte, kb.divs(groupId, index(4))));
          Value word = kb.divs(s, index(2));
          Value keyLow = kb.add(n0, index(8 * h));
          keyLow = kb.add(keyLow, kb.mul(threadInGroup, index(2)));
          Value keyHigh = kb.add(keyLow, index(1));
          Value low = groupScaleWord(value, stageBase, keyLow, word);
          Value high = groupScaleWord(value, stageBase, keyHigh, word);
          scale = e4m3BytePair(kb, low, high, byte);
        }
        halves[h] = decodeHalves(value, word, scale);
        if (value.tokenOffset >= 0) {
          // Per-token scales multiply the two keys' values in
          // fp32, rounded once to the operand type: values keep
          // their precision where a scaled weight p x s would
          // fall into f16's subnormals (s = amax / 57344 for
          // e5m2).
          Value keyLow = kb.add(n0, index(8 * h));
          keyLow = kb.add(keyLow, kb.mul(threadInGroup, index(2)));
          Value tokenScales = tokenScalePair(value, stageBase, keyLow);
          if (float restore = decodedScale(value); restore != 1.0f) {
            auto pairType = VectorType::get({2}, builder.getF32Type());
            Value restores = arith::ConstantOp::create(
                builder, kb.loc,
                DenseElementsAttr::get(pairType,
                                       builder.getF32FloatAttr(restore)));
            tokenScales =
                arith::MulFOp::create(builder, kb.loc, tokenScales, restores);
          }
          for (Value &pair : halves[h])
            pair = scaledPair(pair, tokenScales);
        }
      }
      for (int64_t j = 0; j < valueHalf; ++j) {
        int64_t nt = (a + sigma) * valueHalf + j;
        Value b0 = tc.operand(halves[0][j]);
        Value b1 = tc.operand(halves[1][j]);
        use(nt, b0, b1);
      }
    }
  }
}

void XqaBuilder::valueStep(Value valueRows, Value stageBase, Value n0,
                           ArrayRef<SmallVector<Value>> pOperands,
                           SmallVectorImpl<Value> &s) {
  // O += P V: P's A fragments times each n-tile of values.
  forEachValueTile(
      valueRows, stageBase, n0, [&](int64_t nt, Value b0, Value b1) {
        for (int64_t mt = 0; mt < mTiles; ++mt) {
          SmallVector<Value> c;
          for (int64_t e = 0; e < 4; ++e)
            c.push_back(s[accAt(mt, nt, e)]);
          SmallVector<Value> d = tc.mma(pOperands[mt], {b0, b1}, c);
          for (int64_t e = 0; e < 4; ++e)
            s[accAt(mt, nt, e)] = d[e];
        }
      });
}

void XqaBuilder::mergeKeyWarps(ArrayRef<Value> state, Value split,
                               Value partialOut, Value partialStats) {
  // Merge the key groups through shared memory (the ring is free once
  // every copy has landed): [key group][row][value_dim | max | sum].
  if (copyWarp)
    syncComputeWarps(); // every tile was waited for
  else
    CpAsyncRing(kb, tileCount).land(0);
  int64_t mergeStride = valueDim + 2;
  Value merge =
      view(layout.merge, {keyWarps * rows * mergeStride}, builder.getF32Type());
  Value firstOfQuad =
      kb.cmpi(arith::CmpIPredicate::eq, threadInGroup, index(0));
  Value firstValueGroup =
      kb.cmpi(arith::CmpIPredicate::eq, valueGroup, index(0));
  Value writesStats = kb.land(firstOfQuad, firstValueGroup);
  if (keysAsRows)
    storeWarpPartialsKeysAsRows(state, merge, mergeStride);
  for (int64_t mt = 0; mt < (keysAsRows ? 0 : mTiles); ++mt)
    for (int64_t h = 0; h < rowHalves; ++h) {
      Value row = kb.add(groupId, index(mt * 16 + 8 * h));
      Value groupRow = kb.add(kb.mul(keyGroup, index(rows)), row);
      Value base = kb.mul(groupRow, index(mergeStride));
      Value sum = state[sumAt(mt, h)];
      sum = kb.fadd(sum, tc.shuffleXor(sum, 1));
      sum = kb.fadd(sum, tc.shuffleXor(sum, 2));
      kb.ifThen(writesStats, [&] {
        kb.store(state[maxAt(mt, h)], merge, {kb.add(base, index(valueDim))});
        kb.store(sum, merge, {kb.add(base, index(valueDim + 1))});
      });
      for (int64_t nt = 0; nt < nTiles; ++nt)
        for (int64_t e2 = 0; e2 < 2; ++e2) {
          Value n = kb.add(kb.mul(threadInGroup, index(2)), index(e2));
          Value channel = valueChannel(nt, n);
          kb.store(state[accAt(mt, nt, 2 * h + e2)], merge,
                   {kb.add(base, channel)});
        }
    }
  syncComputeWarps();
  Value realRows = kb.mul(kb.toIndex(tokenCount), index(group));
  kb.forLoop(
      tid, index(rows * valueDim), index(kBlockThreads), {},
      [&](Value item, ValueRange) -> SmallVector<Value> {
        Value row = kb.divs(item, index(valueDim));
        Value channel = kb.rems(item, index(valueDim));
        Value realRow = kb.cmpi(arith::CmpIPredicate::slt, row, realRows);
        kb.ifThen(realRow, [&] {
          Value globalMax = negInf;
          for (int64_t g = 0; g < keyWarps; ++g) {
            Value base =
                kb.mul(kb.add(row, index(g * rows)), index(mergeStride));
            Value m = kb.load(merge, {kb.add(base, index(valueDim))});
            globalMax = kb.fmax(globalMax, m);
          }
          Value total = zeroF32, sum = zeroF32;
          for (int64_t g = 0; g < keyWarps; ++g) {
            Value base =
                kb.mul(kb.add(row, index(g * rows)), index(mergeStride));
            Value m = kb.load(merge, {kb.add(base, index(valueDim))});
            Value empty = kb.cmpf(arith::CmpFPredicate::OEQ, m, negInf);
            Value weight = tc.exp2(kb.fsub(m, globalMax));
            Value w = kb.select(empty, zeroF32, weight);
            Value partial = kb.load(merge, {kb.add(base, channel)});
            total = kb.fma(partial, w, total);
            Value partialSum =
                kb.load(merge, {kb.add(base, index(valueDim + 1))});
            sum = kb.fma(partialSum, w, sum);
          }
          // (A per-token value scale took the decode's power of two.)
          if (float restore = decodedScale(value);
              restore != 1.0f && value.tokenOffset < 0)
            total = kb.fmul(total, kb.f32(restore));
          if (value.type.getScale() == ScaleGranularity::tensor) {
            Value valueScale = kb.load(value.scale, {index(0)});
            total = kb.fmul(total, valueScale);
          }
          // A split op's decode side writes compact token slots, b x
          // decodeTokens + k (the merge maps them to tokens).
          Value firstToken = kb.toIndex(decodeTokens ? seq : tokenBegin);
          if (decodeTokens)
            firstToken = kb.mul(firstToken, index(decodeTokens));
          Value inSequence = kb.divs(row, index(group));
          Value token = kb.add(firstToken, inSequence);
          Value head =
              kb.add(kb.mul(kvHead, index(group)), kb.rems(row, index(group)));
          Value outRow = kb.add(kb.mul(token, index(numHeads)), head);
          kb.store(total, partialOut, {split, outRow, channel});
          Value firstChannel =
              kb.cmpi(arith::CmpIPredicate::eq, channel, index(0));
          kb.ifThen(firstChannel, [&] {
            Value naturalMax = kb.fmul(globalMax, kb.f32(float(M_LN2)));
            kb.store(naturalMax, partialStats, {split, outRow, index(0)});
            kb.store(sum, partialStats, {split, outRow, index(1)});
          });
        });
        return {};
      });
}

void XqaBuilder::computeFacts() {
  headDim = keyBuffers.type.getHeadDim();
  valueDim = valueBuffers.type.getHeadDim();
  kvHeads = keyBuffers.type.getKvHeads();
  numHeads = static_cast<int64_t>(op.getNumHeads());
  group = numHeads / kvHeads;
  blockSize = keyBuffers.type.getBlockSize();
  rows = plan.getRows();
  keysAsRows = rows == 8;
  scoresAhead = plan.getScoresAhead();
  mTiles = keysAsRows ? 1 : rows / 16;
  tileKeys = plan.getKeysPerTile();
  stages = plan.getStages();
  keyWarps = plan.getKeyWarps();
  valueWarps = plan.getValueWarps();
  window = static_cast<int64_t>(op.getWindow());
  softcap = op.getSoftcap().convertToFloat();
  nTiles = valueDim / valueWarps / 8;
  tileTokens = plan.getQueryTile();
  if (plan == op.getDecodePlanAttr())
    decodeTokens = op.getSplitDecodeTokens();
  int64_t queryTokens = tileTokens ? tileTokens
                        : decodeTokens
                            ? decodeTokens
                            : static_cast<int64_t>(op.getMaxQueryLen());
  rowHalves = group * queryTokens <= 8 ? 1 : 2;
  bf16 = plan.getOperand().isBF16();
  tc.bf16 = bf16;
  copyWarp = plan.getThreads() > kBlockThreads;
  layout = layoutXqaShared(keyBuffers.type, valueBuffers.type, rows, tileKeys,
                           stages, keyWarps, copyWarp);
  kb.hardwareFp8 = kernels.hardwareFp8;
  kb.hardwareFp4 = kernels.hardwareFp4;
  // Without the chip's e2m1 conversion, e2m1 pairs stay codes x 2^-14
  // (one multiply a pair less; times an e4m3 group scale still exact f16):
  // the logit scale and the output take the 2^14 (decodedScale).
  kb.fp4Subnormal = !kb.hardwareFp4;
}

gpu::GPUFuncOp XqaBuilder::createKernel(SmallVectorImpl<Value> &hostOperands,
                                        XqaArguments &args) {
  Location loc = op.getLoc();
  // A cluster of splits, or a lone split, writes the output itself.
  bool writesOutput = plan.getClusterSplits() > 1 || plan.getMergesUnsplit();
  DecodeSignature signature = pagedTensorCoreSignature(
      op, keyBuffers, valueBuffers, fold, writesOutput);
  hostOperands.assign(signature.hostOperands().begin(),
                      signature.hostOperands().end());

  gpu::GPUFuncOp kernel =
      kernels.create(builder, loc, "pattn_xqa_decode", signature.types(), {});
  // The plan's residency on this module's chips: ptxas keeps the
  // registers within 65536 / (blocks x 128).
  resident = plan.getResidentBlocksOn(kernels.chips);
  setLaunchBounds(kernel, plan.getThreads(), resident);
  if (plan.getClusterHeads() > 1) {
    // The blocks of cluster_heads consecutive KV heads (blockIdx.y = sequence
    // x KV heads + head) of a sequence and split: one cluster.
    int32_t heads = int32_t(plan.getClusterHeads());
    kernel->setAttr(NVVM::NVVMDialect::getClusterDimAttrName(),
                    builder.getDenseI32ArrayAttr({1, heads, 1}));
  }
  if (plan.getClusterSplits() > 1) {
    // The cluster_splits splits (blockIdx.x) of a sequence and KV head.
    int32_t splits = int32_t(plan.getClusterSplits());
    kernel->setAttr(NVVM::NVVMDialect::getClusterDimAttrName(),
                    builder.getDenseI32ArrayAttr({splits, 1, 1}));
  }
  signature.bind(kernel);
  DecodeSignature::SequenceArgs sequence = signature.sequenceArgs();
  args.query = sequence.query;
  blockTable = sequence.blockTable;
  args.seqLens = sequence.seqLens;
  args.queryStart = sequence.queryStart;
  args.partialOut = sequence.partialOut;
  args.partialStats = sequence.partialStats;
  args.guard = signature.arg(DecodeArg::Guard);
  args.sinks = signature.arg(DecodeArg::Sinks);
  args.outScale = signature.arg(DecodeArg::OutScale);
  args.out = signature.arg(DecodeArg::Out);
  queryExponents = signature.arg(DecodeArg::QueryExponents);
  foldScales = signature.arg(DecodeArg::FoldScales);

  describePagedSide(key, keyBuffers, true, signature, layout);
  describePagedSide(value, valueBuffers, false, signature, layout);
  return kernel;
}

Value XqaBuilder::setUpBlock() {
  Location loc = op.getLoc();
  smem = dynamicSharedBytes(builder, loc);
  queryTile =
      view(layout.query, {rows, layout.queryStride / 2}, builder.getF16Type());

  // Block and lane coordinates.
  tid = kb.threadId();
  Value warp = kb.divs(tid, index(kWarpThreads));
  lane = kb.rems(tid, index(kWarpThreads));
  groupId = kb.divs(lane, index(4));
  threadInGroup = kb.rems(lane, index(4));
  keyGroup = kb.rems(warp, index(keyWarps));
  valueGroup = kb.divs(warp, index(keyWarps));
  Value split;
  if (tileTokens) {
    // A prompt: (query tile, split, KV head); the tile's sequence is found
    // in computeKeyRange.
    promptTile = kb.toI32(kb.blockId(gpu::Dimension::x));
    split = kb.blockId(gpu::Dimension::y);
    kvHead = kb.blockId(gpu::Dimension::z);
  } else {
    split = kb.blockId(gpu::Dimension::x);
    Value sequenceHead = kb.blockId(gpu::Dimension::y);
    seq = kb.toI32(kb.divs(sequenceHead, index(kvHeads)));
    kvHead = kb.rems(sequenceHead, index(kvHeads));
  }

  flattenPagedStorage(kb, key, blockSize);
  flattenPagedStorage(kb, value, blockSize);
  // The key-liveness flags of every ring slot.
  liveKeys = view(layout.liveKeys, {stages * tileKeys}, builder.getI32Type());
  return split;
}

SmallVector<Value> XqaBuilder::startRing() {
  CpAsyncRing ring(kb, tileCount);
  return copies->startRing(ring, stages);
}

void XqaBuilder::prepareSoftmax() {
  bool tensorKey = key.type.getScale() == ScaleGranularity::tensor;
  LogitScale scale =
      logitScale(kb, op, tensorKey ? key.scale : Value(), foldNormalizer);
  softmaxScale = scale.softmaxScale;
  if (float restore = decodedScale(key); restore != 1.0f)
    softmaxScale = kb.fmul(softmaxScale, kb.f32(restore));
  log2e = scale.log2e;
  if (queryExponents || fold)
    loadRowScales();
  negInf = kb.f32(-std::numeric_limits<float>::infinity());
}

SmallVector<Value> XqaBuilder::initialState() {
  // Per thread: for each m-tile the max and partial sum of rows g and
  // g + 8, and the output accumulators of this warp's value channels.
  SmallVector<Value> init;
  zeroF32 = kb.f32(0.0f);
  MmaBuilder::SoftmaxTiles tiles = softmaxTiles();
  for (int64_t i = 0; i < 2 * tiles.mTiles; ++i)
    init.push_back(negInf);
  for (int64_t i = 0; i < 2 * tiles.mTiles; ++i)
    init.push_back(zeroF32);
  for (int64_t i = 0; i < tiles.mTiles * tiles.nTiles * 4; ++i)
    init.push_back(zeroF32);
  valueSegmentBase = kb.mul(valueGroup, index(value.segments / valueWarps));
  return init;
}

void XqaBuilder::tileSteps(Value i32Iteration, Value slot,
                           SmallVectorImpl<Value> &s) {
  int64_t keysPerWarp = tileKeys / keyWarps;
  Value keyRows = ringRows(key, slot);
  Value valueRows = ringRows(value, slot);
  Value tileStart = copies->tileBase(i32Iteration);
  Value stageBase = stageBaseOf(slot);
  // The warp's 16-key steps of this tile: their scores are independent
  // chains (ldmatrix, decode, mma) that the scheduler interleaves; one
  // softmax update then covers all of them.
  int64_t steps = keysPerWarp / 16;
  SmallVector<Value> stepKeys;
  SmallVector<SmallVector<Value>> logits;
  for (int64_t step = 0; step < steps; ++step) {
    Value warpKeys = kb.mul(keyGroup, index(keysPerWarp));
    Value n0 = kb.add(warpKeys, index(step * 16));
    if (keysAsRows) {
      SmallVector<Value> scores = scoreStepKeysAsRows(keyRows, stageBase, n0);
      logits.push_back(
          logitStepKeysAsRows(scores, slot, tileStart, stageBase, n0));
    } else {
      SmallVector<Value> scores = scoreStep(keyRows, stageBase, n0);
      logits.push_back(logitStep(scores, slot, tileStart, stageBase, n0));
    }
    stepKeys.push_back(n0);
  }
  if (keysAsRows) {
    SmallVector<std::array<Value, 2>> pT = softmaxKeysAsRows(logits, s);
    for (int64_t step = 0; step < steps; ++step)
      valueStepKeysAsRows(valueRows, stageBase, stepKeys[step], pT[step], s);
    return;
  }
  SmallVector<SmallVector<SmallVector<Value>>> pOperands =
      tc.softmaxSteps(softmaxTiles(), logits, s, negInf, zeroF32);
  for (int64_t step = 0; step < steps; ++step)
    valueStep(valueRows, stageBase, stepKeys[step], pOperands[step], s);
}

XqaBuilder::TileIteration
XqaBuilder::beginTile(CpAsyncRing &ring, Value iteration, int32_t newerPending,
                      Value i32Stages, ValueRange pages) {
  ring.land(newerPending);
  if (plan.getClusterHeads() > 1) {
    // The cluster's blocks copy their next tiles together: their KV heads'
    // rows of each key are adjacent in a page (cluster_heads).
    NVVM::ClusterArriveRelaxedOp::create(builder, kb.loc,
                                         builder.getUnitAttr());
    NVVM::ClusterWaitOp::create(builder, kb.loc, builder.getUnitAttr());
  }
  TileIteration tile;
  tile.i32Tile = kb.toI32(iteration);
  tile.nextPages =
      copies->copyAhead(ring, tile.i32Tile, i32Stages, stages, pages);
  tile.slot = kb.toIndex(kb.rems(tile.i32Tile, i32Stages));
  return tile;
}

SmallVector<Value> XqaBuilder::runTiles(ArrayRef<Value> aheadPages) {
  SmallVector<Value> init = initialState();
  Value i32Stages = kb.i32(int32_t(stages));
  size_t softmaxState = init.size();
  init.append(aheadPages.begin(), aheadPages.end());
  CpAsyncRing ring(kb, tileCount);

  SmallVector<Value> state = kb.forLoop(
      index(0), kb.toIndex(tileCount), index(1), init,
      [&](Value iteration, ValueRange carried) -> SmallVector<Value> {
        // Tile `iteration` has landed once at most stages - 2 newer
        // groups are pending.
        TileIteration tile =
            beginTile(ring, iteration, int32_t(stages - 2), i32Stages,
                      carried.drop_front(softmaxState));
        SmallVector<Value> s(carried.take_front(softmaxState));
        tileSteps(tile.i32Tile, tile.slot, s);
        s.append(tile.nextPages.begin(), tile.nextPages.end());
        return s;
      });
  state.resize(softmaxState);
  return state;
}

/// Tile t's stage (index) and the parity (i32) of its phase there.
static std::pair<Value, Value> stageOf(KernelBuilder &kb, Value i32Tile,
                                       int64_t stages) {
  Value i32Stages = kb.i32(int32_t(stages));
  Value slot = kb.toIndex(kb.rems(i32Tile, i32Stages));
  Value round = kb.divs(i32Tile, i32Stages);
  Value parity = kb.andi(round, kb.i32(1));
  return {slot, parity};
}

void XqaBuilder::produceTiles() {
  // The copy warp: tile t waits for its stage to be released by the
  // compute threads (its previous tile, t - stages, read), then is
  // copied; the lookups run a tile ahead of the copies.
  prepareCopies();
  SmallVector<Value> firstPages = copies->lookupPages(kb.i32(0));
  kb.forLoop(index(0), kb.toIndex(tileCount), index(1), firstPages,
             [&](Value iteration, ValueRange pages) -> SmallVector<Value> {
               Value tile = kb.toI32(iteration);
               auto [slot, parity] = stageOf(kb, tile, stages);
               SmallVector<Value> nextPages =
                   copies->lookupPages(kb.add(tile, kb.i32(1)));
               Value reused = kb.cmpi(arith::CmpIPredicate::sge, tile,
                                      kb.i32(int32_t(stages)));
               kb.ifThen(reused, [&] {
                 // The stage's previous tile was phase round - 1.
                 Value previous = kb.xori(parity, kb.i32(1));
                 barriers->waitEmpty(slot, previous);
               });
               copies->issueTile(tile, slot, pages);
               barriers->arriveFull(slot);
               return nextPages;
             });
}

SmallVector<Value> XqaBuilder::consumeTiles() {
  SmallVector<Value> init = initialState();
  return kb.forLoop(
      index(0), kb.toIndex(tileCount), index(1), init,
      [&](Value iteration, ValueRange carried) -> SmallVector<Value> {
        Value tile = kb.toI32(iteration);
        auto [slot, parity] = stageOf(kb, tile, stages);
        barriers->waitFull(slot, parity);
        SmallVector<Value> s(carried);
        tileSteps(tile, slot, s);
        barriers->arriveEmpty(slot);
        return s;
      });
}

void XqaBuilder::syncComputeWarps() {
  if (!copyWarp) {
    kb.barrier();
    return;
  }
  // Named barrier 1 over the compute warps; the copy warp does not take
  // part.
  Value id = kb.i32(1);
  Value threads = kb.i32(int32_t(kBlockThreads));
  NVVM::BarrierOp::create(builder, op.getLoc(), TypeRange{}, id, threads,
                          NVVM::BarrierReductionAttr(), Value());
}

void XqaBuilder::runWithCopyWarp(const XqaArguments &args, Value split) {
  // Copy-warp kernels on sm_90 and up suspend in try_wait; older chips
  // poll test_wait.
  bool tryWait = llvm::all_of(kernels.chips, [](Chip chip) {
    return getTargetDescription(chip).capability >= 90;
  });
  barriers.emplace(kb, smem, layout.barriers, stages, tryWait);
  Value first = kb.cmpi(arith::CmpIPredicate::eq, tid, index(0));
  kb.ifThen(first, [&] { barriers->init(kWarpThreads, kBlockThreads); });
  kb.barrier();
  Value isCopyWarp =
      kb.cmpi(arith::CmpIPredicate::sge, tid, index(kBlockThreads));
  kb.ifElse(
      isCopyWarp, TypeRange{},
      [&]() -> SmallVector<Value> {
        produceTiles();
        return {};
      },
      [&]() -> SmallVector<Value> {
        prepareQuery(args.query);
        prepareSoftmax();
        // The compute warps look up nothing; tileBase needs the copies'
        // block facts only.
        prepareCopies();
        SmallVector<Value> state = consumeTiles();
        mergeKeyWarps(state, split, args.partialOut, args.partialStats);
        return {};
      });
}

gpu::GPUFuncOp XqaBuilder::build(SmallVectorImpl<Value> &hostOperands) {
  computeFacts();
  XqaArguments args;
  gpu::GPUFuncOp kernel = createKernel(hostOperands, args);
  Value split = setUpBlock();

  // A guarded op runs only when guard[0] holds its value (read on the
  // device: the fold pass guards both forms of a dynamic K table), or the
  // flag of the table this kernel folds.
  Value allowed =
      fold ? prepareFold(args.guard)
           : guardAllows(kb, args.guard, op.getGuardValue().value_or(0));
  kb.ifThen(allowed, [&] {
    computeKeyRange(args.seqLens, args.queryStart, split);
    if (copyWarp) {
      runWithCopyWarp(args, split);
      return;
    }
    prepareCopies();
    prepareQuery(args.query);
    SmallVector<Value> aheadPages = startRing();
    prepareSoftmax();
    SmallVector<Value> state =
        scoresAhead ? runTilesScoringAhead(aheadPages) : runTiles(aheadPages);
    mergeKeyWarps(state, split, args.partialOut, args.partialStats);
    mergeOwnSplits(args, split);
  });
  gpu::ReturnOp::create(builder, op.getLoc());
  return kernel;
}

auto ::pattn::buildXqaDecodeKernels(KernelModule &kernels, PagedAttentionOp op,
                                    XqaPlanAttr plan, const CacheBuffers &key,
                                    const CacheBuffers &value,
                                    const FusedFold *fold) -> DecodeKernels {
  XqaBuilder xqa(kernels, op, plan, key, value, fold);
  SplitRows rows;
  if (plan == op.getDecodePlanAttr())
    rows.decodeTokens = op.getSplitDecodeTokens();
  DecodeKernels result = buildTensorCorePagedKernels(
      kernels, op, key, value, plan.getSharedBytes(), rows,
      [&](llvm::SmallVectorImpl<Value> &operands) {
        return xqa.build(operands);
      },
      /*withMerge=*/plan.getClusterSplits() == 1);
  // (merges_unsplit keeps the merge kernel for several splits.)
  result.blockThreads = plan.getThreads(); // 160 with a copy warp
  return result;
}
