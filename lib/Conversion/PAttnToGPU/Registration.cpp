//===- Registration.cpp - The conversion's passes and pipelines -----------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file registers --pattn-select-backend, --pattn-plan-decode,
// --convert-pattn-to-gpu and the pattn-fold-and-select pipeline: the fold
// must run first so that the selector sees folded K scales and can hand
// those ops to the tensor-core path.
//
//===----------------------------------------------------------------------===//

#include "pattn/Conversion/Passes.h"
#include "pattn/Dialect/PAttn/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

void pattn::buildFoldAndSelectPipeline(mlir::OpPassManager &pm,
                                       const FoldAndSelectOptions &options) {
  pm.addPass(createPAttnFoldChannelScales());
  PAttnSelectBackendOptions select;
  select.chips.assign(options.chips.begin(), options.chips.end());
  select.force = options.force;
  pm.addPass(createPAttnSelectBackend(select));
}

void pattn::registerConversionPasses() {
  registerPAttnConversionPasses();
  mlir::PassPipelineRegistration<FoldAndSelectOptions>(
      "pattn-fold-and-select",
      "Fold per-channel scales, then choose XQA or portable per attention op",
      buildFoldAndSelectPipeline);
}
