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

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/PrettyStackTrace.h"

int main(int argc, char **argv) {
  llvm::setBugReportMsg("pattn-opt crashed: please file a pattn issue with "
                        "the input and the command line.\n");
  pattn::registerAllPasses();
  mlir::DialectRegistry registry;
  pattn::registerAllDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "pattn optimizer driver\n", registry));
}
