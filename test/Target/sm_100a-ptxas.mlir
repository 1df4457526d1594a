// The PTX pattn emits for sm_100a assembles with ptxas, for every kernel
// (every encoding, granularity and record preset). sm_100a converts fp8 and
// e2m1 in hardware (SPEC §1), so the decode uses cvt.rn.f16x2.e4m3x2 and
// cvt.rn.f16x2.e2m1x2; e5m2 is the top byte of an f16 and stays a shift.
// REQUIRES: ptxas
// RUN: pattn-compile %S/Inputs/all-ops.mlir --chips=sm_100a --emit=ptx -o %t.ptx
// RUN: FileCheck %s < %t.ptx
// RUN: FileCheck %s --check-prefix=NONE < %t.ptx
// RUN: FileCheck %s --check-prefix=FP8 < %t.ptx
// RUN: FileCheck %s --check-prefix=FP4 < %t.ptx
// RUN: %ptxas -arch=sm_100a %t.ptx -o %t.cubin

// CHECK: .target sm_100a
// CHECK: .entry pattn_write_record
// FP8: cvt.rn.f16x2.e4m3x2
// NONE-NOT: e5m2x2
// FP4: cvt.rn.f16x2.e2m1x2
