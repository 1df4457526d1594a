//===- XqaKeysAsRows.cpp - The XQA decode with keys as the mma's M
//---------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// The steps of the XQA decode (XqaPaged.cpp) for a plan of rows = 8: a
// decode of at most 8 query rows (T tokens x g heads), where an M = 16 tile
// of rows would compute 8 or more padding rows in every mma. The operands
// swap instead:
//
//   Sᵀ (16 keys x 8 rows)  = K (16 keys x 16 channels) · Qᵀ      per k-step
//   Oᵀ (16 channels x 8 rows) += Vᵀ (16 channels x 16 keys) · Pᵀ  per step
//
// The decoded K and V registers are the ones the row-major kernel feeds
// to its B operands: the B registers of its two key n-tiles are the A
// rows g and g + 8 of Sᵀ's k-step, and those of two value n-tiles the A
// rows of a 16-channel tile of Oᵀ. The query becomes a B operand, two
// registers per k-step, kept in registers; half as many mma and output
// accumulators as with M = 16 rows.
//
// A lane's Sᵀ elements are keys g and g + 8 of rows 2t and 2t + 1, so a
// row's maximum and sum run over the 8 lanes of its column (xor 4, 8,
// 16). Pᵀ packed per key is an 8 x 8 matrix that movmatrix transposes
// into the B registers of Oᵀ += Vᵀ Pᵀ (row g, keys 2t and 2t + 1).
//
//===----------------------------------------------------------------------===//

#include "Kernels/Decode/XqaPaged.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace pattn;
using namespace pattn::xqa;

SmallVector<Value> XqaBuilder::loadQueryColumns(int64_t step) {
  // ldmatrix.x2: lanes 0-7 address rows 0-7 at the step's column 0,
  // lanes 8-15 at column 8 (the other lanes' addresses repeat them).
  Value laneRow = kb.rems(lane, index(8));
  Value matrix = kb.divs(lane, index(8));
  Value half = kb.rems(matrix, index(2));
  Value columnHalf = kb.mul(half, index(8));
  Value column = kb.add(columnHalf, index(step * 16));
  SmallVector<Value> words =
      tc.ldmatrix(queryTile, laneRow, column, 2, /*transpose=*/false);
  Encoding encoding = bf16 ? Encoding::bf16 : Encoding::f16;
  SmallVector<Value> registers;
  for (Value word : words)
    registers.push_back(tc.operand(rawPair(word, encoding)));
  return registers;
}

void XqaBuilder::loadRowScalesKeysAsRows() {
  Value firstRow = kb.mul(threadInGroup, index(2));
  for (int64_t h = 0; h < 2; ++h) {
    Value row = kb.add(firstRow, index(h));
    rowScales.push_back(rowLogitScale(row));
  }
}

SmallVector<Value> XqaBuilder::scoreStepKeysAsRows(Value keyRows,
                                                   Value stageBase, Value n0) {
  // A k-step's K registers {n-tile 0: b0, b1; n-tile 1: b0, b1} are A's
  // {a0, a2; a1, a3}. Even and odd k-steps accumulate in two chains, added
  // once: half the dependent mma of one chain.
  SmallVector<Value> chains[2] = {SmallVector<Value>(4, zeroF32),
                                  SmallVector<Value>(4, zeroF32)};
  int64_t count = 0;
  forEachKeyStep(keyRows, stageBase, n0, [&](const KeyStep &k) {
    SmallVector<Value> &chain = chains[count++ % 2];
    ArrayRef<Value> query = queryFragment(k.index, 0);
    chain = tc.mma({k.b[0], k.b[2], k.b[1], k.b[3]}, query, chain);
  });
  if (count == 1)
    return chains[0];
  SmallVector<Value> scores;
  for (int64_t e = 0; e < 4; ++e)
    scores.push_back(kb.fadd(chains[0][e], chains[1][e]));
  return scores;
}

