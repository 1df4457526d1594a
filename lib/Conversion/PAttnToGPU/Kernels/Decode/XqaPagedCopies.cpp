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
#include "Kernels/Fold/FoldSteps.h"

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
  QueryTile tile{query, queryTile, tid,   kvHead,
                 rows,  headDim,   group, operandType()};
  auto channelOf = [&](Value column) { return queryChannel(column); };
  if (fold) {
    // The fold of the query tile, a row a warp (the compute warps).
    Value warp = kb.divs(tid, index(kWarpThreads));
    stageFoldedQueryTile(kb, tile, blockQueries(), channelOf, foldScales,
                         foldExponent, warp, lane,
                         kBlockThreads / kWarpThreads);
    return;
  }
  stageQueryTile(kb, tile, blockQueries(), channelOf);
}

Value XqaBuilder::queryChannel(Value column) {
  int64_t perWord = key.perWord;
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
}

Value XqaBuilder::prepareFold(Value guard) {
  ScaleNormalizerOp normalizer = fold->normalizer;
  if (!normalizer) {
    // N came from a normalizer kernel (or is a static table's constant).
    foldNormalizer = kb.load(key.scale, {index(0)});
    foldExponent = normalizerExponentOf(kb, foldNormalizer);
    return guardAllows(kb, guard, op.getGuardValue().value_or(0));
  }
  // Every block reduces the table (the whole block: its scratch is the
  // query tile's bytes, free until the tile is staged), block 0 stores N
  // and the flag for the fallback op and the merge, and the flag decides.
  int64_t warps = plan.getThreads() / kWarpThreads;
  SmallVector<Value> buffers;
  for (int64_t i = 0; i < 3; ++i)
    buffers.push_back(
        view(layout.query + i * warps * 4, {warps}, builder.getI32Type()));
  TableNormalizer table =
      reduceTableNormalizer(kb, foldScales, tid, warps, buffers,
                            normalizer.getSoftmaxScale().convertToFloat());
  Value firstBlock = kb.boolean(true);
  for (gpu::Dimension d :
       {gpu::Dimension::x, gpu::Dimension::y, gpu::Dimension::z}) {
    Value atZero = kb.cmpi(arith::CmpIPredicate::eq, kb.blockId(d), index(0));
    firstBlock = kb.land(firstBlock, atZero);
  }
  kb.ifThen(firstBlock,
            [&] { storeTableNormalizer(kb, tid, table, key.scale, guard); });
  kb.barrier();
  foldNormalizer = table.value;
  foldExponent = table.exponent;
  // As guardAllows on the flag the block would have stored.
  Value flag = arith::ExtUIOp::create(builder, op.getLoc(),
                                      builder.getI32Type(), table.foldable);
  Value wanted = kb.i32(op.getGuardValue().value_or(0));
  return kb.cmpi(arith::CmpIPredicate::eq, flag, wanted);
}

Value XqaBuilder::rowLogitScale(Value row) {
  if (!fold)
    return foldedRowScale(kb, queryExponents, row, group, kvHead,
                          blockQueries(), softmaxScale);
  Value exponent = foldedTileRowExponent(kb, queryTile, row, headDim);
  return kb.ldexpSaturating(softmaxScale, exponent);
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
      rowScales.push_back(rowLogitScale(row));
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
