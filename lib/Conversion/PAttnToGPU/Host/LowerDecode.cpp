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
#include "Planning/DecodeFamilies.h"

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
  Value blocksPerSplit, promptTiles, kvHeads;
  if (grid.queryTile) {
    // Sequence b's n_b tokens make ceil(n_b / T) tiles, so all of them at
    // most (tokens + batch (T - 1)) / T: a bound from host-known sizes.
    Value batch = dim(loc, blockTable, 0);
    Value padding = kb.mul(batch, kb.index(grid.queryTile - 1));
    Value padded = kb.add(tokens, padding);
    promptTiles = kb.divs(padded, kb.index(grid.queryTile));
    kvHeads = kb.index(grid.blocksPerSequence);
    blocksPerSplit = kb.mul(promptTiles, kvHeads);
  } else if (grid.blocksPerSequence)
    blocksPerSplit =
        kb.mul(dim(loc, blockTable, 0), kb.index(grid.blocksPerSequence));
  else if (grid.blocksPerToken)
    blocksPerSplit = kb.mul(tokens, kb.index(grid.blocksPerToken));
  if (grid.clusterSplits) {
    // A cluster of splits per (sequence, KV head), which merges them: the
    // grid's x is the cluster.
    splits = kb.index(grid.clusterSplits);
  } else if (grid.tileKeys) {
    // The split count s minimizes the decode's time in tile-times:
    // waves(s) x (tiles per split(s) + 1), where a wave is the blocks
    // that every SM holds at once (SMs x resident blocks per SM, the
    // latter from the plan's shared memory on the chips built for).
    // Ties keep the smaller s (less merge work). A loop over at most
    // grid.mostSplits candidates on the host, on host-known sizes only.
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
  Value rowTokens = tokens;
  if (grid.compactTokens) {
    Value batch = dim(loc, blockTable, 0);
    rowTokens = kb.mul(batch, kb.index(grid.compactTokens));
  }
  Value rows = kb.mul(rowTokens, kb.index(numHeads));
  // A kernel that finishes unsplit rows itself needs no workspace then.
  Value workspaceRows = rows;
  if (grid.finishesUnsplit) {
    Value one = kb.index(1);
    Value split = kb.cmpi(arith::CmpIPredicate::sgt, splits, one);
    workspaceRows = kb.select(split, rows, kb.index(0));
  }
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
      ValueRange{splits, workspaceRows}, ValueRange{}, /*hostShared=*/false);
  auto partialStats = gpu::AllocOp::create(
      builder, loc, statsType, tokenType, ValueRange{stream},
      ValueRange{splits, workspaceRows}, ValueRange{}, /*hostShared=*/false);
  return {tokens,
          rows,
          splits,
          blocksPerSplit,
          partialOut.getMemref(),
          partialStats.getMemref(),
          grid.rowsOnX,
          promptTiles,
          kvHeads,
          grid.finishesUnsplit || grid.mergesUnsplit};
}

void HostRewriter::launchDecodeKernel(Location loc,
                                      const DecodeWorkspace &workspace,
                                      const DecodeKernels &decode) {
  ScalarBuilder kb(builder, loc);
  SmallVector<Value> decodeOperands(decode.decodeOperands);
  decodeOperands.append({workspace.partialOut, workspace.partialStats});
  Value decodeRows =
      workspace.blocksPerSplit
          ? workspace.blocksPerSplit
          : kb.mul(workspace.tokens, kb.index(decode.decodeBlocksPerToken));
  gpu::KernelDim3 blocks{workspace.splits, decodeRows, kb.index(1)};
  if (workspace.rowsOnX)
    std::swap(blocks.x, blocks.y);
  if (workspace.promptTiles)
    blocks = {workspace.promptTiles, workspace.splits, workspace.kvHeads};
  launch(loc, decode.decode, blocks, decodeOperands, decode.sharedBytes,
         decode.blockThreads);
}

Value HostRewriter::needsMerge(ScalarBuilder &kb,
                               const DecodeWorkspace &workspace) {
  if (!workspace.finishesUnsplit)
    return kb.boolean(true);
  return kb.cmpi(arith::CmpIPredicate::sgt, workspace.splits, kb.index(1));
}

