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
#include "pattn/Conversion/PAttnToGPU.h"
#include "pattn/Dialect/PAttn/Transforms/Passes.h"
#include "pattn/Target/TargetDescription.h"

#include "mlir/Conversion/GPUCommon/GPUCommonPass.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/NVGPUToNVVM/NVGPUToNVVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/IR/Module.h"
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

auto ::pattn::buildPAttnToGPUPipeline(OpPassManager &pm,
                                      const CompileOptions &options,
                                      std::string &error) -> LogicalResult {
  // `chips=` with nothing after it is a mistake, not a request for the
  // default chips (which leaving the option out gives).
  if (options.chips.hasValue() && options.chips.empty()) {
    error = "chips= names no chip; name at least one (" +
            joinChipNames(defaultCompileChips()) +
            ", ...) or leave the option out for those";
    return failure();
  }
  SmallVector<Chip> chips;
  error = parseChipList(options.chips, chips);
  if (!error.empty())
    return failure();
  // Checked here too, so that the message names the option the user wrote.
  if (!parseForceBackend(options.backend)) {
    error = "unknown backend '" + options.backend +
            "'; expected auto, xqa or portable";
    return failure();
  }
  if (options.promptKernel != "xqa" && options.promptKernel != "prefill" &&
      options.promptKernel != "prefill-mma-sync" &&
      options.promptKernel != "prefill-wgmma") {
    error = "unknown prompt-kernel '" + options.promptKernel +
            "'; expected prefill, prefill-mma-sync, prefill-wgmma or xqa";
    return failure();
  }
  if (options.keysPerSplit <= 0 || options.keysPerSplit % 128 != 0) {
    error = "keys-per-split must be a positive multiple of 128, got " +
            std::to_string(int64_t(options.keysPerSplit));
    return failure();
  }

  int64_t tile = options.xqaKeysPerTile;
  if (tile != 0 && tile != 16 && tile != 32 && tile != 64 && tile != 128) {
    error = "xqa-keys-per-tile must be 0, 16, 32, 64 or 128, got " +
            std::to_string(tile);
    return failure();
  }
  int64_t stages = options.xqaStages;
  if (stages != 0 && (stages < 2 || stages > 8)) {
    error = "xqa-stages must be 0 or 2 to 8, got " + std::to_string(stages);
    return failure();
  }
  for (auto [name, cluster] :
       {std::pair<const char *, int64_t>{"xqa-cluster-heads",
                                         options.xqaClusterHeads},
        {"xqa-cluster-splits", options.xqaClusterSplits}})
    if (cluster != 0 && cluster != 1 && cluster != 2 && cluster != 4 &&
        cluster != 8) {
      error = std::string(name) + " must be 0, 1, 2, 4 or 8, got " +
              std::to_string(cluster);
      return failure();
    }

  // The passes are built here, not parsed from a pipeline string, so that a
  // compiler embedding pattn needs no global pass registration.
  // The fold runs first so that the selector sees folded K scales; without
  // it a channel-scaled K is ineligible for XQA. The selector, the planner
  // and the conversion all see every chip; the conversion attaches each
  // chip's #nvvm.target itself, one kernel module per group of chips that
  // decode fp8 alike.
  SmallVector<std::string> chipNames;
  for (Chip chip : chips)
    chipNames.push_back(stringifyChip(chip).str());
  if (options.fold)
    pm.addPass(createPAttnFoldChannelScales());
  PAttnSelectBackendOptions select;
  select.chips = chipNames;
  select.force = options.backend;
  pm.addPass(createPAttnSelectBackend(select));
  // The plan (tiles, stages, splits) must fit every chip built for.
  PAttnPlanDecodeOptions plan;
  plan.chips = chipNames;
  plan.keysPerSplit = options.keysPerSplit;
  plan.promptKernel = options.promptKernel;
  plan.xqaKeysPerTile = options.xqaKeysPerTile;
  plan.xqaStages = options.xqaStages;
  plan.xqaCopyWarp = options.xqaCopyWarp;
  plan.xqaScoresAhead = options.xqaScoresAhead;
  plan.xqaClusterHeads = options.xqaClusterHeads;
  plan.xqaClusterSplits = options.xqaClusterSplits;
  plan.xqaMergeUnsplit = options.xqaMergeUnsplit;
  pm.addPass(createPAttnPlanDecode(plan));
  ConvertPAttnToGPUOptions convert;
  convert.chips = chipNames;
  convert.hardwareConversions = options.hardwareConversions;
  pm.addPass(createConvertPAttnToGPU(convert));
  return success();
}

auto ::pattn::buildCompilePipeline(OpPassManager &pm,
                                   const CompileOptions &options,
                                   std::string &error) -> LogicalResult {
  if (options.format != "isa" && options.format != "bin" &&
      options.format != "fatbin") {
    error =
        "unknown format '" + options.format + "'; expected isa, bin or fatbin";
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
  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  kernels.addPass(createSCFToControlFlowPass());
  kernels.addPass(createConvertNVGPUToNVVMPass());
  kernels.addPass(createConvertGpuOpsToNVVMOps());
  kernels.addPass(createExternDynamicSharedMemory());
  // wgmma (the warpgroup MLA kernel) has no LLVM intrinsic in the NVVM
  // dialect: convert-nvvm-to-llvm writes it as inline PTX.
  kernels.addPass(createConvertNVVMToLLVMPass());
  kernels.addPass(createCSEPass());
  kernels.addPass(createReconcileUnrealizedCastsPass());
  GpuModuleToBinaryPassOptions serialize;
  serialize.compilationTarget = options.format;
  serialize.toolkitPath = findCudaToolkit();
  pm.addPass(createGpuModuleToBinaryPass(serialize));
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(arith::createArithExpandOpsPass());
  pm.addPass(createGpuToLLVMConversionPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  return success();
}

void ::pattn::bindRuntimeSymbols(llvm::Module &module) {
  for (llvm::Function &function : llvm::make_early_inc_range(module)) {
    StringRef name = function.getName();
    if (!function.isDeclaration() || !name.starts_with("mgpu"))
      continue;
    std::string renamed = ("pattnMgpu" + name.drop_front(4)).str();
    if (llvm::Function *existing = module.getFunction(renamed)) {
      function.replaceAllUsesWith(existing);
      function.eraseFromParent();
      continue;
    }
    function.setName(renamed);
  }
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
