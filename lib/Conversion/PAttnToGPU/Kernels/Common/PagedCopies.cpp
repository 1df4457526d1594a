//===- PagedCopies.cpp - Paged cache tiles into a cp.async ring -----------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the shared paged tile copies (PagedCopies.h): the
// per-thread address parts, the block-table lookups a tile ahead and the
// cp.async copies of a tile's rows, scales and liveness flags.
//
//===----------------------------------------------------------------------===//

#include "Kernels/Common/PagedCopies.h"

#include "Kernels/Codecs/Codecs.h"
#include "Kernels/TensorCore/TensorCore.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"

using namespace mlir;
using namespace pattn;

Value PagedTileCopies::view(int64_t offset, ArrayRef<int64_t> shape,
                            Type element) {
  Value at = index(offset);
  return sharedView(kb, smem, at, shape, element);
}

SmallVector<Value> PagedTileCopies::address(const PagedSide &side, Value page,
                                            Value offset, Value byte) {
  if (side.type.getLayout() == Layout::hnd)
    return {page, block.kvHead, offset, byte};
  return {page, offset, block.kvHead, byte};
}

DecodeSignature
pattn::pagedTensorCoreSignature(PagedAttentionOp op,
                                const CacheBuffers &keyBuffers,
                                const CacheBuffers &valueBuffers,
                                const FusedFold *fold, bool writesOutput) {
  // Kernel arguments: the op's buffers, each side's, then the workspace.
  DecodeSignature signature;
  FoldQueryOp foldOp = fold ? fold->fold : FoldQueryOp();
  Value query = fold ? foldOp.getQuery() : op.getQuery();
  signature.addSequences(query, op.getBlockTable(), op.getSeqLens(),
                         op.getQueryStart());
  signature.add(DecodeArg::Guard, op.getGuard());
  if (fold)
    signature.add(DecodeArg::FoldScales, foldOp.getScales());
  else
    signature.add(DecodeArg::QueryExponents, op.getQueryExponents());
  signature.add(DecodeArg::KeyStorage, keyBuffers.storage);
  signature.add(DecodeArg::KeyGroupScales, keyBuffers.groupScales);
  signature.add(DecodeArg::KeyTokenScales, keyBuffers.tokenScales);
  signature.add(DecodeArg::KeyScale, op.getKScale());
  signature.add(DecodeArg::ValueStorage, valueBuffers.storage);
  signature.add(DecodeArg::ValueGroupScales, valueBuffers.groupScales);
  signature.add(DecodeArg::ValueTokenScales, valueBuffers.tokenScales);
  signature.add(DecodeArg::ValueScale, op.getVScale());
  if (writesOutput) {
    signature.add(DecodeArg::Sinks, op.getSinks());
    signature.add(DecodeArg::OutScale, op.getOutScale());
    signature.add(DecodeArg::Out, op.getOut());
  }
  signature.addWorkspace(op.getContext(), valueBuffers.type.getHeadDim());
  return signature;
}

void pattn::describePagedSide(PagedSide &side, const CacheBuffers &buffers,
                              bool isKey, const DecodeSignature &signature,
                              const XqaSharedLayout &layout) {
  side.type = buffers.type;
  side.perWord = elementsPerWord(buffers.type.getEncoding());
  side.segments = buffers.type.getRowBytes() / 16;
  side.storage =
      signature.arg(isKey ? DecodeArg::KeyStorage : DecodeArg::ValueStorage);
  side.groupScales = signature.arg(isKey ? DecodeArg::KeyGroupScales
                                         : DecodeArg::ValueGroupScales);
  side.tokenScales = signature.arg(isKey ? DecodeArg::KeyTokenScales
                                         : DecodeArg::ValueTokenScales);
  side.scale =
      signature.arg(isKey ? DecodeArg::KeyScale : DecodeArg::ValueScale);
  side.rows = isKey ? layout.keyRows : layout.valueRows;
  side.rowStride = isKey ? layout.keyRowStride : layout.valueRowStride;
  side.groupOffset = isKey ? layout.keyGroupScales : layout.valueGroupScales;
  side.groupStride = isKey ? layout.keyGroupStride : layout.valueGroupStride;
  side.tokenOffset = isKey ? layout.keyTokenScales : layout.valueTokenScales;
}

