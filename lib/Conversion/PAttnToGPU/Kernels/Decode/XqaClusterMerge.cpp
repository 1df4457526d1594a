//===- XqaClusterMerge.cpp - An XQA cluster of splits merges itself -------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// The end of an XQA decode planned with cluster_splits = C: the C splits of
// a (sequence, KV head) are one thread-block cluster (grid x = C, the
// cluster's x). Each block has written its split's partial results to the
// workspace (mergeKeyWarps); the cluster meets at a barrier whose arrive
// releases and whose wait acquires those global writes at cluster scope,
// and then block r merges pieces r, r + C, ... of the sequence's rows (a
// piece: one row, kBlockThreads channels) with the merge kernel's code
// (mergeWorkspaceRow), into the output. So the call has no merge launch,
// and its output has the bits the merge kernel gives over the same splits.
//
//===----------------------------------------------------------------------===//

#include "Kernels/Decode/XqaPaged.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace pattn;
using namespace pattn::xqa;

void XqaBuilder::mergeSplitsInCluster(const XqaArguments &args, Value split) {
  Location loc = op.getLoc();
  int64_t splits = plan.getClusterSplits();
  // Every block of the cluster is past its workspace writes (the merge of
  // its key warps read the shared memory below for the last time): the
  // arrive releases them, the wait acquires the others'.
  NVVM::ClusterArriveOp::create(builder, loc, builder.getUnitAttr());
  NVVM::ClusterWaitOp::create(builder, loc, builder.getUnitAttr());

  WorkspaceRowMerge m;
  Type f32 = builder.getF32Type();
  m.weights = view(0, {kMergeSplitsPerChunk}, f32);
  m.sums = view(kMergeSplitsPerChunk * 4, {kMergeSplitsPerChunk}, f32);
  m.sinks = args.sinks;
  m.outScale = args.outScale;
  m.out = args.out;
  m.partialOut = args.partialOut;
  m.partialStats = args.partialStats;
  m.tid = tid;
  m.kvHead = kvHead;
  m.splits = index(splits);
  Value threads = index(kBlockThreads);
  int64_t pieces = llvm::divideCeil(valueDim, kBlockThreads);
  Value piecesPerRow = index(pieces);
  Value groupHeads = index(group);
  // The sequence's rows: g heads of each of its query tokens.
  Value tokens = kb.toIndex(tokenCount);
  Value realRows = kb.mul(tokens, groupHeads);
  Value items = kb.mul(realRows, piecesPerRow);
  Value firstToken = kb.toIndex(tokenBegin);
  Value firstHead = kb.mul(kvHead, groupHeads);
  Value heads = index(numHeads);
  Value channels = index(valueDim);
  Value step = index(splits);
  kb.forLoop(split, items, step, {},
             [&](Value item, ValueRange) -> SmallVector<Value> {
               Value row = kb.divs(item, piecesPerRow);
               Value piece = kb.rems(item, piecesPerRow);
               Value inSequence = kb.divs(row, groupHeads);
               m.token = kb.add(firstToken, inSequence);
               Value headOfGroup = kb.rems(row, groupHeads);
               m.head = kb.add(firstHead, headOfGroup);
               Value tokenRow = kb.mul(m.token, heads);
               m.tokenHead = kb.add(tokenRow, m.head);
               Value pieceStart = kb.mul(piece, threads);
               m.channel = kb.add(pieceStart, tid);
               Value hasChannel =
                   kb.cmpi(arith::CmpIPredicate::slt, m.channel, channels);
               mergeWorkspaceRow(kb, m, valueDim, threads, hasChannel);
               return {};
             });
}
