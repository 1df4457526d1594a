//===- Merge.cpp - The split-KV merge kernel ------------------------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the merge that every decode family shares: a block
// per (token, head, 128 channels) combines the splits' partial results
// (unnormalized output, max, sum) from the workspace, adds the sinks,
// applies the output channel scale and rounds once into the output.
//
//===----------------------------------------------------------------------===//

#include "Kernels/Common/DecodeCommon.h"
#include "Kernels/Common/KernelBuilder.h"
#include "Kernels/Kernels.h"

using namespace mlir;
using namespace pattn;

namespace {

/// Splits per iteration of the merge's channel sum: their loads are in
/// flight together.
constexpr int64_t kMergeUnroll = 8;
/// Splits whose partial outputs a thread loads before the maximum is known
/// (XQA plans split a B1 decode 32 ways): their loads overlap the
/// statistics' instead of following them.
constexpr int64_t kMergePrefetchedSplits = 32;

/// acc = body(j, acc) for j in [0, count) in order (the same operations as
/// a plain loop), kMergeUnroll at a time.
Value foldInOrder(KernelBuilder &kb, Value count, Value init,
                  function_ref<Value(Value, Value)> body) {
  Value unroll = kb.index(kMergeUnroll);
  Value whole = kb.mul(kb.divs(count, unroll), unroll);
  Value acc = kb.forLoop(kb.index(0), whole, unroll, {init},
                         [&](Value j, ValueRange c) -> SmallVector<Value> {
                           Value a = c[0];
                           for (int64_t u = 0; u < kMergeUnroll; ++u)
                             a = body(kb.add(j, kb.index(u)), a);
                           return {a};
                         })[0];
  return kb.forLoop(whole, count, kb.index(1), {acc},
                    [&](Value j, ValueRange c) -> SmallVector<Value> {
                      return {body(j, c[0])};
                    })[0];
}

/// A guarded pair's merge (buildGuardedPairMergeKernel): the guard value
/// of the pair's second op, whose workspace the kernel takes after the
/// first op's.
struct MergePair {
  int32_t secondGuardValue;
  /// Whether a workspace without rows is its op's "written directly".
  bool directOutput;
};

/// The merge kernel's arguments and the block's coordinates (its piece:
/// WorkspaceRowMerge).
struct MergeKernel : WorkspaceRowMerge {
  gpu::GPUFuncOp func;
  Value guard;      ///< the op's (null when absent)
  Value queryStart; ///< a split op's (else null)
  /// A pair's merge: whether the flag names the first op or the second,
  /// and the second op's workspace.
  Value first, second, secondOut, secondStats;
};

/// The kernel: the op's buffers (`hostOperands`), then the workspace (a
/// pair's: the first op's, then the second's).
MergeKernel createMergeKernel(KernelModule &kernels, OpBuilder &builder,
                              KernelBuilder &kb, int64_t valueDim,
                              int64_t kvHeads, const DecodeParams &p,
                              SmallVectorImpl<Value> &hostOperands,
                              SplitRows rows, const MergePair *pair) {
  DecodeSignature signature;
  if (rows.decodeTokens)
    signature.add(DecodeArg::QueryStart, p.queryStart);
  signature.add(DecodeArg::Guard, p.guard);
  signature.add(DecodeArg::Sinks, p.sinks);
  signature.add(DecodeArg::OutScale, p.outScale);
  signature.add(DecodeArg::Out, p.out);
  signature.addWorkspace(builder.getContext(), valueDim);
  if (pair)
    signature.addSecondWorkspace(builder.getContext(), valueDim);
  hostOperands.assign(signature.hostOperands().begin(),
                      signature.hostOperands().end());
  // Per chunk of splits: their weights and their sums (staged), which also
  // hold the threads' partial maxima first.
  Type stageType =
      workgroupMemRefType({kMergeSplitsPerChunk}, builder.getF32Type());
  MergeKernel m;
  m.func = kernels.create(builder, p.loc, "pattn_merge", signature.types(),
                          {stageType, stageType});
  m.weights = m.func.getWorkgroupAttributions()[0];
  m.sums = m.func.getWorkgroupAttributions()[1];

  signature.bind(m.func);
  m.guard = signature.arg(DecodeArg::Guard);
  if (rows.decodeTokens)
    m.queryStart = signature.arg(DecodeArg::QueryStart);
  m.sinks = signature.arg(DecodeArg::Sinks);
  m.outScale = signature.arg(DecodeArg::OutScale);
  m.out = signature.arg(DecodeArg::Out);
  m.partialOut = signature.arg(DecodeArg::PartialOut);
  m.partialStats = signature.arg(DecodeArg::PartialStats);
  int64_t group = p.numHeads / kvHeads;

  // A block per (row, kBlockThreads channels): thread t merges one channel.
  m.tid = kb.threadId();
  m.tokenHead = kb.blockId(gpu::Dimension::x);
  Value channelBlock = kb.blockId(gpu::Dimension::y);
  m.channel = kb.mul(channelBlock, kb.index(kBlockThreads));
  m.channel = kb.add(m.channel, m.tid);
  m.token = kb.divs(m.tokenHead, kb.index(p.numHeads));
  m.head = kb.rems(m.tokenHead, kb.index(p.numHeads));
  m.kvHead = kb.divs(m.head, kb.index(group));
  if (pair) {
    // The flag names the op that ran (or neither); each workspace's split
    // count is read in its own branch (mergeWorkspaces).
    Value flag = kb.load(m.guard, {kb.index(0)});
    m.first = kb.cmpi(arith::CmpIPredicate::eq, flag, kb.i32(p.guardValue));
    m.second =
        kb.cmpi(arith::CmpIPredicate::eq, flag, kb.i32(pair->secondGuardValue));
    m.secondOut = signature.arg(DecodeArg::SecondPartialOut);
    m.secondStats = signature.arg(DecodeArg::SecondPartialStats);
    return m;
  }
  m.splits = memref::DimOp::create(builder, p.loc, m.partialStats, 0);
  return m;
}

/// The largest split maximum (exact in any order): per thread, per warp
/// (shuffles), then across the warps through shared memory; and the sink
/// (null when the op has none), which the maximum includes.
std::pair<Value, Value>
mergeMaximum(KernelBuilder &kb, const WorkspaceRowMerge &m, Value threads) {
  Value ownMax = kb.forLoop(
      m.tid, m.splits, threads, {negInf(kb)},
      [&](Value s, ValueRange c) -> SmallVector<Value> {
        return {kb.fmax(
            c[0], kb.load(m.partialStats, {s, m.tokenHead, kb.index(0)}))};
      })[0];
  for (int32_t mask = 16; mask >= 1; mask /= 2) {
    Value other = gpu::ShuffleOp::create(kb.b, kb.loc, ownMax, kb.i32(mask),
                                         kb.i32(32), gpu::ShuffleMode::XOR)
                      .getShuffleResult();
    ownMax = kb.fmax(ownMax, other);
  }
  Value warp = kb.divs(m.tid, kb.index(32));
  Value laneOfWarp = kb.rems(m.tid, kb.index(32));
  Value leadsWarp = kb.cmpi(arith::CmpIPredicate::eq, laneOfWarp, kb.index(0));
  kb.ifThen(leadsWarp, [&] { kb.store(ownMax, m.weights, {warp}); });
  kb.barrier();
  Value globalMax = negInf(kb);
  for (int64_t w = 0; w < kBlockThreads / 32; ++w)
    globalMax = kb.fmax(globalMax, kb.load(m.weights, {kb.index(w)}));
  // Sinks of any float type, as ONNX Runtime's T-typed head_sink: f32.
  Value sink = m.sinks ? kb.toF32(kb.load(m.sinks, {m.head})) : Value();
  if (sink)
    globalMax = kb.fmax(globalMax, sink);
  kb.barrier();
  return {globalMax, sink};
}

/// Chunks of splits: their weights and sums staged by the block, then the
/// denominator and the channel's sum folded in split order (the same
/// operations, in the same order, as one thread walking them), the first
/// chunk's first splits from `prefetched`. Returns (denominator, sum).
SmallVector<Value> mergeSplits(KernelBuilder &kb, const WorkspaceRowMerge &m,
                               Value threads, Value globalMax,
                               ArrayRef<Value> prefetched, int64_t valueDim) {
  Value chunk = kb.index(kMergeSplitsPerChunk);
  Value chunkBegin = kb.index(0);
  Value zeroDenominator = kb.f32(0.0f);
  Value zeroSum = kb.f32(0.0f);
  return kb.forLoop(
      chunkBegin, m.splits, chunk, {zeroDenominator, zeroSum},
      [&](Value base, ValueRange c) -> SmallVector<Value> {
        Value count = kb.mins(chunk, kb.sub(m.splits, base));
        kb.forLoop(m.tid, count, threads, {},
                   [&](Value j, ValueRange) -> SmallVector<Value> {
                     Value s = kb.add(base, j);
                     Value max =
                         kb.load(m.partialStats, {s, m.tokenHead, kb.index(0)});
                     Value sum =
                         kb.load(m.partialStats, {s, m.tokenHead, kb.index(1)});
                     kb.store(softmaxWeight(kb, max, globalMax), m.weights,
                              {j});
                     kb.store(sum, m.sums, {j});
                     return {};
                   });
        kb.barrier();
        Value denominator =
            foldInOrder(kb, count, c[0], [&](Value j, Value acc) {
              Value l = kb.load(m.sums, {j});
              Value w = kb.load(m.weights, {j});
              return kb.fma(l, w, acc);
            });
        Value safeChannel = kb.mins(m.channel, kb.index(valueDim - 1));
        // The first chunk starts from the prefetched outputs, in order.
        Value first = kb.cmpi(arith::CmpIPredicate::eq, base, kb.index(0));
        Value sum = c[1];
        for (auto [j, o] : llvm::enumerate(prefetched)) {
          Value jIndex = kb.index(int64_t(j));
          Value real = kb.cmpi(arith::CmpIPredicate::slt, jIndex, count);
          Value added = kb.fma(o, kb.load(m.weights, {jIndex}), sum);
          sum = kb.select(kb.land(first, real), added, sum);
        }
        Value done = kb.mins(kb.index(int64_t(prefetched.size())), count);
        Value none = kb.index(0);
        Value skipped = kb.select(first, done, none);
        sum = foldInOrder(
            kb, kb.sub(count, skipped), sum, [&](Value j, Value acc) {
              Value at = kb.add(skipped, j);
              Value split = kb.add(base, at);
              Value o =
                  kb.load(m.partialOut, {split, m.tokenHead, safeChannel});
              return kb.fma(o, kb.load(m.weights, {at}), acc);
            });
        kb.barrier();
        return {denominator, sum};
      });
}

/// The decode side of a split op: the block's row is a compact token slot,
/// sequence b's k-th token at b x decodeTokens + k (the decode kernel's
/// workspace rows). Sets m.token to the query token it stands for and
/// returns whether it is one: k < n_b <= decodeTokens.
Value locateCompactRow(KernelBuilder &kb, MergeKernel &m, SplitRows rows) {
  Value slots = kb.index(rows.decodeTokens);
  Value slot = m.token;
  Value seq = kb.divs(slot, slots);
  Value k = kb.rems(slot, slots);
  Value next = kb.add(seq, kb.index(1));
  Value begin = kb.load(m.queryStart, {seq});
  Value end = kb.load(m.queryStart, {next});
  Value tokens = kb.sub(end, begin);
  Value limit = kb.i32(int32_t(rows.decodeTokens));
  Value isShort = kb.cmpi(arith::CmpIPredicate::sle, tokens, limit);
  Value k32 = kb.toI32(k);
  Value real = kb.cmpi(arith::CmpIPredicate::slt, k32, tokens);
  Value token = kb.add(begin, k32);
  m.token = kb.toIndex(token);
  return kb.land(isShort, real);
}

} // namespace

