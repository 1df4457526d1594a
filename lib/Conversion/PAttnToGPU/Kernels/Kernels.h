//===- Kernels.h - The kernels of the pattn GPU lowering --------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// Declares the kernel generators of --convert-pattn-to-gpu. Each generator
// adds one gpu.func to the kernel module, specialized on the op's types and
// static shapes, and returns it; the pass then launches it from the host.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_KERNELS_H
#define PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_KERNELS_H

#include "pattn/Dialect/PAttn/IR/PAttnOps.h"
#include "pattn/Target/TargetDescription.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"

namespace pattn {

class KernelBuilder;

/// Threads of every pattn kernel block: four warps.
inline constexpr int64_t kBlockThreads = 128;
/// The alignment of every static shared buffer of a kernel: the widest
/// vector load the kernels issue on one.
inline constexpr int64_t kSharedBufferAlignment = 16;

/// The buffers behind a cache value, and the type it is read with (which
/// differs from the bound type after pattn.rescale_view).
struct CacheBuffers {
  pattn::CacheType type;
  mlir::Value storage;
  mlir::Value groupScales; ///< nvfp4 only
  mlir::Value tokenScales; ///< `token` granularity only
};

struct RecordBuffers {
  pattn::RecordCacheType type;
  mlir::Value storage;
};

/// A generated kernel and the host values to launch it with, in argument
/// order (built together so that the two cannot drift apart).
struct Kernel {
  mlir::gpu::GPUFuncOp func;
  llvm::SmallVector<mlir::Value> operands;
};

/// The hardware conversions every chip of a kernel module has, ranked:
/// none (sm_80/86/87), fp8 (sm_89 and up), fp8 and e2m1 (sm_100a, sm_120a).
enum class ConversionClass { none = 0, fp8 = 1, fp8AndFp4 = 2 };

/// Adds uniquely named kernels to one gpu.module, which serves the chips of
/// one conversion class of the target table, or one chip of it whose MLA
/// decodes have a plan of their own (chip_plans).
class KernelModule {
public:
  KernelModule(mlir::gpu::GPUModuleOp module, ConversionClass conversions,
               llvm::ArrayRef<Chip> chips)
      : module(module), hardwareFp8(conversions != ConversionClass::none),
        hardwareFp4(conversions == ConversionClass::fp8AndFp4),
        chips(chips.begin(), chips.end()) {}

  /// A new kernel `name_N` taking `arguments`, with the given workgroup
  /// buffers; the builder is left at its entry. The name is provisional:
  /// nameKernelsByContent gives the finished kernel its own.
  mlir::gpu::GPUFuncOp create(mlir::OpBuilder &builder, mlir::Location loc,
                              llvm::StringRef name, mlir::TypeRange arguments,
                              mlir::TypeRange workgroupBuffers);
  /// The same for a kernel whose arguments are `operands` (host values),
  /// plus `extra` arguments the caller appends at launch.
  Kernel create(mlir::OpBuilder &builder, mlir::Location loc,
                llvm::StringRef name, mlir::ValueRange operands,
                mlir::TypeRange extra, mlir::TypeRange workgroupBuffers);

