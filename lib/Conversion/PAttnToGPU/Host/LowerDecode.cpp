//===- LowerDecode.cpp - The decodes' workspace, splits and launches ------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the host side of pattn.paged_attention and
// pattn.mla_decode: the split count (a function of host-known sizes and the
// SM count only, so the call stays graph-capturable), the stream-ordered
// split-KV workspace, and the decode and merge launches of the kernels the
// op's plan names.
//
//===----------------------------------------------------------------------===//

#include "Host/HostRewriter.h"
#include "Kernels/Common/ScalarBuilder.h"
#include "pattn/Dialect/PAttn/Transforms/DecodePlan.h"

using namespace mlir;
using namespace pattn;

HostRewriter::DecodeWorkspace
HostRewriter::allocateWorkspace(Location loc, Value tokens, Value blockTable,
                                int64_t blockSize, int64_t valueDim,
                                int64_t numHeads, const DecodeGrid &grid) {
  ScalarBuilder kb(builder, loc);
  // Splits depend on the block table's shape (a host-known bound on the
  // kv length) and, for XQA, on the device's SM count, never on device
  // data: the call stays graph-capturable.
  Value maxKeys = kb.mul(dim(loc, blockTable, 1), kb.index(blockSize));
  Value splits;
  // Decode blocks per split of the tensor-core kernels.
  Value blocksPerSplit;
  if (grid.blocksPerSequence)
    blocksPerSplit =
        kb.mul(dim(loc, blockTable, 0), kb.index(grid.blocksPerSequence));
  else if (grid.blocksPerToken)
    blocksPerSplit = kb.mul(tokens, kb.index(grid.blocksPerToken));
  if (grid.tileKeys) {
    // The split count s minimizes the decode's time in tile-times:
    // waves(s) x (tiles per split(s) + 1), where a wave is the blocks
    // that every SM holds at once (SMs x resident blocks per SM, the
    // latter from the plan's shared memory on the chips built for).
    // Ties keep the smaller s (less merge work). A loop over at most
    // kXqaMostSplits candidates on the host, on host-known sizes only.
    int64_t tile = grid.tileKeys;
    Value sequences = kb.maxs(blocksPerSplit, kb.index(1));
    auto ceilDiv = [&](Value a, Value b) {
      return arith::CeilDivSIOp::create(builder, loc, a, b).getResult();
    };
    declareRuntimeFunction(function->getParentOfType<ModuleOp>(),
                           kDeviceMultiprocessors, builder.getI32Type());
    Value multiprocessors =
        func::CallOp::create(builder, loc, kDeviceMultiprocessors,
                             TypeRange{builder.getI32Type()}, ValueRange{})
            .getResult(0);
    multiprocessors = kb.toIndex(kb.maxs(multiprocessors, kb.i32(1)));
    int64_t resident = grid.residentBlocks;
    Value wave = kb.mul(multiprocessors, kb.index(resident));
    Value one = kb.index(1);
    Value tiles = ceilDiv(maxKeys, kb.index(tile));
    tiles = kb.maxs(tiles, one);
    Value most = kb.divs(tiles, kb.index(grid.leastTilesPerSplit));
    most = kb.mins(most, kb.index(grid.mostSplits));
    most = kb.maxs(most, one);
    auto cost = [&](Value candidate) {
      Value waves = ceilDiv(kb.mul(candidate, sequences), wave);
      Value perSplit = kb.add(ceilDiv(tiles, candidate), one);
      return kb.mul(waves, perSplit);
    };
    Value firstCost = cost(one);
    Value upper = kb.add(most, one);
    SmallVector<Value> best = kb.forLoop(
        kb.index(2), upper, one, {one, firstCost},
        [&](Value candidate, ValueRange carried) -> SmallVector<Value> {
          Value candidateCost = cost(candidate);
          Value better =
              kb.cmpi(arith::CmpIPredicate::slt, candidateCost, carried[1]);
          Value bestSplits = kb.select(better, candidate, carried[0]);
          Value bestCost = kb.select(better, candidateCost, carried[1]);
          return {bestSplits, bestCost};
        });
    splits = best[0];
  } else {
    Value perSplit = kb.index(grid.splitKeys);
    Value bySize = arith::CeilDivSIOp::create(builder, loc, maxKeys, perSplit);
    Value one = kb.index(1);
    splits = kb.maxs(bySize, one);
  }
  Value rows = kb.mul(tokens, kb.index(numHeads));
  MLIRContext *context = builder.getContext();
  auto outputType =
      MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic, valueDim},
                      builder.getF32Type());
  auto statsType = MemRefType::get(
      {ShapedType::kDynamic, ShapedType::kDynamic, 2}, builder.getF32Type());
  Type tokenType = gpu::AsyncTokenType::get(context);
  // Stream-ordered workspace: allocated and freed on the caller's stream.
  auto partialOut = gpu::AllocOp::create(
      builder, loc, outputType, tokenType, ValueRange{stream},
      ValueRange{splits, rows}, ValueRange{}, /*hostShared=*/false);
  auto partialStats = gpu::AllocOp::create(
      builder, loc, statsType, tokenType, ValueRange{stream},
      ValueRange{splits, rows}, ValueRange{}, /*hostShared=*/false);
  return {tokens,
          rows,
          splits,
          blocksPerSplit,
          partialOut.getMemref(),
          partialStats.getMemref()};
}

