//===- XqaMlaCommon.cpp - What the tensor-core MLA kernels share ----------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the steps both tensor-core MLA decode kernels take
// (XqaMlaCommon.h): the kernel's frame, the page lookup and the raw tile
// copies, the online softmax and the value-block exponents of P V, the row
// statistics; and buildXqaMlaDecodeKernels, which picks the kernel.
//
//===----------------------------------------------------------------------===//

#include "Kernels/Decode/XqaMlaCommon.h"
#include "Kernels/Codecs/Codecs.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace pattn;
using namespace pattn::xqa_mla;

namespace {

/// The softmax keeps a row's maximum until a tile's logits pass it by more
/// than this (base 2), so P = 2^(x - max) <= 2^4 and the accumulators are
/// rescaled only when a maximum jumps.
constexpr int32_t kMaxSlack = 4;
/// P V's A operand is P times each key's value scale times 2^e, with one
/// exponent e per value block of a warp: set where the tile's largest scale
/// times 2^e lands in [2^5, 2^6), and kept while it stays within 2^5 of
/// that, in [2^0, 2^11) (so A < 2^15 with P <= 2^4, and the dominant keys'
/// A, P >= 1, keep every bit down to scales 2^-14 of the tile's largest).
constexpr int32_t kValueScaleTarget = 5;
constexpr int32_t kValueExponentWindow = 5;
/// Where the keys share one value scale (a tensor scale, or none), A is
/// P 2^10: below 2^15, and exact in f16 down to P = 2^-24.
constexpr int kSharedScaleExponent = 10;

} // namespace

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

Value XqaMlaBuilder::view(int64_t offset, ArrayRef<int64_t> shape,
                          Type element) {
  Value at = index(offset);
  return sharedView(kb, smem, at, shape, element);
}

Value XqaMlaBuilder::ceilDiv(Value a, int64_t b) {
  Value rounded = kb.add(a, kb.i32(int32_t(b - 1)));
  return kb.divs(rounded, kb.i32(int32_t(b)));
}

Value XqaMlaBuilder::quadRowMax(ArrayRef<Value> values, int64_t h, Value init) {
  Value largest = init;
  for (int64_t nt = 0; nt < int64_t(values.size()) / 4; ++nt)
    for (int64_t e = 2 * h; e < 2 * h + 2; ++e)
      largest = kb.fmax(largest, values[nt * 4 + e]);
  return f16Mma.quadMax(largest);
}

Value XqaMlaBuilder::loadPair(Value memref, Value at, Type element) {
  return vector::LoadOp::create(builder, kb.loc, VectorType::get({2}, element),
                                memref, ValueRange{at},
                                /*nontemporal=*/false, llvm::MaybeAlign(8))
      .getResult();
}

Value XqaMlaBuilder::rawWord(Value threadWords, int64_t constant) {
  Value at = kb.add(rawBaseWords, threadWords);
  return kb.load(words, {kb.add(at, index(constant))});
}

Value XqaMlaBuilder::rawF32(Value threadWords, int64_t constant) {
  return kb.bitcast(builder.getF32Type(), rawWord(threadWords, constant));
}

Value XqaMlaBuilder::rawByte(Value threadBytes, int64_t constant) {
  Value at = kb.add(rawBaseBytes, threadBytes);
  return kb.loadByte(bytes, {kb.add(at, index(constant))});
}

//===----------------------------------------------------------------------===//
// The kernel's frame
//===----------------------------------------------------------------------===//

void XqaMlaBuilder::describeRecord() {
  kb.hardwareFp8 = kernels.hardwareFp8;
  kb.hardwareFp4 = kernels.hardwareFp4;
  // e2m1 pairs stay codes x 2^-14; the sums take the 2^14 (in S, on the
  // logits; in P V, in the inverse of P's normalization).
  kb.fp4Subnormal = true;
  recordType = cache.type.getRecord();
  record = describeMlaRecord(recordType);
  LaneAttr latentAttr = recordType.getLane("latent");
  LaneAttr ropeAttr = recordType.getLane("rope");
  if (latentAttr.isScaled())
    latentScaleLane = recordType.getLane(latentAttr.getScaleLane());
  if (ropeAttr.isScaled())
    ropeScaleLane = recordType.getLane(ropeAttr.getScaleLane());
  if (record.latentFormat == MlaLatentFormat::E2M1GroupScaled &&
      recordType.getMode() == ScaleGranularity::token)
    tokenLane = recordType.getLane("token_scale");
  latent = record.latent;
  keyDim = latent + record.rope;
  latentLane = describeLane(latentAttr, 0);
  ropeLane = describeLane(ropeAttr, latent);
  recordBytes = record.recordBytes;
  numHeads = static_cast<int64_t>(op.getNumHeads());
  headGroups = numHeads / plan.getHeadsPerBlock();
  tileKeys = plan.getKeysPerTile();
  blockSize = cache.type.getBlockSize();
  latentGroup = record.latentFormat == MlaLatentFormat::E4M3BlockScaled
                    ? record.latentScaleGroup
                    : latent;
}