SmallVector<Value> XqaBuilder::logitStepKeysAsRows(ArrayRef<Value> scores,
                                                   Value slot, Value tileStart,
                                                   Value stageBase, Value n0) {
  Value unmasked = stepUnmasked(slot, tileStart, n0);
  // Element e: key n0 + g + 8 (e >> 1), row 2t + (e & 1).
  SmallVector<Value> keys, keyScales;
  for (int64_t kh = 0; kh < 2; ++kh) {
    Value inStep = kb.add(groupId, index(8 * kh));
    Value n = kb.add(n0, inStep);
    keys.push_back(n);
    Value scale = softmaxScale;
    if (key.tokenOffset >= 0) {
      Value scales = view(0, {layout.total / 4}, builder.getF32Type());
      Value at = kb.add(stageBase, index(key.tokenOffset));
      at = kb.add(at, kb.mul(n, index(4)));
      Value tokenScale = kb.load(scales, {kb.divs(at, index(4))});
      scale = kb.fmul(scale, tokenScale);
    }
    keyScales.push_back(scale);
  }
  auto logitOf = [&](int64_t e) {
    Value scale = rowScales.empty() ? keyScales[e / 2] : rowScales[e % 2];
    return scaledLogit(kb, scores[e], scale, softcap, log2e);
  };
  SmallVector<Type> logitTypes(4, builder.getF32Type());
  return kb.ifElse(
      unmasked, logitTypes,
      [&]() -> SmallVector<Value> {
        SmallVector<Value> plain;
        for (int64_t e = 0; e < 4; ++e)
          plain.push_back(logitOf(e));
        return plain;
      },
      [&]() -> SmallVector<Value> {
        SmallVector<Value> masked(4);
        for (int64_t kh = 0; kh < 2; ++kh) {
          Value keyPos = kb.add(tileStart, kb.toI32(keys[kh]));
          Value liveAt = kb.add(kb.mul(slot, index(tileKeys)), keys[kh]);
          Value flag = kb.load(liveKeys, {liveAt});
          Value live = kb.cmpi(arith::CmpIPredicate::ne, flag, kb.i32(0));
          Value firstRow = kb.mul(threadInGroup, index(2));
          for (int64_t h = 0; h < 2; ++h) {
            Value row = kb.add(firstRow, index(h));
            Value visible = keyVisible(live, keyPos, row);
            Value x = logitOf(2 * kh + h);
            masked[2 * kh + h] = kb.select(visible, x, negInf);
          }
        }
        return masked;
      });
}

Value XqaBuilder::transposeQuad(Value pair) {
  Value word = pair;
  if (!bf16) { // f16 operands are vector<2xf16>; bf16's are already i32
    Value wide = vector::BitCastOp::create(
        builder, kb.loc, VectorType::get({1}, builder.getI32Type()), pair);
    word = vector::ExtractOp::create(builder, kb.loc, wide, 0);
  }
  // Warp-synchronous: kept in place like the shuffles around it.
  Value moved = kb.inlinePtx(builder.getI32Type(),
                             "movmatrix.sync.aligned.m8n8.trans.b16 $0, $1;",
                             "=r,r", {word}, /*sideEffects=*/true);
  if (bf16)
    return moved;
  return rawPair(moved, Encoding::f16);
}

SmallVector<std::array<Value, 2>>
XqaBuilder::softmaxKeysAsRows(ArrayRef<SmallVector<Value>> logits,
                              SmallVectorImpl<Value> &s) {
  // Row 2t + h: elements h and h + 2 of every step, then the 8 lanes of
  // the column. Each lane keeps a partial sum over its own keys (the
  // merge adds the column's).
  int64_t steps = logits.size();
  MmaBuilder::SoftmaxTiles tiles = softmaxTiles();
  SmallVector<SmallVector<Value>> weights(steps, SmallVector<Value>(4));
  Value alphas[2];
  Value rescale = kb.boolean(false);
  for (int64_t h = 0; h < 2; ++h) {
    Value stepsMax;
    SmallVector<Value> rowLogits;
    for (int64_t k = 0; k < steps; ++k) {
      Value stepMax = kb.fmax(logits[k][h], logits[k][h + 2]);
      stepsMax = k ? kb.fmax(stepsMax, stepMax) : stepMax;
      rowLogits.append({logits[k][h], logits[k][h + 2]});
    }
    for (int32_t mask : {4, 8, 16}) {
      Value other = tc.shuffleXor(stepsMax, mask);
      stepsMax = kb.fmax(stepsMax, other);
    }
    Value oldMax = s[tiles.maxAt(0, h)];
    Value newMax = kb.fmax(oldMax, stepsMax);
    MmaBuilder::SoftmaxRow row = tc.softmaxRow(
        oldMax, newMax, s[tiles.sumAt(0, h)], rowLogits, negInf, zeroF32);
    for (int64_t k = 0; k < steps; ++k) {
      weights[k][h] = row.weights[2 * k];
      weights[k][h + 2] = row.weights[2 * k + 1];
    }
    Value grew = kb.cmpf(arith::CmpFPredicate::OGT, newMax, oldMax);
    rescale = kb.lor(rescale, grew);
    alphas[h] = row.alpha;
    s[tiles.maxAt(0, h)] = newMax;
    s[tiles.sumAt(0, h)] = row.sum;
  }
  // Oᵀ's element e is row 2t + (e & 1): it decays by that row's alpha,
  // only when some row of the warp has a new maximum.
  Value anyRescale =
      NVVM::VoteSyncOp::create(builder, kb.loc, builder.getI1Type(), kb.i32(-1),
                               rescale, NVVM::VoteSyncKind::any);
  int64_t first = tiles.accAt(0, 0, 0);
  SmallVector<Type> accTypes(s.size() - first, builder.getF32Type());
  SmallVector<Value> accumulators = kb.ifElse(
      anyRescale, accTypes,
      [&]() -> SmallVector<Value> {
        SmallVector<Value> decayed;
        for (int64_t at = first; at < int64_t(s.size()); ++at)
          decayed.push_back(kb.fmul(s[at], alphas[(at - first) % 2]));
        return decayed;
      },
      [&]() -> SmallVector<Value> {
        return SmallVector<Value>(s.begin() + first, s.end());
      });
  std::copy(accumulators.begin(), accumulators.end(), s.begin() + first);
  // Pᵀ of keys g (elements 0, 1) and g + 8 (2, 3), transposed: the B
  // registers (keys 2t, 2t + 1, then + 8, of row g).
  SmallVector<std::array<Value, 2>> pT;
  for (int64_t k = 0; k < steps; ++k) {
    Value low = tc.packPair(weights[k][0], weights[k][1]);
    Value high = tc.packPair(weights[k][2], weights[k][3]);
    Value lowT = transposeQuad(low);
    Value highT = transposeQuad(high);
    pT.push_back({lowT, highT});
  }
  return pT;
}

