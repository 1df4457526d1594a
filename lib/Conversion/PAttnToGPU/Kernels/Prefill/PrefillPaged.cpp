//===- PrefillPaged.cpp - The tensor-core prefill of a prompt -------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the prefill family of pattn.paged_attention: one
// block of four warps per (query tile, split, KV head), following its
// #pattn.prefill_plan. The query tile's tokens times the g heads of the KV
// head are 64 rows, 16 per warp: each warp is one m16 tile of
// mma.sync.m16n8k16 over all of a tile's keys, so each key read and
// decoded serves 64 rows (XQA's prompt tiles serve 32):
//
//   cp.async ring (raw cache rows, stages deep; Common/PagedCopies)
//     -> a quantized side decoded once per tile into a 16-bit tile
//        (Codecs' word decoders; V's per-token scales applied here)
//     -> per warp: S = Q Kᵀ (ldmatrix, mma), logits and masks of each
//        16-key step of the tile, one online softmax update over the whole
//        tile (MmaBuilder::softmaxSteps), then O += P V per step
//        (ldmatrix.trans, mma)
//     -> each warp writes its rows' partial results, which the shared
//        merge kernel normalizes (sinks, out_scale, one rounding).
//
// decodeWordHalves pairs channels j and j + n/2 of a word of n codes; the
// decoded tile stores the pairs in order, so a decoded row's channels are
// permuted within each word (channelAt). The query tile is stored in K's
// order (Q Kᵀ does not change), and the output channel of each of V's
// positions is looked up at the write-out.
//
//===----------------------------------------------------------------------===//

#include "Kernels/Prefill/PrefillPaged.h"
#include "Kernels/Codecs/Codecs.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace pattn;
using namespace pattn::prefill;

Value PrefillBuilder::view(int64_t offset, ArrayRef<int64_t> shape,
                           Type element) {
  Value at = index(offset);
  return sharedView(kb, smem, at, shape, element);
}

void PrefillBuilder::computeFacts() {
  headDim = keyBuffers.type.getHeadDim();
  valueDim = valueBuffers.type.getHeadDim();
  kvHeads = keyBuffers.type.getKvHeads();
  numHeads = static_cast<int64_t>(op.getNumHeads());
  group = numHeads / kvHeads;
  blockSize = keyBuffers.type.getBlockSize();
  rows = plan.getRows();
  blockThreads = plan.getThreads();
  tileTokens = plan.getQueryTile();
  tileKeys = plan.getKeysPerTile();
  stages = plan.getStages();
  window = static_cast<int64_t>(op.getWindow());
  softcap = op.getSoftcap().convertToFloat();
  nTiles = valueDim / 8;
  tc.bf16 = plan.getOperand().isBF16();
  wgmma = plan.getKernel() == TensorCoreKernel::wgmma;
  layout = layoutPrefillShared(keyBuffers.type, valueBuffers.type, tileKeys,
                               stages, plan.getKernel());
  keyDecoded = layout.decodedKeys >= 0;
  valueDecoded = layout.decodedValues >= 0;
  kb.hardwareFp8 = kernels.hardwareFp8;
  kb.hardwareFp4 = kernels.hardwareFp4;
}

gpu::GPUFuncOp
PrefillBuilder::createKernel(SmallVectorImpl<Value> &hostOperands,
                             DecodeSignature &signature) {
  signature = pagedTensorCoreSignature(op, keyBuffers, valueBuffers,
                                       /*fold=*/nullptr,
                                       /*writesOutput=*/true);
  hostOperands.assign(signature.hostOperands().begin(),
                      signature.hostOperands().end());
  gpu::GPUFuncOp kernel = kernels.create(builder, op.getLoc(), "pattn_prefill",
                                         signature.types(), {});
  setLaunchBounds(kernel, plan.getThreads(),
                  plan.getResidentBlocksOn(kernels.chips));
  signature.bind(kernel);
  describePagedSide(key, keyBuffers, true, signature, layout.ring);
  describePagedSide(value, valueBuffers, false, signature, layout.ring);
  return kernel;
}

