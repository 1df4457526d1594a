//===- Pipelines.cpp - pattn pass registration and pipelines --------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file registers the pattn passes and the pattn-fold-and-select
// pipeline: the fold must run first so that the selector sees folded K
// scales and can hand those ops to the tensor-core path.
//
//===----------------------------------------------------------------------===//

#include "pattn/Dialect/PAttn/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

namespace pattn {
#define GEN_PASS_REGISTRATION
#include "pattn/Dialect/PAttn/Transforms/Passes.h.inc"
} // namespace pattn

void pattn::buildFoldAndSelectPipeline(mlir::OpPassManager &pm,
                                       const FoldAndSelectOptions &options) {
  pm.addPass(createPAttnFoldChannelScales());
  PAttnSelectBackendOptions select;
  select.chip = options.chip;
  select.force = options.force;
  pm.addPass(createPAttnSelectBackend(select));
}

void pattn::registerPasses() {
  registerPAttnPasses();
  mlir::PassPipelineRegistration<FoldAndSelectOptions>(
      "pattn-fold-and-select",
      "Fold per-channel scales, then choose XQA or portable per attention op",
      buildFoldAndSelectPipeline);
}