void HostRewriter::launchMerge(Location loc, int64_t valueDim, Value rows,
                               gpu::GPUFuncOp merge, ValueRange operands) {
  ScalarBuilder kb(builder, loc);
  // A merge block per (row, kBlockThreads channels).
  Value channelBlocks = kb.index(llvm::divideCeil(valueDim, kBlockThreads));
  launch(loc, merge, {rows, channelBlocks, kb.index(1)}, operands);
}

void HostRewriter::launchDecode(Location loc, int64_t valueDim,
                                const DecodeWorkspace &workspace,
                                const DecodeKernels &decode) {
  launchDecodeKernel(loc, workspace, decode);
  // A decode whose clusters merge their splits has no merge kernel.
  if (!decode.merge)
    return;
  SmallVector<Value> mergeOperands(decode.mergeOperands);
  mergeOperands.append({workspace.partialOut, workspace.partialStats});
  if (!workspace.finishesUnsplit) {
    launchMerge(loc, valueDim, workspace.rows, decode.merge, mergeOperands);
    return;
  }
  ScalarBuilder kb(builder, loc);
  kb.ifThen(needsMerge(kb, workspace), [&] {
    launchMerge(loc, valueDim, workspace.rows, decode.merge, mergeOperands);
  });
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

/// How the blocks of the kernels `plan` describes cover a decode on
/// `chips`: the plan's tiles, shared memory, residency (the fewest blocks
/// among the chips) and split bounds; a block per (sequence, KV head) for
/// paged XQA, per (token, head group) otherwise.
static HostRewriter::DecodeGrid gridOfPlan(Attribute plan, ArrayRef<Chip> chips,
                                           int64_t kvHeads, int64_t numHeads) {
  HostRewriter::DecodeGrid grid;
  // The paged tensor-core plans: a block per (query tile or sequence,
  // split, KV head).
  auto pagedGrid = [&](auto paged) {
    grid.tileKeys = paged.getKeysPerTile();
    grid.sharedBytes = paged.getSharedBytes();
    grid.residentBlocks = paged.getResidentBlocksOn(chips);
    grid.blocksPerSequence = kvHeads;
    grid.queryTile = paged.getQueryTile();
    grid.leastTilesPerSplit = paged.getLeastTilesPerSplit();
    grid.mostSplits = paged.getMostSplits();
  };
  if (auto xqa = dyn_cast<XqaPlanAttr>(plan)) {
    pagedGrid(xqa);
    if (xqa.getClusterSplits() > 1)
      grid.clusterSplits = xqa.getClusterSplits();
    grid.mergesUnsplit = xqa.getMergesUnsplit();
  } else if (auto prefill = dyn_cast<PrefillPlanAttr>(plan)) {
    pagedGrid(prefill);
    grid.finishesUnsplit = true;
  } else if (auto mla = dyn_cast<XqaMlaPlanAttr>(plan)) {
    grid.tileKeys = mla.getKeysPerTile();
    grid.sharedBytes = mla.getSharedBytes();
    grid.residentBlocks = mla.getResidentBlocksOn(chips);
    grid.blocksPerToken = numHeads / mla.getHeadsPerBlock();
    grid.leastTilesPerSplit = mla.getLeastTilesPerSplit();
    grid.mostSplits = mla.getMostSplits();
  } else {
    auto portable = cast<PortablePlanAttr>(plan);
    grid.splitKeys = portable.getKeysPerSplit();
    grid.rowsOnX = portable.getPrompt();
    // A prompt's portable kernel finishes its rows itself with one split.
    grid.finishesUnsplit = portable.getPrompt();
  }
  return grid;
}

LogicalResult HostRewriter::lower(PagedAttentionOp op) {
  if (auto pair = guardedPairs.find(op); pair != guardedPairs.end())
    return lowerGuardedPair(op, pair->second);
  FailureOr<CacheBuffers> key = resolveCache(op, op.getKey());
  FailureOr<CacheBuffers> value = resolveCache(op, op.getValue());
  if (failed(key) || failed(value))
    return failure();
  // The plan --pattn-plan-decode recorded decides (checked against the
  // chips by the pass before any rewriting); its family builds the kernels.
  DecodeSources sources;
  sources.key = &*key;
  sources.value = &*value;
  if (auto fused = fusedFolds.find(op); fused != fusedFolds.end())
    sources.fold = &fused->second;
  int64_t numHeads = static_cast<int64_t>(op.getNumHeads());
  auto lowerPlan = [&](Attribute plan) {
    const DecodeFamily &family = familyOfPlan(op, plan);
    DecodeGrid grid = gridOfPlan(plan, chips, key->type.getKvHeads(), numHeads);
    if (plan == op.getDecodePlanAttr())
      grid.compactTokens = op.getSplitDecodeTokens();
    lowerDecode(op.getLoc(), queryRead(op), op.getBlockTable(),
                key->type.getBlockSize(), value->type.getHeadDim(), numHeads,
                grid, [&](KernelModule &module) {
                  return family.build(module, op, plan, sources);
                });
  };
  // A split op: the prefill family over the batch (the short sequences'
  // rows come out zero), then the decode kernel and its merge, which write
  // the short sequences' rows; each through a workspace of its own.
  lowerPlan(op.getPlanAttr());
  if (XqaPlanAttr decode = op.getDecodePlanAttr())
    lowerPlan(decode);
  return success();
}

LogicalResult HostRewriter::lower(MlaDecodeOp op) {
  FailureOr<RecordBuffers> cache = resolveRecords(op, op.getCache());
  if (failed(cache))
    return failure();
  // As for paged attention: the recorded plans decide.
  Attribute plan = op.getPlanAttr();
  DictionaryAttr chipPlans = op.getChipPlansAttr();
  DecodeSources sources;
  sources.records = &*cache;
  int64_t latent = cache->type.getRecord().getLane("latent").getCount();
  int64_t numHeads = static_cast<int64_t>(op.getNumHeads());
  if (!chipPlans) {
    const DecodeFamily &family = familyOfPlan(op, plan);
    lowerDecode(op.getLoc(), op.getQuery(), op.getBlockTable(),
                cache->type.getBlockSize(), latent, numHeads,
                gridOfPlan(plan, chips, 1, numHeads),
                [&](KernelModule &module) {
                  return family.build(module, op, plan, sources);
                });
    return success();
  }
  // Chips with a plan of their own have a module of their own, so each
  // module has one plan: its chips' own, else the op's.
  auto planOf = [&](KernelModule &module) -> Attribute {
    Attribute own = chipPlans.get(stringifyChip(module.chips.front()));
    return own ? own : plan;
  };
  lowerDecodePerModule(
      op.getLoc(), op.getQuery(), op.getBlockTable(),
      cache->type.getBlockSize(), latent, numHeads,
      [&](KernelModule &module) {
        return gridOfPlan(planOf(module), module.chips, 1, numHeads);
      },
      [&](KernelModule &module) {
        Attribute modulePlan = planOf(module);
        return familyOfPlan(op, modulePlan)
            .build(module, op, modulePlan, sources);
      });
  return success();
}

/// Whether `a` and `b` read queries of the same tokens: the same buffer, or
/// one the fold wrote from the other.
static bool sameQueryTokens(PagedAttentionOp a, PagedAttentionOp b) {
  auto foldedFrom = [](Value query) -> Value {
    for (Operation *user : query.getUsers())
      if (auto fold = dyn_cast<FoldQueryOp>(user);
          fold && fold.getOut() == query)
        return fold.getQuery();
    return Value();
  };
  Value first = a.getQuery(), second = b.getQuery();
  return first == second || foldedFrom(first) == second ||
         foldedFrom(second) == first;
}

// Two attention ops in a row that share a guard (with different values),
// the output, the sinks and the output scale, over queries of the same
// tokens, none split into prefill and decode sides: the fold's folded op and
// its fallback. At most one of them runs, so one merge, which reads the flag
// and merges the workspace of the op that ran, replaces their two (each a
// launch that otherwise only reads the flag and exits).
void HostRewriter::findGuardedPairs() {
  function.walk([&](PagedAttentionOp first) {
    // An op already paired with the one before it starts no pair.
    if (fusedAway.contains(first))
      return;
    auto second = dyn_cast_or_null<PagedAttentionOp>(first->getNextNode());
    if (!second || !first.getGuard() || second.getGuard() != first.getGuard())
      return;
    if (first.getGuardValue().value_or(0) == second.getGuardValue().value_or(0))
      return;
    if (first.getOut() != second.getOut() ||
        first.getSinks() != second.getSinks() ||
        first.getOutScale() != second.getOutScale() ||
        first.getNumHeads() != second.getNumHeads() ||
        first.getValue().getType() != second.getValue().getType())
      return;
    if (first.getDecodePlanAttr() || second.getDecodePlanAttr() ||
        !sameQueryTokens(first, second))
      return;
    guardedPairs[first] = second;
    fusedAway.insert(second);
  });
}

LogicalResult HostRewriter::lowerGuardedPair(PagedAttentionOp first,
                                             PagedAttentionOp second) {
  FailureOr<CacheBuffers> firstKey = resolveCache(first, first.getKey());
  FailureOr<CacheBuffers> firstValue = resolveCache(first, first.getValue());
  FailureOr<CacheBuffers> secondKey = resolveCache(second, second.getKey());
  FailureOr<CacheBuffers> secondValue = resolveCache(second, second.getValue());
  if (failed(firstKey) || failed(firstValue) || failed(secondKey) ||
      failed(secondValue))
    return failure();
  DecodeSources firstSources, secondSources;
  firstSources.key = &*firstKey;
  firstSources.value = &*firstValue;
  if (auto fused = fusedFolds.find(first); fused != fusedFolds.end())
    firstSources.fold = &fused->second;
  secondSources.key = &*secondKey;
  secondSources.value = &*secondValue;
  int64_t numHeads = static_cast<int64_t>(first.getNumHeads());
  int64_t valueDim = firstValue->type.getHeadDim();
  Attribute firstPlan = first.getPlanAttr(), secondPlan = second.getPlanAttr();
  const DecodeFamily &firstFamily = familyOfPlan(first, firstPlan);
  const DecodeFamily &secondFamily = familyOfPlan(second, secondPlan);
  DecodeGrid firstGrid =
      gridOfPlan(firstPlan, chips, firstKey->type.getKvHeads(), numHeads);
  DecodeGrid secondGrid =
      gridOfPlan(secondPlan, chips, secondKey->type.getKvHeads(), numHeads);
  // The pair's merge picks the workspace the guard names. A kernel that
  // finishes unsplit rows itself (the prefill family) gets a workspace
  // without rows with one split and writes the output; the merge then
  // skips that workspace, and runs at all only where a workspace has rows.
  bool directOutput = firstGrid.finishesUnsplit || secondGrid.finishesUnsplit;
  Location loc = first.getLoc();
  Value tokens = dim(loc, queryRead(first), 0);
  ifPositive(loc, tokens, [&] {
    DecodeWorkspace firstWorkspace = allocateWorkspace(
        loc, tokens, first.getBlockTable(), firstKey->type.getBlockSize(),
        valueDim, numHeads, firstGrid);
    DecodeWorkspace secondWorkspace = allocateWorkspace(
        second.getLoc(), tokens, second.getBlockTable(),
        secondKey->type.getBlockSize(), valueDim, numHeads, secondGrid);
    dispatch(loc, [&](KernelModule &module) {
      DecodeKernels firstKernels =
          firstFamily.build(module, first, firstPlan, firstSources);
      DecodeKernels secondKernels =
          secondFamily.build(module, second, secondPlan, secondSources);
      // The pair's merge replaces the ops' own (not launched).
      firstKernels.merge.erase();
      secondKernels.merge.erase();
      launchDecodeKernel(loc, firstWorkspace, firstKernels);
      launchDecodeKernel(second.getLoc(), secondWorkspace, secondKernels);
      SmallVector<Value> mergeOperands;
      gpu::GPUFuncOp merge = buildGuardedPairMergeKernel(
          module, first, second, mergeOperands, directOutput);
      mergeOperands.append(
          {firstWorkspace.partialOut, firstWorkspace.partialStats,
           secondWorkspace.partialOut, secondWorkspace.partialStats});
      if (!directOutput) {
        launchMerge(loc, valueDim, firstWorkspace.rows, merge, mergeOperands);
        return;
      }
      ScalarBuilder kb(builder, loc);
      Value firstSplit = needsMerge(kb, firstWorkspace);
      Value secondSplit = needsMerge(kb, secondWorkspace);
      kb.ifThen(kb.lor(firstSplit, secondSplit), [&] {
        launchMerge(loc, valueDim, firstWorkspace.rows, merge, mergeOperands);
      });
    });
    freeWorkspace(loc, firstWorkspace);
    freeWorkspace(loc, secondWorkspace);
  });
  return success();
}
