//===- KeyRange.cpp - A block's query rows and key range ------------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the shared key-range step (KeyRange.h): which query
// tokens a tensor-core block serves and which keys of its sequence they
// see, in whole tiles.
//
//===----------------------------------------------------------------------===//

#include "Kernels/Common/KeyRange.h"
#include "Kernels/Common/DecodeCommon.h"
#include "Kernels/Kernels.h"

using namespace mlir;
using namespace pattn;

BlockQueries pattn::locatePromptTile(KernelBuilder &kb, Value blockTable,
                                     Value queryStart, Value promptTile,
                                     int64_t tileTokens) {
  BlockQueries q;
  // Sequence b has ceil(n_b / T) query tiles, numbered one sequence after
  // another: a scan over the batch (a few entries) finds the block's.
  Value batch = memref::DimOp::create(kb.b, kb.loc, blockTable, 0);
  Value tokensPerTile = kb.i32(int32_t(tileTokens));
  Value none = kb.i32(-1);
  Value zero = kb.index(0), one = kb.index(1);
  Value noTiles = kb.i32(0), firstSequence = kb.i32(0);
  SmallVector<Value> found = kb.forLoop(
      zero, batch, one, {noTiles, firstSequence, none},
      [&](Value b, ValueRange c) -> SmallVector<Value> {
        Value begin = kb.load(queryStart, {b});
        Value end = kb.load(queryStart, {kb.add(b, kb.index(1))});
        Value tokens = kb.sub(end, begin);
        Value rounded = kb.add(tokens, kb.i32(int32_t(tileTokens - 1)));
        Value tiles = kb.divs(rounded, tokensPerTile);
        Value inSequence = kb.sub(promptTile, c[0]);
        Value notBefore =
            kb.cmpi(arith::CmpIPredicate::sge, inSequence, kb.i32(0));
        Value within = kb.cmpi(arith::CmpIPredicate::slt, inSequence, tiles);
        Value owns = kb.land(notBefore, within);
        Value sequence = kb.select(owns, kb.toI32(b), c[1]);
        Value tileInSequence = kb.select(owns, inSequence, c[2]);
        return {kb.add(c[0], tiles), sequence, tileInSequence};
      });
  q.seq = found[1];
  Value tileInSequence = found[2];
  // Blocks past the last tile (the host launches a bound) have no tokens.
  Value real = kb.cmpi(arith::CmpIPredicate::sge, tileInSequence, kb.i32(0));
  Value sequenceBegin = kb.load(queryStart, {kb.toIndex(q.seq)});
  Value nextSeq = kb.add(kb.toIndex(q.seq), kb.index(1));
  Value sequenceTokens = kb.sub(kb.load(queryStart, {nextSeq}), sequenceBegin);
  Value offset = kb.mul(kb.maxs(tileInSequence, kb.i32(0)), tokensPerTile);
  q.tokenBegin = kb.add(sequenceBegin, offset);
  Value remaining = kb.mins(kb.sub(sequenceTokens, offset), tokensPerTile);
  q.tokenCount = kb.select(real, remaining, kb.i32(0));
  q.tileOffset = offset;
  q.sequenceTokens = sequenceTokens;
  return q;
}

BlockKeys pattn::blockKeyRange(KernelBuilder &kb, const BlockQueries &q,
                               Value seqLens, Value blockTable,
                               int64_t blockSize, int64_t tileKeys,
                               int64_t window, Value split, bool promptTile) {
  BlockKeys k;
  k.length = kb.load(seqLens, {kb.toIndex(q.seq)});
  Value length = k.length;
  // The block's keys: the union of its rows' (causal, windowed) ranges,
  // cut to this split. Splits are ceil(max keys / the grid's splits,
  // gridDim.x, or gridDim.y for a prompt) rounded up to whole tiles: a
  // function of host-known sizes only.
  Value tileKeysI32 = kb.i32(int32_t(tileKeys));
  Value perSplit =
      keysPerGridSplit(kb, blockTable, blockSize,
                       promptTile ? gpu::Dimension::y : gpu::Dimension::x);
  perSplit = kb.add(perSplit, kb.i32(int32_t(tileKeys - 1)));
  perSplit = kb.mul(kb.divs(perSplit, tileKeysI32), tileKeysI32);
  Value splitBegin = kb.mul(kb.toI32(split), perSplit);
  Value begin = kb.i32(0);
  // Token i of n sits at length - n + i; a prompt tile's first token is
  // token tileOffset of its sequence's.
  Value firstQueryPos;
  if (promptTile)
    firstQueryPos = kb.add(kb.sub(length, q.sequenceTokens), q.tileOffset);
  else
    firstQueryPos = kb.sub(length, q.tokenCount);
  k.firstQueryPos = firstQueryPos;
  if (window > 0) {
    Value windowStart = kb.sub(firstQueryPos, kb.i32(int32_t(window - 1)));
    begin = kb.maxs(begin, windowStart);
  }
  Value first = kb.maxs(begin, splitBegin);
  Value last = kb.mins(length, kb.add(splitBegin, perSplit));
  if (promptTile) {
    // A prompt tile sees keys up to its last token (none without tokens).
    Value pastLast = kb.add(firstQueryPos, q.tokenCount);
    k.lastQueryPos = kb.sub(pastLast, kb.i32(1));
    last = kb.mins(last, kb.add(k.lastQueryPos, kb.i32(1)));
    Value hasTokens =
        kb.cmpi(arith::CmpIPredicate::sgt, q.tokenCount, kb.i32(0));
    last = kb.select(hasTokens, last, kb.i32(0));
  }
  k.first = first;
  k.last = last;
  k.firstTile = kb.divs(first, tileKeysI32);
  Value lastTile =
      kb.divs(kb.add(last, kb.i32(int32_t(tileKeys - 1))), tileKeysI32);
  Value nonEmpty = kb.cmpi(arith::CmpIPredicate::sgt, last, first);
  k.tileCount = kb.select(nonEmpty, kb.sub(lastTile, k.firstTile), kb.i32(0));
  return k;
}

