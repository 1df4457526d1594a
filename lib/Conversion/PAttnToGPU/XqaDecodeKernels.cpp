//===- XqaDecodeKernels.cpp - The tensor-core split-KV decode ------------===//
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
//     -> decode (quantized sides: Codecs.h words -> f16/bf16 tile)
//     -> ldmatrix -> S = Q Kᵀ (mma) -> online softmax in registers
//     -> P (registers, re-packed as the A operand) x ldmatrix.trans(V) (mma)
//
// Warps form `key_warps` groups over a tile's keys times `value_warps`
// groups over the value channels; after the last tile the key groups merge
// through shared memory and the block writes the same partial results as
// the portable kernel, which the shared merge kernel combines.
//
//===----------------------------------------------------------------------===//

#include "Codecs.h"
#include "KernelBuilder.h"
#include "Kernels.h"
#include "pattn/Dialect/PAttn/Transforms/DecodePlan.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <limits>

using namespace mlir;
using namespace mlir::pattn;
using namespace ::pattn;

namespace {

constexpr int64_t kWarpSize = 32;

/// One side (K or V) of the cache as the XQA kernel reads it.
struct XqaSide {
  CacheType type;
  bool raw = false; ///< the mma reads the ring (codes are operand values)
  Value storage, groupScales, tokenScales, scale; ///< kernel arguments
  int64_t rows = 0, rowStride = 0, groupOffset = -1, groupStride = 0,
          tokenOffset = -1, tile = -1, tileStride = 0;
};

class XqaBuilder {
public:
  XqaBuilder(KernelModule &kernels, PagedAttentionOp op, XqaPlanAttr plan,
             const CacheBuffers &key, const CacheBuffers &value)
      : kernels(kernels), op(op), plan(plan), keyBuffers(key),
        valueBuffers(value), builder(op.getContext()), kb(builder, op.getLoc()) {
  }

  gpu::GPUFuncOp build(SmallVectorImpl<Value> &hostOperands);

private:
  KernelModule &kernels;
  PagedAttentionOp op;
  XqaPlanAttr plan;
  const CacheBuffers &keyBuffers, &valueBuffers;
  OpBuilder builder;
  KernelBuilder kb;

  // Static facts.
  bool bf16 = false;
  int64_t headDim = 0, valueDim = 0, kvHeads = 0, group = 0, numHeads = 0;
  int64_t rows = 0, mTiles = 0, tileKeys = 0, stages = 0, keyWarps = 0,
          valueWarps = 0, blockSize = 0;
  XqaSharedLayout layout;
  XqaSide key, value;

  // Kernel values.
  Value smem, queryTile, seq, kvHead, tokenBegin, tokenCount, length, first,
      last, tid, lane, groupId, threadInGroup, keyGroup, valueGroup;
  Value blockTable, pagesRing;
  Value softmaxScale;

  Type operandType() { return bf16 ? builder.getBF16Type() : builder.getF16Type(); }
  Value index(int64_t v) { return kb.index(v); }

  /// A typed view of `bytes` of dynamic shared memory at `offset`.
  Value view(int64_t offset, ArrayRef<int64_t> shape, Type element) {
    auto type = MemRefType::get(
        shape, element, AffineMap(),
        gpu::AddressSpaceAttr::get(builder.getContext(),
                                   gpu::AddressSpace::Workgroup));
    return memref::ViewOp::create(builder, kb.loc, type, smem, index(offset),
                                  ValueRange{});
  }
  /// Storage indices of byte `byte` of a cache row.
  SmallVector<Value> address(const XqaSide &side, Value page, Value offset,
                             Value byte) {
    if (side.type.getLayout() == Layout::hnd)
      return {page, kvHead, offset, byte};
    return {page, offset, kvHead, byte};
  }

  void loadQueryTile(Value query);
  void issueTile(Value tileIndex, Value slot);
  void decodeTile(const XqaSide &side, Value slot);
  /// The mma operand tile of `side` in `slot`: a [keys][row elements] view.
  Value operandTile(const XqaSide &side, Value slot);
  SmallVector<Value> mma(ArrayRef<Value> a, ArrayRef<Value> b,
                         ArrayRef<Value> c);
  Value operandOf(Value halves);
  Value packPair(Value lowF32, Value highF32);
  Value shuffleXor(Value v, int32_t mask);
};

Value XqaBuilder::shuffleXor(Value v, int32_t mask) {
  return gpu::ShuffleOp::create(builder, kb.loc, v, kb.i32(mask),
                                kb.i32(kWarpSize), gpu::ShuffleMode::XOR)
      .getShuffleResult();
}

/// A row of an ldmatrix result (vector<2xf16>) as an mma operand register:
/// vector<2xf16> for f16 mma, the same bits as i32 for bf16.
Value XqaBuilder::operandOf(Value halves) {
  if (!bf16)
    return halves;
  Value word = vector::BitCastOp::create(
      builder, kb.loc, VectorType::get({1}, builder.getI32Type()), halves);
  return vector::ExtractOp::create(builder, kb.loc, word, 0);
}

/// Two fp32 values rounded to the operand type and packed (low first).
Value XqaBuilder::packPair(Value lowF32, Value highF32) {
  Type element = operandType();
  Value low = arith::TruncFOp::create(builder, kb.loc, element, lowF32);
  Value high = arith::TruncFOp::create(builder, kb.loc, element, highF32);
  Value pair = vector::FromElementsOp::create(
      builder, kb.loc, VectorType::get({2}, element), ValueRange{low, high});
  if (!bf16)
    return pair;
  Value word = vector::BitCastOp::create(
      builder, kb.loc, VectorType::get({1}, builder.getI32Type()), pair);
  return vector::ExtractOp::create(builder, kb.loc, word, 0);
}

SmallVector<Value> XqaBuilder::mma(ArrayRef<Value> a, ArrayRef<Value> b,
                                   ArrayRef<Value> c) {
  MLIRContext *context = builder.getContext();
  Type f32 = builder.getF32Type();
  auto resultType =
      LLVM::LLVMStructType::getLiteral(context, {f32, f32, f32, f32});
  std::optional<std::array<NVVM::MMATypes, 2>> types;
  if (bf16)
    types = std::array<NVVM::MMATypes, 2>{NVVM::MMATypes::bf16,
                                          NVVM::MMATypes::bf16};
  Value d = NVVM::MmaOp::create(
      builder, kb.loc, resultType, a, b, c, ArrayRef<int64_t>{16, 8, 16},
      std::nullopt, std::nullopt, types,
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                     NVVM::MMALayout::col});
  SmallVector<Value> result;
  for (int64_t i = 0; i < 4; ++i)
    result.push_back(LLVM::ExtractValueOp::create(builder, kb.loc, d, i));
  return result;
}

