//===- pattn-opt.cpp - pattn optimizer driver -----------------------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// pattn-opt parses, verifies, transforms and prints pattn IR. It carries the
// upstream GPU pipeline too, so `gpu-module-to-binary` runs from here.
//
//===----------------------------------------------------------------------===//

#include "pattn/InitAll.h"
#include "pattn/Version.inc"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/PrettyStackTrace.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  llvm::setBugReportMsg("pattn-opt crashed: please file a pattn issue with "
                        "the input and the command line.\n");
  llvm::cl::AddExtraVersionPrinter([](llvm::raw_ostream &os) {
    os << "pattn " PATTN_VERSION_STRING " (commit " PATTN_COMMIT_STRING ")\n";
  });
  pattn::registerAllPasses();
  mlir::DialectRegistry registry;
  pattn::registerAllDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "pattn optimizer driver\n", registry));
}
