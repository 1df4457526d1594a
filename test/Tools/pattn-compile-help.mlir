// pattn-compile --help lists pattn-compile's own options, not the hundreds
// that LLVM and MLIR register (they stay usable, hidden).
//
// RUN: pattn-compile --help | FileCheck %s
// RUN: pattn-compile --help | not grep -i -E "amdgpu|aarch64|x86-|mlir-print"
// RUN: not pattn-compile %s --emit=wat -o - 2>&1 | FileCheck %s --check-prefix=EMIT
// RUN: not pattn-compile %s --backend=fast --emit=mlir -o - 2>&1 | FileCheck %s --check-prefix=BACKEND
// RUN: not pattn-compile %s --chips=sm_75 --emit=mlir -o - 2>&1 | FileCheck %s --check-prefix=CHIP

// CHECK: USAGE: pattn-compile [options] <input.mlir>
// CHECK: --version
// CHECK: pattn-compile options:
// CHECK: --backend=<auto|xqa|portable>
// CHECK: --chips=
// CHECK: --emit=

// EMIT: pattn-compile: unknown --emit=wat; expected so, mlir, llvm, ptx or cubin
// BACKEND: pattn-compile: unknown backend 'fast'; expected auto, xqa or portable
// CHIP: pattn-compile: unsupported chip 'sm_75'; supported chips: sm_80,

func.func @empty() {
  return
}
