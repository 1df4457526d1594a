//===- pattn-readme.cpp - The README's embedding example, built -----------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// Everything below the line is the C++ block of the README's "Embedding
// pattn in a compiler", character for character (python/tests/
// test_readme_embedding.py keeps them equal); scripts/test-embedding.sh
// builds it against the installed package and runs it on the bundled
// example.
//
//===----------------------------------------------------------------------===//

#include "pattn/InitAll.h"             // pattn::registerAllDialects
#include "pattn/Pipelines/Pipelines.h" // pattn::CompileOptions, buildCompilePipeline

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

/// Parses `path` and lowers it for sm_90a: host code in the LLVM dialect
/// and the kernels as a gpu.binary (translate it to LLVM IR, call
/// pattn::bindRuntimeSymbols and link against libpattn_runtime.so, as
/// pattn-compile does). Null on failure, with the diagnostics printed.
static mlir::OwningOpRef<mlir::ModuleOp> compile(const char *path,
                                                 mlir::MLIRContext &context) {
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(path, &context);
  if (!module)
    return nullptr;
  mlir::PassManager pm(&context);
  pattn::CompileOptions options;
  options.chips = {"sm_90a"};
  std::string error;
  if (mlir::failed(pattn::buildCompilePipeline(pm, options, error))) {
    llvm::errs() << error << "\n";
    return nullptr;
  }
  if (mlir::failed(pm.run(*module)))
    return nullptr;
  return module;
}

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  pattn::registerAllDialects(registry); // no global pass registration needed
  mlir::MLIRContext context(registry);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      compile(argc > 1 ? argv[1] : "decode.mlir", context);
  if (!module)
    return 1;
  module->print(llvm::outs());
  return 0;
}