void PrefillBuilder::setUpBlock() {
  Location loc = op.getLoc();
  smem = dynamicSharedBytes(builder, loc);
  if (wgmma) {
    // wgmma's K-major A: [channel / 8][row / 8][row % 8][channel % 8].
    queryTile = view(layout.ring.query, {headDim / 8, rows / 8, 8, 8},
                     builder.getF16Type());
    Value address =
        memref::ExtractAlignedPointerAsIndexOp::create(builder, loc, smem);
    smemAddress = kb.toI64(address);
  } else {
    queryTile = view(layout.ring.query, {rows, layout.ring.queryStride / 2},
                     builder.getF16Type());
  }
  tid = kb.threadId();
  warp = kb.divs(tid, index(kWarpThreads));
  lane = kb.rems(tid, index(kWarpThreads));
  groupId = kb.divs(lane, index(4));
  threadInGroup = kb.rems(lane, index(4));
  warpRow = kb.mul(warp, index(16));
  warpgroup = kb.divs(warp, index(4));
  promptTile = kb.toI32(kb.blockId(gpu::Dimension::x));
  split = kb.blockId(gpu::Dimension::y);
  kvHead = kb.blockId(gpu::Dimension::z);
  flattenPagedStorage(kb, key, blockSize);
  flattenPagedStorage(kb, value, blockSize);
  liveKeys =
      view(layout.ring.liveKeys, {stages * tileKeys}, builder.getI32Type());
}

void PrefillBuilder::prepareQuery(Value query, Value queryExponents) {
  // Column c holds channel decodedChannel(c) of K's words (c itself for a
  // 16-bit K), the order of the K tile Q Kᵀ reads.
  QueryTile tile{query, queryTile, tid,   kvHead,
                 rows,  headDim,   group, tc.operandType()};
  tile.coreMatrices = wgmma;
  tile.threads = blockThreads;
  stageQueryTile(kb, tile, queries, [&](Value column) {
    return keyDecoded ? decodedChannel(column, key.perWord) : column;
  });
  if (wgmma)
    publishToAsyncProxy();
  kb.barrier();
  // D <= 128: the warp's 8 x 4 fragment registers stay resident (wgmma
  // reads the tile itself).
  if (headDim <= 128 && !wgmma)
    for (int64_t step = 0; step < headDim / 16; ++step)
      queryFragments.push_back(queryFragment(step));
  if (!queryExponents)
    return;
  for (int64_t h = 0; h < 2; ++h) {
    Value row = kb.add(warpRow, kb.add(groupId, index(8 * h)));
    rowScales.push_back(foldedRowScale(kb, queryExponents, row, group, kvHead,
                                       queries, softmaxScale));
  }
}

SmallVector<Value> PrefillBuilder::queryFragment(int64_t step) {
  if (step < static_cast<int64_t>(queryFragments.size()))
    return queryFragments[step];
  Value row = kb.add(warpRow, kb.rems(lane, index(16)));
  Value columnHalf = kb.mul(kb.divs(lane, index(16)), index(8));
  Value column = kb.add(columnHalf, index(step * 16));
  return tc.loadOperandA(queryTile, row, column);
}