OperandLane XqaMlaBuilder::describeLane(LaneAttr lane, int64_t firstColumn) {
  OperandLane result;
  result.lane = lane;
  result.firstColumn = firstColumn;
  result.count = lane.getCount();
  Type type = lane.getElementType();
  if (type.isBF16())
    result.encoding = Encoding::bf16;
  else if (isa<Float4E2M1FNType>(type))
    result.encoding = Encoding::nvfp4;
  else
    result.encoding = Encoding::f8e4m3;
  result.bf16 = result.encoding == Encoding::bf16;
  result.wordChannels = elementsPerWord(result.encoding);
  result.pairs = wordPairOrder(result.encoding, kb.hardwareFp8, kb.hardwareFp4);
  return result;
}

void XqaMlaBuilder::divideLatent(int64_t ownerChannels,
                                 int64_t ownerBlockChannels) {
  warpChannels = ownerChannels;
  blockChannels = ownerBlockChannels;
  warpTiles = warpChannels / 8;
  valueBlocks = warpChannels / blockChannels;
}

gpu::GPUFuncOp XqaMlaBuilder::build(SmallVectorImpl<Value> &hostOperands) {
  describeRecord();
  layOut();
  gpu::GPUFuncOp kernel = createKernel(kernelName(), hostOperands);
  createViews(logitSlots());
  BlockPosition block = locateBlock();
  Value nonEmpty = startBlock(block);
  loadQueryRows(block.token, block.firstHead);
  loadScales();
  SmallVector<Value> init = initialState();
  Value firstRow =
      kb.add(kb.mul(block.token, index(numHeads)), block.firstHead);
  SmallVector<Value> state = runTiles(init, nonEmpty);
  writeRows(state, block.split, firstRow);
  gpu::ReturnOp::create(builder, kb.loc);
  return kernel;
}

gpu::GPUFuncOp
XqaMlaBuilder::createKernel(StringRef name,
                            SmallVectorImpl<Value> &hostOperands) {
  Location loc = op.getLoc();
  // Kernel arguments: the op's buffers, the records, then the workspace.
  DecodeSignature signature;
  signature.addSequences(op.getQuery(), op.getBlockTable(), op.getSeqLens(),
                         op.getQueryStart());
  signature.add(DecodeArg::OuterScale, op.getOuterScale());
  signature.add(DecodeArg::Records, cache.storage);
  signature.addWorkspace(op.getContext(), latent);
  hostOperands.assign(signature.hostOperands().begin(),
                      signature.hostOperands().end());

  gpu::GPUFuncOp kernel =
      kernels.create(builder, loc, name, signature.types(), {});
  setLaunchBounds(kernel, blockThreads,
                  plan.getResidentBlocksOn(kernels.chips));
  signature.bind(kernel);
  DecodeSignature::SequenceArgs sequence = signature.sequenceArgs();
  query = sequence.query;
  blockTable = sequence.blockTable;
  seqLens = sequence.seqLens;
  queryStart = sequence.queryStart;
  partialOut = sequence.partialOut;
  partialStats = sequence.partialStats;
  outerScale = signature.arg(DecodeArg::OuterScale);
  storage = signature.arg(DecodeArg::Records);
  return kernel;
}

void XqaMlaBuilder::createViews(int64_t logitSlots) {
  Location loc = op.getLoc();
  smem = dynamicSharedBytes(builder, loc);
  Type f16 = builder.getF16Type(), f32 = builder.getF32Type(),
       i32 = builder.getI32Type();
  int64_t rows = plan.getHeadsPerBlock();
  queryTile = view(layout.query, {rows, layout.rowStride}, f16);
  queryBf16 =
      view(layout.query, {rows, layout.rowStride}, builder.getBF16Type());
  queryInverse = view(layout.queryScales, {rows}, f32);
  logits = view(layout.logits, {logitSlots * rows * layout.logitStride}, f32);
  pages = view(layout.pages, {3 * tileKeys}, i32);
  words = view(0, {layout.total / 4}, i32);
  bytes = view(0, {layout.total}, builder.getIntegerType(8));
}

void XqaMlaBuilder::storeLogitPair(Value at, ArrayRef<Value> pair) {
  Value both = vector::FromElementsOp::create(
      builder, kb.loc, VectorType::get({2}, builder.getF32Type()), pair);
  vector::StoreOp::create(builder, kb.loc, both, logits, ValueRange{at},
                          /*nontemporal=*/false, llvm::MaybeAlign(8));
}