void XqaBuilder::valueStepKeysAsRows(Value valueRows, Value stageBase, Value n0,
                                     std::array<Value, 2> pT,
                                     SmallVectorImpl<Value> &s) {
  // n-tiles 2v and 2v + 1 (channels valueChannel(2v, g) and
  // valueChannel(2v + 1, g)) are rows g and g + 8 of Vᵀ's tile v.
  MmaBuilder::SoftmaxTiles tiles = softmaxTiles();
  auto accumulate = [&](int64_t vt, ArrayRef<Value> a) {
    SmallVector<Value> c;
    for (int64_t e = 0; e < 4; ++e)
      c.push_back(s[tiles.accAt(0, vt, e)]);
    SmallVector<Value> d = tc.mma(a, {pT[0], pT[1]}, c);
    for (int64_t e = 0; e < 4; ++e)
      s[tiles.accAt(0, vt, e)] = d[e];
  };
  int64_t valueSegments = value.segments / valueWarps;
  if (value.perWord == 2 && valueSegments % 2 == 0) {
    // 16-bit values: ldmatrix.trans keys-major gives tile v's A registers
    // (segments 2v, 2v + 1 of keys n0 ..., then of n0 + 8) in order.
    Encoding encoding = value.type.getEncoding();
    for (int64_t a = 0; a < valueSegments; a += 2) {
      Value segment = kb.add(valueSegmentBase, index(a));
      SmallVector<Value> words = tc.loadSegmentsKeysMajor(
          valueRows, lane, n0, segment, /*transpose=*/true);
      SmallVector<Value> operands;
      for (Value word : words)
        operands.push_back(tc.operand(rawPair(word, encoding)));
      accumulate(a / 2, operands);
    }
    return;
  }
  std::array<Value, 2> even;
  forEachValueTile(valueRows, stageBase, n0,
                   [&](int64_t nt, Value b0, Value b1) {
                     if (nt % 2 == 0) {
                       even = {b0, b1};
                       return;
                     }
                     accumulate(nt / 2, {even[0], b0, even[1], b1});
                   });
}

void XqaBuilder::storeWarpPartialsKeysAsRows(ArrayRef<Value> state, Value merge,
                                             int64_t mergeStride) {
  // Rows 2t and 2t + 1: every lane of a column holds the row's max; the
  // sums add over the column. Oᵀ's element e of tile v: channel
  // valueChannel(2v + e / 2, g), row 2t + e % 2.
  MmaBuilder::SoftmaxTiles tiles = softmaxTiles();
  Value firstOfColumn = kb.cmpi(arith::CmpIPredicate::eq, groupId, index(0));
  Value firstValueGroup =
      kb.cmpi(arith::CmpIPredicate::eq, valueGroup, index(0));
  Value writesStats = kb.land(firstOfColumn, firstValueGroup);
  SmallVector<Value> bases;
  Value firstRow = kb.mul(threadInGroup, index(2));
  for (int64_t h = 0; h < 2; ++h) {
    Value row = kb.add(firstRow, index(h));
    Value groupRow = kb.add(kb.mul(keyGroup, index(rows)), row);
    Value base = kb.mul(groupRow, index(mergeStride));
    bases.push_back(base);
    Value sum = state[tiles.sumAt(0, h)];
    for (int32_t mask : {4, 8, 16}) {
      Value other = tc.shuffleXor(sum, mask);
      sum = kb.fadd(sum, other);
    }
    kb.ifThen(writesStats, [&] {
      kb.store(state[tiles.maxAt(0, h)], merge,
               {kb.add(base, index(valueDim))});
      kb.store(sum, merge, {kb.add(base, index(valueDim + 1))});
    });
  }
  for (int64_t vt = 0; vt < tiles.nTiles; ++vt)
    for (int64_t e = 0; e < 4; ++e) {
      Value channel = valueChannel(2 * vt + e / 2, groupId);
      Value at = kb.add(bases[e % 2], channel);
      kb.store(state[tiles.accAt(0, vt, e)], merge, {at});
    }
}