SmallVector<Value> PrefillBuilder::runTiles() {
  if (wgmma)
    return runTilesWgmma();
  // Per thread: the max and sum of rows g and g + 8 of the warp's m-tile,
  // then the accumulators of every value channel, then the block-table
  // entries of the next tile to copy.
  SmallVector<Value> init{negInf, negInf, zeroF32, zeroF32};
  for (int64_t i = 0; i < nTiles * 4; ++i)
    init.push_back(zeroF32);
  size_t softmaxState = init.size();

  // Prologue: stages - 1 tiles in flight, the next one's pages loaded.
  CpAsyncRing ring(kb, keys.tileCount);
  SmallVector<Value> ahead = copies->startRing(ring, stages);
  init.append(ahead.begin(), ahead.end());
  Value i32Stages = kb.i32(int32_t(stages));
  Type f16 = builder.getF16Type();

  SmallVector<Value> state = kb.forLoop(
      index(0), kb.toIndex(keys.tileCount), index(1), init,
      [&](Value iteration, ValueRange carried) -> SmallVector<Value> {
        // Tile `iteration` has landed, and every warp is done with the
        // previous one (its ring slot and the decoded tiles).
        ring.land(int32_t(stages - 2));
        Value i32Iteration = kb.toI32(iteration);
        SmallVector<Value> nextPages =
            copies->copyAhead(ring, i32Iteration, i32Stages, stages,
                              carried.drop_front(softmaxState));
        TileViews tile;
        tile.slot = kb.toIndex(kb.rems(i32Iteration, i32Stages));
        tile.stageBase =
            kb.add(kb.mul(tile.slot, index(layout.ring.stageBytes)),
                   index(layout.ring.ring));
        tile.tileStart = copies->tileBase(i32Iteration);
        if (keyDecoded || valueDecoded) {
          decodeTile(tile.stageBase);
          kb.barrier();
        }
        auto rowsOf = [&](const PagedSide &side, bool decoded, int64_t at,
                          int64_t stride) {
          if (decoded)
            return view(at, {tileKeys, stride / 2}, f16);
          Value offset = kb.add(tile.stageBase, index(side.rows));
          return sharedView(kb, smem, offset, {tileKeys, side.rowStride / 2},
                            f16);
        };
        tile.keyRows =
            rowsOf(key, keyDecoded, layout.decodedKeys, layout.keyStride);
        tile.valueRows = rowsOf(value, valueDecoded, layout.decodedValues,
                                layout.valueStride);
        // S and the logits of every 16-key step of the tile, one online
        // softmax update over all of them (one row maximum, quad
        // reduction and decay per tile), then O += P V step by step.
        SmallVector<Value> s(carried.take_front(softmaxState));
        SmallVector<SmallVector<Value>> logits;
        for (int64_t step = 0; step < tileKeys / 16; ++step) {
          Value n0 = index(step * 16);
          SmallVector<Value> scores = scoreStep(tile, n0);
          logits.push_back(logitStep(scores, tile, n0));
        }
        SmallVector<SmallVector<SmallVector<Value>>> p =
            tc.softmaxSteps(softmaxTiles(), logits, s, negInf, zeroF32);
        for (int64_t step = 0; step < tileKeys / 16; ++step)
          valueStep(tile, index(step * 16), p[step].front(), s);
        s.append(nextPages.begin(), nextPages.end());
        return s;
      });
  // No copy may be in flight when the block exits.
  ring.land(0);
  state.resize(softmaxState);
  return state;
}

PrefillBuilder::RowPlace PrefillBuilder::rowPlace(int64_t h) {
  RowPlace place;
  place.row = kb.add(warpRow, kb.add(groupId, index(8 * h)));
  Value realRows = kb.mul(kb.toIndex(queries.tokenCount), index(group));
  place.real = kb.cmpi(arith::CmpIPredicate::slt, place.row, realRows);
  Value tokenBegin = kb.toIndex(queries.tokenBegin);
  place.token = kb.add(tokenBegin, kb.divs(place.row, index(group)));
  Value firstHead = kb.mul(kvHead, index(group));
  place.head = kb.add(firstHead, kb.rems(place.row, index(group)));
  Value tokenRow = kb.mul(place.token, index(numHeads));
  place.outRow = kb.add(tokenRow, place.head);
  return place;
}