SmallVector<Value> XqaMlaBuilder::forEachTile(
    ArrayRef<Value> init,
    function_ref<void(Value, SmallVectorImpl<Value> &)> body) {
  Value loopBegin = index(0), loopStep = index(1);
  Value loopEnd = kb.toIndex(tileCount);
  return kb.forLoop(
      loopBegin, loopEnd, loopStep, init,
      [&](Value iteration, ValueRange carried) -> SmallVector<Value> {
        SmallVector<Value> s(carried.begin(), carried.end());
        Value i = kb.toI32(iteration);
        body(i, s);
        return s;
      });
}

XqaMlaBuilder::BlockPosition XqaMlaBuilder::locateBlock() {
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
  Value firstHead = kb.mul(headGroup, index(plan.getHeadsPerBlock()));
  return {split, token, firstHead};
}

Value XqaMlaBuilder::cutSplit(const BlockPosition &block) {
  // The token's keys, cut to this split: splits of ceil(max keys /
  // gridDim.x) keys rounded up to whole tiles (host-known sizes only).
  auto [seq, queryTokens, position] =
      findQuerySequence(kb, block.token, queryStart, blockTable);
  sequence = seq;
  Value length = kb.load(seqLens, {sequence});
  Value queryPos = kb.add(kb.sub(length, queryTokens), position);
  Value end = kb.mins(length, kb.add(queryPos, kb.i32(1)));
  Value perSplit = keysPerGridSplit(kb, blockTable, blockSize);
  perSplit = kb.mul(ceilDiv(perSplit, tileKeys), kb.i32(int32_t(tileKeys)));
  first = kb.mul(kb.toI32(block.split), perSplit);
  last = kb.mins(end, kb.add(first, perSplit));
  Value nonEmpty = kb.cmpi(arith::CmpIPredicate::sgt, last, first);
  Value span = kb.sub(last, first);
  Value tiles = ceilDiv(span, tileKeys);
  tileCount = kb.select(nonEmpty, tiles, kb.i32(0));
  return nonEmpty;
}

void XqaMlaBuilder::loadScales() {
  if (outerScale)
    tensorScale = kb.load(outerScale, {index(0)});

  std::optional<APFloat> scale = op.getSoftmaxScale();
  float softmax =
      scale ? scale->convertToFloat() : 1.0f / std::sqrt(float(keyDim));
  // Logits in base 2: every exponential is one ex2.approx.
  softmaxScale = kb.f32(softmax * float(M_LOG2E));
}

SmallVector<Value> XqaMlaBuilder::initialState() {
  SmallVector<Value> init = {negInf, negInf, zero, zero};
  for (int64_t i = 0; i < warpTiles * 4; ++i)
    init.push_back(zero);
  for (int64_t bw = 0; bw < expCount(); ++bw)
    init.push_back(kb.i32(0));
  return init;
}

void XqaMlaBuilder::loadRowInverses() {
  for (int64_t h = 0; h < 2; ++h)
    rowInverse[h] =
        anyF16Query() ? kb.load(queryInverse, {rowOf(h)}) : kb.f32(1.0f);
}

//===----------------------------------------------------------------------===//
// The tile's raw records
//===----------------------------------------------------------------------===//

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

void XqaMlaBuilder::issueTile(Value tileIndex, Value rawSlot, Value pageSlot) {
  // Splits start on whole tiles, so where a page holds whole tiles
  // (block_size >= the tile's keys, both powers of two) a tile's keys are
  // consecutive records of one page. When all of them are live (the tile
  // ends inside the split, the page is mapped) the tile is one contiguous
  // run of bytes: every chunk's source is the tile's start plus a per-
  // thread and a compile-time offset, with no page entry to read per
  // chunk. Other tiles (a split's last, an unmapped page) look each key's
  // page up and zero-fill dead keys.
  if (blockSize < tileKeys)
    return issueTileCopies(tileIndex, rawSlot, pageSlot, /*wholePage=*/{});
  Value tileStart = kb.add(first, kb.mul(tileIndex, kb.i32(int32_t(tileKeys))));
  Value tileEnd = kb.add(tileStart, kb.i32(int32_t(tileKeys)));
  Value isWhole = kb.cmpi(arith::CmpIPredicate::sle, tileEnd, last);
  Value page = kb.load(pages, {kb.mul(pageSlot, index(tileKeys))});
  Value isMapped = kb.cmpi(arith::CmpIPredicate::sge, page, kb.i32(0));
  kb.ifElse(
      kb.land(isWhole, isMapped), TypeRange{},
      [&]() -> SmallVector<Value> {
        issueTileCopies(tileIndex, rawSlot, pageSlot, page);
        return {};
      },
      [&]() -> SmallVector<Value> {
        issueTileCopies(tileIndex, rawSlot, pageSlot, /*wholePage=*/{});
        return {};
      });
}

