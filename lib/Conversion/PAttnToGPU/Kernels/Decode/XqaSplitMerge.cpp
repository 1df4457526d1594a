//===- XqaSplitMerge.cpp - The XQA decode merges its own splits -----------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// The end of an XQA decode whose blocks merge their splits into the output
// themselves, so that the call has no merge launch:
//
// - cluster_splits = C: the C splits of a (sequence, KV head) are one
//   thread-block cluster (grid x = C, the cluster's x). Each block has
//   written its split's partial results to the workspace (mergeKeyWarps);
//   the cluster meets at a barrier whose arrive releases and whose wait
//   acquires those global writes at cluster scope, and block r merges
//   pieces r, r + C, ... of the sequence's rows (a piece: one row,
//   kBlockThreads channels).
// - merges_unsplit: where the host picked one split (gridDim.x = 1), the
//   block merges all pieces of its rows after a block barrier (which orders
//   its threads' global writes before their reads); with several splits the
//   host launches the merge kernel as before.
//
// A piece is merged with the merge kernel's own code (mergeWorkspaceRow), so
// the output has the bits the merge kernel gives over the same splits.
//
//===----------------------------------------------------------------------===//

#include "Kernels/Decode/XqaPaged.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace pattn;
using namespace pattn::xqa;

void XqaBuilder::mergeOwnSplits(const XqaArguments &args, Value split) {
  Location loc = op.getLoc();
  int64_t clusterSplits = plan.getClusterSplits();
  if (clusterSplits > 1) {
    // Every block of the cluster is past its workspace writes (the merge of
    // its key warps read the shared memory below for the last time): the
    // arrive releases them, the wait acquires the others'.
    NVVM::ClusterArriveOp::create(builder, loc, builder.getUnitAttr());
    NVVM::ClusterWaitOp::create(builder, loc, builder.getUnitAttr());
    mergeRowPieces(args, split, clusterSplits);
    return;
  }
  if (!plan.getMergesUnsplit())
    return;
  Value splits = gpu::GridDimOp::create(builder, loc, gpu::Dimension::x);
  Value lone = kb.cmpi(arith::CmpIPredicate::eq, splits, index(1));
  kb.ifThen(lone, [&] {
    kb.barrier();
    mergeRowPieces(args, split, 1);
  });
}

void XqaBuilder::mergeRowPieces(const XqaArguments &args, Value split,
                                int64_t splits) {
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