void XqaBuilder::loadQueryTile(Value query) {
  // rows x head_dim elements, 8 at a time: row r = (token i, head j) with
  // r = i * g + j; rows past the sequence's tokens are zeros.
  int64_t chunksPerRow = headDim / 8;
  int64_t chunks = rows * chunksPerRow;
  Type element = operandType();
  auto chunkType = VectorType::get({8}, element);
  Type queryElement = cast<MemRefType>(query.getType()).getElementType();
  auto loadType = VectorType::get({8}, queryElement);
  kb.forLoop(tid, index(chunks), index(kBlockThreads), {},
             [&](Value chunk, ValueRange) -> SmallVector<Value> {
               Value row = kb.divs(chunk, index(chunksPerRow));
               Value column = kb.mul(kb.rems(chunk, index(chunksPerRow)), index(8));
               Value token = kb.divs(row, index(group));
               Value head = kb.add(kb.mul(kvHead, index(group)),
                                   kb.rems(row, index(group)));
               Value live = kb.cmpi(arith::CmpIPredicate::slt, kb.toI32(token),
                                    tokenCount);
               Value values = kb.ifElse(
                   live, {chunkType},
                   [&]() -> SmallVector<Value> {
                     Value tokenIndex =
                         kb.add(kb.toIndex(tokenBegin), token);
                     Value loaded = vector::LoadOp::create(
                         builder, kb.loc, loadType, query,
                         ValueRange{tokenIndex, head, column},
                         /*nontemporal=*/false, llvm::MaybeAlign(16));
                     if (queryElement == element)
                       return {loaded};
                     Value wide = arith::ExtFOp::create(
                         builder, kb.loc, VectorType::get({8}, builder.getF32Type()),
                         loaded);
                     return {arith::TruncFOp::create(builder, kb.loc, chunkType,
                                                     wide)};
                   },
                   [&]() -> SmallVector<Value> {
                     Value zero = arith::ConstantOp::create(
                         builder, kb.loc,
                         DenseElementsAttr::get(
                             chunkType, builder.getZeroAttr(element)));
                     return {zero};
                   })[0];
               // The tile is typed f16: bf16 operands are stored as bits.
               if (bf16)
                 values = vector::BitCastOp::create(
                     builder, kb.loc, VectorType::get({8}, builder.getF16Type()),
                     values);
               vector::StoreOp::create(builder, kb.loc, values, queryTile,
                                       ValueRange{row, column},
                                       /*nontemporal=*/false,
                                       llvm::MaybeAlign(16));
               return {};
             });
}