void XqaMlaBuilder::issueTileCopies(Value tileIndex, Value rawSlot,
                                    Value pageSlot, Value wholePage) {
  // 16 bytes per cp.async; consecutive threads copy consecutive chunks of
  // a record (coalesced). With `wholePage` (the page of every key of the
  // tile, all live) the sources are one run of bytes in a flat view of the
  // cache: the tile's first byte + a per-thread part + a compile-time part
  // per pass, which the copy's immediate offset absorbs. Without it, each
  // key's page comes from the page slot and dead keys are zero-filled.
  int64_t chunksPerRecord = recordBytes / 16;
  Value tileStart = kb.add(first, kb.mul(tileIndex, kb.i32(int32_t(tileKeys))));
  Value rawBytes = view(0, {layout.total}, builder.getIntegerType(8));
  Value slotBase = kb.mul(rawSlot, index(tileKeys * layout.rawStride));
  slotBase = kb.add(slotBase, index(layout.raw));
  // The key's position in its page: block_size is a power of two.
  Value pageMask = kb.i32(int32_t(blockSize - 1));
  Value flatCache, tileBytes;
  if (wholePage) {
    // The cache's pages are contiguous (identity layout): one i8 row.
    Value pageCount = memref::DimOp::create(builder, kb.loc, storage, 0);
    Value flatBytes = kb.mul(pageCount, index(blockSize * recordBytes));
    auto flatType =
        MemRefType::get({ShapedType::kDynamic}, builder.getIntegerType(8));
    flatCache = memref::ReinterpretCastOp::create(
        builder, kb.loc, flatType, storage,
        OpFoldResult(builder.getIndexAttr(0)),
        ArrayRef<OpFoldResult>{flatBytes},
        ArrayRef<OpFoldResult>{builder.getIndexAttr(1)});
    Value pageIndex = kb.toIndex(wholePage);
    Value tileKey = kb.mul(pageIndex, index(blockSize));
    tileKey = kb.add(tileKey, kb.toIndex(kb.andi(tileStart, pageMask)));
    tileBytes = kb.mul(tileKey, index(recordBytes));
  }
  // The copy of `byte` of key `key` (= a per-thread key + `keyConstant`) to
  // `dst`; `threadSource` is the per-thread part of the flat source.
  auto copy = [&](Value key, Value byte, Value dst, Value threadSource,
                  int64_t keyConstant) {
    if (wholePage) {
      Value source = kb.add(threadSource, index(keyConstant * recordBytes));
      nvgpu::DeviceAsyncCopyOp::create(
          builder, kb.loc, rawBytes, ValueRange{dst}, flatCache,
          ValueRange{source}, builder.getIndexAttr(16), Value(),
          builder.getUnitAttr());
      return;
    }
    Value at = kb.add(kb.mul(pageSlot, index(tileKeys)), key);
    Value page = kb.load(pages, {at});
    Value isLive = kb.cmpi(arith::CmpIPredicate::sge, page, kb.i32(0));
    Value keyPos = kb.add(tileStart, kb.toI32(key));
    Value offset = kb.andi(keyPos, pageMask);
    Value safePage = kb.toIndex(kb.maxs(page, kb.i32(0)));
    Value full = index(16);
    Value copied = kb.select(isLive, full, index(0));
    nvgpu::DeviceAsyncCopyOp::create(
        builder, kb.loc, rawBytes, ValueRange{dst}, storage,
        ValueRange{safePage, kb.toIndex(offset), byte},
        builder.getIndexAttr(16), copied, builder.getUnitAttr());
  };
  if (chunksPerRecord <= blockThreads) {
    // Thread t copies chunk t % C of keys t / C + K j (K = whole records
    // per pass): its chunk and first destination are fixed, the passes
    // differ by compile-time strides.
    int64_t keysPerPass = blockThreads / chunksPerRecord;
    Value byte = kb.rems(tid, index(chunksPerRecord));
    byte = kb.mul(byte, index(16));
    Value firstKey = kb.divs(tid, index(chunksPerRecord));
    Value threadDst = kb.add(kb.mul(firstKey, index(layout.rawStride)), byte);
    threadDst = kb.add(slotBase, threadDst);
    Value threadSource;
    if (wholePage) {
      threadSource = kb.add(kb.mul(firstKey, index(recordBytes)), byte);
      threadSource = kb.add(tileBytes, threadSource);
    }
    Value inPass = kb.cmpi(arith::CmpIPredicate::slt, tid,
                           index(keysPerPass * chunksPerRecord));
    for (int64_t pass = 0; pass * keysPerPass < tileKeys; ++pass) {
      Value key = kb.add(firstKey, index(pass * keysPerPass));
      Value dst =
          kb.add(threadDst, index(pass * keysPerPass * layout.rawStride));
      Value active = inPass;
      if ((pass + 1) * keysPerPass > tileKeys)
        active = kb.land(
            active, kb.cmpi(arith::CmpIPredicate::slt, key, index(tileKeys)));
      auto copyPass = [&] {
        copy(key, byte, dst, threadSource, pass * keysPerPass);
      };
      if (keysPerPass * chunksPerRecord == blockThreads &&
          (pass + 1) * keysPerPass <= tileKeys)
        copyPass();
      else
        kb.ifThen(active, copyPass);
    }
    return;
  }
  // Records of more chunks than threads: chunk t + T q of every key.
  for (int64_t q = 0; q * blockThreads < chunksPerRecord; ++q) {
    Value chunk = kb.add(tid, index(q * blockThreads));
    Value byte = kb.mul(chunk, index(16));
    Value inRecord =
        kb.cmpi(arith::CmpIPredicate::slt, chunk, index(chunksPerRecord));
    kb.ifThen(inRecord, [&] {
      Value threadSource = wholePage ? kb.add(tileBytes, byte) : Value();
      for (int64_t key = 0; key < tileKeys; ++key) {
        Value dst = kb.add(slotBase, byte);
        dst = kb.add(dst, index(key * layout.rawStride));
        copy(index(key), byte, dst, threadSource, key);
      }
    });
  }
}