void HostRewriter::launchDecode(Location loc, int64_t valueDim,
                                const DecodeWorkspace &workspace,
                                const DecodeKernels &decode) {
  ScalarBuilder kb(builder, loc);
  SmallVector<Value> decodeOperands(decode.decodeOperands);
  decodeOperands.append({workspace.partialOut, workspace.partialStats});
  Value decodeRows =
      workspace.blocksPerSplit
          ? workspace.blocksPerSplit
          : kb.mul(workspace.tokens, kb.index(decode.decodeBlocksPerToken));
  launch(loc, decode.decode, {workspace.splits, decodeRows, kb.index(1)},
         decodeOperands, decode.sharedBytes, decode.blockThreads);
  SmallVector<Value> mergeOperands(decode.mergeOperands);
  mergeOperands.append({workspace.partialOut, workspace.partialStats});
  // A merge block per (row, kBlockThreads channels).
  Value channelBlocks = kb.index(llvm::divideCeil(valueDim, kBlockThreads));
  launch(loc, decode.merge, {workspace.rows, channelBlocks, kb.index(1)},
         mergeOperands);
}

void HostRewriter::freeWorkspace(Location loc,
                                 const DecodeWorkspace &workspace) {
  Type tokenType = gpu::AsyncTokenType::get(builder.getContext());
  gpu::DeallocOp::create(builder, loc, tokenType, ValueRange{stream},
                         workspace.partialOut);
  gpu::DeallocOp::create(builder, loc, tokenType, ValueRange{stream},
                         workspace.partialStats);
}

void HostRewriter::lowerDecode(
    Location loc, Value query, Value blockTable, int64_t blockSize,
    int64_t valueDim, int64_t numHeads, const DecodeGrid &grid,
    function_ref<DecodeKernels(KernelModule &)> build) {
  Value tokens = dim(loc, query, 0);
  ifPositive(loc, tokens, [&] {
    DecodeWorkspace workspace = allocateWorkspace(
        loc, tokens, blockTable, blockSize, valueDim, numHeads, grid);
    dispatch(loc, [&](KernelModule &module) {
      launchDecode(loc, valueDim, workspace, build(module));
    });
    freeWorkspace(loc, workspace);
  });
}

void HostRewriter::lowerDecodePerModule(
    Location loc, Value query, Value blockTable, int64_t blockSize,
    int64_t valueDim, int64_t numHeads,
    function_ref<DecodeGrid(KernelModule &)> gridOf,
    function_ref<DecodeKernels(KernelModule &)> build) {
  Value tokens = dim(loc, query, 0);
  ifPositive(loc, tokens, [&] {
    dispatch(loc, [&](KernelModule &module) {
      DecodeWorkspace workspace =
          allocateWorkspace(loc, tokens, blockTable, blockSize, valueDim,
                            numHeads, gridOf(module));
      launchDecode(loc, valueDim, workspace, build(module));
      freeWorkspace(loc, workspace);
    });
  });
}

