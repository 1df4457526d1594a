//===- Pipelines.cpp - pattn's end-to-end compile pipeline ----------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the `pattn-compile` pipeline. Until the XQA lowering
// lands, the backend choice is forced to portable so that what runs is what
// the remarks say; the targets and PTX versions come from the target table.
//
//===----------------------------------------------------------------------===//

#include "pattn/Pipelines/Pipelines.h"
#include "pattn/Target/TargetDescription.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <cstdlib>

using namespace mlir;
using namespace ::pattn;

/// The CUDA toolkit whose libdevice and ptxas serialize the kernels: the
/// usual environment variables, else the toolkit of the ptxas on PATH.
static std::string findCudaToolkit() {
  for (const char *variable : {"CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"})
    if (const char *value = std::getenv(variable); value && *value)
      return value;
  if (llvm::ErrorOr<std::string> ptxas = llvm::sys::findProgramByName("ptxas"))
    return llvm::sys::path::parent_path(llvm::sys::path::parent_path(*ptxas))
        .str();
  return "/usr/local/cuda";
}

auto ::pattn::buildCompilePipeline(OpPassManager &pm,
                                   const CompileOptions &options,
                                   std::string &error) -> LogicalResult {
  SmallVector<Chip> chips;
  for (const std::string &name : options.chips) {
    std::optional<Chip> chip = parseChip(name);
    if (!chip) {
      error = "unsupported chip '" + name +
              "'; supported chips: " + supportedChipList();
      return failure();
    }
    chips.push_back(*chip);
  }
  if (chips.empty())
    chips.assign(defaultCompileChips().begin(), defaultCompileChips().end());
  if (options.format != "isa" && options.format != "bin" &&
      options.format != "fatbin") {
    error = "unknown format '" + options.format + "'; expected isa, bin or fatbin";
    return failure();
  }

  // The conversion attaches each chip's #nvvm.target itself: it groups the
  // chips by how they decode fp8, one kernel module per group.
  SmallVector<StringRef> chipNames;
  for (Chip chip : chips)
    chipNames.push_back(stringifyChip(chip));
  std::string pipeline = llvm::formatv(
      "pattn-fold-channel-scales,"
      "pattn-select-backend{{chip={0} force=portable},"
      "convert-pattn-to-gpu{{keys-per-split={1} chips={2} "
      "hardware-conversions={3}},",
      stringifyChip(chips.front()), int64_t(options.keysPerSplit),
      llvm::join(chipNames, ","),
      options.hardwareConversions ? "true" : "false");
  pipeline += llvm::formatv(
      "gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm,cse,"
      "reconcile-unrealized-casts),"
      "gpu-module-to-binary{{format={0} toolkit={1}},"
      "convert-scf-to-cf,arith-expand,gpu-to-llvm,reconcile-unrealized-casts",
      std::string(options.format), findCudaToolkit());
  if (failed(parsePassPipeline(pipeline, pm))) {
    error = "internal error: cannot parse the pipeline " + pipeline;
    return failure();
  }
  return success();
}

void ::pattn::registerCompilePipeline() {
  PassPipelineRegistration<CompileOptions>(
      "pattn-compile",
      "Compile pattn ops to LLVM host code and one GPU object per chip",
      [](OpPassManager &pm, const CompileOptions &options) {
        std::string error;
        if (failed(buildCompilePipeline(pm, options, error)))
          llvm::errs() << "pattn-compile: " << error << "\n";
      });
}