Value PrefillBuilder::outputChannel(int64_t nt, int64_t e2) {
  Value at = kb.add(kb.mul(threadInGroup, index(2)), index(8 * nt + e2));
  return valueDecoded ? decodedChannel(at, value.perWord) : at;
}

void PrefillBuilder::writeRows(ArrayRef<Value> state,
                               const DecodeSignature &signature) {
  // Thread (g, t) holds rows g and g + 8 of its warp, value positions
  // 8 nt + 2t + e; the quad's lanes sum the row's partial sums.
  MmaBuilder::SoftmaxTiles tiles = softmaxTiles();
  Value valueScale;
  if (value.type.getScale() == ScaleGranularity::tensor)
    valueScale = kb.load(value.scale, {index(0)});
  Value sinks = signature.arg(DecodeArg::Sinks);
  Value outScale = signature.arg(DecodeArg::OutScale);
  Value out = signature.arg(DecodeArg::Out);
  Value partialOut = signature.arg(DecodeArg::PartialOut);
  Value partialStats = signature.arg(DecodeArg::PartialStats);
  // The host hands over a workspace without rows where the kernel is to
  // finish its rows itself (one split, no merge after it).
  Value workspaceRows =
      memref::DimOp::create(builder, op.getLoc(), partialStats, 1);
  Value unsplit = kb.cmpi(arith::CmpIPredicate::eq, workspaceRows, index(0));
  for (int64_t h = 0; h < 2; ++h) {
    Value sum = state[tiles.sumAt(0, h)];
    sum = kb.fadd(sum, tc.shuffleXor(sum, 1));
    sum = kb.fadd(sum, tc.shuffleXor(sum, 2));
    Value naturalMax = kb.fmul(state[tiles.maxAt(0, h)], kb.f32(float(M_LN2)));
    RowPlace place = rowPlace(h);
    auto valueAt = [&](int64_t nt, int64_t e2) {
      Value x = state[tiles.accAt(0, nt, 2 * h + e2)];
      return valueScale ? kb.fmul(x, valueScale) : x;
    };
    kb.ifThen(place.real, [&] {
      kb.ifElse(
          unsplit, {},
          [&]() -> SmallVector<Value> {
            // The merge's arithmetic for one split (Merge.cpp), so the
            // bits are the same.
            UnsplitRow finished =
                finishUnsplitRow(kb, naturalMax, sum, sinks, place.head);
            for (int64_t nt = 0; nt < nTiles; ++nt)
              for (int64_t e2 = 0; e2 < 2; ++e2) {
                Value channel = outputChannel(nt, e2);
                Value weighted = finished.weighted(kb, valueAt(nt, e2));
                storeOutput(kb, weighted, finished.inverse, outScale, out,
                            place.token, place.head, kvHead, channel);
              }
            return {};
          },
          [&]() -> SmallVector<Value> {
            for (int64_t nt = 0; nt < nTiles; ++nt)
              for (int64_t e2 = 0; e2 < 2; ++e2) {
                Value channel = outputChannel(nt, e2);
                Value x = valueAt(nt, e2);
                kb.store(x, partialOut, {split, place.outRow, channel});
              }
            Value firstOfQuad =
                kb.cmpi(arith::CmpIPredicate::eq, threadInGroup, index(0));
            kb.ifThen(firstOfQuad, [&] {
              kb.store(naturalMax, partialStats,
                       {split, place.outRow, index(0)});
              kb.store(sum, partialStats, {split, place.outRow, index(1)});
            });
            return {};
          });
    });
  }
}

