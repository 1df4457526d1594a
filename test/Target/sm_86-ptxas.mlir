// The PTX pattn emits for sm_86 assembles with ptxas, for every kernel
// (every encoding, granularity and record preset), and reaches no fp8/fp4
// conversion instruction anywhere (SPEC §1: sm_86 has none, and asking for
// one aborts the backend); the kernels decode with bit tricks.
// REQUIRES: ptxas
// RUN: pattn-compile %S/Inputs/all-ops.mlir --chips=sm_86 --emit=ptx -o %t.ptx
// RUN: FileCheck %s < %t.ptx
// RUN: FileCheck %s --check-prefix=NONE < %t.ptx
// RUN: %ptxas -arch=sm_86 %t.ptx -o %t.cubin
// The default backend (auto) lowers the eligible ops to the XQA kernel (mma.sync,
// ldmatrix, cp.async); the portable kernels of the same ops assemble too.
// RUN: FileCheck %s --check-prefix=XQA < %t.ptx
// RUN: pattn-compile %S/Inputs/all-ops.mlir --chips=sm_86 --backend=portable --emit=ptx -o %t.portable.ptx
// RUN: FileCheck %s --check-prefix=PORTABLE < %t.portable.ptx
// RUN: %ptxas -arch=sm_86 %t.portable.ptx -o %t.portable.cubin
// XQA: .entry pattn_xqa_decode
// XQA: mma.sync.aligned.m16n8k16.row.col.f32
// XQA: .entry pattn_xqa_mla_decode
// XQA: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// XQA: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// XQA: prmt.b32
// PORTABLE-NOT: pattn_xqa_mla_decode
// PORTABLE-NOT: pattn_xqa_decode
// PORTABLE-NOT: mma.sync

// CHECK: .target sm_86
// CHECK: .entry pattn_write_record
// NONE-NOT: e4m3x2
// NONE-NOT: e5m2x2
// NONE-NOT: e2m1x2