  mlir::gpu::GPUModuleOp module;
  /// The chips of this module convert e4m3 pairs in hardware.
  bool hardwareFp8;
  /// The chips of this module convert e2m1 pairs in hardware.
  bool hardwareFp4;
  /// The chips this module is built for; the host runs it on devices of
  /// their compute capabilities (pattn::chipForDevice).
  llvm::SmallVector<Chip> chips;

private:
  unsigned counter = 0;
};

/// Names each kernel of `kernelModules` `<family>_<16 hex digits>`, the
/// hash of its text: the same for the same kernel in every build (a
/// profile's kernel names stay comparable across builds and compilers),
/// and one kernel for ops that build the same one (the copies are erased
/// and their launches in `module` call the first). Runs once the kernels
/// and the host code are finished and deterministically ordered.
void nameKernelsByContent(mlir::ModuleOp module,
                          llvm::ArrayRef<mlir::gpu::GPUModuleOp> kernelModules);

/// The split-KV workspace of a decode: unnormalized partial outputs
/// [splits, rows, valueDim] and their (max, sum) [splits, rows, 2], f32.
mlir::MemRefType workspaceOutputType(mlir::MLIRContext *context,
                                     int64_t valueDim);
mlir::MemRefType workspaceStatsType(mlir::MLIRContext *context);

/// Declares a kernel's launch bounds (nvvm.maxntid, nvvm.minctasm): ptxas
/// then keeps its registers within 65536 / (threads x blocksPerSM).
void setLaunchBounds(mlir::gpu::GPUFuncOp kernel, int64_t threads,
                     int64_t blocksPerSM);

/// The bit a rejected slot raises in the runtime's device error word
/// (PATTN_DEVICE_ERROR_SLOT_OUT_OF_RANGE in pattn/Runtime/Runtime.h).
constexpr int32_t kSlotOutOfRangeBit = 1;

/// A check kernel runs on up to kMostCheckBlocks blocks, and each block
/// writes its own verdict: `flags` ([blocks], i32) holds 0 at the block's
/// index when every item it checked passed, else 1. A gated kernel writes
/// nothing unless every verdict is 0 (checksPassed), so a rejected batch
/// writes nothing at all. With a verdict per block no block depends on
/// another, and no memset has to clear a shared flag first.
inline constexpr int64_t kMostCheckBlocks = 32;
/// Items (slots or positions) a check thread loads at once, each
/// gridDim x kBlockThreads apart: a 32K-token prompt takes 16 blocks and
/// one round of loads.
inline constexpr int64_t kCheckItemsPerThread = 16;

/// A check block's rejection: stores 1 into its verdict `flags`[block]
/// and ORs `bit` into `errorWord`[0]. Every thread that rejects stores the
/// same 1: the race is benign.
void raiseRejection(KernelBuilder &kb, mlir::Value flags, mlir::Value block,
                    mlir::Value errorWord, int32_t bit);

/// A check block's prologue: thread 0 (`tid`) clears the block's verdict,
/// and a barrier orders that before any rejection. Returns the block index.
mlir::Value clearCheckVerdict(KernelBuilder &kb, mlir::Value flags,
                              mlir::Value tid);

/// Whether every verdict of `flags` ([blocks], at most kMostCheckBlocks,
/// i32) is 0: lane `lane` loads one, and a warp vote combines them. All 32
/// lanes of the warp must reach it.
mlir::Value checksPassed(KernelBuilder &kb, mlir::Value flags,
                         mlir::Value lane);

/// Check blocks that write a verdict in `flags` ([blocks], i32): each sets
/// its verdict to 1 when any slot it checks is out of range (below -1, or
/// past the pages of `storage`) and to 0 otherwise, and then also ORs
/// kSlotOutOfRangeBit into `errorWord` ([1], i32, the runtime's device
/// error word). Its operands are (slots, storage), the caller appends
/// (flags, errorWord) and launches up to kMostCheckBlocks blocks.
/// With a `rotary` prologue (the op the write is fused with) it checks the
/// rotary's positions too, into the same verdicts; its operands then
/// continue with rotaryReads(rotary).
Kernel buildSlotCheckKernel(KernelModule &kernels, mlir::Location loc,
                            mlir::Value slots, mlir::Value storage,
                            int64_t blockSize,
                            pattn::RotaryOp rotary = nullptr);

/// The warps of a write-cache block.
inline constexpr int64_t kWriteWarpsPerBlock = kBlockThreads / 32;
/// The (token, kv head) rows a write-cache warp writes: their loads are
/// issued together, so that a warp has two rows in flight.
inline constexpr int64_t kWriteRowsPerWarp = 2;
/// Rows per warp of the write-cache kernel of a `type` cache for an op
/// fused with `rotary` (one: the warp prepares its row in shared memory) or
/// of none: kWriteRowsPerWarp, times the rows a warp step covers where a
/// row takes fewer than 32 lanes (nvfp4: a group of 16 channels a lane). A
/// block writes kWriteWarpsPerBlock times this many.
int64_t writeCacheRowsPerWarp(pattn::CacheType type, pattn::RotaryOp rotary);

/// writeCacheRowsPerWarp(type, rotary) consecutive rows per warp,
/// kWriteWarpsPerBlock warps a block (row r is token r / kv_heads, head
/// r % kv_heads), each lane a run of channels per step (an nvfp4 row: a
/// group a lane, head_dim / 16 lanes a row); the row's and the nvfp4
/// groups' max |x| are reduced across the lanes (exactly: max is
/// order-free).
/// The last operand is the slot check's verdicts: the kernel writes only when
/// every one is 0, so a call with a bad slot leaves the whole cache untouched.
/// With a `rotary` prologue (whose output is the write's values, used by
/// nothing else) the kernel reads the rotary's input instead: each warp
/// computes its normalized, rotated row into shared memory exactly as
/// pattn.rotary's kernel would store it, and quantizes that.
Kernel buildWriteCacheKernel(KernelModule &kernels, pattn::WriteCacheOp op,
                             const CacheBuffers &cache,
                             pattn::RotaryOp rotary = nullptr);

/// The bit a rotary position outside its cos/sin tables raises in the
/// device error word (PATTN_DEVICE_ERROR_POSITION_OUT_OF_RANGE).
constexpr int32_t kPositionOutOfRangeBit = 2;

/// A rotary op's reads as kernel arguments: its input, tables, position
/// source and norm weight (absent operands are null).
struct RotaryArguments {
  mlir::Value input, cos, sin, positions, seqLens, queryStart, weight;
};

/// The host values of a rotary op's reads, in RotaryArguments' order.
llvm::SmallVector<mlir::Value> rotaryReads(pattn::RotaryOp op);
/// RotaryArguments from kernel arguments laid out as rotaryReads(op).
RotaryArguments bindRotaryArguments(pattn::RotaryOp op,
                                    mlir::ValueRange arguments);

/// Emits the check of the op's tokens `first`, `first` + `stride`, ...
/// (a check grid's threads) against the op's tables: a bad position stores
/// 1 into the block's verdict `flags`[block] and ORs kPositionOutOfRangeBit
/// into `errorWord`.
void emitPositionChecks(KernelBuilder &kb, pattn::RotaryOp op,
                        const RotaryArguments &a, mlir::Value first,
                        mlir::Value stride, mlir::Value flags,
                        mlir::Value block, mlir::Value errorWord);

/// Emits, for one warp (`lane` of 32, all active), the op's row of
/// (token, input head `inHead`): RMS-normalized when the op has a weight,
/// rotated, each channel rounded once to `element`; `store(channel, value)`
/// receives every channel, each once, as a value of `element`.
void emitRotaryRow(KernelBuilder &kb, pattn::RotaryOp op,
                   const RotaryArguments &a, mlir::Value token,
                   mlir::Value inHead, mlir::Value lane, mlir::Type element,
                   llvm::function_ref<void(mlir::Value, mlir::Value)> store);

/// Check blocks that each set their verdict in `flags` ([blocks], i32) to
/// 1 when any token position they check lies outside [0, max_position) of
/// the op's tables (else 0), and then also OR kPositionOutOfRangeBit into
/// `errorWord`; the caller appends (flags, errorWord) to its operands.
Kernel buildPositionCheckKernel(KernelModule &kernels, pattn::RotaryOp op);

/// One warp per (token, output head), rotaryBlocksPerToken(op) blocks per
/// token; the last operand is the position check's verdicts (nothing is
/// written unless every one is 0).
Kernel buildRotaryKernel(KernelModule &kernels, pattn::RotaryOp op);
int64_t rotaryBlocksPerToken(pattn::RotaryOp op);

/// One block per token; the last operand is the slot check's flag.
Kernel buildWriteRecordKernel(KernelModule &kernels, pattn::WriteRecordOp op,
                              const RecordBuffers &cache);

/// A single block: N and the fold flag of a channel table.
Kernel buildScaleNormalizerKernel(KernelModule &kernels,
                                  pattn::ScaleNormalizerOp op);

/// Query rows folded by a fold_query kernel's block: one (token, head) row
/// a warp.
inline constexpr int64_t kFoldRowsPerBlock = kBlockThreads / 32;

/// ceil(tokens * heads / kFoldRowsPerBlock) blocks, a warp per (token,
/// head) row, a lane per 32nd channel. With `fusedNormalizer` (the
/// scale_normalizer of the same table, whose N the fold reads), every block
/// computes N itself and block 0 also writes N and the flag: the
/// normalizer's launch is saved.
Kernel buildFoldQueryKernel(KernelModule &kernels, pattn::FoldQueryOp op,
                            pattn::ScaleNormalizerOp fusedNormalizer = {});

/// A query fold that the decode of the folded op computes itself, in
/// place of a fold kernel (and, with `normalizer`, of the normalizer's):
/// the kernel reads the fold's query and table, not its outputs, and with
/// a fused normalizer every block reduces the table and block 0 writes N
/// and the flag (docs/Lowering.md, "The fold inside the decode").
struct FusedFold {
  pattn::FoldQueryOp fold;
  pattn::ScaleNormalizerOp normalizer; ///< null: N is read from k_scale
};

/// The split-KV decode kernels of an attention op: `decode` writes partial
/// results for grid (splits, tokens * decodeBlocksPerToken), each block
/// serving several heads of one KV head; `merge` combines them into the
/// output for grid (tokens * heads), unless `decode` merges its splits
/// itself (an XQA plan's cluster_splits; `merge` null).
struct DecodeKernels {
  mlir::gpu::GPUFuncOp decode;
  mlir::gpu::GPUFuncOp merge;
  llvm::SmallVector<mlir::Value> decodeOperands; ///< without the workspace
  llvm::SmallVector<mlir::Value> mergeOperands;  ///< without the workspace
  int64_t numHeads;
  int64_t decodeBlocksPerToken;
  int64_t valueDim;
  int64_t blockSize;
  /// Dynamic shared memory of a decode block (XQA), 0 for none.
  int64_t sharedBytes = 0;
  /// Threads of a decode block.
  int64_t blockThreads = kBlockThreads;
};

DecodeKernels buildPagedDecodeKernels(KernelModule &kernels,
                                      pattn::PagedAttentionOp op,
                                      const CacheBuffers &key,
                                      const CacheBuffers &value,
                                      pattn::PortablePlanAttr plan);

/// The workspace rows of a decode family's kernels: one per (token, head)
/// (decodeTokens = 0), or, for the decode kernel of a split prompt op (one
/// with a decode_plan), one per (token slot, head): sequence b's k-th
/// token at slot b x decodeTokens + k, real where k < n_b <= decodeTokens.
struct SplitRows {
  int64_t decodeTokens = 0;
};

/// A tensor-core family's kernels over paged caches (the XQA decode, the
/// prefill): `buildDecode` builds the family's kernel (appending its host
/// operands), then the portable split merge of the rows `rows` names
/// (none without `withMerge`: the decode kernel merges its splits itself);
/// `sharedBytes` of dynamic shared memory a block.
DecodeKernels buildTensorCorePagedKernels(
    KernelModule &kernels, pattn::PagedAttentionOp op, const CacheBuffers &key,
    const CacheBuffers &value, int64_t sharedBytes, SplitRows rows,
    llvm::function_ref<
        mlir::gpu::GPUFuncOp(llvm::SmallVectorImpl<mlir::Value> &)>
        buildDecode,
    bool withMerge = true);

/// The tensor-core decode of an op planned for XQA (`plan`): grid (splits,
/// batch * kv_heads), 128 threads, plan.shared_bytes of dynamic shared
/// memory; the splits are taken from gridDim.x. Its merge is the portable
/// one.
DecodeKernels buildXqaDecodeKernels(KernelModule &kernels,
                                    pattn::PagedAttentionOp op,
                                    pattn::XqaPlanAttr plan,
                                    const CacheBuffers &key,
                                    const CacheBuffers &value,
                                    const FusedFold *fold = nullptr);

/// The tensor-core prefill of a prompt planned for it (`plan`): grid
/// (query tiles, splits, kv_heads), 128 threads, plan.shared_bytes of
/// dynamic shared memory; the splits are taken from gridDim.y. Its merge is
/// the portable one.
DecodeKernels buildPrefillKernels(KernelModule &kernels,
                                  pattn::PagedAttentionOp op,
                                  pattn::PrefillPlanAttr plan,
                                  const CacheBuffers &key,
                                  const CacheBuffers &value);
struct DecodeParams;

/// The split merge every decode family shares: a block per (token, head,
/// 128 channels) combines the splits' partial results (sinks, out_scale,
/// the output's single rounding); its operands precede the workspace. With
/// `rows.decodeTokens`, a block merges a token slot, if it is real, into
/// the token it stands for.
mlir::gpu::GPUFuncOp
buildMergeKernel(KernelModule &kernels, int64_t valueDim, int64_t kvHeads,
                 const DecodeParams &params,
                 llvm::SmallVectorImpl<mlir::Value> &hostOperands,
                 SplitRows rows = {});

/// The split merge of a paged attention op (sinks, out_scale, the output's
/// single rounding) over the rows `rows` names; its operands precede the
/// workspace.
mlir::gpu::GPUFuncOp
buildPagedMergeKernel(KernelModule &kernels, pattn::PagedAttentionOp op,
                      llvm::SmallVectorImpl<mlir::Value> &hostOperands,
                      SplitRows rows = {});

/// The one merge of a guarded pair (HostRewriter::findGuardedPairs): two
/// attention ops of one guard and output, of which the flag lets at most
/// one run. Its operands are the first op's merge operands, then the first
/// op's workspace, then the second's; each block merges the workspace of
/// the op the flag names (neither: nothing). With `directOutput` (a kernel
/// of the pair finishes its rows itself given a workspace without rows),
/// a named workspace without rows is skipped: its op wrote the output.
mlir::gpu::GPUFuncOp buildGuardedPairMergeKernel(
    KernelModule &kernels, pattn::PagedAttentionOp first,
    pattn::PagedAttentionOp second,
    llvm::SmallVectorImpl<mlir::Value> &hostOperands, bool directOutput);

DecodeKernels buildMlaDecodeKernels(KernelModule &kernels,
                                    pattn::MlaDecodeOp op,
                                    const RecordBuffers &cache,
                                    pattn::PortablePlanAttr plan);

/// The split merge of an MLA decode (one latent head); its operands
/// precede the workspace.
mlir::gpu::GPUFuncOp
buildMlaMergeKernel(KernelModule &kernels, pattn::MlaDecodeOp op,
                    llvm::SmallVectorImpl<mlir::Value> &hostOperands);

/// The tensor-core MLA decode of an op planned for XQA (`plan`): grid
/// (splits, tokens * num_heads / 16), 256 threads, plan.shared_bytes of
/// dynamic shared memory; the splits are taken from gridDim.x. Its merge is
/// the portable one.
DecodeKernels buildXqaMlaDecodeKernels(KernelModule &kernels,
                                       pattn::MlaDecodeOp op,
                                       pattn::XqaMlaPlanAttr plan,
                                       const RecordBuffers &cache);

/// (sequence, query tokens of it, this token's position among them) of
/// query token `token` (index), as i32 values but the sequence (index).
/// `perSequence` is any buffer whose dimension 0 is the batch (the block
/// table, the sequence lengths).
std::tuple<mlir::Value, mlir::Value, mlir::Value>
findQuerySequence(KernelBuilder &kb, mlir::Value token, mlir::Value queryStart,
                  mlir::Value perSequence);

} // namespace pattn

#endif // PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_KERNELS_H