void pattn::mergeWorkspaceRow(KernelBuilder &kb, const WorkspaceRowMerge &m,
                              int64_t valueDim, Value threads,
                              Value hasChannel) {
  // Splits 0 ... kMergePrefetchedSplits - 1 of this thread's channel,
  // each loaded only where the split exists: with fewer splits (B4 L32K
  // f16 has 8, a B64 decode 2) clamped loads of the last split were
  // wasted L2 requests that slowed every merge block (H100: the merge
  // 11.0 -> 7.8 us at B64 L4K, 6.8 -> 5.3 us with 8 query tokens).
  SmallVector<Value> prefetched;
  Value safeChannel = kb.mins(m.channel, kb.index(valueDim - 1));
  Value lastSplit = kb.sub(m.splits, kb.index(1));
  Value none = kb.f32(0.0f);
  for (int64_t j = 0; j < kMergePrefetchedSplits; ++j) {
    Value split = kb.index(j);
    Value real = kb.cmpi(arith::CmpIPredicate::sle, split, lastSplit);
    auto load = scf::IfOp::create(kb.b, kb.loc, TypeRange{kb.b.getF32Type()},
                                  real, /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard guard(kb.b);
      kb.b.setInsertionPointToStart(load.thenBlock());
      Value o = kb.load(m.partialOut, {split, m.tokenHead, safeChannel});
      scf::YieldOp::create(kb.b, kb.loc, o);
      kb.b.setInsertionPointToStart(load.elseBlock());
      scf::YieldOp::create(kb.b, kb.loc, none);
    }
    prefetched.push_back(load.getResult(0));
  }
  auto [globalMax, sink] = mergeMaximum(kb, m, threads);
  SmallVector<Value> totals =
      mergeSplits(kb, m, threads, globalMax, prefetched, valueDim);
  Value sinkWeight = sink ? softmaxWeight(kb, sink, globalMax) : Value();
  Value inverse = outputInverse(kb, totals[0], sinkWeight);
  kb.ifThen(hasChannel, [&] {
    storeOutput(kb, totals[1], inverse, m.outScale, m.out, m.token, m.head,
                m.kvHead, m.channel);
  });
}

