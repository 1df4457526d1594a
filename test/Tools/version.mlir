// Both tools print pattn's version (VERSION) and commit next to LLVM's.
// RUN: pattn-compile --version | FileCheck %s
// RUN: pattn-opt --version | FileCheck %s
// CHECK: pattn {{[0-9]+\.[0-9]+\.[0-9]+}} (commit {{[0-9a-f]+|unknown}})