void XqaMlaBuilder::useRawSlot(Value slot) {
  rawBaseBytes = kb.mul(slot, index(tileKeys * layout.rawStride));
  rawBaseBytes = kb.add(rawBaseBytes, index(layout.raw));
  rawBaseWords = kb.mul(slot, index(tileKeys * strideWords()));
  rawBaseWords = kb.add(rawBaseWords, index(layout.raw / 4));
}

Value XqaMlaBuilder::latentScale(Value threadWords, int64_t constant) {
  switch (record.latentFormat) {
  case MlaLatentFormat::E4M3BlockScaled:
    return rawF32(threadWords, constant + latentScaleLane.getOffset() / 4);
  case MlaLatentFormat::E2M1GroupScaled:
    return tokenLane ? rawF32(threadWords, constant + tokenLane.getOffset() / 4)
                     : tensorScale;
  default:
    return Value();
  }
}

Value XqaMlaBuilder::scalePair(Value low, Value high) {
  // Elements 0 and 2 of a word are the pair decodeWordHalves returns first.
  Value word = kb.ori(low, kb.shl(high, kb.i32(16)));
  return decodeWordHalves(kb, Encoding::f8e4m3, word)[0];
}

std::pair<Value, Value> XqaMlaBuilder::normalization(Value magnitude) {
  // magnitude = 1.f x 2^(E - 127): the factor's exponent field is 268 - E
  // (at most 253, so that the inverse 2^(254 - F - 127) stays normal); an
  // inf or NaN maximum gives 13, and stays inf or NaN.
  Value bits = kb.bitcast(builder.getI32Type(), magnitude);
  Value exponent = kb.shru(bits, kb.i32(23));
  Value field = kb.sub(kb.i32(268), exponent);
  field = kb.mins(field, kb.i32(253));
  Value factor = kb.bitcast(builder.getF32Type(), kb.shl(field, kb.i32(23)));
  Value inverseField = kb.sub(kb.i32(254), field);
  Value inverse =
      kb.bitcast(builder.getF32Type(), kb.shl(inverseField, kb.i32(23)));
  return {factor, inverse};
}

//===----------------------------------------------------------------------===//
// The tile's softmax and the value scales of P V
//===----------------------------------------------------------------------===//

XqaMlaBuilder::TileWeights XqaMlaBuilder::softmaxTile(SmallVectorImpl<Value> &s,
                                                      Value valueOwner) {
  SmallVector<Value> x = tileLogits();
  TileSoftmax softmax = onlineSoftmax(x, s);
  // The value blocks of P V start at the owner's first channel.
  Value channelBase = kb.mul(valueOwner, index(warpChannels));
  Value twoT = kb.mul(threadInGroup, index(2));
  ValueScales scales = tileValueScales(channelBase, twoT, s);
  rescaleAccumulators(softmax, scales, s);
  return {softmax.p, scales.keyScales, twoT};
}

