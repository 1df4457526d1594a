//===- PAttnToGPU.cpp - Lower pattn ops to GPU kernels ----------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements --convert-pattn-to-gpu: the host side. Each pattn op
// of a function becomes kernel launches ordered on a caller-provided stream
// (a trailing !llvm.ptr argument, seen by the GPU dialect as an async token
// so that upstream gpu-to-llvm passes it to every launch and allocation),
// and the function returns the runtime's status. The kernels themselves are
// built by the kernel families under Kernels/ (docs/Architecture.md).
//
//===----------------------------------------------------------------------===//

#include "pattn/Conversion/PAttnToGPU.h"
#include "Host/HostChecks.h"
#include "Host/HostRewriter.h"
#include "Host/OpOrder.h"
#include "Kernels/Kernels.h"
#include "Planning/DecodePlan.h"
#include "Planning/VerifyPlans.h"
#include "pattn/Dialect/PAttn/IR/PAttnOps.h"
#include "pattn/Dialect/PAttn/Transforms/ConstantTables.h"
#include "pattn/Target/TargetDescription.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

#define DEBUG_TYPE "convert-pattn-to-gpu"

namespace pattn {
#define GEN_PASS_DEF_CONVERTPATTNTOGPU
#include "pattn/Conversion/Passes.h.inc"
} // namespace pattn

using namespace mlir;
using namespace pattn;

namespace {
struct ConvertPAttnToGPUPass
    : public ::pattn::impl::ConvertPAttnToGPUBase<ConvertPAttnToGPUPass> {
  using Base::Base;

  /// The chips, checked by initialize.
  SmallVector<::pattn::Chip> targetChips;

  LogicalResult initialize(MLIRContext *context) override {
    // Options are not ops: their errors carry no location and dump no IR.
    targetChips.clear();
    std::string error = ::pattn::parseChipList(chips, targetChips);
    if (!error.empty())
      return emitError(UnknownLoc::get(context))
             << "convert-pattn-to-gpu: chips: " << error;
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> functions;
    for (auto function : module.getOps<func::FuncOp>()) {
      bool usesPAttn = function
                           .walk([](Operation *op) {
                             return isa<PAttnDialect>(op->getDialect())
                                        ? WalkResult::interrupt()
                                        : WalkResult::advance();
                           })
                           .wasInterrupted();
      if (usesPAttn)
        functions.push_back(function);
    }
    if (functions.empty())
      return;
    // The conversion lowers recorded plans only, each checked against the
    // chips it is lowered for, before anything is rewritten.
    for (func::FuncOp function : functions)
      if (failed(verifyDecodePlans(function, targetChips)))
        return signalPassFailure();

    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(&getContext()));
    // One kernel module per conversion class of the target table, carrying
    // the #nvvm.target of each of its chips; a chip whose MLA decodes have
    // a plan of their own (chip_plans) gets its own module, since its
    // kernels differ from the class's other chips'.
    auto classOf = [&](const ::pattn::TargetDescription &target) {
      if (!hardwareConversions ||
          !target.has(::pattn::HardwareConversion::F8x2ToF16x2))
        return ConversionClass::none;
      return target.has(::pattn::HardwareConversion::F4x2ToF16x2)
                 ? ConversionClass::fp8AndFp4
                 : ConversionClass::fp8;
    };
    llvm::SmallSetVector<::pattn::Chip, 4> ownModule;
    for (func::FuncOp function : functions)
      function.walk([&](MlaDecodeOp op) {
        if (DictionaryAttr chipPlans = op.getChipPlansAttr())
          for (::pattn::Chip chip : targetChips)
            if (chipPlans.get(::pattn::stringifyChip(chip)))
              ownModule.insert(chip);
      });
    std::vector<std::unique_ptr<KernelModule>> owned;
    auto createModule = [&](StringRef name, ConversionClass conversions,
                            ArrayRef<::pattn::Chip> members) {
      SmallVector<Attribute> targets;
      for (::pattn::Chip chip : members)
        targets.push_back(NVVM::NVVMTargetAttr::get(
            &getContext(), /*optLevel=*/3, "nvptx64-nvidia-cuda",
            ::pattn::stringifyChip(chip),
            ::pattn::getTargetDescription(chip).ptxFeatures));
      // Created detached, then inserted: the symbol table renames it on a
      // clash with a module the user already has.
      OpBuilder builder(&getContext());
      auto gpuModule = gpu::GPUModuleOp::create(builder, module.getLoc(), name);
      gpuModule.setTargetsAttr(ArrayAttr::get(&getContext(), targets));
      SymbolTable(module).insert(gpuModule);
      owned.push_back(
          std::make_unique<KernelModule>(gpuModule, conversions, members));
    };
    for (ConversionClass conversions :
         {ConversionClass::none, ConversionClass::fp8,
          ConversionClass::fp8AndFp4}) {
      SmallVector<::pattn::Chip> members, apart;
      for (::pattn::Chip chip : targetChips) {
        if (classOf(::pattn::getTargetDescription(chip)) != conversions)
          continue;
        (ownModule.contains(chip) ? apart : members).push_back(chip);
      }
      // A chip alone in its class already has a module of its own.
      if (members.empty() && apart.size() == 1)
        std::swap(members, apart);
      static constexpr const char *kNames[] = {
          "pattn_kernels", "pattn_kernels_fp8", "pattn_kernels_fp4"};
      if (!members.empty())
        createModule(kNames[int(conversions)], conversions, members);
      for (::pattn::Chip chip : apart)
        createModule(
            (Twine("pattn_kernels_") + ::pattn::stringifyChip(chip)).str(),
            conversions, chip);
    }
    SmallVector<KernelModule *> modules;
    for (auto &kernelModule : owned)
      modules.push_back(kernelModule.get());
    for (func::FuncOp function : functions) {
      HostRewriter rewriter(function, modules, targetChips);
      if (failed(rewriter.run()))
        return signalPassFailure();
    }
    // The same IR whichever compiler built pattn (OpOrder.h).
    for (func::FuncOp function : functions)
      orderOpsDeterministically(function);
    for (KernelModule *kernelModule : modules)
      for (auto kernel : kernelModule->module.getOps<gpu::GPUFuncOp>())
        orderOpsDeterministically(kernel);
    // Kernels named by what they are; ops that build the same kernel share
    // it.
    SmallVector<gpu::GPUModuleOp> gpuModules;
    for (KernelModule *kernelModule : modules)
      gpuModules.push_back(kernelModule->module);
    nameKernelsByContent(module, gpuModules);
    // A kernel module stands at the ops its kernels came from, so that a
    // failure while serializing it (ptxas) points at them, not at file:0:0.
    for (KernelModule *kernelModule : modules) {
      SmallVector<Location> origins;
      for (auto kernel : kernelModule->module.getOps<gpu::GPUFuncOp>())
        origins.push_back(kernel.getLoc());
      if (!origins.empty())
        kernelModule->module->setLoc(FusedLoc::get(&getContext(), origins));
    }
  }
};
} // namespace
