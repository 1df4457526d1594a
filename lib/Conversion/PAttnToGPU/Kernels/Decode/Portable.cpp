//===- Portable.cpp - The portable split-KV decode kernel -----------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the portable (fp32) decode of pattn.paged_attention
// and pattn.mla_decode. A decode block owns one (query token, head) and one
// split of the keys: 128 threads score 128 keys at a time into shared
// memory, then accumulate the softmax-weighted values with each thread
// owning a slice of the output channels (online softmax across chunks). The
// shared merge kernel (Merge.cpp) combines the splits. Caches are read
// through a KVSource (PortableSources.h), so paged caches of every encoding
// and MLA records share the kernel skeleton.
//
//===----------------------------------------------------------------------===//

#include "Kernels/Common/DecodeCommon.h"
#include "Kernels/Common/KernelBuilder.h"
#include "Kernels/Decode/PortableSources.h"
#include "Kernels/Kernels.h"

using namespace mlir;
using namespace pattn;
using namespace pattn::portable;

namespace {

/// Decode blocks that must fit on one SM at once (the register budget).
constexpr int32_t kDecodeBlocksPerSM = 4;

/// How a decode block spreads its work over its threads: static facts of
/// the op, its source and its plan.
struct PortableShape {
  int64_t keysPerSplit, keyDim, valueDim, kvHeads, group, heads, headGroups;
  /// A prompt plan: the (token, head group) rows on the grid's x, the
  /// splits on y (a decode has them the other way round).
  bool prompt;
  /// Each thread reads `elements` consecutive channels of a value row as one
  /// vector; when a row needs fewer than 128 threads, the block reads
  /// `lanes` keys at once and sums the lanes' partial outputs at the end.
  int64_t elements, vectorsPerRow, lanes, vectorsPerThread, accumulators;
  /// A lane's head in the lane reduction: outputs, then sum.
  int64_t reduceStride;
  /// Floats of the first shared buffer: the query rows, reused for the
  /// lanes' partial outputs once the keys are done.
  int64_t scratch;

  /// The loop state per head j: max, this lane's sum, then its
  /// accumulators (vector v, element e at accumulator v * elements + e).
  int64_t perHead() const { return 2 + accumulators; }
  int64_t maxOf(int64_t j) const { return j * perHead(); }
  int64_t sumOf(int64_t j) const { return j * perHead() + 1; }
  int64_t accOf(int64_t j, int64_t a) const { return j * perHead() + 2 + a; }
};

PortableShape shapeOf(KVSource &source, const DecodeParams &p,
                      PortablePlanAttr plan) {
  PortableShape s;
  s.keysPerSplit = plan.getKeysPerSplit();
  s.prompt = plan.getPrompt();
  s.keyDim = source.keyDim();
  s.valueDim = source.valueDim();
  s.kvHeads = source.kvHeads();
  s.group = p.numHeads / s.kvHeads;
  s.heads = plan.getHeadsPerBlock();
  s.headGroups = s.group / s.heads;
  s.elements = source.valueVectorElements(s.heads);
  s.vectorsPerRow = s.valueDim / s.elements;
  s.lanes = std::max<int64_t>(1, kBlockThreads / s.vectorsPerRow);
  s.vectorsPerThread =
      s.lanes == 1 ? llvm::divideCeil(s.vectorsPerRow, kBlockThreads) : 1;
  s.accumulators = s.vectorsPerThread * s.elements;
  s.reduceStride = s.valueDim + 1;
  s.scratch = std::max(s.heads * s.keyDim,
                       s.lanes > 1 ? s.lanes * s.heads * s.reduceStride : 0);
  return s;
}

/// Builds one decode kernel: the steps below, in kernel order.
class PortableDecode {
public:
  PortableDecode(KernelModule &kernels, KVSource &source, const DecodeParams &p,
                 PortablePlanAttr plan)
      : kernels(kernels), source(source), p(p), s(shapeOf(source, p, plan)),
        builder(p.query.getContext()), kb(builder, p.loc) {}

