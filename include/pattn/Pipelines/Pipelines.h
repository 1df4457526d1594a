//===- Pipelines.h - pattn's end-to-end compile pipeline --------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// The `pattn-compile` pipeline: from pattn ops to a module whose host code is
// LLVM dialect and whose kernels are a gpu.binary with one object per chip.
// Compilers that embed pattn add it to their own pass manager.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_PIPELINES_PIPELINES_H
#define PATTN_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassOptions.h"

#include <string>

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
  Option<bool> hardwareConversions{
      *this, "hardware-conversions",
      llvm::cl::desc("Use the chips' conversion instructions where the target "
                     "table allows (false: bit tricks on every chip)"),
      llvm::cl::init(true)};
};

/// Adds the whole pipeline to `pm` (anchored on builtin.module). Fails with
/// a message when a chip or the format is unknown.
llvm::LogicalResult buildCompilePipeline(mlir::OpPassManager &pm,
                                         const CompileOptions &options,
                                         std::string &error);

/// Registers `--pattn-compile`.
void registerCompilePipeline();

} // namespace pattn

#endif // PATTN_PIPELINES_PIPELINES_H
