//===- HostRewriter.h - The host side of --convert-pattn-to-gpu -*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// The host side of the GPU lowering: each pattn op of an entry function
// becomes kernel launches ordered on the caller's stream. One `lower` per
// user op; the kernels come from the families under Kernels/, built into the
// kernel modules the pass created, and follow the plans the planner recorded.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_LIB_CONVERSION_PATTNTOGPU_HOST_HOSTREWRITER_H
#define PATTN_LIB_CONVERSION_PATTNTOGPU_HOST_HOSTREWRITER_H

#include "Kernels/Kernels.h"
#include "pattn/Dialect/PAttn/IR/PAttnOps.h"
#include "pattn/Target/TargetDescription.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace pattn {

class ScalarBuilder;

/// The runtime entries that hand a compiled function its status, the
/// device's compute capability, the device error word and the SM count.
inline constexpr llvm::StringLiteral kTakeStatus = "pattnRuntimeTakeStatus";
inline constexpr llvm::StringLiteral kDeviceArch = "pattnRuntimeDeviceArch";
inline constexpr llvm::StringLiteral kDeviceErrorWord =
    "pattnRuntimeDeviceErrorWord";
inline constexpr llvm::StringLiteral kDeviceMultiprocessors =
    "pattnRuntimeDeviceMultiprocessors";

/// Declares the runtime function `name` taking nothing and returning
/// `result`; one returning a memref goes through MLIR's C interface.
void declareRuntimeFunction(mlir::ModuleOp module, llvm::StringRef name,
                            mlir::Type result);

/// Rewrites one host function.
class HostRewriter {
public:
  HostRewriter(mlir::func::FuncOp function,
               llvm::ArrayRef<KernelModule *> modules,
               llvm::ArrayRef<Chip> chips)
      : function(function), modules(modules), chips(chips),
        builder(function.getContext()) {}

  mlir::LogicalResult run();

  /// How a decode's blocks cover the work, per split.
  struct DecodeGrid {
    /// Portable: a fixed number of keys per split, and a block per (token,
    /// head group); 0 for the tensor-core kernels. A prompt's blocks are on
    /// the grid's x (more than y's 65535), its splits on y.
    int64_t splitKeys = 0;
    bool rowsOnX = false;
    /// Tensor-core kernels: as many splits of whole tiles of `tileKeys`
    /// keys as fill the device, given `sharedBytes` per block; a block per
    /// (sequence, KV head) when `blocksPerSequence` is set (paged XQA),
    /// else per (token, head group) like the portable kernel (MLA);
    /// `residentBlocks` of them fit on an SM.
    int64_t tileKeys = 0, sharedBytes = 0, residentBlocks = 1;
    int64_t blocksPerSequence = 0, blocksPerToken = 0;
    /// A paged XQA or prefill plan of a prompt: a block per (query tile of
    /// this many tokens, split, KV head), the tiles on the grid's x.
    int64_t queryTile = 0;
    /// The split search's bounds (the plan's): at least this many tiles per
    /// split, at most this many splits.
    int64_t leastTilesPerSplit = 1;
    int64_t mostSplits = 1;
    /// A split op's decode side: its workspace rows are batch x this many
    /// token slots (sequence b's k-th token at b x compactTokens + k), not
    /// the query's tokens, which are mostly the prefill family's.
    int64_t compactTokens = 0;
    /// The prefill family and the portable prompt kernel: with one split
    /// the host allocates a workspace without rows, which tells the kernel
    /// to write the output itself, and launches no merge (a guarded pair's
    /// merge runs only where a workspace has rows, and skips one without).
    bool finishesUnsplit = false;
    /// An XQA plan whose splits form one cluster that merges them
    /// (cluster_splits): exactly this many splits, and no merge launch.
    int64_t clusterSplits = 0;
    /// An XQA plan of merges_unsplit: with one split the kernel merges its
    /// rows from the workspace itself, and the merge launches only with
    /// several splits.
    bool mergesUnsplit = false;
  };

private:
  mlir::func::FuncOp function;
  llvm::ArrayRef<KernelModule *> modules;
  llvm::ArrayRef<Chip> chips;
  mlir::OpBuilder builder;
  mlir::Value stream; ///< the async token standing for the caller's stream
  mlir::Value arch; ///< the device's compute capability (several modules only)

  /// Emits `body` once per kernel module, each under a test of the device's
  /// compute capability, so that launches use the module built for it.
  void dispatch(mlir::Location loc,
                llvm::function_ref<void(KernelModule &)> body);

  mlir::FailureOr<CacheBuffers> resolveCache(mlir::Operation *user,
                                             mlir::Value cache);
  mlir::FailureOr<RecordBuffers> resolveRecords(mlir::Operation *user,
                                                mlir::Value cache);

  /// Launches `kernel` on the stream with 128 threads per block and
  /// `sharedBytes` of dynamic shared memory.
  void launch(mlir::Location loc, mlir::gpu::GPUFuncOp kernel,
              mlir::gpu::KernelDim3 grid, mlir::ValueRange operands,
              int64_t sharedBytes = 0, int64_t threads = kBlockThreads);
  void launch(mlir::Location loc, const Kernel &kernel,
              mlir::gpu::KernelDim3 grid) {
    launch(loc, kernel.func, grid, kernel.operands);
  }
  /// Runs `body` only when `count` (index) is positive: CUDA rejects empty
  /// grids, and a batch with no tokens is a valid call.
  void ifPositive(mlir::Location loc, mlir::Value count,
                  llvm::function_ref<void()> body);
  mlir::Value dim(mlir::Location loc, mlir::Value memref, int64_t index) {
    return mlir::memref::DimOp::create(builder, loc, memref, index);
  }