void XqaBuilder::issueTile(Value tileIndex, Value slot) {
  // Every key of the tile is copied: keys outside [first, last) or on an
  // unmapped page are zero-filled (cp.async's source size 0), so the ring
  // never holds stale bytes that a zero weight could turn into NaN.
  Value tileBase = kb.add(kb.mul(tileIndex, kb.i32(int32_t(tileKeys))),
                          kb.mul(kb.divs(first, kb.i32(int32_t(tileKeys))),
                                 kb.i32(int32_t(tileKeys))));
  Value maxBlocks =
      kb.toI32(memref::DimOp::create(builder, kb.loc, blockTable, 1));
  Value stageBase = kb.mul(slot, index(layout.stageBytes));
  Value ringBase = kb.add(stageBase, index(layout.ring));

  // The page of key n of the tile, and whether it is live.
  auto keyInfo = [&](Value n) -> std::tuple<Value, Value, Value> {
    Value keyPos = kb.add(tileBase, kb.toI32(n));
    Value inRange = kb.land(kb.cmpi(arith::CmpIPredicate::sge, keyPos, first),
                            kb.cmpi(arith::CmpIPredicate::slt, keyPos, last));
    Value blockIndex = kb.mins(kb.divs(keyPos, kb.i32(int32_t(blockSize))),
                               kb.sub(maxBlocks, kb.i32(1)));
    blockIndex = kb.maxs(blockIndex, kb.i32(0));
    Value page = kb.load(blockTable, {kb.toIndex(seq), kb.toIndex(blockIndex)});
    Value live = kb.land(inRange, kb.cmpi(arith::CmpIPredicate::sge, page, kb.i32(0)));
    Value offset = kb.rems(keyPos, kb.i32(int32_t(blockSize)));
    return {live, kb.toIndex(kb.select(live, page, kb.i32(0))), kb.toIndex(offset)};
  };

  Value all = view(0, {layout.total}, builder.getIntegerType(8));
  // Rows of K and V, 16 bytes per copy.
  for (XqaSide *side : {&key, &value}) {
    int64_t chunksPerRow = side->type.getRowBytes() / 16;
    int64_t chunks = tileKeys * chunksPerRow;
    kb.forLoop(tid, index(chunks), index(kBlockThreads), {},
               [&](Value chunk, ValueRange) -> SmallVector<Value> {
                 Value n = kb.divs(chunk, index(chunksPerRow));
                 Value c = kb.rems(chunk, index(chunksPerRow));
                 auto [live, page, offset] = keyInfo(n);
                 Value dst = kb.add(ringBase,
                                    kb.add(index(side->rows),
                                           kb.add(kb.mul(n, index(side->rowStride)),
                                                  kb.mul(c, index(16)))));
                 Value bytes = kb.select(live, index(16), index(0));
                 nvgpu::DeviceAsyncCopyOp::create(
                     builder, kb.loc, all, ValueRange{dst}, side->storage,
                     address(*side, page, offset, kb.mul(c, index(16))),
                     builder.getIndexAttr(16), bytes, builder.getUnitAttr());
                 if (side == &key) {
                   // One thread per key records whether it is live.
                   kb.ifThen(kb.cmpi(arith::CmpIPredicate::eq, c, index(0)), [&] {
                     kb.store(kb.select(live, kb.i32(1), kb.i32(0)), pagesRing,
                              {kb.add(kb.mul(slot, index(tileKeys)), n)});
                   });
                 }
                 return {};
               });
  }
  // nvfp4 group scales (head_dim / 16 bytes a row) and per-token scales.
  for (XqaSide *side : {&key, &value}) {
    if (side->groupOffset >= 0) {
      int64_t bytes = side->groupStride;
      kb.forLoop(tid, index(tileKeys), index(kBlockThreads), {},
                 [&](Value n, ValueRange) -> SmallVector<Value> {
                   auto [live, page, offset] = keyInfo(n);
                   Value dst = kb.add(ringBase, kb.add(index(side->groupOffset),
                                                       kb.mul(n, index(bytes))));
                   // The scales' own element type (f8E4M3FN) on both ends.
                   Type scaleType =
                       cast<MemRefType>(side->groupScales.getType())
                           .getElementType();
                   Value scalesView = view(0, {layout.total}, scaleType);
                   nvgpu::DeviceAsyncCopyOp::create(
                       builder, kb.loc, scalesView, ValueRange{dst},
                       side->groupScales,
                       address(*side, page, offset, index(0)),
                       builder.getIndexAttr(bytes),
                       kb.select(live, index(bytes), index(0)),
                       bytes == 16 ? builder.getUnitAttr() : UnitAttr());
                   return {};
                 });
    }
    if (side->tokenOffset >= 0) {
      Value scales = view(0, {layout.total / 4}, builder.getF32Type());
      kb.forLoop(tid, index(tileKeys), index(kBlockThreads), {},
                 [&](Value n, ValueRange) -> SmallVector<Value> {
                   auto [live, page, offset] = keyInfo(n);
                   Value dst = kb.divs(
                       kb.add(ringBase, kb.add(index(side->tokenOffset),
                                               kb.mul(n, index(4)))),
                       index(4));
                   nvgpu::DeviceAsyncCopyOp::create(
                       builder, kb.loc, scales, ValueRange{dst},
                       side->tokenScales, ValueRange{page, offset, kvHead},
                       builder.getIndexAttr(1),
                       kb.select(live, index(1), index(0)), UnitAttr());
                   return {};
                 });
    }
  }
}

void XqaBuilder::decodeTile(const XqaSide &side, Value slot) {
  // 16 raw bytes per item: 4 words -> 4 * elementsPerWord elements of the
  // operand type, stored in channel order into the tile.
  Encoding encoding = side.type.getEncoding();
  int64_t perWord = elementsPerWord(encoding);
  int64_t perChunk = 4 * perWord;
  int64_t chunksPerRow = side.type.getRowBytes() / 16;
  int64_t items = tileKeys * chunksPerRow;
  Value all = view(0, {layout.total}, builder.getIntegerType(8));
  Value tile = view(side.tile, {tileKeys, side.tileStride / 2},
                    builder.getF16Type());
  Value stageBase = kb.add(kb.mul(slot, index(layout.stageBytes)),
                           index(layout.ring));
  Type f16 = builder.getF16Type(), f32 = builder.getF32Type();
  kb.forLoop(tid, index(items), index(kBlockThreads), {},
             [&](Value item, ValueRange) -> SmallVector<Value> {
    Value n = kb.divs(item, index(chunksPerRow));
    Value c = kb.rems(item, index(chunksPerRow));
    Value src = kb.add(stageBase, kb.add(index(side.rows),
                                         kb.add(kb.mul(n, index(side.rowStride)),
                                                kb.mul(c, index(16)))));
    Value bytes = vector::LoadOp::create(
        builder, kb.loc, VectorType::get({16}, builder.getIntegerType(8)), all,
        ValueRange{src}, /*nontemporal=*/false, llvm::MaybeAlign(16));
    Value words = vector::BitCastOp::create(
        builder, kb.loc, VectorType::get({4}, builder.getI32Type()), bytes);
    SmallVector<Value> elements(perChunk);
    for (int64_t w = 0; w < 4; ++w) {
      Value word = vector::ExtractOp::create(builder, kb.loc, words, w);
      Value groupScale;
      if (encoding == Encoding::nvfp4) {
        // Word w of chunk c holds channels c * 32 + 8w ... + 7: group
        // 2c + w / 2, an e4m3 byte; code x scale is exact in f16.
        Value group = kb.add(kb.mul(c, index(2)), index(w / 2));
        Value scaleByte = kb.loadByte(
            all, {kb.add(stageBase,
                         kb.add(index(side.groupOffset),
                                kb.add(kb.mul(n, index(side.groupStride)),
                                       group)))});
        Value scale = arith::TruncFOp::create(builder, kb.loc, f16,
                                              kb.decodeE4M3(scaleByte));
        groupScale = vector::BroadcastOp::create(
            builder, kb.loc, VectorType::get({2}, f16), scale);
      }
      for (const ChannelPair &pair : decodeWordPairs(kb, encoding, word)) {
        Value halves = pair.pair;
        if (groupScale)
          halves = arith::MulFOp::create(builder, kb.loc, halves, groupScale);
        Type pairElement = cast<VectorType>(halves.getType()).getElementType();
        int64_t positions[] = {pair.low, pair.high};
        for (auto [k, position] : llvm::enumerate(positions)) {
          Value element = vector::ExtractOp::create(builder, kb.loc, halves,
                                                    int64_t(k));
          if (pairElement != operandType()) {
            Value wide = arith::ExtFOp::create(builder, kb.loc, f32, element);
            element = arith::TruncFOp::create(builder, kb.loc, operandType(), wide);
          }
          if (bf16)
            element = arith::BitcastOp::create(builder, kb.loc, f16, element);
          elements[w * perWord + position] = element;
        }
      }
    }
    Value packed = vector::FromElementsOp::create(
        builder, kb.loc, VectorType::get({perChunk}, f16), elements);
    vector::StoreOp::create(builder, kb.loc, packed, tile,
                            ValueRange{n, kb.mul(c, index(perChunk))},
                            /*nontemporal=*/false, llvm::MaybeAlign(16));
    return {};
  });
}

