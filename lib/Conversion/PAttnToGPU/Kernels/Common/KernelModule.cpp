//===- KernelModule.cpp - The gpu.module kernels are added to -------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements KernelModule::create, the one place every kernel
// family creates its gpu.func (the kernel attribute, a provisional unique
// name, the alignment of its shared buffers), and the naming of the
// finished kernels by what they are, which also merges identical ones.
//
//===----------------------------------------------------------------------===//

#include "Kernels/Kernels.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

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

/// `name` without the `_<N>` that KernelModule::create appended.
static StringRef familyName(StringRef name) {
  auto [base, counter] = name.rsplit('_');
  unsigned unused;
  return !counter.empty() && !counter.getAsInteger(10, unused) ? base : name;
}

void pattn::nameKernelsByContent(ModuleOp module,
                                 ArrayRef<gpu::GPUModuleOp> kernelModules) {
  // Per kernel module: a kernel's final name, by its provisional one.
  DenseMap<std::pair<Operation *, StringAttr>, StringAttr> renamed;
  for (gpu::GPUModuleOp kernelModule : kernelModules) {
    llvm::StringMap<gpu::GPUFuncOp> byName;
    for (auto kernel :
         llvm::make_early_inc_range(kernelModule.getOps<gpu::GPUFuncOp>())) {
      StringAttr provisional = SymbolTable::getSymbolName(kernel);
      StringRef base = familyName(provisional.getValue());
      // The kernel's text under its family name (no locations): equal for
      // kernels that are the same, whatever op or plan they came from.
      SymbolTable::setSymbolName(kernel, base);
      std::string text;
      llvm::raw_string_ostream os(text);
      kernel->print(os, OpPrintingFlags().useLocalScope());
      std::string name;
      llvm::raw_string_ostream(name)
          << base << "_"
          << llvm::format_hex_no_prefix(llvm::xxh3_64bits(text), 16);
      auto [existing, inserted] = byName.try_emplace(name, kernel);
      if (inserted)
        SymbolTable::setSymbolName(kernel, name);
      else
        kernel->erase();
      renamed[{kernelModule, provisional}] =
          StringAttr::get(module.getContext(), name);
    }
  }
  module.walk([&](gpu::LaunchFuncOp launch) {
    SymbolRefAttr kernel = launch.getKernel();
    Operation *kernelModule =
        SymbolTable::lookupSymbolIn(module, kernel.getRootReference());
    auto it = renamed.find({kernelModule, kernel.getLeafReference()});
    if (it == renamed.end())
      return;
    launch.setKernelAttr(SymbolRefAttr::get(
        kernel.getRootReference(), {FlatSymbolRefAttr::get(it->second)}));
  });
}
