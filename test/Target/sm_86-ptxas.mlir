// The PTX pattn emits for sm_86 assembles with ptxas, for every kernel
// (every encoding, granularity and record preset), and reaches no fp8/fp4
// conversion instruction anywhere (SPEC §1: sm_86 has none, and asking for
// one aborts the backend); the kernels decode with bit tricks.
// REQUIRES: ptxas
// RUN: pattn-compile %S/Inputs/all-ops.mlir --chips=sm_86 --emit=ptx -o %t.ptx
// RUN: FileCheck %s < %t.ptx
// RUN: FileCheck %s --check-prefix=NONE < %t.ptx
// RUN: %ptxas -arch=sm_86 %t.ptx -o %t.cubin

// CHECK: .target sm_86
// CHECK: .entry pattn_write_record
// NONE-NOT: e4m3x2
// NONE-NOT: e5m2x2
// NONE-NOT: e2m1x2