SmallVector<Value> XqaMlaBuilder::tileLogits() {
  int64_t keyTiles = tileKeys / 8;
  SmallVector<Value> x(keyTiles * 4);
  auto keyOf = [&](int64_t nt, int64_t e) {
    Value key = kb.mul(threadInGroup, index(2));
    return kb.add(key, index(8 * nt + e % 2));
  };
  for (int64_t nt = 0; nt < keyTiles; ++nt)
    for (int64_t h = 0; h < 2; ++h) {
      Value row = rowOf(h);
      Value rowStart = kb.mul(row, index(layout.logitStride));
      Value key = keyOf(nt, 0);
      Value at = kb.add(rowStart, key);
      Value pair = loadPair(logits, at, builder.getF32Type());
      for (int64_t k = 0; k < 2; ++k)
        x[nt * 4 + 2 * h + k] =
            vector::ExtractOp::create(builder, kb.loc, pair, k);
      finishLogits(at, key, MutableArrayRef<Value>(x).slice(nt * 4 + 2 * h, 2));
    }
  return x;
}

XqaMlaBuilder::TileSoftmax
XqaMlaBuilder::onlineSoftmax(ArrayRef<Value> x, SmallVectorImpl<Value> &s) {
  // The online softmax (as the paged XQA kernel: a finite maximum, so that
  // ex2.approx(-inf) = +0 covers masked keys and a row's first maximum).
  // A row's maximum moves only when some row's logits pass its maximum by
  // more than kMaxSlack; every row then takes its new maximum (a warp-
  // uniform choice: every warp runs the same softmax on the same logits).
  int64_t keyTiles = tileKeys / 8;
  SmallVector<Value> p(keyTiles * 4), alphas(2), kept(2), raised(2);
  Value rescale = kb.boolean(false);
  for (int64_t h = 0; h < 2; ++h) {
    Value rowMax = quadRowMax(x, h, negInf);
    Value oldMax = s[maxAt(h)];
    kept[h] = oldMax;
    raised[h] = kb.fmax(oldMax, rowMax);
    Value limit = kb.fadd(oldMax, kb.f32(float(kMaxSlack)));
    rescale =
        kb.lor(rescale, kb.cmpf(arith::CmpFPredicate::OGT, raised[h], limit));
  }
  Value anyRescale =
      NVVM::VoteSyncOp::create(builder, kb.loc, builder.getI1Type(), kb.i32(-1),
                               rescale, NVVM::VoteSyncKind::any);
  for (int64_t h = 0; h < 2; ++h) {
    Value oldMax = kept[h];
    Value newMax = kb.select(anyRescale, raised[h], oldMax);
    SmallVector<Value> row;
    for (int64_t nt = 0; nt < keyTiles; ++nt)
      for (int64_t e = 2 * h; e < 2 * h + 2; ++e)
        row.push_back(x[nt * 4 + e]);
    MmaBuilder::SoftmaxRow update =
        f16Mma.softmaxRow(oldMax, newMax, s[sumAt(h)], row, negInf, zero);
    for (int64_t nt = 0; nt < keyTiles; ++nt)
      for (int64_t e = 2 * h; e < 2 * h + 2; ++e)
        p[nt * 4 + e] = update.weights[nt * 2 + e - 2 * h];
    Value alpha = update.alpha, sum = update.sum;
    alphas[h] = alpha;
    s[maxAt(h)] = newMax;
    s[sumAt(h)] = sum;
  }
  return {p, alphas, anyRescale};
}

XqaMlaBuilder::ValueScales XqaMlaBuilder::tileValueScales(Value channelBase,
                                                          Value twoT,
                                                          ArrayRef<Value> s) {
  // Each block's value scales of this tile's keys 8 nt + 2t + e, their
  // largest over the tile (every quad holds all 32 keys: warp-uniform),
  // and whether the block's exponent leaves its window.
  int64_t keyTiles = tileKeys / 8;
  int64_t stride = strideWords();
  ValueScales scales;
  scales.keyScales.resize(valueBlocks);
  scales.targets.resize(valueBlocks);
  scales.leaves.resize(valueBlocks);
  scales.anyLeaves = kb.boolean(false);
  if (!perKeyValueScale())
    return scales;
  for (int64_t bw = 0; bw < valueBlocks; ++bw) {
    Value firstChannel = kb.add(channelBase, index(bw * blockChannels));
    Value block = kb.divs(firstChannel, index(latentGroup));
    Value scaleWords = kb.add(kb.mul(twoT, index(stride)), block);
    Value largest = zero;
    for (int64_t nt = 0; nt < keyTiles; ++nt)
      for (int64_t e = 0; e < 2; ++e) {
        Value scale = latentScale(scaleWords, (8 * nt + e) * stride);
        scales.keyScales[bw].push_back(scale);
        largest = kb.fmax(largest, scale);
      }
    largest = kb.fmax(largest, f16Mma.shuffleXor(largest, 1));
    largest = kb.fmax(largest, f16Mma.shuffleXor(largest, 2));
    scales.targets[bw] = valueExponent(largest);
    Value distance = kb.sub(s[expAt(bw)], scales.targets[bw]);
    Value negated = kb.sub(kb.i32(0), distance);
    distance = kb.maxs(distance, negated);
    scales.leaves[bw] = kb.cmpi(arith::CmpIPredicate::sgt, distance,
                                kb.i32(kValueExponentWindow));
    scales.anyLeaves = kb.lor(scales.anyLeaves, scales.leaves[bw]);
  }
  return scales;
}

