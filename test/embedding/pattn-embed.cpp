//===- pattn-embed.cpp - A compiler that embeds pattn ---------------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// What a compiler that embeds pattn does, through the installed package and
// the C++ API only: its own MLIRContext and registry, no global pass
// registration, pass pipelines built by pattn's builders. It runs the fold
// and the backend choice (and the selector nested in func.func), then the
// whole compile pipeline to PTX, and prints both for FileCheck
// (test/embedding/pattn-embed.check).
//
//===----------------------------------------------------------------------===//

#include "pattn/Conversion/PAttnToGPU.h"
#include "pattn/Dialect/PAttn/IR/PAttnDialect.h"
#include "pattn/InitAll.h"
#include "pattn/Pipelines/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

/// Parses `path` into `context`, or prints why not.
static mlir::OwningOpRef<mlir::ModuleOp> parse(const char *path,
                                               mlir::MLIRContext &context) {
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(path, &context);
  if (!module)
    llvm::errs() << "pattn-embed: cannot parse " << path << "\n";
  return module;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    llvm::errs() << "usage: pattn-embed <decode.mlir>\n";
    return 2;
  }
  mlir::DialectRegistry registry;
  pattn::registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  context.printOpOnDiagnostic(false);

  // 1. Fold and select, built directly. The selector and the planner work
  //    per op, so they may also run nested in func.func.
  mlir::OwningOpRef<mlir::ModuleOp> module = parse(argv[1], context);
  if (!module)
    return 1;
  mlir::PassManager foldAndSelect(&context);
  pattn::FoldAndSelectOptions selection;
  selection.chips = {"sm_90a"};
  pattn::buildFoldAndSelectPipeline(foldAndSelect, selection);
  pattn::PAttnPlanDecodeOptions plan;
  plan.chips = {"sm_90a"};
  foldAndSelect.nest<mlir::func::FuncOp>().addPass(
      pattn::createPAttnPlanDecode(plan));
  if (mlir::failed(foldAndSelect.run(*module)))
    return 1;
  llvm::outs() << "// fold, select and plan\n";
  module->print(llvm::outs());

  // 2. The whole pipeline, to PTX for one chip.
  module = parse(argv[1], context);
  if (!module)
    return 1;
  mlir::PassManager compile(&context);
  pattn::CompileOptions options;
  options.chips = {"sm_90a"};
  options.format = "isa";
  std::string error;
  if (mlir::failed(pattn::buildCompilePipeline(compile, options, error))) {
    llvm::errs() << "pattn-embed: " << error << "\n";
    return 1;
  }
  if (mlir::failed(compile.run(*module)))
    return 1;
  module->walk([](mlir::gpu::BinaryOp binary) {
    for (mlir::Attribute attr : binary.getObjects()) {
      auto object = mlir::cast<mlir::gpu::ObjectAttr>(attr);
      llvm::outs() << "// ptx of " << binary.getSymName() << "\n"
                   << object.getObject().getValue() << "\n";
    }
  });

  // 3. A bad option is an error message, not a crash.
  mlir::PassManager bad(&context);
  pattn::CompileOptions wrong;
  wrong.chips = {"sm_75"};
  if (mlir::succeeded(pattn::buildCompilePipeline(bad, wrong, error)))
    return 1;
  llvm::outs() << "// bad chip: " << error << "\n";
  return 0;
}