LogicalResult HostRewriter::lower(PagedAttentionOp op) {
  FailureOr<CacheBuffers> key = resolveCache(op, op.getKey());
  FailureOr<CacheBuffers> value = resolveCache(op, op.getValue());
  if (failed(key) || failed(value))
    return failure();
  // The plan --pattn-plan-decode recorded decides (checked against the
  // chips by the pass before any rewriting).
  Attribute plan = op.getPlanAttr();
  if (auto xqa = dyn_cast<XqaPlanAttr>(plan)) {
    DecodeGrid grid;
    grid.tileKeys = xqa.getKeysPerTile();
    grid.sharedBytes = xqa.getSharedBytes();
    grid.residentBlocks = xqaResidentBlocks(grid.sharedBytes, chips);
    grid.blocksPerSequence = key->type.getKvHeads();
    lowerDecode(op.getLoc(), op.getQuery(), op.getBlockTable(),
                key->type.getBlockSize(), value->type.getHeadDim(),
                static_cast<int64_t>(op.getNumHeads()), grid,
                [&](KernelModule &module) {
                  return buildXqaDecodeKernels(module, op, xqa, *key, *value);
                });
    return success();
  }
  auto portable = cast<PortablePlanAttr>(plan);
  DecodeGrid grid;
  grid.splitKeys = portable.getKeysPerSplit();
  lowerDecode(
      op.getLoc(), op.getQuery(), op.getBlockTable(), key->type.getBlockSize(),
      value->type.getHeadDim(), static_cast<int64_t>(op.getNumHeads()), grid,
      [&](KernelModule &module) {
        return buildPagedDecodeKernels(module, op, *key, *value, portable);
      });
  return success();
}

LogicalResult HostRewriter::lower(MlaDecodeOp op) {
  FailureOr<RecordBuffers> cache = resolveRecords(op, op.getCache());
  if (failed(cache))
    return failure();
  // As for paged attention: the recorded plans decide.
  Attribute plan = op.getPlanAttr();
  DictionaryAttr chipPlans = op.getChipPlansAttr();
  RecordType record = cache->type.getRecord();
  int64_t latent = record.getLane("latent").getCount();
  int64_t numHeads = static_cast<int64_t>(op.getNumHeads());
  if (auto xqa = dyn_cast<XqaMlaPlanAttr>(plan)) {
    auto gridOf = [&](XqaMlaPlanAttr xqa, ArrayRef<Chip> chips) {
      DecodeGrid grid;
      grid.tileKeys = xqa.getKeysPerTile();
      grid.sharedBytes = xqa.getSharedBytes();
      grid.residentBlocks = xqaMlaResidentBlocks(xqa, chips);
      grid.blocksPerToken = numHeads / xqa.getHeadsPerBlock();
      // An MLA tile is 32 keys, and a block's tile costs more than a paged
      // one: a short sequence spreads over more splits.
      grid.leastTilesPerSplit = kXqaMlaLeastTilesPerSplit;
      grid.mostSplits = kXqaMlaMostSplits;
      return grid;
    };
    if (!chipPlans) {
      lowerDecode(op.getLoc(), op.getQuery(), op.getBlockTable(),
                  cache->type.getBlockSize(), latent, numHeads,
                  gridOf(xqa, chips), [&](KernelModule &module) {
                    return buildXqaMlaDecodeKernels(module, op, xqa, *cache);
                  });
      return success();
    }
    // Chips with a plan of their own have a module of their own, so each
    // module has one plan: its chips' own, else the op's.
    auto planOf = [&](KernelModule &module) {
      auto own =
          chipPlans.getAs<XqaMlaPlanAttr>(stringifyChip(module.chips.front()));
      return own ? own : xqa;
    };
    lowerDecodePerModule(
        op.getLoc(), op.getQuery(), op.getBlockTable(),
        cache->type.getBlockSize(), latent, numHeads,
        [&](KernelModule &module) {
          return gridOf(planOf(module), module.chips);
        },
        [&](KernelModule &module) {
          return buildXqaMlaDecodeKernels(module, op, planOf(module), *cache);
        });
    return success();
  }
  auto portable = cast<PortablePlanAttr>(plan);
  DecodeGrid grid;
  grid.splitKeys = portable.getKeysPerSplit();
  lowerDecode(op.getLoc(), op.getQuery(), op.getBlockTable(),
              cache->type.getBlockSize(), latent, numHeads, grid,
              [&](KernelModule &module) {
                return buildMlaDecodeKernels(module, op, *cache, portable);
              });
  return success();
}