void pattn::flattenPagedStorage(KernelBuilder &kb, PagedSide &side,
                                int64_t blockSize) {
  int64_t rowBytes = side.type.getRowBytes();
  int64_t heads = side.type.getKvHeads();
  // Pages are contiguous, or a static stride apart (a page-strided view of
  // an engine's allocation): either way one byte stride per page.
  auto storageType = cast<MemRefType>(side.storage.getType());
  int64_t pageStride = pageStrideElements(storageType);
  // A view inside the function (V of an engine's [blocks, 2, ...] buffer)
  // starts at a static offset, which the flat view keeps.
  auto [strides, offset] = storageType.getStridesAndOffset();
  (void)strides;
  // A reinterpret_cast, which the memref lowering turns into the same
  // pointer (collapse_shape would need expand-strided-metadata first).
  Value pages = memref::DimOp::create(kb.b, kb.loc, side.storage, 0);
  Value bytes = kb.mul(pages, kb.index(pageStride));
  MemRefLayoutAttrInterface flatLayout;
  if (offset != 0)
    flatLayout = StridedLayoutAttr::get(kb.b.getContext(), offset, {1});
  auto flatType = MemRefType::get({ShapedType::kDynamic},
                                  kb.b.getIntegerType(8), flatLayout);
  side.flat = memref::ReinterpretCastOp::create(
      kb.b, kb.loc, flatType, side.storage,
      /*offset=*/OpFoldResult(kb.b.getIndexAttr(offset)),
      /*sizes=*/{OpFoldResult(bytes)},
      /*strides=*/{OpFoldResult(kb.b.getIndexAttr(1))});
  side.pageStride = pageStride;
  bool hnd = side.type.getLayout() == Layout::hnd;
  side.tokenStride = hnd ? rowBytes : heads * rowBytes;
  side.headStride = hnd ? blockSize * rowBytes : rowBytes;
}

PagedTileCopies::PagedTileCopies(KernelBuilder &kb, Value smem,
                                 PagedRingLayout layout, PagedSide &key,
                                 PagedSide &value, Value liveKeys,
                                 const PagedBlock &block)
    : kb(kb), smem(smem), layout(layout), key(key), liveKeys(liveKeys),
      block(block) {
  Value tid = block.tid, kvHead = block.kvHead;
  int64_t tileKeys = layout.tileKeys, blockSize = layout.blockSize;
  SmallVector<SmallVector<PagedSide *>> groups;
  if (key.segments == value.segments)
    groups.push_back({&key, &value});
  else
    groups.assign({{&key}, {&value}});
  // Passes are page-aligned when tiles are whole pages and each pass's keys
  // (copyThreads / segments of them) lie in one page.
  pageAlignedPasses = tileKeys % blockSize == 0;
  for (SmallVector<PagedSide *> &sides : groups) {
    CopyGroup group;
    group.sides = sides;
    group.segments = sides.front()->segments;
    group.passes =
        llvm::divideCeil(tileKeys * group.segments, layout.copyThreads);
    group.keysPerPass =
        std::max<int64_t>(layout.copyThreads / group.segments, 1);
    group.uniformChunks = layout.copyThreads % group.segments == 0;
    pageAlignedPasses &=
        group.uniformChunks && blockSize % group.keysPerPass == 0;
    if (layout.coreMatrices) {
      initCoreMatrixChunks(group);
      copyGroups.push_back(group);
      continue;
    }
    group.keyInPass = kb.divs(tid, index(group.segments));
    group.keyInPassI32 = kb.toI32(group.keyInPass);
    Value segment = kb.rems(tid, index(group.segments));
    group.byte = kb.mul(segment, index(16));
    group.firstChunk = kb.cmpi(arith::CmpIPredicate::eq, segment, index(0));
    for (PagedSide *side : sides) {
      Value head = kb.mul(kvHead, index(side->headStride));
      group.pageBytes.push_back(kb.add(head, group.byte));
      Value row = kb.mul(group.keyInPass, index(side->rowStride));
      Value stage = kb.add(index(side->rows), row);
      group.stageBytes.push_back(kb.add(stage, group.byte));
    }
    copyGroups.push_back(group);
  }
  keySpan = kb.sub(block.last, block.first);
  Value blocks =
      kb.toI32(memref::DimOp::create(kb.b, kb.loc, block.blockTable, 1));
  lastBlock = kb.sub(blocks, kb.i32(1));
}