void XqaMlaBuilder::rescaleAccumulators(const TileSoftmax &softmax,
                                        const ValueScales &scales,
                                        SmallVectorImpl<Value> &s) {
  // The accumulators decay when the maxima moved, and move to a block's
  // new exponent when its scales left the window (both uniform across the
  // warp, and rare once a split's first tiles are past).
  Value update = kb.lor(softmax.anyRescale, scales.anyLeaves);
  int64_t accCount = warpTiles * 4;
  SmallVector<Type> stateTypes(accCount, builder.getF32Type());
  stateTypes.append(expCount(), builder.getI32Type());
  auto current = [&]() {
    return SmallVector<Value>(s.begin() + accAt(0, 0), s.end());
  };
  SmallVector<Value> updated = kb.ifElse(
      update, stateTypes,
      [&]() -> SmallVector<Value> {
        SmallVector<Value> state = current();
        if (perKeyValueScale())
          state = kb.ifElse(
              scales.anyLeaves, stateTypes,
              [&]() {
                return moveExponents(state, scales.targets, scales.leaves);
              },
              [&]() { return state; });
        for (int64_t nt = 0; nt < warpTiles; ++nt)
          for (int64_t e = 0; e < 4; ++e)
            state[nt * 4 + e] =
                kb.fmul(state[nt * 4 + e], softmax.alphas[e / 2]);
        return state;
      },
      current);
  std::copy(updated.begin(), updated.end(), s.begin() + accAt(0, 0));
}

SmallVector<Value> XqaMlaBuilder::valueOperand(ArrayRef<Value> p,
                                               ArrayRef<Value> keyScales,
                                               ArrayRef<Value> s, int64_t bw) {
  // A = P times each key's value scale times the block's 2^exponent
  // (P <= 2^4, so A stays below 2^15), or P 2^10 where the keys share one
  // scale (applied to the partial results instead).
  SmallVector<Value> scaled(p);
  int64_t keyTiles = tileKeys / 8;
  if (perKeyValueScale()) {
    Value factor = kb.powerOfTwo(s[expAt(bw)]);
    for (int64_t nt = 0; nt < keyTiles; ++nt)
      for (int64_t e = 0; e < 2; ++e) {
        Value scale = kb.fmul(keyScales[nt * 2 + e], factor);
        scaled[nt * 4 + e] = kb.fmul(p[nt * 4 + e], scale);
        scaled[nt * 4 + e + 2] = kb.fmul(p[nt * 4 + e + 2], scale);
      }
  } else {
    Value factor = kb.f32(std::ldexp(1.0f, kSharedScaleExponent));
    for (Value &x : scaled)
      x = kb.fmul(x, factor);
  }
  return scaled;
}

Value XqaMlaBuilder::valueExponent(Value largest) {
  // largest = 1.f x 2^(E - 127) (E its exponent field): 2^(127 + T - E)
  // brings it into [2^T, 2^(T + 1)), T = kValueScaleTarget; clamped so that
  // 2^e stays a normal fp32.
  Value bits = kb.bitcast(builder.getI32Type(), largest);
  Value field = kb.shru(bits, kb.i32(23));
  Value exponent = kb.sub(kb.i32(127 + kValueScaleTarget), field);
  exponent = kb.mins(exponent, kb.i32(126));
  return kb.maxs(exponent, kb.i32(-126));
}

