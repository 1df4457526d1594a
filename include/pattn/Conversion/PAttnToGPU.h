//===- PAttnToGPU.h - Lower pattn ops to GPU kernels ------------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_CONVERSION_PATTNTOGPU_H
#define PATTN_CONVERSION_PATTNTOGPU_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

#include <optional>
#include <string>

namespace pattn {

/// The `force` option of --pattn-select-backend.
enum class ForceBackend { Auto, Xqa, Portable };

std::optional<ForceBackend> parseForceBackend(llvm::StringRef name);

#define GEN_PASS_DECL_PATTNSELECTBACKEND
#define GEN_PASS_DECL_PATTNPLANDECODE
#define GEN_PASS_DECL_CONVERTPATTNTOGPU
#define GEN_PASS_DECL_EXTERNDYNAMICSHAREDMEMORY
#include "pattn/Conversion/Passes.h.inc"

/// The options of the pattn-fold-and-select pipeline.
struct FoldAndSelectOptions
    : public mlir::PassPipelineOptions<FoldAndSelectOptions> {
  ListOption<std::string> chips{
      *this, "chips", llvm::cl::desc("Chips the kernels are built for")};
  // A string, checked by pattn-select-backend, so that a bad value is a
  // message naming the option and its values.
  Option<std::string> force{
      *this, "force",
      llvm::cl::desc("auto (by eligibility), xqa (an ineligible op is an "
                     "error) or portable"),
      llvm::cl::init("auto")};
};

/// --pattn-fold-channel-scales, then --pattn-select-backend: the fold runs
/// first so that the selector sees folded K scales.
void buildFoldAndSelectPipeline(mlir::OpPassManager &pm,
                                const FoldAndSelectOptions &options);

/// Registers the conversion's passes and the pattn-fold-and-select
/// pipeline.
void registerConversionPasses();

} // namespace pattn

#endif // PATTN_CONVERSION_PATTNTOGPU_H
