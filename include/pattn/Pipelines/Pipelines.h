//===- Pipelines.h - pattn's end-to-end compile pipeline --------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// The `pattn-compile` pipeline: from pattn ops to a module whose host code is
// LLVM dialect and whose kernels are a gpu.binary with one object per chip.
// Compilers that embed pattn add it to their own pass manager; the tools and
// the Python package reach it through `pattn-compile`, so one builder decides
// what every entry point runs.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_PIPELINES_PIPELINES_H
#define PATTN_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassOptions.h"

#include <string>

namespace llvm {
class Module;
} // namespace llvm

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace pattn {

struct CompileOptions : public mlir::PassPipelineOptions<CompileOptions> {
  ListOption<std::string> chips{
      *this, "chips",
      llvm::cl::desc("Chips to build for (default: sm_80, sm_86, sm_89, "
                     "sm_90a, sm_100a, sm_120a)")};
  Option<std::string> format{
      *this, "format",
      llvm::cl::desc("Object format per chip: isa (PTX), bin (cubin) or "
                     "fatbin"),
      llvm::cl::init("bin")};
  Option<int64_t> keysPerSplit{
      *this, "keys-per-split",
      llvm::cl::desc("Keys one decode block processes"), llvm::cl::init(512)};
  Option<int64_t> xqaKeysPerTile{
      *this, "xqa-keys-per-tile",
      llvm::cl::desc("Keys per tile of the XQA decode plans (0: the "
                     "planner's choice; 16, 32, 64 or 128)"),
      llvm::cl::init(0)};
  Option<int64_t> xqaStages{
      *this, "xqa-stages",
      llvm::cl::desc("Ring stages of the XQA decode plans (0: the planner's "
                     "choice; 2 to 8)"),
      llvm::cl::init(0)};
  Option<bool> xqaCopyWarp{
      *this, "xqa-copy-warp",
      llvm::cl::desc("XQA decode plans with a copy warp (160 threads a "
                     "block; for tuning and comparing plans)"),
      llvm::cl::init(false)};
  Option<bool> xqaScoresAhead{
      *this, "xqa-scores-ahead",
      llvm::cl::desc("XQA decode plans of at most 8 rows that score each "
                     "tile one iteration ahead (for measuring)"),
      llvm::cl::init(false)};
  Option<int64_t> xqaClusterHeads{
      *this, "xqa-cluster-heads",
      llvm::cl::desc("XQA decode plans whose blocks of this many KV heads "
                     "form one thread-block cluster (0: none; for "
                     "measuring)"),
      llvm::cl::init(0)};
  Option<int64_t> xqaClusterSplits{
      *this, "xqa-cluster-splits",
      llvm::cl::desc("XQA decode plans of this many splits that form one "
                     "thread-block cluster and merge themselves (0: none; "
                     "for measuring)"),
      llvm::cl::init(0)};
  Option<bool> xqaMergeUnsplit{
      *this, "xqa-merge-unsplit",
      llvm::cl::desc("XQA decode plans whose block merges its own rows "
                     "where the host picks one split (for measuring)"),
      llvm::cl::init(false)};
  Option<bool> hardwareConversions{
      *this, "hardware-conversions",
      llvm::cl::desc("Use the chips' conversion instructions where the target "
                     "table allows (false: bit tricks on every chip)"),
      llvm::cl::init(true)};
  // A string, as pattn-select-backend's `force`, so that a bad value
  // reaches buildCompilePipeline, which names it and the choices.
  Option<std::string> backend{
      *this, "backend",
      llvm::cl::desc("Backend of every attention op: auto (the default; by the "
                     "eligibility table), xqa (an ineligible op is an error) "
                     "or portable"),
      llvm::cl::init("auto")};
  Option<std::string> promptKernel{
      *this, "prompt-kernel",
      llvm::cl::desc("Tensor-core kernel of a prompt: prefill (the default: "
                     "the prefill family, on wgmma where every chip has it "
                     "and the caches are quantized), prefill-mma-sync (the "
                     "prefill family on mma.sync), prefill-wgmma (on wgmma "
                     "wherever it serves) or xqa (query tiles of the decode "
                     "kernel)"),
      llvm::cl::init("prefill")};
  Option<bool> fold{
      *this, "fold",
      llvm::cl::desc("Run pattn-fold-channel-scales (false leaves channel "
                     "scales unfolded, for testing the unfolded path)"),
      llvm::cl::init(true)};
};

/// Adds the pattn part of the pipeline to `pm` (anchored on builtin.module):
/// the fold (unless `fold` is false), pattn-select-backend and
/// convert-pattn-to-gpu. The result holds host code in upstream dialects and
/// one gpu.module of kernels per chip group; `pattn-compile --emit=mlir`
/// prints it. Fails with a message when a chip or the backend is unknown.
llvm::LogicalResult buildPAttnToGPUPipeline(mlir::OpPassManager &pm,
                                            const CompileOptions &options,
                                            std::string &error);

/// Adds the whole pipeline to `pm` (anchored on builtin.module): the pattn
/// part above, then the NVGPU/GPU-to-NVVM lowering, serialization and the
/// host lowering to LLVM. Fails with a message when a chip, the backend or
/// the format is unknown.
llvm::LogicalResult buildCompilePipeline(mlir::OpPassManager &pm,
                                         const CompileOptions &options,
                                         std::string &error);

/// Points the launcher calls of the pipeline's output, once translated to
/// LLVM IR, at libpattn_runtime.so: upstream's gpu-to-llvm lowering and the
/// gpu.binary translation call mgpu* functions (mgpuLaunchKernel, ...), the
/// names MLIR's own CUDA runtime exports, and pattn's runtime exports them
/// as pattnMgpu* so that both can be loaded in one process. Compilers that
/// translate and link the output themselves call this before linking
/// against libpattn_runtime.so; pattn-compile does it for every artifact.
void bindRuntimeSymbols(llvm::Module &module);

/// Registers `--pattn-compile`; bad options make the pipeline fail to parse.
void registerCompilePipeline();

} // namespace pattn

#endif // PATTN_PIPELINES_PIPELINES_H