void PrefillBuilder::runBlock(const DecodeSignature &signature,
                              const DecodeSignature::SequenceArgs &args) {
  Value warpToken = kb.toI32(kb.divs(warpRow, index(group)));
  warpFirstQueryPos = kb.add(keys.firstQueryPos, warpToken);
  PagedRingLayout ringLayout;
  ringLayout.ring = layout.ring.ring;
  ringLayout.stageBytes = layout.ring.stageBytes;
  ringLayout.total = layout.total;
  ringLayout.tileKeys = tileKeys;
  ringLayout.blockSize = blockSize;
  ringLayout.coreMatrices = wgmma;
  ringLayout.copyThreads = blockThreads;
  PagedBlock block{tid, queries.seq, kvHead, blockTable, keys.first, keys.last};
  copies.emplace(kb, smem, ringLayout, key, value, liveKeys, block);

  bool tensorKey = key.type.getScale() == ScaleGranularity::tensor;
  LogitScale scale = logitScale(kb, op, tensorKey ? key.scale : Value());
  softmaxScale = scale.softmaxScale;
  log2e = scale.log2e;
  negInf = kb.f32(-std::numeric_limits<float>::infinity());
  zeroF32 = kb.f32(0.0f);
  prepareQuery(args.query, signature.arg(DecodeArg::QueryExponents));
  SmallVector<Value> state = runTiles();
  writeRows(state, signature);
}

gpu::GPUFuncOp PrefillBuilder::build(SmallVectorImpl<Value> &hostOperands) {
  computeFacts();
  DecodeSignature signature;
  gpu::GPUFuncOp kernel = createKernel(hostOperands, signature);
  DecodeSignature::SequenceArgs args = signature.sequenceArgs();
  blockTable = args.blockTable;
  setUpBlock();

  // A guarded op runs only when guard[0] holds its value (the fold pass
  // guards both forms of a dynamic K table).
  Value allowed = guardAllows(kb, signature.arg(DecodeArg::Guard),
                              op.getGuardValue().value_or(0));
  kb.ifThen(allowed, [&] {
    queries = locatePromptTile(kb, blockTable, args.queryStart, promptTile,
                               tileTokens);
    keys = blockKeyRange(kb, queries, args.seqLens, blockTable, blockSize,
                         tileKeys, window, split, /*promptTile=*/true);
    int64_t decodeTokens = op.getSplitDecodeTokens();
    if (!decodeTokens) {
      runBlock(signature, args);
      return;
    }
    // A split op's short sequences are the decode kernel's, which writes
    // their rows after this kernel. With one split (a workspace without
    // rows) their blocks stop here: on wgmma each holds an SM, and staging
    // a query to write zero rows made a mixed batch 3-5% slower than its
    // parts. With several splits they write empty partial results (no
    // keys), which this op's merge turns into zeros.
    Value limit = kb.i32(int32_t(decodeTokens));
    Value isShort =
        kb.cmpi(arith::CmpIPredicate::sle, queries.sequenceTokens, limit);
    Value none = kb.i32(0);
    keys.tileCount = kb.select(isShort, none, keys.tileCount);
    Value partialStats = signature.arg(DecodeArg::PartialStats);
    Value workspaceRows =
        memref::DimOp::create(builder, op.getLoc(), partialStats, 1);
    Value hasRows = kb.cmpi(arith::CmpIPredicate::sgt, workspaceRows, index(0));
    Value isLong =
        kb.cmpi(arith::CmpIPredicate::sgt, queries.sequenceTokens, limit);
    kb.ifThen(kb.lor(isLong, hasRows), [&] { runBlock(signature, args); });
  });
  gpu::ReturnOp::create(builder, op.getLoc());
  return kernel;
}

auto ::pattn::buildPrefillKernels(KernelModule &kernels, PagedAttentionOp op,
                                  PrefillPlanAttr plan, const CacheBuffers &key,
                                  const CacheBuffers &value) -> DecodeKernels {
  PrefillBuilder prefill(kernels, op, plan, key, value);
  DecodeKernels result = buildTensorCorePagedKernels(
      kernels, op, key, value, plan.getSharedBytes(), SplitRows(),
      [&](llvm::SmallVectorImpl<Value> &operands) {
        return prefill.build(operands);
      });
  result.blockThreads = plan.getThreads();
  return result;
}
