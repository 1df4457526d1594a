//===- Pipelines.cpp - pattn's end-to-end compile pipeline ----------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the `pattn-compile` pipeline and its pattn part, the
// one builder behind pattn-opt --pattn-compile, every output of pattn-compile
// and the Python package. The backend choice is an option (auto by default);
// the targets and PTX versions come from the target table. Kernels may use
// nvgpu ops (mma.sync, ldmatrix, cp.async), so convert-nvgpu-to-nvvm runs
// before convert-gpu-to-nvvm.
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
#include "llvm/Support/raw_ostream.h"

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

/// Appends `pipeline` to `pm`; a parse error is ours, not the user's.
static LogicalResult appendPipeline(OpPassManager &pm, StringRef pipeline,
                                    std::string &error) {
  std::string parseErrors;
  llvm::raw_string_ostream os(parseErrors);
  if (succeeded(parsePassPipeline(pipeline, pm, os)))
    return success();
  error = ("internal error: cannot parse the pipeline " + pipeline + ": " +
           parseErrors)
              .str();
  return failure();
}

auto ::pattn::buildPAttnToGPUPipeline(OpPassManager &pm,
                                      const CompileOptions &options,
                                      std::string &error) -> LogicalResult {
  SmallVector<Chip> chips;
  error = parseChipList(options.chips, chips);
  if (!error.empty())
    return failure();
  // The values of pattn-select-backend's `force`, checked here so that the
  // message names the option the user wrote.
  if (options.backend != "auto" && options.backend != "xqa" &&
      options.backend != "portable") {
    error = "unknown backend '" + options.backend +
            "'; expected auto, xqa or portable";
    return failure();
  }

  // The fold runs first so that the selector sees folded K scales; without
  // it a channel-scaled K is ineligible for XQA. The selector decides for
  // the first chip; the conversion attaches each chip's #nvvm.target itself,
  // one kernel module per group of chips that decode fp8 alike.
  SmallVector<StringRef> chipNames;
  for (Chip chip : chips)
    chipNames.push_back(stringifyChip(chip));
  std::string pipeline;
  if (options.fold)
    pipeline += "pattn-fold-channel-scales,";
  pipeline += llvm::formatv("pattn-select-backend{{chip={0} force={1}},",
                            stringifyChip(chips.front()),
                            std::string(options.backend));
  // The plan (tiles, stages, splits) must fit every chip built for.
  pipeline += llvm::formatv("pattn-plan-decode{{chips={0} keys-per-split={1}},",
                            llvm::join(chipNames, ","),
                            int64_t(options.keysPerSplit));
  pipeline += llvm::formatv("convert-pattn-to-gpu{{keys-per-split={0} "
                            "chips={1} hardware-conversions={2}}",
                            int64_t(options.keysPerSplit),
                            llvm::join(chipNames, ","),
                            options.hardwareConversions ? "true" : "false");
  return appendPipeline(pm, pipeline, error);
}

auto ::pattn::buildCompilePipeline(OpPassManager &pm,
                                   const CompileOptions &options,
                                   std::string &error) -> LogicalResult {
  if (options.format != "isa" && options.format != "bin" &&
      options.format != "fatbin") {
    error = "unknown format '" + options.format + "'; expected isa, bin or fatbin";
    return failure();
  }
  if (failed(buildPAttnToGPUPipeline(pm, options, error)))
    return failure();

  // convert-gpu-to-nvvm does not lower nvgpu ops (mma.sync, ldmatrix,
  // device_async_copy): without convert-nvgpu-to-nvvm their fragments stay
  // unrealized casts and serialization fails. It runs first so that
  // convert-gpu-to-nvvm finishes the memref and index types it leaves.
  // pattn-extern-dynamic-shared-memory then makes the dynamic shared memory
  // window an .extern array, so that it cannot alias static shared arrays.
  std::string pipeline = llvm::formatv(
      "gpu.module(convert-scf-to-cf,convert-nvgpu-to-nvvm,convert-gpu-to-nvvm,"
      "pattn-extern-dynamic-shared-memory,cse,reconcile-unrealized-casts),"
      "gpu-module-to-binary{{format={0} toolkit={1}},"
      "convert-scf-to-cf,arith-expand,gpu-to-llvm,reconcile-unrealized-casts",
      std::string(options.format), findCudaToolkit());
  return appendPipeline(pm, pipeline, error);
}

void ::pattn::registerCompilePipeline() {
  // Registered by hand rather than with PassPipelineRegistration, whose
  // builder cannot fail: a bad chip, backend or format must fail the
  // pipeline's parse instead of leaving an empty pipeline that succeeds.
  registerPassPipeline(
      "pattn-compile",
      "Compile pattn ops to LLVM host code and one GPU object per chip",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler)
          -> LogicalResult {
        CompileOptions options;
        if (failed(options.parseFromString(text)))
          return failure();
        std::string error;
        if (succeeded(buildCompilePipeline(pm, options, error)))
          return success();
        (void)errorHandler("pattn-compile: " + error);
        return failure();
      },
      [](function_ref<void(const detail::PassOptions &)> optionHandler) {
        optionHandler(CompileOptions());
      });
}
