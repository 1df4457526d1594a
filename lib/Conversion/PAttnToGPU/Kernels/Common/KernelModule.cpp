//===- KernelModule.cpp - The gpu.module kernels are added to -------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements KernelModule::create, the one place every kernel
// family creates its gpu.func: the kernel attribute, unique naming, and the
// alignment of its shared buffers.
//
//===----------------------------------------------------------------------===//

#include "Kernels/Kernels.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;
using namespace pattn;

gpu::GPUFuncOp KernelModule::create(OpBuilder &builder, Location loc,
                                    StringRef name, TypeRange arguments,
                                    TypeRange workgroupBuffers) {
  builder.setInsertionPointToEnd(module.getBody());
  std::string unique = (name + "_" + Twine(counter++)).str();
  auto kernel = gpu::GPUFuncOp::create(builder, loc, unique,
                                       builder.getFunctionType(arguments, {}),
                                       workgroupBuffers, TypeRange());
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                  builder.getUnitAttr());
  // Kernels read shared buffers with vector loads of up to 16 bytes; the
  // lowering would otherwise align each buffer to its element only (4
  // bytes), and where ptxas placed one off a 16-byte boundary those loads
  // faulted (CUDA_ERROR_MISALIGNED_ADDRESS, head_dim 96 with one query head
  // per KV head: bench/results/2026-12-02-h200-onnx-vs-ort.md).
  for (unsigned index = 0; index < workgroupBuffers.size(); ++index)
    kernel.setWorkgroupAttributionAttr(
        index, LLVM::LLVMDialect::getAlignAttrName(),
        builder.getI64IntegerAttr(kSharedBufferAlignment));
  builder.setInsertionPointToStart(&kernel.front());
  return kernel;
}

Kernel KernelModule::create(OpBuilder &builder, Location loc, StringRef name,
                            ValueRange operands, TypeRange extra,
                            TypeRange workgroupBuffers) {
  SmallVector<Type> types(operands.getTypes());
  llvm::append_range(types, extra);
  return {create(builder, loc, name, types, workgroupBuffers),
          SmallVector<Value>(operands)};
}
