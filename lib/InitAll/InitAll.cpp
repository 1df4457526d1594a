//===- InitAll.cpp - Register pattn and what its pipeline needs -----------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements pattn's registration. Forgetting the NVVM target
// interface makes gpu-module-to-binary crash, and forgetting the LLVM IR
// translations or convert-to-LLVM interfaces makes serialization fail, so the
// three are registered together here and nowhere else.
//
//===----------------------------------------------------------------------===//

#include "pattn/InitAll.h"
#include "pattn/Conversion/Passes.h"
#include "pattn/Dialect/PAttn/IR/PAttnDialect.h"
#include "pattn/Dialect/PAttn/Transforms/Passes.h"
#include "pattn/Pipelines/Pipelines.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

void pattn::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<pattn::PAttnDialect, mlir::arith::ArithDialect,
                  mlir::bufferization::BufferizationDialect,
                  mlir::func::FuncDialect, mlir::gpu::GPUDialect,
                  mlir::LLVM::LLVMDialect, mlir::math::MathDialect,
                  mlir::memref::MemRefDialect, mlir::NVVM::NVVMDialect,
                  mlir::nvgpu::NVGPUDialect, mlir::scf::SCFDialect,
                  mlir::vector::VectorDialect>();
  mlir::registerAllExtensions(registry);
  mlir::registerAllToLLVMIRTranslations(registry);
  mlir::NVVM::registerNVVMTargetInterfaceExternalModels(registry);
}

void pattn::registerAllPasses() {
  mlir::registerAllPasses();
  pattn::registerPasses();
  pattn::registerConversionPasses();
  pattn::registerCompilePipeline();
}
