// The PTX pattn emits for sm_100a assembles with ptxas, for every kernel
// (every encoding, granularity and record preset), and reaches no fp8/fp4
// conversion instruction (SPEC §1: they abort the backend on older chips;
// the portable kernels decode with bit tricks everywhere).
// REQUIRES: ptxas
// RUN: pattn-compile %S/Inputs/all-ops.mlir --chips=sm_100a --emit=ptx -o %t.ptx
// RUN: FileCheck %s < %t.ptx
// RUN: %ptxas -arch=sm_100a %t.ptx -o %t.cubin

// CHECK: .target sm_100a
// CHECK-NOT: e4m3x2
// CHECK-NOT: e5m2x2
// CHECK-NOT: e2m1x2
// CHECK: .entry pattn_write_record
