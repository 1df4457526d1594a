//===- XqaPagedCopies.cpp - The XQA decode's copies into shared memory ----===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements what the XQA decode of pattn.paged_attention
// (XqaPaged.cpp) moves into shared memory: the block's key range, the query
// tile and its fragments, the block-table lookups and the cp.async copies
// of a tile into the ring.
//
//===----------------------------------------------------------------------===//

#include "Kernels/Decode/XqaPaged.h"

#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <tuple>

using namespace mlir;
using namespace pattn;
using namespace pattn::xqa;

Value XqaBuilder::view(Value offset, ArrayRef<int64_t> shape, Type element) {
  return sharedView(kb, smem, offset, shape, element);
}

Value XqaBuilder::view(int64_t offset, ArrayRef<int64_t> shape, Type element) {
  Value at = index(offset);
  return view(at, shape, element);
}

void XqaBuilder::computeKeyRange(Value seqLens, Value queryStart, Value split) {
  BlockQueries queries;
  if (tileTokens) {
    queries =
        locatePromptTile(kb, blockTable, queryStart, promptTile, tileTokens);
    seq = queries.seq;
  } else if (queryStart) {
    queries.seq = seq;
    queries.tokenBegin = kb.load(queryStart, {kb.toIndex(seq)});
    Value nextSeq = kb.add(kb.toIndex(seq), index(1));
    Value tokenEnd = kb.load(queryStart, {nextSeq});
    queries.tokenCount = kb.sub(tokenEnd, queries.tokenBegin);
    if (decodeTokens) {
      // A split op's longer sequences are the prefill family's.
      Value limit = kb.i32(int32_t(decodeTokens));
      Value isShort =
          kb.cmpi(arith::CmpIPredicate::sle, queries.tokenCount, limit);
      Value none = kb.i32(0);
      queries.tokenCount = kb.select(isShort, queries.tokenCount, none);
    }
  } else {
    queries.seq = seq;
    queries.tokenBegin = seq;
    queries.tokenCount = kb.i32(1);
  }
  tokenBegin = queries.tokenBegin;
  tokenCount = queries.tokenCount;
  BlockKeys keys = blockKeyRange(kb, queries, seqLens, blockTable, blockSize,
                                 tileKeys, window, split, tileTokens > 0);
  length = keys.length;
  firstQueryPos = keys.firstQueryPos;
  lastQueryPos = keys.lastQueryPos;
  first = keys.first;
  last = keys.last;
  firstTile = keys.firstTile;
  tileCount = keys.tileCount;
  if (decodeTokens) {
    // No rows, no keys: the block of a longer sequence reads nothing.
    Value none = kb.i32(0);
    Value hasRows = kb.cmpi(arith::CmpIPredicate::sgt, tokenCount, none);
    tileCount = kb.select(hasRows, tileCount, none);
  }
}

void XqaBuilder::loadQueryTile(Value query) {
  // Logical column c holds channel queryChannel(c).
  QueryTile tile{query, queryTile, tid,   kvHead,
                 rows,  headDim,   group, operandType()};
  int64_t perWord = key.perWord;
  stageQueryTile(kb, tile, blockQueries(), [&](Value column) {
    Value channel = column;
    if (perWord != 2) {
      // Within a 16-byte segment (4 x perWord channels) thread t's word
      // covers channels [t * perWord, (t + 1) * perWord); k-step s of the
      // segment takes its pairs 2s (B register 0: columns 0-7 of the step)
      // and 2s + 1 (register 1: columns 8-15), and pair p holds channels p
      // and p + perWord / 2 of the word (decodeWordHalves).
      Value step = kb.divs(column, index(16));
      Value within = kb.rems(column, index(16));
      Value segment = kb.divs(step, index(perWord / 4));
      Value s = kb.rems(step, index(perWord / 4));
      Value thread = kb.divs(kb.rems(within, index(8)), index(2));
      Value elementIndex = kb.rems(within, index(2));
      Value pair = kb.add(kb.mul(s, index(2)), kb.divs(within, index(8)));
      channel = kb.mul(segment, index(4 * perWord));
      channel = kb.add(channel, kb.mul(thread, index(perWord)));
      channel = kb.add(channel, pair);
      channel = kb.add(channel, kb.mul(elementIndex, index(perWord / 2)));
    }
    return channel;
  });
}

SmallVector<Value> XqaBuilder::loadQueryFragment(int64_t step, int64_t mt) {
  Value row = kb.add(kb.rems(lane, index(16)), index(mt * 16));
  Value columnHalf = kb.mul(kb.divs(lane, index(16)), index(8));
  Value column = kb.add(columnHalf, index(step * 16));
  return tc.loadOperandA(queryTile, row, column);
}

ArrayRef<Value> XqaBuilder::queryFragment(int64_t step, int64_t mt) {
  if (!queryFragments.empty())
    return queryFragments[step * mTiles + mt];
  fragmentScratch = loadQueryFragment(step, mt);
  return fragmentScratch;
}

void XqaBuilder::prepareQuery(Value query) {
  loadQueryTile(query);
  syncComputeWarps();
  // At most 32 registers of query fragments stay resident (D128, one
  // m-tile), and only when registers are not held to 128 for a fourth
  // block per SM; otherwise they are read from the tile at each use.
  int64_t querySteps = headDim / 16;
  if (keysAsRows) {
    // Keys as M: the query is the B operand, 2 registers a k-step.
    for (int64_t step = 0; step < querySteps; ++step)
      queryFragments.push_back(loadQueryColumns(step));
    return;
  }
  if (querySteps * mTiles * 4 <= 32 && resident < 4)
    for (int64_t step = 0; step < querySteps; ++step)
      for (int64_t mt = 0; mt < mTiles; ++mt)
        queryFragments.push_back(loadQueryFragment(step, mt));
}

void XqaBuilder::loadRowScales() {
  if (keysAsRows) {
    loadRowScalesKeysAsRows();
    return;
  }
  // Row r = (token r / g, head kvHead * g + r % g), as in loadQueryTile.
  for (int64_t mt = 0; mt < mTiles; ++mt)
    for (int64_t h = 0; h < 2; ++h) {
      if (h >= rowHalves) { // padding rows: never read
        rowScales.push_back(softmaxScale);
        continue;
      }
      Value row = kb.add(groupId, index(mt * 16 + 8 * h));
      rowScales.push_back(foldedRowScale(kb, queryExponents, row, group, kvHead,
                                         blockQueries(), softmaxScale));
    }
}

void XqaBuilder::prepareCopies() {
  PagedRingLayout ring;
  ring.ring = layout.ring;
  ring.stageBytes = layout.stageBytes;
  ring.total = layout.total;
  ring.tileKeys = tileKeys;
  ring.blockSize = blockSize;
  // With a copy warp its lanes copy (in the compute warps only tileBase is
  // used).
  Value copyThread = tid;
  if (copyWarp) {
    ring.copyThreads = kWarpThreads;
    copyThread = kb.sub(tid, index(kBlockThreads));
  }
  PagedBlock block{copyThread, seq, kvHead, blockTable, first, last};
  copies.emplace(kb, smem, ring, key, value, liveKeys, block);
}