void PagedTileCopies::initCoreMatrixChunks(CopyGroup &group) {
  // Thread t: key 8 (t / 8s) + t % 8 and segment (t % 8s) / 8 of a row of
  // s segments, so eight consecutive threads fill one core matrix.
  int64_t octet = 8 * group.segments;
  assert(layout.copyThreads % octet == 0 && group.uniformChunks &&
         "a pass of the copying threads is whole core matrices");
  Value tid = block.tid;
  Value octetKeys = kb.mul(kb.divs(tid, index(octet)), index(8));
  group.keyInPass = kb.add(octetKeys, kb.rems(tid, index(8)));
  group.keyInPassI32 = kb.toI32(group.keyInPass);
  Value segment = kb.divs(kb.rems(tid, index(octet)), index(8));
  group.byte = kb.mul(segment, index(16));
  group.firstChunk = kb.cmpi(arith::CmpIPredicate::eq, segment, index(0));
  // coreMatrixByte's offset, computed once for every side of the group.
  Value matrix = kb.mul(segment, index(layout.tileKeys / 8));
  matrix = kb.add(matrix, kb.divs(group.keyInPass, index(8)));
  Value row = kb.mul(kb.rems(group.keyInPass, index(8)), index(16));
  Value inRows = kb.add(kb.mul(matrix, index(128)), row);
  for (PagedSide *side : group.sides) {
    Value head = kb.mul(block.kvHead, index(side->headStride));
    group.pageBytes.push_back(kb.add(head, group.byte));
    group.stageBytes.push_back(kb.add(index(side->rows), inRows));
  }
}

Value pattn::coreMatrixByte(KernelBuilder &kb, Value base, Value row,
                            Value chunk, int64_t rows) {
  Value matrix = kb.mul(chunk, kb.index(rows / 8));
  matrix = kb.add(matrix, kb.divs(row, kb.index(8)));
  Value at = kb.add(base, kb.mul(matrix, kb.index(128)));
  return kb.add(at, kb.mul(kb.rems(row, kb.index(8)), kb.index(16)));
}

Value PagedTileCopies::tileBase(Value tileIndex) {
  Value tileKeysI32 = kb.i32(int32_t(layout.tileKeys));
  Value firstTileBase = kb.mul(kb.divs(block.first, tileKeysI32), tileKeysI32);
  return kb.add(kb.mul(tileIndex, tileKeysI32), firstTileBase);
}

SmallVector<Value> PagedTileCopies::lookupPages(Value tileIndex) {
  // The block index is clamped into the table, so every load is in bounds
  // even for keys past the sequence (issueTile masks those).
  Value base = tileBase(tileIndex);
  Value row = kb.toIndex(block.seq);
  auto entryOf = [&](Value keyPos) {
    Value blockIndex =
        kb.mins(kb.divs(keyPos, kb.i32(int32_t(layout.blockSize))), lastBlock);
    return kb.load(block.blockTable, {row, kb.toIndex(blockIndex)});
  };
  SmallVector<Value> pages;
  if (pageAlignedPasses) {
    for (int64_t page = 0; page < layout.tileKeys / layout.blockSize; ++page)
      pages.push_back(
          entryOf(kb.add(base, kb.i32(int32_t(page * layout.blockSize)))));
    return pages;
  }
  for (const CopyGroup &group : copyGroups)
    for (int64_t pass = 0; pass < group.passes; ++pass)
      pages.push_back(entryOf(kb.add(base, passChunk(group, pass).keyI32)));
  return pages;
}

