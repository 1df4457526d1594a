//===- DecodeCommon.h - What every decode kernel family shares --*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// The facts of an attention op that the decode and merge kernels read
// (DecodeParams), and the steps written once for all of them: the guard of
// a device-side fold, the online softmax's -inf conventions.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_COMMON_DECODECOMMON_H
#define PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_COMMON_DECODECOMMON_H

#include "Kernels/Common/KernelBuilder.h"
#include "pattn/Dialect/PAttn/IR/PAttnOps.h"

namespace pattn {

/// What the decode and merge kernels need to know about an attention op
/// (pattn.paged_attention or pattn.mla_decode).
struct DecodeParams {
  mlir::Location loc;
  mlir::Value query = {}, blockTable = {}, seqLens = {}, queryStart = {},
              guard = {}, queryExponents = {}, sinks = {}, outScale = {},
              out = {};
  int32_t guardValue = 0;
  int64_t numHeads = 0;
  int64_t blockSize = 0;
  float softmaxScale = 1.0f;
  float softcap = 0.0f;
  int64_t window = -1;
};

DecodeParams decodeParams(pattn::PagedAttentionOp op);
/// `keyDim` (latent + rope) sets the default softmax scale.
DecodeParams decodeParams(pattn::MlaDecodeOp op, int64_t keyDim);

/// What an argument of a decode or merge kernel is.
enum class DecodeArg : uint8_t {
  Query,
  BlockTable,
  SeqLens,
  QueryStart,
  Guard,
  QueryExponents,
  /// The channel table of a fold the kernel computes (FusedFold).
  FoldScales,
  OuterScale,
  /// MLA records.
  Records,
  /// A paged cache side: its pages, nvfp4 group scales, per-token scales
  /// and tensor or channel scale.
  KeyStorage,
  KeyGroupScales,
  KeyTokenScales,
  KeyScale,
  ValueStorage,
  ValueGroupScales,
  ValueTokenScales,
  ValueScale,
  /// The portable decode's cache reader (a run of arguments).
  Source,
  Sinks,
  OutScale,
  Out,
  /// The split-KV workspace, which the host passes at launch.
  PartialOut,
  PartialStats,
  /// The second workspace of a guarded pair's merge (the second op's).
  SecondPartialOut,
  SecondPartialStats,
};

/// A kernel's arguments by role: the host side adds the op's values
/// (an absent optional operand takes no argument), the kernel reads its
/// arguments by the same roles, so that the launch's operand list and the
/// kernel's signature cannot drift apart.
class DecodeSignature {
public:
  /// Appends `value` as `role` where it is present.
  void add(DecodeArg role, mlir::Value value);
  /// Appends `values` as one run of arguments, `role`.
  void addRun(DecodeArg role, mlir::ValueRange values);
  /// Appends the operands every decode starts with: the query, the block
  /// table, the sequence lengths and (where present) the query starts.
  void addSequences(mlir::Value query, mlir::Value blockTable,
                    mlir::Value seqLens, mlir::Value queryStart);
  /// Appends the split-KV workspace: partial outputs of `valueDim`
  /// channels, then their statistics.
  void addWorkspace(mlir::MLIRContext *context, int64_t valueDim);
  /// A guarded pair's merge: the second op's workspace after the first's.
  void addSecondWorkspace(mlir::MLIRContext *context, int64_t valueDim);

  /// The host values, in argument order (without the workspace).
  llvm::ArrayRef<mlir::Value> hostOperands() const { return values; }
  /// Every argument's type, workspace included.
  llvm::ArrayRef<mlir::Type> types() const { return argumentTypes; }