/// A guarded pair's row: the merge of the first op's workspace where the
/// flag names it, else of the second's where it names that one. Each
/// branch is the lone merge's code over its workspace (one merge over a
/// selected workspace ran 0.5-1.1 us slower on the H100).
/// With `directOutput`, a workspace without rows is skipped: its op found
/// one split and wrote the output itself.
static void mergeWorkspaces(KernelBuilder &kb, const MergeKernel &m,
                            int64_t valueDim, Value threads, Value hasChannel,
                            bool directOutput) {
  auto mergeNamed = [&](Value named, Value partialOut, Value partialStats) {
    Value merges = named;
    if (directOutput) {
      Value rows = memref::DimOp::create(kb.b, kb.loc, partialStats, 1);
      Value hasRows = kb.cmpi(arith::CmpIPredicate::sgt, rows, kb.index(0));
      merges = kb.land(named, hasRows);
    }
    kb.ifThen(merges, [&] {
      MergeKernel own = m;
      own.partialOut = partialOut;
      own.partialStats = partialStats;
      own.splits = memref::DimOp::create(kb.b, kb.loc, own.partialStats, 0);
      mergeWorkspaceRow(kb, own, valueDim, threads, hasChannel);
    });
  };
  mergeNamed(m.first, m.partialOut, m.partialStats);
  mergeNamed(m.second, m.secondOut, m.secondStats);
}