Value XqaBuilder::operandTile(const XqaSide &side, Value slot) {
  if (!side.raw)
    return view(side.tile, {tileKeys, side.tileStride / 2},
                builder.getF16Type());
  // The ring slot itself: rows of row_bytes + 16, as f16 elements.
  Value offset = kb.add(index(layout.ring + side.rows),
                        kb.mul(slot, index(layout.stageBytes)));
  auto type = MemRefType::get(
      {tileKeys, side.rowStride / 2}, builder.getF16Type(), AffineMap(),
      gpu::AddressSpaceAttr::get(builder.getContext(),
                                 gpu::AddressSpace::Workgroup));
  return memref::ViewOp::create(builder, kb.loc, type, smem, offset,
                                ValueRange{});
}

gpu::GPUFuncOp XqaBuilder::build(SmallVectorImpl<Value> &hostOperands) {
  MLIRContext *context = op.getContext();
  Location loc = op.getLoc();
  headDim = keyBuffers.type.getHeadDim();
  valueDim = valueBuffers.type.getHeadDim();
  kvHeads = keyBuffers.type.getKvHeads();
  numHeads = static_cast<int64_t>(op.getNumHeads());
  group = numHeads / kvHeads;
  blockSize = keyBuffers.type.getBlockSize();
  rows = plan.getRows();
  mTiles = rows / 16;
  tileKeys = plan.getKeysPerTile();
  stages = plan.getStages();
  keyWarps = plan.getKeyWarps();
  valueWarps = plan.getValueWarps();
  Type queryElement = cast<MemRefType>(op.getQuery().getType()).getElementType();
  bf16 = xqaUsesBf16(queryElement, keyBuffers.type, valueBuffers.type);
  layout = layoutXqaShared(keyBuffers.type, valueBuffers.type, bf16, rows,
                           tileKeys, stages, keyWarps);
  kb.hardwareFp8 = kernels.hardwareFp8;
  kb.hardwareFp4 = kernels.hardwareFp4;

  // Kernel arguments: the op's buffers, each side's, then the workspace.
  hostOperands.assign({op.getQuery(), op.getBlockTable(), op.getSeqLens()});
  if (op.getQueryStart())
    hostOperands.push_back(op.getQueryStart());
  if (op.getGuard())
    hostOperands.push_back(op.getGuard());
  struct SidePositions {
    int storage = -1, groups = -1, tokens = -1, scale = -1;
  } positions[2];
  auto addSide = [&](const CacheBuffers &buffers, Value scale,
                     SidePositions &at) {
    at.storage = hostOperands.size();
    hostOperands.push_back(buffers.storage);
    if (buffers.groupScales) {
      at.groups = hostOperands.size();
      hostOperands.push_back(buffers.groupScales);
    }
    if (buffers.tokenScales) {
      at.tokens = hostOperands.size();
      hostOperands.push_back(buffers.tokenScales);
    }
    if (scale) {
      at.scale = hostOperands.size();
      hostOperands.push_back(scale);
    }
  };
  addSide(keyBuffers, op.getKScale(), positions[0]);
  addSide(valueBuffers, op.getVScale(), positions[1]);
  SmallVector<Type> argTypes = llvm::to_vector(
      llvm::map_range(hostOperands, [](Value v) { return v.getType(); }));
  Type f32 = builder.getF32Type();
  argTypes.push_back(MemRefType::get(
      {ShapedType::kDynamic, ShapedType::kDynamic, valueDim}, f32));
  argTypes.push_back(
      MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic, 2}, f32));

  gpu::GPUFuncOp kernel =
      kernels.create(builder, loc, "pattn_xqa_decode", argTypes, {});
  kernel->setAttr(NVVM::NVVMDialect::getMaxntidAttrName(),
                  builder.getDenseI32ArrayAttr({int32_t(kBlockThreads), 1, 1}));
  auto arg = [&](int position) {
    return position < 0 ? Value() : kernel.getArgument(position);
  };
  unsigned next = 0;
  Value query = kernel.getArgument(next++);
  blockTable = kernel.getArgument(next++);
  Value seqLens = kernel.getArgument(next++);
  Value queryStart = op.getQueryStart() ? kernel.getArgument(next++) : Value();
  Value guard = op.getGuard() ? kernel.getArgument(next++) : Value();
  Value partialOut = kernel.getArgument(argTypes.size() - 2);
  Value partialStats = kernel.getArgument(argTypes.size() - 1);

  auto describe = [&](XqaSide &side, const CacheBuffers &buffers,
                      const SidePositions &at, bool isKey) {
    side.type = buffers.type;
    side.raw = xqaReadsRaw(buffers.type, bf16);
    side.storage = arg(at.storage);
    side.groupScales = arg(at.groups);
    side.tokenScales = arg(at.tokens);
    side.scale = arg(at.scale);
    side.rows = isKey ? layout.keyRows : layout.valueRows;
    side.rowStride = isKey ? layout.keyRowStride : layout.valueRowStride;
    side.groupOffset = isKey ? layout.keyGroupScales : layout.valueGroupScales;
    side.groupStride = isKey ? layout.keyGroupStride : layout.valueGroupStride;
    side.tokenOffset = isKey ? layout.keyTokenScales : layout.valueTokenScales;
    side.tile = isKey ? layout.keyTile : layout.valueTile;
    side.tileStride = isKey ? layout.keyTileStride : layout.valueTileStride;
  };
  describe(key, keyBuffers, positions[0], true);
  describe(value, valueBuffers, positions[1], false);

  smem = gpu::DynamicSharedMemoryOp::create(
      builder, loc,
      MemRefType::get({ShapedType::kDynamic}, builder.getIntegerType(8),
                      AffineMap(),
                      gpu::AddressSpaceAttr::get(
                          context, gpu::AddressSpace::Workgroup)));
  queryTile = view(layout.query, {rows, layout.queryStride / 2},
                   builder.getF16Type());

  // Block and lane coordinates.
  tid = kb.threadId();
  Value warp = kb.divs(tid, index(kWarpSize));
  lane = kb.rems(tid, index(kWarpSize));
  groupId = kb.divs(lane, index(4));
  threadInGroup = kb.rems(lane, index(4));
  keyGroup = kb.rems(warp, index(keyWarps));
  valueGroup = kb.divs(warp, index(keyWarps));
  Value split = kb.blockId(gpu::Dimension::x);
  Value sequenceHead = kb.blockId(gpu::Dimension::y);
  seq = kb.toI32(kb.divs(sequenceHead, index(kvHeads)));
  kvHead = kb.rems(sequenceHead, index(kvHeads));

  // The key-liveness ring lives in static shared memory.
  auto pagesType = MemRefType::get(
      {stages * tileKeys}, builder.getI32Type(), AffineMap(),
      gpu::AddressSpaceAttr::get(context, gpu::AddressSpace::Workgroup));
  pagesRing = kernel.addWorkgroupAttribution(pagesType, loc);

  Value allowed = kb.boolean(true);
  if (guard)
    allowed = kb.cmpi(arith::CmpIPredicate::eq, kb.load(guard, {index(0)}),
                      kb.i32(op.getGuardValue().value_or(0)));
  kb.ifThen(allowed, [&] {
    if (queryStart) {
      tokenBegin = kb.load(queryStart, {kb.toIndex(seq)});
      tokenCount = kb.sub(kb.load(queryStart, {kb.add(kb.toIndex(seq), index(1))}),
                          tokenBegin);
    } else {
      tokenBegin = seq;
      tokenCount = kb.i32(1);
    }
    length = kb.load(seqLens, {kb.toIndex(seq)});
    // The block's keys: the union of its rows' (causal, windowed) ranges,
    // cut to this split. Splits are ceil(max keys / gridDim.x) rounded up
    // to whole tiles: a function of host-known sizes only.
    Value maxKeys = kb.mul(
        kb.toI32(memref::DimOp::create(builder, loc, blockTable, 1)),
        kb.i32(int32_t(blockSize)));
    Value splits = kb.toI32(gpu::GridDimOp::create(builder, loc, gpu::Dimension::x));
    Value perSplit = kb.divs(kb.add(maxKeys, kb.sub(splits, kb.i32(1))), splits);
    perSplit = kb.mul(kb.divs(kb.add(perSplit, kb.i32(int32_t(tileKeys - 1))),
                              kb.i32(int32_t(tileKeys))),
                      kb.i32(int32_t(tileKeys)));
    Value splitBegin = kb.mul(kb.toI32(split), perSplit);
    Value begin = kb.i32(0);
    int64_t window = static_cast<int64_t>(op.getWindow());
    Value firstQueryPos = kb.sub(length, tokenCount);
    if (window > 0)
      begin = kb.maxs(begin, kb.add(kb.sub(firstQueryPos, kb.i32(int32_t(window))),
                                    kb.i32(1)));
    first = kb.maxs(begin, splitBegin);
    last = kb.mins(length, kb.add(splitBegin, perSplit));
    Value firstTile = kb.divs(first, kb.i32(int32_t(tileKeys)));
    Value tileCount = kb.select(
        kb.cmpi(arith::CmpIPredicate::sgt, last, first),
        kb.sub(kb.divs(kb.add(last, kb.i32(int32_t(tileKeys - 1))),
                       kb.i32(int32_t(tileKeys))),
               firstTile),
        kb.i32(0));

    loadQueryTile(query);

    // Prologue: stages - 1 tiles in flight.
    for (int64_t s = 0; s + 1 < stages; ++s) {
      kb.ifThen(kb.cmpi(arith::CmpIPredicate::slt, kb.i32(int32_t(s)), tileCount),
                [&] { issueTile(kb.i32(int32_t(s)), index(s)); });
      NVVM::CpAsyncCommitGroupOp::create(builder, loc);
    }

    Value softmax = kb.f32(op.getEffectiveSoftmaxScale());
    if (key.type.getScale() == ScaleGranularity::tensor)
      softmax = kb.fmul(softmax, kb.load(key.scale, {index(0)}));
    float softcap = op.getSoftcap().convertToFloat();
    Value negInf = kb.f32(-std::numeric_limits<float>::infinity());

    // Per thread: for each m-tile the max and partial sum of rows g and
    // g + 8, and the output accumulators of this warp's value channels.
    int64_t channels = valueDim / valueWarps;
    int64_t nTiles = channels / 8;
    auto maxAt = [&](int64_t mt, int64_t h) { return mt * 2 + h; };
    auto sumAt = [&](int64_t mt, int64_t h) { return 2 * mTiles + mt * 2 + h; };
    auto accAt = [&](int64_t mt, int64_t nt, int64_t e) {
      return 4 * mTiles + (mt * nTiles + nt) * 4 + e;
    };
    SmallVector<Value> init;
    for (int64_t i = 0; i < 2 * mTiles; ++i)
      init.push_back(negInf);
    for (int64_t i = 0; i < 2 * mTiles; ++i)
      init.push_back(kb.f32(0.0f));
    for (int64_t i = 0; i < mTiles * nTiles * 4; ++i)
      init.push_back(kb.f32(0.0f));

    Value channelBase = kb.mul(valueGroup, index(channels));
    int64_t keysPerWarp = tileKeys / keyWarps;
    Value i32Stages = kb.i32(int32_t(stages));

    SmallVector<Value> state = kb.forLoop(
        index(0), kb.toIndex(tileCount), index(1), init,
        [&](Value iteration, ValueRange carried) -> SmallVector<Value> {
          // Tile `iteration` has landed once at most stages - 2 newer
          // groups are pending.
          NVVM::CpAsyncWaitGroupOp::create(builder, loc, int32_t(stages - 2));
          kb.barrier();
          Value i32Iteration = kb.toI32(iteration);
          Value ahead = kb.add(i32Iteration, kb.i32(int32_t(stages - 1)));
          kb.ifThen(kb.cmpi(arith::CmpIPredicate::slt, ahead, tileCount), [&] {
            issueTile(ahead, kb.toIndex(kb.rems(ahead, i32Stages)));
          });
          NVVM::CpAsyncCommitGroupOp::create(builder, loc);
          Value slot = kb.toIndex(kb.rems(i32Iteration, i32Stages));
          if (!key.raw || !value.raw) {
            if (!key.raw)
              decodeTile(key, slot);
            if (!value.raw)
              decodeTile(value, slot);
            kb.barrier();
          }
          Value keyTile = operandTile(key, slot);
          Value valueTile = operandTile(value, slot);
          Value tileBase = kb.mul(kb.add(firstTile, i32Iteration),
                                  kb.i32(int32_t(tileKeys)));
          Value stageBase = kb.add(kb.mul(slot, index(layout.stageBytes)),
                                   index(layout.ring));
          SmallVector<Value> s(carried.begin(), carried.end());
          for (int64_t step = 0; step < keysPerWarp / 16; ++step) {
            Value n0 = kb.add(kb.mul(keyGroup, index(keysPerWarp)),
                              index(step * 16));
            // S = Q Kᵀ over head_dim, 16 channels at a time.
            SmallVector<Value> zero(mTiles * 8, kb.f32(0.0f));
            SmallVector<Value> scores = kb.forLoop(
                index(0), index(headDim), index(16), zero,
                [&](Value k0, ValueRange acc) -> SmallVector<Value> {
                  // K: matrices (keys n0.., k0), (n0.., k0+8), (n0+8.., k0),
                  // (n0+8.., k0+8).
                  Value matrix = kb.divs(lane, index(8));
                  Value keyRow = kb.add(
                      n0, kb.add(kb.mul(kb.divs(matrix, index(2)), index(8)),
                                 kb.rems(lane, index(8))));
                  Value keyCol = kb.add(k0, kb.mul(kb.rems(matrix, index(2)), index(8)));
                  Value kFrag = nvgpu::LdMatrixOp::create(
                      builder, loc, VectorType::get({4, 2}, builder.getF16Type()),
                      keyTile, ValueRange{keyRow, keyCol},
                      builder.getBoolAttr(false), builder.getI32IntegerAttr(4));
                  SmallVector<Value> b;
                  for (int64_t r = 0; r < 4; ++r)
                    b.push_back(operandOf(
                        vector::ExtractOp::create(builder, loc, kFrag, r)));
                  SmallVector<Value> out;
                  for (int64_t mt = 0; mt < mTiles; ++mt) {
                    Value qRow = kb.add(index(mt * 16), kb.rems(lane, index(16)));
                    Value qCol = kb.add(k0, kb.mul(kb.divs(lane, index(16)), index(8)));
                    Value qFrag = nvgpu::LdMatrixOp::create(
                        builder, loc, VectorType::get({4, 2}, builder.getF16Type()),
                        queryTile, ValueRange{qRow, qCol},
                        builder.getBoolAttr(false), builder.getI32IntegerAttr(4));
                    SmallVector<Value> a;
                    for (int64_t r = 0; r < 4; ++r)
                      a.push_back(operandOf(
                          vector::ExtractOp::create(builder, loc, qFrag, r)));
                    for (int64_t nt = 0; nt < 2; ++nt) {
                      SmallVector<Value> c(acc.begin() + (mt * 2 + nt) * 4,
                                           acc.begin() + (mt * 2 + nt) * 4 + 4);
                      llvm::append_range(out,
                                         mma(a, {b[2 * nt], b[2 * nt + 1]}, c));
                    }
                  }
                  return out;
                });

            // Logits: scales, softcap, masks. Element e of n-tile nt holds
            // key n0 + 8 nt + 2t + (e & 1), row g + 8 (e >> 1).
            SmallVector<Value> logits(mTiles * 8);
            for (int64_t nt = 0; nt < 2; ++nt)
              for (int64_t e2 = 0; e2 < 2; ++e2) {
                Value n = kb.add(n0, kb.add(index(8 * nt),
                                            kb.add(kb.mul(threadInGroup, index(2)),
                                                   index(e2))));
                Value keyPos = kb.add(tileBase, kb.toI32(n));
                Value live = kb.cmpi(
                    arith::CmpIPredicate::ne,
                    kb.load(pagesRing, {kb.add(kb.mul(slot, index(tileKeys)), n)}),
                    kb.i32(0));
                Value scale = softmax;
                if (key.tokenOffset >= 0) {
                  Value scales = view(0, {layout.total / 4}, builder.getF32Type());
                  scale = kb.fmul(
                      scale,
                      kb.load(scales, {kb.divs(kb.add(stageBase,
                                                      kb.add(index(key.tokenOffset),
                                                             kb.mul(n, index(4)))),
                                               index(4))}));
                }
                for (int64_t mt = 0; mt < mTiles; ++mt)
                  for (int64_t h = 0; h < 2; ++h) {
                    Value row = kb.add(index(mt * 16 + 8 * h), groupId);
                    Value token = kb.toI32(kb.divs(row, index(group)));
                    Value queryPos = kb.add(firstQueryPos, token);
                    Value visible = kb.land(
                        live, kb.cmpi(arith::CmpIPredicate::sle, keyPos, queryPos));
                    if (window > 0)
                      visible = kb.land(
                          visible,
                          kb.cmpi(arith::CmpIPredicate::sgt, keyPos,
                                  kb.sub(queryPos, kb.i32(int32_t(window)))));
                    int64_t at = (mt * 2 + nt) * 4 + 2 * h + e2;
                    Value x = kb.fmul(scores[at], scale);
                    if (softcap > 0.0f)
                      x = kb.fmul(kb.f32(softcap),
                                  kb.tanh(kb.fdiv(x, kb.f32(softcap))));
                    logits[at] = kb.select(visible, x, negInf);
                  }
              }

            // Online softmax per row; P re-packed as the A operand of P V.
            SmallVector<SmallVector<Value>> pOperands(mTiles);
            for (int64_t mt = 0; mt < mTiles; ++mt) {
              SmallVector<Value> p(8);
              for (int64_t h = 0; h < 2; ++h) {
                auto atOf = [&](int64_t nt, int64_t e2) {
                  return (mt * 2 + nt) * 4 + 2 * h + e2;
                };
                Value rowMax = kb.fmax(kb.fmax(logits[atOf(0, 0)], logits[atOf(0, 1)]),
                                       kb.fmax(logits[atOf(1, 0)], logits[atOf(1, 1)]));
                rowMax = kb.fmax(rowMax, shuffleXor(rowMax, 1));
                rowMax = kb.fmax(rowMax, shuffleXor(rowMax, 2));
                Value oldMax = s[maxAt(mt, h)];
                Value newMax = kb.fmax(oldMax, rowMax);
                Value oldInf = kb.cmpf(arith::CmpFPredicate::OEQ, oldMax, negInf);
                Value alpha = kb.select(oldInf, kb.f32(0.0f),
                                        kb.exp(kb.fsub(oldMax, newMax)));
                Value sum = kb.fmul(s[sumAt(mt, h)], alpha);
                for (int64_t nt = 0; nt < 2; ++nt)
                  for (int64_t e2 = 0; e2 < 2; ++e2) {
                    Value x = logits[atOf(nt, e2)];
                    Value w = kb.select(
                        kb.cmpf(arith::CmpFPredicate::OEQ, x, negInf),
                        kb.f32(0.0f), kb.exp(kb.fsub(x, newMax)));
                    sum = kb.fadd(sum, w);
                    p[nt * 4 + 2 * h + e2] = w;
                  }
                s[maxAt(mt, h)] = newMax;
                s[sumAt(mt, h)] = sum;
                for (int64_t nt = 0; nt < nTiles; ++nt)
                  for (int64_t e2 = 0; e2 < 2; ++e2)
                    s[accAt(mt, nt, 2 * h + e2)] =
                        kb.fmul(s[accAt(mt, nt, 2 * h + e2)], alpha);
              }
              if (value.tokenOffset >= 0) {
                Value scales = view(0, {layout.total / 4}, builder.getF32Type());
                for (int64_t nt = 0; nt < 2; ++nt)
                  for (int64_t e2 = 0; e2 < 2; ++e2) {
                    Value n = kb.add(n0, kb.add(index(8 * nt),
                                                kb.add(kb.mul(threadInGroup, index(2)),
                                                       index(e2))));
                    Value vs = kb.load(
                        scales, {kb.divs(kb.add(stageBase,
                                                kb.add(index(value.tokenOffset),
                                                       kb.mul(n, index(4)))),
                                         index(4))});
                    for (int64_t h = 0; h < 2; ++h)
                      p[nt * 4 + 2 * h + e2] = kb.fmul(p[nt * 4 + 2 * h + e2], vs);
                  }
              }
              // a0: row g keys 2t..; a1: row g+8; a2, a3: keys 2t+8.. .
              pOperands[mt] = {packPair(p[0], p[1]), packPair(p[2], p[3]),
                               packPair(p[4], p[5]), packPair(p[6], p[7])};
            }

            // O += P V over this warp's channels, two n-tiles per ldmatrix.
            for (int64_t nt = 0; nt < nTiles; nt += 2) {
              Value matrix = kb.divs(lane, index(8));
              Value vRow = kb.add(n0, kb.add(kb.mul(kb.rems(matrix, index(2)), index(8)),
                                             kb.rems(lane, index(8))));
              Value vCol = kb.add(channelBase,
                                  kb.add(index(nt * 8),
                                         kb.mul(kb.divs(matrix, index(2)), index(8))));
              int64_t tiles = nt + 1 < nTiles ? 4 : 2;
              Value vFrag = nvgpu::LdMatrixOp::create(
                  builder, loc, VectorType::get({tiles, 2}, builder.getF16Type()),
                  valueTile, ValueRange{vRow, vCol}, builder.getBoolAttr(true),
                  builder.getI32IntegerAttr(int32_t(tiles)));
              SmallVector<Value> b;
              for (int64_t r = 0; r < tiles; ++r)
                b.push_back(operandOf(vector::ExtractOp::create(builder, loc, vFrag, r)));
              for (int64_t mt = 0; mt < mTiles; ++mt)
                for (int64_t half = 0; half * 2 < tiles; ++half) {
                  SmallVector<Value> c;
                  for (int64_t e = 0; e < 4; ++e)
                    c.push_back(s[accAt(mt, nt + half, e)]);
                  SmallVector<Value> d =
                      mma(pOperands[mt], {b[2 * half], b[2 * half + 1]}, c);
                  for (int64_t e = 0; e < 4; ++e)
                    s[accAt(mt, nt + half, e)] = d[e];
                }
            }
          }
          return s;
        });

    // Merge the key groups through shared memory (the ring is free once
    // every copy has landed): [key group][row][value_dim | max | sum].
    NVVM::CpAsyncWaitGroupOp::create(builder, loc, 0);
    kb.barrier();
    int64_t mergeStride = valueDim + 2;
    Value merge = view(layout.merge, {keyWarps * rows * mergeStride},
                       builder.getF32Type());
    for (int64_t mt = 0; mt < mTiles; ++mt)
      for (int64_t h = 0; h < 2; ++h) {
        Value row = kb.add(index(mt * 16 + 8 * h), groupId);
        Value base = kb.mul(kb.add(kb.mul(keyGroup, index(rows)), row),
                            index(mergeStride));
        Value sum = state[sumAt(mt, h)];
        sum = kb.fadd(sum, shuffleXor(sum, 1));
        sum = kb.fadd(sum, shuffleXor(sum, 2));
        kb.ifThen(kb.land(kb.cmpi(arith::CmpIPredicate::eq, threadInGroup, index(0)),
                          kb.cmpi(arith::CmpIPredicate::eq, valueGroup, index(0))),
                  [&] {
                    kb.store(state[maxAt(mt, h)], merge,
                             {kb.add(base, index(valueDim))});
                    kb.store(sum, merge, {kb.add(base, index(valueDim + 1))});
                  });
        for (int64_t nt = 0; nt < nTiles; ++nt)
          for (int64_t e2 = 0; e2 < 2; ++e2) {
            Value channel = kb.add(channelBase,
                                   kb.add(index(nt * 8),
                                          kb.add(kb.mul(threadInGroup, index(2)),
                                                 index(e2))));
            kb.store(state[accAt(mt, nt, 2 * h + e2)], merge,
                     {kb.add(base, channel)});
          }
      }
    kb.barrier();
    Value realRows = kb.mul(kb.toIndex(tokenCount), index(group));
    kb.forLoop(tid, index(rows * valueDim), index(kBlockThreads), {},
               [&](Value item, ValueRange) -> SmallVector<Value> {
      Value row = kb.divs(item, index(valueDim));
      Value channel = kb.rems(item, index(valueDim));
      kb.ifThen(kb.cmpi(arith::CmpIPredicate::slt, row, realRows), [&] {
        Value globalMax = negInf;
        for (int64_t g = 0; g < keyWarps; ++g)
          globalMax = kb.fmax(
              globalMax,
              kb.load(merge, {kb.add(kb.mul(kb.add(index(g * rows), row),
                                            index(mergeStride)),
                                     index(valueDim))}));
        Value total = kb.f32(0.0f), sum = kb.f32(0.0f);
        for (int64_t g = 0; g < keyWarps; ++g) {
          Value base = kb.mul(kb.add(index(g * rows), row), index(mergeStride));
          Value m = kb.load(merge, {kb.add(base, index(valueDim))});
          Value w = kb.select(kb.cmpf(arith::CmpFPredicate::OEQ, m, negInf),
                              kb.f32(0.0f), kb.exp(kb.fsub(m, globalMax)));
          total = kb.fma(kb.load(merge, {kb.add(base, channel)}), w, total);
          sum = kb.fma(kb.load(merge, {kb.add(base, index(valueDim + 1))}), w, sum);
        }
        if (value.type.getScale() == ScaleGranularity::tensor)
          total = kb.fmul(total, kb.load(value.scale, {index(0)}));
        Value token = kb.add(kb.toIndex(tokenBegin), kb.divs(row, index(group)));
        Value head = kb.add(kb.mul(kvHead, index(group)), kb.rems(row, index(group)));
        Value outRow = kb.add(kb.mul(token, index(numHeads)), head);
        kb.store(total, partialOut, {split, outRow, channel});
        kb.ifThen(kb.cmpi(arith::CmpIPredicate::eq, channel, index(0)), [&] {
          kb.store(globalMax, partialStats, {split, outRow, index(0)});
          kb.store(sum, partialStats, {split, outRow, index(1)});
        });
      });
      return {};
    });
  });
  gpu::ReturnOp::create(builder, loc);
  return kernel;
}

} // namespace

auto ::pattn::buildXqaDecodeKernels(KernelModule &kernels,
                                   PagedAttentionOp op, XqaPlanAttr plan,
                                   const CacheBuffers &key,
                                   const CacheBuffers &value) -> DecodeKernels {
  DecodeKernels result;
  XqaBuilder xqa(kernels, op, plan, key, value);
  result.decode = xqa.build(result.decodeOperands);
  result.merge = buildPagedMergeKernel(kernels, op, result.mergeOperands);
  result.numHeads = static_cast<int64_t>(op.getNumHeads());
  result.valueDim = value.type.getHeadDim();
  result.blockSize = key.type.getBlockSize();
  result.decodeBlocksPerToken = 0;
  result.sharedBytes = plan.getSharedBytes();
  return result;
}