  mlir::LogicalResult lower(WriteCacheOp op);
  mlir::LogicalResult lower(WriteRecordOp op);
  mlir::LogicalResult lower(RotaryOp op);
  mlir::LogicalResult lower(ScaleNormalizerOp op);
  mlir::LogicalResult lower(FoldQueryOp op);
  mlir::LogicalResult lower(PagedAttentionOp op);
  mlir::LogicalResult lower(MlaDecodeOp op);
  /// The workspace, then per kernel module the decode and merge launches of
  /// the kernels `build` makes in that module.
  void lowerDecode(mlir::Location loc, mlir::Value query,
                   mlir::Value blockTable, int64_t blockSize, int64_t valueDim,
                   int64_t numHeads, const DecodeGrid &grid,
                   llvm::function_ref<DecodeKernels(KernelModule &)> build);
  /// The same where each kernel module has its own grid, `gridOf(module)`:
  /// the split count and the workspace are computed under the module's
  /// dispatch branch.
  void
  lowerDecodePerModule(mlir::Location loc, mlir::Value query,
                       mlir::Value blockTable, int64_t blockSize,
                       int64_t valueDim, int64_t numHeads,
                       llvm::function_ref<DecodeGrid(KernelModule &)> gridOf,
                       llvm::function_ref<DecodeKernels(KernelModule &)> build);
  /// A decode's split-KV workspace for `tokens` query tokens (`rows` =
  /// tokens x heads): the split count, the decode blocks per split of the
  /// tensor-core kernels (null for the portable one), and the partial
  /// outputs and statistics, allocated on the stream.
  struct DecodeWorkspace {
    mlir::Value tokens, rows, splits, blocksPerSplit, partialOut, partialStats;
    bool rowsOnX = false; ///< the grid's (DecodeGrid::rowsOnX)
    /// A prompt's query tiles (a bound: sequences' partial tiles included)
    /// and KV heads, for a paged XQA prompt plan; null otherwise.
    mlir::Value promptTiles, kvHeads;
    /// DecodeGrid::finishesUnsplit or mergesUnsplit: the merge runs only
    /// with several splits.
    bool finishesUnsplit = false;
  };
  DecodeWorkspace allocateWorkspace(mlir::Location loc, mlir::Value tokens,
                                    mlir::Value blockTable, int64_t blockSize,
                                    int64_t valueDim, int64_t numHeads,
                                    const DecodeGrid &grid);
  /// The decode and merge launches of `decode` into `workspace`.
  void launchDecode(mlir::Location loc, int64_t valueDim,
                    const DecodeWorkspace &workspace,
                    const DecodeKernels &decode);
  /// The decode launch of `decode` into `workspace`.
  void launchDecodeKernel(mlir::Location loc, const DecodeWorkspace &workspace,
                          const DecodeKernels &decode);
  /// Whether `workspace`'s merge must run: always, unless its kernel
  /// finishes unsplit rows itself (then: with several splits).
  mlir::Value needsMerge(ScalarBuilder &kb, const DecodeWorkspace &workspace);
  /// A merge launch: a block per (row of `rows`, kBlockThreads channels).
  void launchMerge(mlir::Location loc, int64_t valueDim, mlir::Value rows,
                   mlir::gpu::GPUFuncOp merge, mlir::ValueRange operands);
  /// A guarded pair (findGuardedPairs): both decodes, then one merge.
  mlir::LogicalResult lowerGuardedPair(PagedAttentionOp first,
                                       PagedAttentionOp second);
  void freeWorkspace(mlir::Location loc, const DecodeWorkspace &workspace);
  /// Launches the slot check (and the positions of a fused `rotary`),
  /// then `kernel` gated by its verdicts.
  void launchCheckedWrite(mlir::Location loc, KernelModule &module,
                          const Kernel &kernel, mlir::gpu::KernelDim3 grid,
                          mlir::Value slots, mlir::Value storage,
                          int64_t blockSize, RotaryOp rotary = nullptr);
  /// The rotary ops fused into the cache write of their output (keyed by
  /// the write), and the ops that fusion leaves without work: the rotary
  /// op, its output's allocation and deallocation.
  llvm::DenseMap<mlir::Operation *, RotaryOp> fusedRotaries;
  llvm::SmallPtrSet<mlir::Operation *, 8> fusedAway;
  void findFusedRotaries();
  /// The scale normalizers computed inside the fold kernel of the same
  /// table (keyed by the fold_query op); fusedAway holds them too.
  llvm::DenseMap<mlir::Operation *, ScaleNormalizerOp> fusedNormalizers;
  void findFusedNormalizers();
  /// The folds computed inside the XQA decode of the folded op (keyed by
  /// that op); fusedAway holds them, their normalizers and the folded
  /// query's and exponents' temporaries.
  llvm::DenseMap<mlir::Operation *, FusedFold> fusedFolds;
  void findFusedFolds();
  /// The query buffer `op`'s kernels read: the fold's input where its fold
  /// is fused.
  mlir::Value queryRead(PagedAttentionOp op);
  /// The attention ops lowered with the op before them under one merge
  /// (keyed by that first op); fusedAway holds them too.
  llvm::DenseMap<mlir::Operation *, PagedAttentionOp> guardedPairs;
  void findGuardedPairs();
  /// Launches `check` over `checkItems` items (up to kMostCheckBlocks
  /// blocks; its operands get their verdicts and the device error word
  /// appended), then `kernel` (its operands get the verdicts), which does
  /// nothing when any check block rejected.
  void launchGated(mlir::Location loc, Kernel check, const Kernel &kernel,
                   mlir::gpu::KernelDim3 grid, mlir::Value checkItems);
};

} // namespace pattn

#endif // PATTN_LIB_CONVERSION_PATTNTOGPU_HOST_HOSTREWRITER_H