PagedTileCopies::PassChunk PagedTileCopies::passChunk(const CopyGroup &group,
                                                      int64_t pass) {
  PassChunk chunk;
  if (group.uniformChunks) {
    int64_t passKeys = pass * group.keysPerPass;
    chunk.key = kb.add(group.keyInPass, index(passKeys));
    chunk.keyI32 = kb.add(group.keyInPassI32, kb.i32(int32_t(passKeys)));
    chunk.firstChunk = group.firstChunk;
    for (auto [s, side] : llvm::enumerate(group.sides)) {
      chunk.pageBytes.push_back(group.pageBytes[s]);
      // Whole core matrices of keys further (passKeys is a multiple of 8).
      int64_t shift =
          layout.coreMatrices ? passKeys / 8 * 128 : passKeys * side->rowStride;
      chunk.stageBytes.push_back(kb.add(group.stageBytes[s], index(shift)));
    }
    return chunk;
  }
  // Rows of a number of segments that does not divide the block: chunk
  // tid + copyThreads x pass is key chunk / segments, segment chunk % segments.
  Value at = kb.add(block.tid, index(pass * layout.copyThreads));
  chunk.key = kb.divs(at, index(group.segments));
  chunk.keyI32 = kb.toI32(chunk.key);
  Value segment = kb.rems(at, index(group.segments));
  Value byte = kb.mul(segment, index(16));
  chunk.firstChunk = kb.cmpi(arith::CmpIPredicate::eq, segment, index(0));
  for (PagedSide *side : group.sides) {
    Value head = kb.mul(block.kvHead, index(side->headStride));
    chunk.pageBytes.push_back(kb.add(head, byte));
    Value row = kb.mul(chunk.key, index(side->rowStride));
    Value stage = kb.add(index(side->rows), row);
    chunk.stageBytes.push_back(kb.add(stage, byte));
  }
  return chunk;
}

std::pair<Value, Value> PagedTileCopies::passPage(ValueRange pages,
                                                  int64_t group, int64_t pass,
                                                  Value keyPos) {
  const CopyGroup &copy = copyGroups[group];
  if (pageAlignedPasses) {
    // Tiles start on a page, and pass p's keys are p x keysPerPass + the
    // thread's key in the pass: page p x keysPerPass / block_size.
    int64_t first = pass * copy.keysPerPass;
    Value offset = kb.add(copy.keyInPass, index(first % layout.blockSize));
    return {pages[first / layout.blockSize], offset};
  }
  int64_t at = pass;
  for (int64_t g = 0; g < group; ++g)
    at += copyGroups[g].passes;
  Value offset = kb.toIndex(kb.rems(keyPos, kb.i32(int32_t(layout.blockSize))));
  return {pages[at], offset};
}

