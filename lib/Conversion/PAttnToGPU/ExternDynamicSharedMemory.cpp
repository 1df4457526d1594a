//===- ExternDynamicSharedMemory.cpp - The dynamic window as .extern ------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements pattn-extern-dynamic-shared-memory: the zero-length
// shared-memory globals that convert-gpu-to-nvvm makes for
// gpu.dynamic_shared_memory become external declarations, which NVPTX
// prints as `.extern .shared ... name[]`, the window that starts after every
// static shared array of the kernel. See the pass description for the bug
// this prevents.
//
//===----------------------------------------------------------------------===//

#include "pattn/Conversion/PAttnToGPU.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace pattn {
#define GEN_PASS_DEF_EXTERNDYNAMICSHAREDMEMORY
#include "pattn/Conversion/Passes.h.inc"
} // namespace pattn

using namespace mlir;

namespace {
struct ExternDynamicSharedMemoryPass
    : public ::pattn::impl::ExternDynamicSharedMemoryBase<
          ExternDynamicSharedMemoryPass> {
  void runOnOperation() override {
    getOperation().walk([](LLVM::GlobalOp global) {
      auto array = dyn_cast<LLVM::LLVMArrayType>(global.getGlobalType());
      bool dynamicWindow =
          global.getAddrSpace() ==
              static_cast<unsigned>(NVVM::NVVMMemorySpace::Shared) &&
          array && array.getNumElements() == 0 && !global.getValue() &&
          global.getInitializerRegion().empty();
      if (dynamicWindow)
        global.setLinkage(LLVM::Linkage::External);
    });
  }
};
} // namespace