/// The merge kernel of buildMergeKernel, or of a guarded pair (`pair`).
static gpu::GPUFuncOp buildMerge(KernelModule &kernels, int64_t valueDim,
                                 int64_t kvHeads, const DecodeParams &p,
                                 SmallVectorImpl<Value> &hostOperands,
                                 SplitRows rows, const MergePair *pair) {
  OpBuilder builder(p.query.getContext());
  KernelBuilder kb(builder, p.loc);
  MergeKernel m = createMergeKernel(kernels, builder, kb, valueDim, kvHeads, p,
                                    hostOperands, rows, pair);
  Value threads = kb.index(kBlockThreads);
  Value hasChannel =
      kb.cmpi(arith::CmpIPredicate::slt, m.channel, kb.index(valueDim));
  if (pair) {
    mergeWorkspaces(kb, m, valueDim, threads, hasChannel, pair->directOutput);
    gpu::ReturnOp::create(builder, p.loc);
    return m.func;
  }

  // A split op's decode side: only the real token slots.
  Value merges = guardAllows(kb, m.guard, p.guardValue);
  if (rows.decodeTokens) {
    Value owned = locateCompactRow(kb, m, rows);
    merges = kb.land(merges, owned);
  }
  kb.ifThen(merges,
            [&] { mergeWorkspaceRow(kb, m, valueDim, threads, hasChannel); });
  gpu::ReturnOp::create(builder, p.loc);
  return m.func;
}

gpu::GPUFuncOp pattn::buildMergeKernel(KernelModule &kernels, int64_t valueDim,
                                       int64_t kvHeads, const DecodeParams &p,
                                       SmallVectorImpl<Value> &hostOperands,
                                       SplitRows rows) {
  return buildMerge(kernels, valueDim, kvHeads, p, hostOperands, rows,
                    /*pair=*/nullptr);
}

auto ::pattn::buildGuardedPairMergeKernel(KernelModule &kernels,
                                          PagedAttentionOp first,
                                          PagedAttentionOp second,
                                          SmallVectorImpl<Value> &hostOperands,
                                          bool directOutput) -> gpu::GPUFuncOp {
  CacheType value = first.getValue().getType();
  MergePair pair{static_cast<int32_t>(second.getGuardValue().value_or(0)),
                 directOutput};
  return buildMerge(kernels, value.getHeadDim(), value.getKvHeads(),
                    decodeParams(first), hostOperands, SplitRows(), &pair);
}

auto ::pattn::buildPagedMergeKernel(KernelModule &kernels, PagedAttentionOp op,
                                    SmallVectorImpl<Value> &hostOperands,
                                    SplitRows rows) -> gpu::GPUFuncOp {
  CacheType value = op.getValue().getType();
  return buildMergeKernel(kernels, value.getHeadDim(), value.getKvHeads(),
                          decodeParams(op), hostOperands, rows);
}

auto ::pattn::buildMlaMergeKernel(KernelModule &kernels, MlaDecodeOp op,
                                  SmallVectorImpl<Value> &hostOperands)
    -> gpu::GPUFuncOp {
  RecordType record = op.getCache().getType().getRecord();
  int64_t latent = record.getLane("latent").getCount();
  int64_t keyDim = latent + record.getLane("rope").getCount();
  return buildMergeKernel(kernels, latent, /*kvHeads=*/1,
                          decodeParams(op, keyDim), hostOperands);
}
