//===- pattn-fuzz.cpp - libFuzzer target over the pattn pipeline ----------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// Feeds arbitrary bytes through what pattn-opt and pattn-compile do with a
// program before any external tool runs: parse, verify, fold, select,
// plan and convert-pattn-to-gpu for two chips (sm_80 and sm_90a, so both
// backends and both conversion classes are reached). Diagnostics are the
// expected outcome of bad input and are swallowed; a crash, a sanitizer
// report, a hang or unbounded memory is a bug. scripts/fuzz.sh builds it
// with ASan and UBSan, seeds it from test/ and examples/, and runs it.
//
//===----------------------------------------------------------------------===//

#include "pattn/InitAll.h"
#include "pattn/Pipelines/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace {

/// Inputs larger than this are cut: the interesting structure of a pattn
/// program is small, and the parser's cost grows with the text.
constexpr size_t kMaxInputBytes = 16 * 1024;

const mlir::DialectRegistry &registry() {
  static const mlir::DialectRegistry *instance = [] {
    pattn::registerAllPasses();
    auto *registry = new mlir::DialectRegistry();
    pattn::registerAllDialects(*registry);
    return registry;
  }();
  return *instance;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > kMaxInputBytes)
    size = kMaxInputBytes;
  std::string text(reinterpret_cast<const char *>(data), size);

  // One context per input: nothing one input interns can change how the
  // next one behaves, so every crash reproduces from its file alone.
  mlir::MLIRContext context(registry(), mlir::MLIRContext::Threading::DISABLED);
  context.allowUnregisteredDialects(false);
  mlir::ScopedDiagnosticHandler quiet(
      &context, [](mlir::Diagnostic &) { return mlir::success(); });

  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, &context);
  if (!module || mlir::failed(mlir::verify(*module)))
    return 0;

  pattn::CompileOptions options;
  options.chips = {"sm_80", "sm_90a"};
  mlir::PassManager pm(&context);
  std::string error;
  if (mlir::failed(pattn::buildPAttnToGPUPipeline(pm, options, error)))
    __builtin_trap(); // the options above are valid: a bug of ours
  if (mlir::succeeded(pm.run(*module)))
    (void)mlir::verify(*module);
  return 0;
}