void pattn::stageQueryTile(KernelBuilder &kb, const QueryTile &tile,
                           const BlockQueries &queries,
                           function_ref<Value(Value)> channelOf) {
  Type queryElement = cast<MemRefType>(tile.query.getType()).getElementType();
  int64_t items = tile.rows * tile.headDim;
  int64_t perStep = tile.threads * kQueryLoadsInFlight;
  // A row past the block's tokens loads token 0 (a launch has one) and
  // stores zero; an item past the tile (when the tile is not a whole number
  // of steps) loads the last item and stores nothing.
  bool partial = items % perStep != 0;
  Value lastItem = kb.index(items - 1);
  Value zero =
      arith::ConstantOp::create(kb.b, kb.loc, kb.b.getZeroAttr(tile.element));
  Value firstHead = kb.mul(tile.kvHead, kb.index(tile.group));
  Value end = kb.index(items);
  Value step = kb.index(perStep);
  kb.forLoop(
      tile.tid, end, step, {},
      [&](Value first, ValueRange) -> SmallVector<Value> {
        struct Item {
          Value inTile, row, column, live, loaded;
        };
        SmallVector<Item> batch;
        // Every load of the step first, so that they are in flight at once.
        for (int64_t j = 0; j < kQueryLoadsInFlight; ++j) {
          Item it;
          Value item = kb.add(first, kb.index(j * tile.threads));
          if (partial) {
            it.inTile = kb.cmpi(arith::CmpIPredicate::sle, item, lastItem);
            item = kb.mins(item, lastItem);
          }
          it.row = kb.divs(item, kb.index(tile.headDim));
          it.column = kb.rems(item, kb.index(tile.headDim));
          Value channel = channelOf(it.column);
          Value token = kb.divs(it.row, kb.index(tile.group));
          Value within = kb.rems(it.row, kb.index(tile.group));
          Value head = kb.add(firstHead, within);
          it.live = kb.cmpi(arith::CmpIPredicate::slt, kb.toI32(token),
                            queries.tokenCount);
          Value tokenIndex = kb.add(kb.toIndex(queries.tokenBegin), token);
          Value safeToken = kb.select(it.live, tokenIndex, kb.index(0));
          it.loaded = kb.load(tile.query, {safeToken, head, channel});
          batch.push_back(it);
        }
        for (Item &it : batch) {
          Value x = it.loaded;
          if (queryElement != tile.element) {
            Value wide = kb.toF32(x);
            x = arith::TruncFOp::create(kb.b, kb.loc, tile.element, wide);
          }
          x = kb.select(it.live, x, zero);
          if (!tile.element.isF16())
            x = arith::BitcastOp::create(kb.b, kb.loc, kb.b.getF16Type(), x);
          SmallVector<Value> at{it.row, it.column};
          if (tile.coreMatrices) {
            Value eight = kb.index(8);
            Value chunk = kb.divs(it.column, eight);
            Value rowGroup = kb.divs(it.row, eight);
            Value rowInGroup = kb.rems(it.row, eight);
            Value inChunk = kb.rems(it.column, eight);
            at = {chunk, rowGroup, rowInGroup, inChunk};
          }
          if (it.inTile)
            kb.ifThen(it.inTile, [&] { kb.store(x, tile.tile, at); });
          else
            kb.store(x, tile.tile, at);
        }
        return {};
      });
}

Value pattn::foldedRowScale(KernelBuilder &kb, Value queryExponents, Value row,
                            int64_t group, Value kvHead,
                            const BlockQueries &queries, Value softmaxScale) {
  Value token = kb.divs(row, kb.index(group));
  Value firstHead = kb.mul(kvHead, kb.index(group));
  Value head = kb.add(firstHead, kb.rems(row, kb.index(group)));
  Value live =
      kb.cmpi(arith::CmpIPredicate::slt, kb.toI32(token), queries.tokenCount);
  Value exponent = kb.ifElse(
      live, {kb.b.getI32Type()},
      [&]() -> SmallVector<Value> {
        Value tokenIndex = kb.add(kb.toIndex(queries.tokenBegin), token);
        return {kb.load(queryExponents, {tokenIndex, head})};
      },
      [&]() -> SmallVector<Value> { return {kb.i32(0)}; })[0];
  return kb.ldexpSaturating(softmaxScale, exponent);
}