SmallVector<Value> XqaMlaBuilder::moveExponents(ArrayRef<Value> state,
                                                ArrayRef<Value> targets,
                                                ArrayRef<Value> leaves) {
  // A raised exponent is held where the largest accumulator would pass
  // 2^119 (the tile's products are then below 2^-90 of it); a lowered
  // one only shrinks the accumulators. The move is two exact powers of
  // two (each in [2^-126, 2^126]).
  SmallVector<Value> result(state);
  int64_t accCount = warpTiles * 4;
  Value largest = zero;
  for (int64_t i = 0; i < accCount; ++i)
    largest = kb.fmax(largest, kb.fabs(state[i]));
  for (int32_t mask = 16; mask >= 1; mask /= 2)
    largest = kb.fmax(largest, f16Mma.shuffleXor(largest, mask));
  Value largestBits = kb.bitcast(builder.getI32Type(), largest);
  Value largestField = kb.shru(largestBits, kb.i32(23));
  Value room = kb.sub(kb.i32(127 + 119), largestField);
  int64_t tilesPerBlock = warpTiles / valueBlocks;
  for (int64_t bw = 0; bw < valueBlocks; ++bw) {
    Value old = state[accCount + bw];
    Value raised = kb.mins(targets[bw], kb.add(old, room));
    Value rises = kb.cmpi(arith::CmpIPredicate::sgt, targets[bw], old);
    Value next = kb.select(rises, raised, targets[bw]);
    next = kb.select(leaves[bw], next, old);
    Value move = kb.sub(next, old);
    Value first = kb.mins(move, kb.i32(126));
    first = kb.maxs(first, kb.i32(-126));
    Value second = kb.sub(move, first);
    Value firstFactor = kb.powerOfTwo(first);
    Value secondFactor = kb.powerOfTwo(second);
    for (int64_t i = bw * tilesPerBlock * 4; i < (bw + 1) * tilesPerBlock * 4;
         ++i)
      result[i] = kb.fmul(kb.fmul(state[i], firstFactor), secondFactor);
    result[accCount + bw] = next;
  }
  return result;
}

//===----------------------------------------------------------------------===//
// The partial results
//===----------------------------------------------------------------------===//

SmallVector<Value> XqaMlaBuilder::undoFactors(ArrayRef<Value> s, int64_t bw) {
  // In order: the constant part (the e2m1 bit trick's 2^14 in P V's B
  // operand, P 2^10 for shared scales), then 2^-e, then a tensor scale
  // (so that no factor underflows what a later one would restore).
  SmallVector<Value> factors;
  float constant =
      perKeyValueScale() ? 1.0f : std::ldexp(1.0f, -kSharedScaleExponent);
  if (latentLane.encoding == Encoding::nvfp4)
    constant *= kFp4SubnormalScale;
  if (constant != 1.0f)
    factors.push_back(kb.f32(constant));
  if (perKeyValueScale()) {
    Value negated = kb.sub(kb.i32(0), s[expAt(bw)]);
    factors.push_back(kb.powerOfTwo(negated));
  } else if (tensorScale) {
    factors.push_back(tensorScale);
  }
  return factors;
}

void XqaMlaBuilder::writeRowStats(ArrayRef<Value> s, int64_t h, Value split,
                                  Value outRow, Value writes) {
  Value sum = s[sumAt(h)];
  sum = kb.fadd(sum, f16Mma.shuffleXor(sum, 1));
  sum = kb.fadd(sum, f16Mma.shuffleXor(sum, 2));
  kb.ifThen(writes, [&] {
    Value naturalMax = kb.fmul(s[maxAt(h)], kb.f32(float(M_LN2)));
    kb.store(naturalMax, partialStats, {split, outRow, index(0)});
    kb.store(sum, partialStats, {split, outRow, index(1)});
  });
}

//===----------------------------------------------------------------------===//
// The entry point
//===----------------------------------------------------------------------===//

auto ::pattn::buildXqaMlaDecodeKernels(KernelModule &kernels, MlaDecodeOp op,
                                       XqaMlaPlanAttr plan,
                                       const RecordBuffers &cache)
    -> DecodeKernels {
  DecodeKernels result;
  // The plan names its kernel (#pattn.xqa_mla_plan's `kernel`).
  switch (plan.getKernel()) {
  case TensorCoreKernel::mma_sync:
    result.decode = buildXqaMlaMmaSyncKernel(kernels, op, plan, cache,
                                             result.decodeOperands);
    break;
  case TensorCoreKernel::wgmma:
    result.decode =
        buildXqaMlaWgmmaKernel(kernels, op, plan, cache, result.decodeOperands);
    break;
  }
  result.blockThreads = plan.getThreads();
  result.merge = buildMlaMergeKernel(kernels, op, result.mergeOperands);
  result.numHeads = static_cast<int64_t>(op.getNumHeads());
  result.valueDim = cache.type.getRecord().getLane("latent").getCount();
  result.blockSize = cache.type.getBlockSize();
  result.decodeBlocksPerToken = result.numHeads / plan.getHeadsPerBlock();
  result.sharedBytes = plan.getSharedBytes();
  return result;
}