  gpu::GPUFuncOp build(SmallVectorImpl<Value> &hostOperands);

private:
  KernelModule &kernels;
  KVSource &source;
  const DecodeParams &p;
  const PortableShape s;
  OpBuilder builder;
  KernelBuilder kb;

  gpu::GPUFuncOp kernel;
  // Arguments and shared buffers.
  Value query, blockTable, seqLens, queryStart, guard, queryExponents,
      partialOut, partialStats;
  /// A prompt plan's: the op's sinks, out_scale and output (null when
  /// absent), for rows it finishes itself (writeFinished).
  Value sinks, outScale, out;
  Value querySmem, scores, pages, offsets;
  // The block's coordinates.
  Value tid, split, token, kvHead, firstHead, lane, firstVector, active;
  // The block's keys, [first, last) of `sequence`, and its heads' logit
  // scales.
  Value sequence, first, last, maxBlocks;
  SmallVector<Value> logitScales;

  /// Element i (index) of head j's row of the per-chunk scores.
  Value at(int64_t j, Value i) {
    return kb.add(kb.index(j * kBlockThreads), i);
  }
  void createKernel(SmallVectorImpl<Value> &hostOperands);
  void locateBlock();
  void findKeyRange();
  void stageQuery();
  void computeLogitScales();
  SmallVector<Value> initialState();
  /// Phase 1: thread tid scores key chunk + tid for every head into the
  /// shared scores; returns its logits.
  SmallVector<Value> scoreChunk(Value chunk);
  /// Phase 2: each head's new maximum and the factor that rescales what was
  /// accumulated under the old one; the scores become softmax weights.
  void weighChunk(ValueRange carried, ArrayRef<Value> logits, Value count,
                  SmallVectorImpl<Value> &newMax,
                  SmallVectorImpl<Value> &alpha);
  /// Phase 3: each lane takes every lanes-th key; a thread reads its value
  /// vector once for all heads.
  SmallVector<Value> accumulateValues(ValueRange carried, ArrayRef<Value> alpha,
                                      Value count);
  SmallVector<Value> accumulateKey(Value i, ValueRange c);
  SmallVector<Value> keyLoop();
  /// The block's results: with a workspace without rows (a prompt plan's
  /// one split: the host launches no merge) the finished output, else the
  /// split's partial results.
  void writeResults(ArrayRef<Value> state);
  void writePartials(ArrayRef<Value> state);
  /// The finished output of the block's rows, as the merge writes it.
  void writeFinished(ArrayRef<Value> state);
  /// One lane: each thread writes its channels, thread 0 the sums.
  void writeLanePartials(ArrayRef<Value> state, Value isFirst);
  void reduceLanePartials(ArrayRef<Value> state);
  /// Each lane's outputs and sums into shared memory, between barriers.
  void stageLanes(ArrayRef<Value> state);
  Value tokenHeadOf(Value headInBlock) {
    return kb.add(kb.mul(token, kb.index(p.numHeads)),
                  kb.add(firstHead, headInBlock));
  }
};

void PortableDecode::createKernel(SmallVectorImpl<Value> &hostOperands) {
  MLIRContext *context = p.query.getContext();
  Type f32 = Float32Type::get(context), i32 = IntegerType::get(context, 32);
  // Kernel arguments: the op's buffers, the source's, then the workspace.
  DecodeSignature signature;
  signature.addSequences(p.query, p.blockTable, p.seqLens, p.queryStart);
  signature.add(DecodeArg::Guard, p.guard);
  signature.add(DecodeArg::QueryExponents, p.queryExponents);
  signature.addRun(DecodeArg::Source, source.hostOperands);
  if (s.prompt) {
    signature.add(DecodeArg::Sinks, p.sinks);
    signature.add(DecodeArg::OutScale, p.outScale);
    signature.add(DecodeArg::Out, p.out);
  }
  signature.addWorkspace(context, s.valueDim);
  hostOperands.assign(signature.hostOperands().begin(),
                      signature.hostOperands().end());

  auto workgroup = [&](int64_t size, Type element) -> Type {
    return workgroupMemRefType({size}, element);
  };
  // Shared memory: the block's query rows (reused for the lanes' partial
  // outputs once the keys are done), then per chunk each head's logits
  // (overwritten by its softmax weights) and each key's page slot.
  kernel = kernels.create(
      builder, p.loc, "pattn_decode", signature.types(),
      {workgroup(s.scratch, f32), workgroup(s.heads * kBlockThreads, f32),
       workgroup(kBlockThreads, i32), workgroup(kBlockThreads, i32)});
  // Where the kernel would need more than 128 registers (code decoding, or
  // 64+ accumulators), ask for 4 blocks of 128 threads per SM: ptxas then
  // stays within 128 registers instead of landing at 130-140 and fitting
  // only 3 blocks. A light f16 kernel (~72 registers) is left alone: with
  // the bound ptxas spends registers up to 128 and loses occupancy.
  // (H200, bench/results/2026-11-29-h200-portable-decode.md.)
  if (!source.decodesCheaply() || s.heads * s.accumulators >= 64)
    setLaunchBounds(kernel, kBlockThreads, kDecodeBlocksPerSM);
  kb.hardwareFp8 = kernels.hardwareFp8;
  kb.hardwareFp4 = kernels.hardwareFp4;

  signature.bind(kernel);
  DecodeSignature::SequenceArgs sequence = signature.sequenceArgs();
  query = sequence.query;
  blockTable = sequence.blockTable;
  seqLens = sequence.seqLens;
  queryStart = sequence.queryStart;
  partialOut = sequence.partialOut;
  partialStats = sequence.partialStats;
  guard = signature.arg(DecodeArg::Guard);
  queryExponents = signature.arg(DecodeArg::QueryExponents);
  if (s.prompt) {
    sinks = signature.arg(DecodeArg::Sinks);
    outScale = signature.arg(DecodeArg::OutScale);
    out = signature.arg(DecodeArg::Out);
  }
  source.bind(signature.run(DecodeArg::Source));
  querySmem = kernel.getWorkgroupAttributions()[0];
  scores = kernel.getWorkgroupAttributions()[1];
  pages = kernel.getWorkgroupAttributions()[2];
  offsets = kernel.getWorkgroupAttributions()[3];
}

void PortableDecode::locateBlock() {
  // row = (token * kvHeads + kvHead) * headGroups + headGroup: blockId.y
  // and the split blockId.x, or the other way round for a prompt.
  tid = kb.threadId();
  split = kb.blockId(s.prompt ? gpu::Dimension::y : gpu::Dimension::x);
  Value row = kb.blockId(s.prompt ? gpu::Dimension::x : gpu::Dimension::y);
  token = kb.divs(row, kb.index(s.kvHeads * s.headGroups));
  Value kvHeadRow = kb.divs(row, kb.index(s.headGroups));
  kvHead = kb.rems(kvHeadRow, kb.index(s.kvHeads));
  Value groupBase = kb.mul(kvHead, kb.index(s.group));
  Value headGroup = kb.rems(row, kb.index(s.headGroups));
  firstHead = kb.add(groupBase, kb.mul(headGroup, kb.index(s.heads)));
  lane = s.lanes > 1 ? kb.divs(tid, kb.index(s.vectorsPerRow)) : kb.index(0);
  firstVector = s.lanes > 1 ? kb.rems(tid, kb.index(s.vectorsPerRow)) : tid;
  active = s.lanes > 1 ? kb.cmpi(arith::CmpIPredicate::slt, tid,
                                 kb.index(s.lanes * s.vectorsPerRow))
                       : kb.boolean(true);
}

void PortableDecode::findKeyRange() {
  auto [seq, queryTokens, position] =
      findQuerySequence(kb, token, queryStart, blockTable);
  sequence = seq;
  Value length = kb.load(seqLens, {sequence});
  // Query token i of n sits at kv position L - n + i and sees keys up to
  // its own position (causal among the speculative tokens).
  Value queryPos = kb.add(kb.sub(length, queryTokens), position);
  Value end = kb.mins(length, kb.add(queryPos, kb.i32(1)));
  Value begin = kb.i32(0);
  if (p.window > 0) {
    Value windowStart = kb.sub(queryPos, kb.i32(p.window));
    begin = kb.maxs(begin, kb.add(windowStart, kb.i32(1)));
  }
  Value splitBegin = kb.mul(kb.toI32(split), kb.i32(s.keysPerSplit));
  first = kb.maxs(begin, splitBegin);
  last = kb.mins(end, kb.add(splitBegin, kb.i32(s.keysPerSplit)));
  maxBlocks = kb.toI32(memref::DimOp::create(kb.b, kb.loc, blockTable, 1));
}

void PortableDecode::stageQuery() {
  // The block's query rows in shared memory as fp32.
  kb.forLoop(tid, kb.index(s.heads * s.keyDim), kb.index(kBlockThreads), {},
             [&](Value c, ValueRange) -> SmallVector<Value> {
               Value head = kb.add(firstHead, kb.divs(c, kb.index(s.keyDim)));
               Value channel = kb.rems(c, kb.index(s.keyDim));
               kb.store(kb.toF32(kb.load(query, {token, head, channel})),
                        querySmem, {c});
               return {};
             });
  kb.barrier();
}

void PortableDecode::computeLogitScales() {
  // Each head's logit scale: softmax_scale, times 2^e for the row
  // exponents of a folded query (exact; saturating, never inf).
  logitScales.assign(s.heads, kb.f32(p.softmaxScale));
  if (!queryExponents)
    return;
  for (int64_t j = 0; j < s.heads; ++j) {
    Value head = kb.add(firstHead, kb.index(j));
    Value exponent = kb.load(queryExponents, {token, head});
    logitScales[j] = kb.ldexpSaturating(logitScales[j], exponent);
  }
}

SmallVector<Value> PortableDecode::initialState() {
  SmallVector<Value> init;
  for (int64_t j = 0; j < s.heads; ++j) {
    init.append({negInf(kb), kb.f32(0.0f)});
    for (int64_t a = 0; a < s.accumulators; ++a)
      init.push_back(kb.f32(0.0f));
  }
  return init;
}

SmallVector<Value> PortableDecode::scoreChunk(Value chunk) {
  Value key32 = kb.toI32(kb.add(chunk, tid));
  Value inRange = kb.cmpi(arith::CmpIPredicate::slt, key32, last);
  // Clamp so the block-table read stays in bounds for idle threads.
  Value blockIndex = kb.mins(kb.divs(key32, kb.i32(p.blockSize)),
                             kb.sub(maxBlocks, kb.i32(1)));
  Value page = kb.load(blockTable, {sequence, kb.toIndex(blockIndex)});
  Value valid =
      kb.land(inRange, kb.cmpi(arith::CmpIPredicate::sge, page, kb.i32(0)));
  Value offset = kb.rems(key32, kb.i32(p.blockSize));
  Row keyRow{kb.toIndex(kb.maxs(page, kb.i32(0))), kb.toIndex(offset), kvHead};
  SmallVector<Type> scoreTypes(s.heads, kb.b.getF32Type());
  SmallVector<Value> logits = kb.ifElse(
      valid, scoreTypes,
      [&]() -> SmallVector<Value> {
        SmallVector<Value> dots =
            source.keyDots(kb, keyRow, querySmem, s.heads);
        for (auto [score, scale] : llvm::zip(dots, logitScales)) {
          score = kb.finiteLogit(kb.fmul(score, scale));
          if (p.softcap > 0.0f)
            score = kb.fmul(kb.f32(p.softcap),
                            kb.tanh(kb.fdiv(score, kb.f32(p.softcap))));
        }
        return dots;
      },
      [&]() -> SmallVector<Value> {
        return SmallVector<Value>(s.heads, negInf(kb));
      });
  for (int64_t j = 0; j < s.heads; ++j)
    kb.store(logits[j], scores, {at(j, tid)});
  kb.store(kb.select(valid, page, kb.i32(-1)), pages, {tid});
  kb.store(offset, offsets, {tid});
  kb.barrier();
  return logits;
}

void PortableDecode::weighChunk(ValueRange carried, ArrayRef<Value> logits,
                                Value count, SmallVectorImpl<Value> &newMax,
                                SmallVectorImpl<Value> &alpha) {
  // Every thread reads each head's chunk maximum; then each thread turns
  // its own logits into weights, once per key.
  for (int64_t j = 0; j < s.heads; ++j) {
    Value chunkMax =
        kb.forLoop(kb.index(0), count, kb.index(1), {negInf(kb)},
                   [&](Value i, ValueRange c) -> SmallVector<Value> {
                     return {kb.fmax(c[0], kb.load(scores, {at(j, i)}))};
                   })[0];
    Value oldMax = carried[s.maxOf(j)];
    newMax.push_back(kb.fmax(oldMax, chunkMax));
    // Rescale what was accumulated under the old maximum.
    alpha.push_back(kb.select(isNegInf(kb, oldMax), kb.f32(0.0f),
                              kb.exp(kb.fsub(oldMax, newMax[j]))));
  }
  kb.barrier();
  for (int64_t j = 0; j < s.heads; ++j)
    kb.store(softmaxWeight(kb, logits[j], newMax[j]), scores, {at(j, tid)});
  kb.barrier();
}

SmallVector<Value> PortableDecode::accumulateKey(Value i, ValueRange c) {
  int64_t perHead = s.perHead();
  auto slot = [&](int64_t j, int64_t k) {
    return j * (perHead - 1) + k; // k = 0: sum, 1 + a: acc a
  };
  SmallVector<Value> w;
  for (int64_t j = 0; j < s.heads; ++j)
    w.push_back(kb.load(scores, {at(j, i)}));
  Value keyPage = kb.load(pages, {i});
  Value live = kb.cmpi(arith::CmpIPredicate::sge, keyPage, kb.i32(0));
  Row valueRow{kb.toIndex(kb.maxs(keyPage, kb.i32(0))),
               kb.toIndex(kb.load(offsets, {i})), kvHead};
  SmallVector<Value> updated(c.begin(), c.end());
  for (int64_t j = 0; j < s.heads; ++j)
    updated[slot(j, 0)] = kb.fadd(c[slot(j, 0)], w[j]);
  for (int64_t v = 0; v < s.vectorsPerThread; ++v) {
    Value vector = kb.add(firstVector, kb.index(v * kBlockThreads));
    Value owns = kb.land(live, kb.cmpi(arith::CmpIPredicate::slt, vector,
                                       kb.index(s.vectorsPerRow)));
    SmallVector<Value> current;
    for (int64_t j = 0; j < s.heads; ++j)
      for (int64_t e = 0; e < s.elements; ++e)
        current.push_back(c[slot(j, 1 + v * s.elements + e)]);
    SmallVector<Value> next = kb.ifElse(
        owns, TypeRange(ValueRange(current)),
        [&]() -> SmallVector<Value> {
          SmallVector<Value> values = source.valueVector(
              kb, valueRow, kb.mul(vector, kb.index(s.elements)), s.elements);
          SmallVector<Value> sums;
          for (int64_t j = 0; j < s.heads; ++j)
            for (int64_t e = 0; e < s.elements; ++e)
              sums.push_back(
                  kb.fma(w[j], values[e], current[j * s.elements + e]));
          return sums;
        },
        [&]() -> SmallVector<Value> { return current; });
    for (int64_t j = 0; j < s.heads; ++j)
      for (int64_t e = 0; e < s.elements; ++e)
        updated[slot(j, 1 + v * s.elements + e)] = next[j * s.elements + e];
  }
  return updated;
}

SmallVector<Value> PortableDecode::accumulateValues(ValueRange carried,
                                                    ArrayRef<Value> alpha,
                                                    Value count) {
  SmallVector<Value> accInit;
  for (int64_t j = 0; j < s.heads; ++j)
    for (int64_t k = 1; k < s.perHead(); ++k)
      accInit.push_back(kb.fmul(carried[j * s.perHead() + k], alpha[j]));
  Value laneStart = kb.select(active, lane, count);
  SmallVector<Value> acc =
      kb.forLoop(laneStart, count, kb.index(s.lanes), accInit,
                 [&](Value i, ValueRange c) { return accumulateKey(i, c); });
  kb.barrier();
  return acc;
}

SmallVector<Value> PortableDecode::keyLoop() {
  SmallVector<Value> init = initialState();
  Value begin = kb.toIndex(first);
  Value end = kb.toIndex(kb.maxs(first, last));
  Value step = kb.index(kBlockThreads);
  return kb.forLoop(
      begin, end, step, init,
      [&](Value chunk, ValueRange carried) -> SmallVector<Value> {
        SmallVector<Value> logits = scoreChunk(chunk);
        Value count = kb.toIndex(
            kb.mins(kb.sub(last, kb.toI32(chunk)), kb.i32(kBlockThreads)));
        SmallVector<Value> newMax, alpha;
        weighChunk(carried, logits, count, newMax, alpha);
        SmallVector<Value> acc = accumulateValues(carried, alpha, count);
        SmallVector<Value> nextState;
        for (int64_t j = 0; j < s.heads; ++j) {
          nextState.push_back(newMax[j]);
          for (int64_t k = 0; k < s.perHead() - 1; ++k)
            nextState.push_back(acc[j * (s.perHead() - 1) + k]);
        }
        return nextState;
      });
}

void PortableDecode::writeLanePartials(ArrayRef<Value> state, Value isFirst) {
  for (int64_t j = 0; j < s.heads; ++j) {
    for (int64_t v = 0; v < s.vectorsPerThread; ++v) {
      Value vector = kb.add(firstVector, kb.index(v * kBlockThreads));
      Value inRow =
          kb.cmpi(arith::CmpIPredicate::slt, vector, kb.index(s.vectorsPerRow));
      kb.ifThen(inRow, [&] {
        for (int64_t e = 0; e < s.elements; ++e) {
          Value channel =
              kb.add(kb.mul(vector, kb.index(s.elements)), kb.index(e));
          kb.store(state[s.accOf(j, v * s.elements + e)], partialOut,
                   {split, tokenHeadOf(kb.index(j)), channel});
        }
      });
    }
    kb.ifThen(isFirst, [&] {
      kb.store(state[s.sumOf(j)], partialStats,
               {split, tokenHeadOf(kb.index(j)), kb.index(1)});
    });
  }
}

void PortableDecode::stageLanes(ArrayRef<Value> state) {
  // The lanes' outputs and sums into shared memory:
  // [lane][head][channel | sum].
  kb.barrier();
  kb.ifThen(active, [&] {
    for (int64_t j = 0; j < s.heads; ++j) {
      Value laneHead = kb.add(kb.mul(lane, kb.index(s.heads)), kb.index(j));
      Value base = kb.mul(laneHead, kb.index(s.reduceStride));
      for (int64_t e = 0; e < s.elements; ++e) {
        Value channel =
            kb.add(kb.mul(firstVector, kb.index(s.elements)), kb.index(e));
        kb.store(state[s.accOf(j, e)], querySmem, {kb.add(base, channel)});
      }
      kb.ifThen(kb.cmpi(arith::CmpIPredicate::eq, firstVector, kb.index(0)),
                [&] {
                  kb.store(state[s.sumOf(j)], querySmem,
                           {kb.add(base, kb.index(s.valueDim))});
                });
    }
  });
  kb.barrier();
}

void PortableDecode::reduceLanePartials(ArrayRef<Value> state) {
  // Sum the lanes through shared memory.
  stageLanes(state);
  kb.forLoop(
      tid, kb.index(s.heads * s.reduceStride), kb.index(kBlockThreads), {},
      [&](Value index, ValueRange) -> SmallVector<Value> {
        Value j = kb.divs(index, kb.index(s.reduceStride));
        Value channel = kb.rems(index, kb.index(s.reduceStride));
        Value total = kb.f32(0.0f);
        for (int64_t l = 0; l < s.lanes; ++l) {
          Value at = kb.add(kb.index(l * s.heads * s.reduceStride), index);
          total = kb.fadd(total, kb.load(querySmem, {at}));
        }
        Value tokenHead = tokenHeadOf(j);
        Value isSum =
            kb.cmpi(arith::CmpIPredicate::eq, channel, kb.index(s.valueDim));
        kb.ifElse(
            isSum, {},
            [&]() -> SmallVector<Value> {
              kb.store(total, partialStats, {split, tokenHead, kb.index(1)});
              return {};
            },
            [&]() -> SmallVector<Value> {
              kb.store(total, partialOut, {split, tokenHead, channel});
              return {};
            });
        return {};
      });
}

void PortableDecode::writePartials(ArrayRef<Value> state) {
  // Partial results of this split: unnormalized output, max and sum.
  Value isFirst = kb.cmpi(arith::CmpIPredicate::eq, tid, kb.index(0));
  kb.ifThen(isFirst, [&] {
    for (int64_t j = 0; j < s.heads; ++j)
      kb.store(state[s.maxOf(j)], partialStats,
               {split, tokenHeadOf(kb.index(j)), kb.index(0)});
  });
  if (s.lanes == 1)
    writeLanePartials(state, isFirst);
  else
    reduceLanePartials(state);
}

void PortableDecode::writeResults(ArrayRef<Value> state) {
  if (!s.prompt) {
    writePartials(state);
    return;
  }
  Value workspaceRows = memref::DimOp::create(builder, p.loc, partialStats, 1);
  Value unsplit = kb.cmpi(arith::CmpIPredicate::eq, workspaceRows, kb.index(0));
  kb.ifElse(
      unsplit, {},
      [&]() -> SmallVector<Value> {
        writeFinished(state);
        return {};
      },
      [&]() -> SmallVector<Value> {
        writePartials(state);
        return {};
      });
}

void PortableDecode::writeFinished(ArrayRef<Value> state) {
  // The row's output: the sum of its lanes' accumulators (one lane: the
  // thread's own), finished with the sum of their sums.
  auto headOf = [&](int64_t j) { return kb.add(firstHead, kb.index(j)); };
  auto store = [&](const UnsplitRow &row, int64_t j, Value channel, Value x) {
    Value weighted = row.weighted(kb, x);
    Value head = headOf(j);
    storeOutput(kb, weighted, row.inverse, outScale, out, token, head, kvHead,
                channel);
  };
  if (s.lanes == 1) {
    for (int64_t j = 0; j < s.heads; ++j) {
      UnsplitRow row = finishUnsplitRow(kb, state[s.maxOf(j)],
                                        state[s.sumOf(j)], sinks, headOf(j));
      for (int64_t v = 0; v < s.vectorsPerThread; ++v) {
        Value vector = kb.add(firstVector, kb.index(v * kBlockThreads));
        Value inRow = kb.cmpi(arith::CmpIPredicate::slt, vector,
                              kb.index(s.vectorsPerRow));
        kb.ifThen(inRow, [&] {
          for (int64_t e = 0; e < s.elements; ++e) {
            Value channel =
                kb.add(kb.mul(vector, kb.index(s.elements)), kb.index(e));
            store(row, j, channel, state[s.accOf(j, v * s.elements + e)]);
          }
        });
      }
    }
    return;
  }
  stageLanes(state);
  auto laneTotal = [&](int64_t j, Value channel) {
    Value total = kb.f32(0.0f);
    for (int64_t l = 0; l < s.lanes; ++l) {
      Value at = kb.index((l * s.heads + j) * s.reduceStride);
      total = kb.fadd(total, kb.load(querySmem, {kb.add(at, channel)}));
    }
    return total;
  };
  for (int64_t j = 0; j < s.heads; ++j) {
    Value sum = laneTotal(j, kb.index(s.valueDim));
    UnsplitRow row =
        finishUnsplitRow(kb, state[s.maxOf(j)], sum, sinks, headOf(j));
    kb.forLoop(tid, kb.index(s.valueDim), kb.index(kBlockThreads), {},
               [&](Value channel, ValueRange) -> SmallVector<Value> {
                 store(row, j, channel, laneTotal(j, channel));
                 return {};
               });
  }
}

gpu::GPUFuncOp PortableDecode::build(SmallVectorImpl<Value> &hostOperands) {
  // Each key row is loaded and dequantized once for the block's heads.
  createKernel(hostOperands);
  locateBlock();
  kb.ifThen(guardAllows(kb, guard, p.guardValue), [&] {
    findKeyRange();
    stageQuery();
    computeLogitScales();
    SmallVector<Value> state = keyLoop();
    writeResults(state);
  });
  gpu::ReturnOp::create(builder, p.loc);
  return kernel;
}

/// The decode kernel of `source` and the shared merge (`buildMerge`).
DecodeKernels buildDecodeKernels(
    KernelModule &kernels, KVSource &source, const DecodeParams &params,
    PortablePlanAttr plan,
    function_ref<gpu::GPUFuncOp(SmallVectorImpl<Value> &)> buildMerge) {
  DecodeKernels result;
  result.decode = PortableDecode(kernels, source, params, plan)
                      .build(result.decodeOperands);
  result.merge = buildMerge(result.mergeOperands);
  result.numHeads = params.numHeads;
  result.decodeBlocksPerToken =
      source.kvHeads() *
      (params.numHeads / source.kvHeads() / plan.getHeadsPerBlock());
  result.valueDim = source.valueDim();
  result.blockSize = params.blockSize;
  return result;
}

} // namespace

auto ::pattn::buildPagedDecodeKernels(KernelModule &kernels,
                                      PagedAttentionOp op,
                                      const CacheBuffers &key,
                                      const CacheBuffers &value,
                                      PortablePlanAttr plan) -> DecodeKernels {
  std::unique_ptr<KVSource> source =
      makePagedSource(key, op.getKScale(), value, op.getVScale());
  return buildDecodeKernels(kernels, *source, decodeParams(op), plan,
                            [&](SmallVectorImpl<Value> &operands) {
                              return buildPagedMergeKernel(kernels, op,
                                                           operands);
                            });
}

auto ::pattn::buildMlaDecodeKernels(KernelModule &kernels, MlaDecodeOp op,
                                    const RecordBuffers &cache,
                                    PortablePlanAttr plan) -> DecodeKernels {
  std::unique_ptr<KVSource> source =
      makeRecordSource(cache, op.getOuterScale());
  return buildDecodeKernels(kernels, *source,
                            decodeParams(op, source->keyDim()), plan,
                            [&](SmallVectorImpl<Value> &operands) {
                              return buildMlaMergeKernel(kernels, op, operands);
                            });
}
