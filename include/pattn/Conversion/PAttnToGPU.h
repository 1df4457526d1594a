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

namespace pattn {
#define GEN_PASS_DECL_CONVERTPATTNTOGPU
#define GEN_PASS_DECL_EXTERNDYNAMICSHAREDMEMORY
#include "pattn/Conversion/Passes.h.inc"
} // namespace pattn

#endif // PATTN_CONVERSION_PATTNTOGPU_H