  /// After the kernel is created from types(): its argument of `role`
  /// (null where absent), or its run of them.
  void bind(mlir::gpu::GPUFuncOp kernel) { this->kernel = kernel; }
  mlir::Value arg(DecodeArg role) const;
  mlir::ValueRange run(DecodeArg role) const;
  /// The arguments addSequences added, and the workspace's.
  struct SequenceArgs {
    mlir::Value query, blockTable, seqLens, queryStart;
    mlir::Value partialOut, partialStats;
  };
  SequenceArgs sequenceArgs() const;

private:
  struct Slot {
    DecodeArg role;
    unsigned begin, size;
  };
  const Slot *find(DecodeArg role) const;
  llvm::SmallVector<Slot> slots;
  llvm::SmallVector<mlir::Value> values;
  llvm::SmallVector<mlir::Type> argumentTypes;
  mutable mlir::gpu::GPUFuncOp kernel;
};

/// The kernel's dynamic shared memory as bytes (memref<?xi8, workgroup>).
mlir::Value dynamicSharedBytes(mlir::OpBuilder &builder, mlir::Location loc);

/// The keys of one split before any rounding: ceil(max keys / the grid's
/// `splits` dimension), max keys being the block table's width times
/// `blockSize` (host-known sizes only, so the launch stays
/// graph-capturable), as i32.
mlir::Value
keysPerGridSplit(KernelBuilder &kb, mlir::Value blockTable, int64_t blockSize,
                 mlir::gpu::Dimension splits = mlir::gpu::Dimension::x);

/// True when the guard (if any) lets this launch run: the device-side
/// fold's flag equals `guardValue`.
mlir::Value guardAllows(KernelBuilder &kb, mlir::Value guard,
                        int32_t guardValue);

/// The tensor-core kernels' logit scale, in base 2: the op's softmax scale
/// times K's tensor scale (`keyScale`, [1] f32, where K has one), times
/// log2 e unless the op has a softcap (which applies log2 e after tanh);
/// and log2 e itself. `keyScaleValue` (f32), where given, is K's tensor
/// scale already in a register (a fold's N the kernel computed).
struct LogitScale {
  mlir::Value softmaxScale, log2e;
};
LogitScale logitScale(KernelBuilder &kb, pattn::PagedAttentionOp op,
                      mlir::Value keyScale, mlir::Value keyScaleValue = {});

/// The base-2 logit of `score` at `scale` (LogitScale's, or a row's or
/// key's multiple of it), finite, and capped when `softcap` > 0: cap x
/// tanh(x / cap) x log2 e.
mlir::Value scaledLogit(KernelBuilder &kb, mlir::Value score, mlir::Value scale,
                        float softcap, mlir::Value log2e);

/// The online softmax's conventions: -inf is "no key yet".
mlir::Value negInf(KernelBuilder &kb);
mlir::Value isNegInf(KernelBuilder &kb, mlir::Value x);
/// exp(x - m), or 0 when x is -inf (also when m is).
mlir::Value softmaxWeight(KernelBuilder &kb, mlir::Value x, mlir::Value m);

/// The reciprocal of a row's softmax denominator, with the sink's weight
/// (null without a sink) added first; 0 for an empty row (no key, no sink).
mlir::Value outputInverse(KernelBuilder &kb, mlir::Value denominator,
                          mlir::Value sinkWeight);
/// A row of one split finished as the merge finishes it (so with the same
/// bits): `weight` = exp(max - max'), max' the row's (natural) maximum with
/// the sink of `head` taken in (`sinks` null: none), and `inverse` that of
/// the denominator sum x weight with the sink's weight added.
struct UnsplitRow {
  mlir::Value weight, inverse, zero;
  /// A channel's sum x weight (fused, as the merge's).
  mlir::Value weighted(KernelBuilder &kb, mlir::Value x) const;
};
UnsplitRow finishUnsplitRow(KernelBuilder &kb, mlir::Value naturalMax,
                            mlir::Value sum, mlir::Value sinks,
                            mlir::Value head);
/// Writes out[token, head, channel] = sum x inverse (x out_scale[kvHead,
/// channel] when `outScale` is set), rounded once to the output's type.
/// The merge and the prefill's unsplit rows share it, so both give the
/// same bits.
void storeOutput(KernelBuilder &kb, mlir::Value sum, mlir::Value inverse,
                 mlir::Value outScale, mlir::Value out, mlir::Value token,
                 mlir::Value head, mlir::Value kvHead, mlir::Value channel);

/// The splits whose weights a row's merge stages in shared memory at a
/// time (mergeWorkspaceRow's `weights` and `sums` hold this many f32).
inline constexpr int64_t kMergeSplitsPerChunk = 256;

/// One (row, kBlockThreads channels) piece of a split-KV workspace merged
/// into the output: the merge kernel's block, and a share of an XQA
/// cluster of splits (cluster_splits). Workspace row `tokenHead` of
/// `splits` splits; thread `tid` merges `channel` into out[token, head].
struct WorkspaceRowMerge {
  mlir::Value weights, sums; ///< staged per chunk of splits (shared memory)
  mlir::Value sinks, outScale, out; ///< the op's (null when absent)
  mlir::Value partialOut, partialStats;
  mlir::Value tid, tokenHead, channel, token, head, kvHead, splits;
};

/// Merges `m`'s piece with the block's `threads` threads (kBlockThreads,
/// all of them, since it meets block barriers): the first splits' partial
/// outputs prefetched, the maximum, the weighted sums in split order, the
/// sink, out_scale and the output's single rounding (where `hasChannel`).
void mergeWorkspaceRow(KernelBuilder &kb, const WorkspaceRowMerge &m,
                       int64_t valueDim, mlir::Value threads,
                       mlir::Value hasChannel);

} // namespace pattn

#endif // PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_COMMON_DECODECOMMON_H