Value XqaBuilder::warpStepKeys(int64_t step) {
  int64_t keysPerWarp = tileKeys / keyWarps;
  Value warpKeys = kb.mul(keyGroup, index(keysPerWarp));
  return kb.add(warpKeys, index(step * 16));
}

SmallVector<Value> XqaBuilder::tileScoresKeysAsRows(Value slot) {
  Value keyRows = ringRows(key, slot);
  Value stageBase = stageBaseOf(slot);
  SmallVector<Value> scores;
  for (int64_t step = 0; step < tileKeys / keyWarps / 16; ++step) {
    Value n0 = warpStepKeys(step);
    SmallVector<Value> stepScores = scoreStepKeysAsRows(keyRows, stageBase, n0);
    scores.append(stepScores.begin(), stepScores.end());
  }
  return scores;
}

SmallVector<Value>
XqaBuilder::runTilesScoringAhead(ArrayRef<Value> aheadPages) {
  // The prologue issued tiles 0 ... stages - 2. Tile 0 lands (at most
  // stages - 2 newer groups pending) and is scored before the loop; the
  // loop state carries the next tile's scores after the softmax state.
  CpAsyncRing ring(kb, tileCount);
  SmallVector<Value> init = initialState();
  size_t softmaxState = init.size();
  ring.land(int32_t(stages - 2));
  SmallVector<Value> firstScores = tileScoresKeysAsRows(index(0));
  init.append(firstScores.begin(), firstScores.end());
  size_t scoresEnd = init.size();
  init.append(aheadPages.begin(), aheadPages.end());
  Value i32Stages = kb.i32(int32_t(stages));
  int64_t steps = tileKeys / keyWarps / 16;

  SmallVector<Value> state = kb.forLoop(
      index(0), kb.toIndex(tileCount), index(1), init,
      [&](Value iteration, ValueRange carried) -> SmallVector<Value> {
        // Tile t + 1 has landed once at most stages - 3 newer groups are
        // pending (tiles t + 2 ... t + stages - 2); the barrier also frees
        // tile t - 1's slot, which tile t + stages - 1 then fills. The last
        // iteration scores a slot no tile fills: never used.
        TileIteration tile =
            beginTile(ring, iteration, int32_t(stages - 3), i32Stages,
                      carried.drop_front(scoresEnd));
        Value i32Iteration = tile.i32Tile, slot = tile.slot;
        Value next = kb.add(i32Iteration, kb.i32(1));
        Value nextSlot = kb.toIndex(kb.rems(next, i32Stages));
        Value valueRows = ringRows(value, slot);
        Value tileStart = copies->tileBase(i32Iteration);
        Value stageBase = stageBaseOf(slot);
        SmallVector<Value> s(carried.take_front(softmaxState));
        ValueRange scores =
            carried.slice(softmaxState, scoresEnd - softmaxState);
        SmallVector<Value> stepKeys;
        SmallVector<SmallVector<Value>> logits;
        for (int64_t step = 0; step < steps; ++step) {
          Value n0 = warpStepKeys(step);
          SmallVector<Value> stepScores(scores.slice(4 * step, 4));
          logits.push_back(
              logitStepKeysAsRows(stepScores, slot, tileStart, stageBase, n0));
          stepKeys.push_back(n0);
        }
        SmallVector<std::array<Value, 2>> pT = softmaxKeysAsRows(logits, s);
        // Tile t + 1's scores, in the same straight-line code as tile t's
        // P V: the two chains interleave.
        SmallVector<Value> nextScores = tileScoresKeysAsRows(nextSlot);
        for (int64_t step = 0; step < steps; ++step)
          valueStepKeysAsRows(valueRows, stageBase, stepKeys[step], pT[step],
                              s);
        s.append(nextScores.begin(), nextScores.end());
        s.append(tile.nextPages.begin(), tile.nextPages.end());
        return s;
      });
  state.resize(softmaxState);
  return state;
}
