//===- Passes.h - pattn dialect passes --------------------------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// Declares the passes of the pattn dialect and the named pipeline that runs
// them in order.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_DIALECT_PATTN_TRANSFORMS_PASSES_H
#define PATTN_DIALECT_PATTN_TRANSFORMS_PASSES_H

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Pass/Pass.h"

#include <optional>
#include <string>

namespace pattn {

/// The values of the `force` option of --pattn-select-backend.
enum class ForceBackend { Auto, Xqa, Portable };

/// The ForceBackend that `name` spells (auto, xqa, portable), if any.
std::optional<ForceBackend> parseForceBackend(llvm::StringRef name);

#define GEN_PASS_DECL
#include "pattn/Dialect/PAttn/Transforms/Passes.h.inc"

/// Options of the `pattn-fold-and-select` pipeline.
struct FoldAndSelectOptions
    : public mlir::PassPipelineOptions<FoldAndSelectOptions> {
  Option<std::string> chip{*this, "chip", llvm::cl::desc("Target chip")};
  // A string, checked by pattn-select-backend, so that a bad value is a
  // message naming the option and its values.
  Option<std::string> force{
      *this, "force",
      llvm::cl::desc("auto (by eligibility), xqa (an ineligible op is an "
                     "error) or portable"),
      llvm::cl::init("auto")};
};

/// Adds --pattn-fold-channel-scales then --pattn-select-backend.
void buildFoldAndSelectPipeline(mlir::OpPassManager &pm,
                                const FoldAndSelectOptions &options);

/// Registers the passes and the `pattn-fold-and-select` pipeline.
void registerPasses();

} // namespace pattn

#endif // PATTN_DIALECT_PATTN_TRANSFORMS_PASSES_H