void PagedTileCopies::issueTile(Value tileIndex, Value slot, ValueRange pages) {
  // Every key of the tile is copied: keys outside [first, last) or on an
  // unmapped page are zero-filled (cp.async's source size 0), so the ring
  // never holds stale bytes that a zero weight could turn into NaN.
  Value base = tileBase(tileIndex);
  Value stageBase = kb.mul(slot, index(layout.stageBytes));
  Value ringBase = kb.add(stageBase, index(layout.ring));
  Value baseFromFirst = kb.sub(base, block.first);

  // Rows are copied 16 bytes per cp.async, consecutive threads on
  // consecutive bytes of a row (coalesced). The thread that copies a key's
  // first 16 bytes also records whether the key is live and copies its
  // nvfp4 group scales (head_dim / 16 bytes) and per-token scale. Only the
  // page and the pass's constant differ between a thread's copies.
  Value all = view(0, {layout.total}, kb.b.getIntegerType(8));
  auto copyChunk = [&](int64_t g, int64_t pass) {
    const CopyGroup &group = copyGroups[g];
    PassChunk chunk = passChunk(group, pass);
    Value n = chunk.key, nI32 = chunk.keyI32;
    Value keyPos = kb.add(base, nI32);
    auto [entry, offset] = passPage(pages, g, pass, keyPos);
    // first <= keyPos < last as one unsigned comparison.
    Value fromFirst = kb.add(baseFromFirst, nI32);
    Value inRange = kb.cmpi(arith::CmpIPredicate::ult, fromFirst, keySpan);
    Value mapped = kb.cmpi(arith::CmpIPredicate::sge, entry, kb.i32(0));
    Value live = kb.land(inRange, mapped);
    // An unmapped entry reads page 0 (with size 0: nothing is read).
    Value page = kb.toIndex(kb.select(mapped, entry, kb.i32(0)));
    Value bytes = kb.select(live, index(16), index(0));
    for (auto [s, side] : llvm::enumerate(group.sides)) {
      Value pageStart = kb.mul(page, index(side->pageStride));
      Value src = kb.add(pageStart, chunk.pageBytes[s]);
      src = kb.add(src, kb.mul(offset, index(side->tokenStride)));
      Value dst = kb.add(ringBase, chunk.stageBytes[s]);
      nvgpu::DeviceAsyncCopyOp::create(
          kb.b, kb.loc, all, ValueRange{dst}, side->flat, ValueRange{src},
          kb.b.getIndexAttr(16), bytes, kb.b.getUnitAttr());
    }
    kb.ifThen(chunk.firstChunk, [&] {
      for (PagedSide *side : group.sides) {
        if (side == &key) {
          Value flag = kb.select(live, kb.i32(1), kb.i32(0));
          Value at = kb.add(kb.mul(slot, index(layout.tileKeys)), n);
          kb.store(flag, liveKeys, {at});
        }
        if (side->groupOffset >= 0) {
          int64_t size = side->groupStride;
          // The scales' own element type (f8E4M3FN) on both ends.
          Type scaleType =
              cast<MemRefType>(side->groupScales.getType()).getElementType();
          Value scalesView = view(0, {layout.total}, scaleType);
          Value scaleDst = kb.add(ringBase, index(side->groupOffset));
          scaleDst = kb.add(scaleDst, kb.mul(n, index(size)));
          Value copied = kb.select(live, index(size), index(0));
          nvgpu::DeviceAsyncCopyOp::create(
              kb.b, kb.loc, scalesView, ValueRange{scaleDst}, side->groupScales,
              address(*side, page, offset, index(0)), kb.b.getIndexAttr(size),
              copied, size == 16 ? kb.b.getUnitAttr() : UnitAttr());
        }
        if (side->tokenOffset >= 0) {
          Value scales = view(0, {layout.total / 4}, kb.b.getF32Type());
          Value scaleDst = kb.add(ringBase, index(side->tokenOffset));
          scaleDst = kb.add(scaleDst, kb.mul(n, index(4)));
          scaleDst = kb.divs(scaleDst, index(4));
          Value copied = kb.select(live, index(1), index(0));
          nvgpu::DeviceAsyncCopyOp::create(
              kb.b, kb.loc, scales, ValueRange{scaleDst}, side->tokenScales,
              ValueRange{page, offset, block.kvHead}, kb.b.getIndexAttr(1),
              copied, UnitAttr());
        }
      }
    });
  };
  for (auto [g, group] : llvm::enumerate(copyGroups))
    for (int64_t pass = 0; pass < group.passes; ++pass) {
      int64_t chunks = layout.tileKeys * group.segments;
      if ((pass + 1) * layout.copyThreads <= chunks) {
        copyChunk(g, pass);
        continue;
      }
      Value chunk = kb.add(block.tid, index(pass * layout.copyThreads));
      Value inTile = kb.cmpi(arith::CmpIPredicate::slt, chunk, index(chunks));
      kb.ifThen(inTile, [&] { copyChunk(g, pass); });
    }
}

SmallVector<Value> PagedTileCopies::startRing(CpAsyncRing &ring,
                                              int64_t stages) {
  for (int64_t s = 0; s + 1 < stages; ++s) {
    Value stage = kb.i32(int32_t(s));
    SmallVector<Value> pages = lookupPages(stage);
    ring.issue(stage, [&] { issueTile(stage, index(s), pages); });
  }
  SmallVector<Value> aheadPages = lookupPages(kb.i32(int32_t(stages - 1)));
  return aheadPages;
}

SmallVector<Value> PagedTileCopies::copyAhead(CpAsyncRing &ring, Value tile,
                                              Value i32Stages, int64_t stages,
                                              ValueRange pages) {
  Value ahead = kb.add(tile, kb.i32(int32_t(stages - 1)));
  ring.issue(ahead, [&] {
    Value aheadSlot = kb.toIndex(kb.rems(ahead, i32Stages));
    issueTile(ahead, aheadSlot, pages);
  });
  // The next tile's lookups land while this one is computed.
  return lookupPages(kb.add(ahead, kb.i32(1)));
}

Value PagedTileCopies::stepAllLive(Value slot, Value n0, Value lane) {
  Value laneKey = kb.add(n0, kb.rems(lane, index(16)));
  Value laneLiveAt = kb.add(kb.mul(slot, index(layout.tileKeys)), laneKey);
  Value laneFlag = kb.load(liveKeys, {laneLiveAt});
  Value laneLive = kb.cmpi(arith::CmpIPredicate::ne, laneFlag, kb.i32(0));
  return NVVM::VoteSyncOp::create(kb.b, kb.loc, kb.b.getI1Type(), kb.i32(-1),
                                  laneLive, NVVM::VoteSyncKind::all);
}
