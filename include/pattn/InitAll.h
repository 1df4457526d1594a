//===- InitAll.h - Register pattn and what its pipeline needs ---*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// One place that registers the pattn dialect, its passes, and the upstream
// dialects, passes, interfaces and translations that the pattn pipeline uses,
// for tools and for compilers that embed pattn.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_INITALL_H
#define PATTN_INITALL_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace pattn {

/// Inserts the pattn dialect and the upstream dialects its pipeline parses
/// and produces (func, arith, bufferization, math, memref, scf, vector, gpu,
/// nvgpu, nvvm, llvm), the NVVM target attribute model, the convert-to-LLVM
/// interfaces and the LLVM IR translations that `gpu-module-to-binary`
/// needs. nvgpu is here for the tensor-core kernels, which
/// `convert-nvgpu-to-nvvm` lowers (test/Target/pattn-compile-nvgpu.mlir).
void registerAllDialects(mlir::DialectRegistry &registry);

/// Registers pattn's passes and the upstream passes and pipelines.
void registerAllPasses();

} // namespace pattn

#endif // PATTN_INITALL_H
