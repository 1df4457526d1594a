// The PTX pattn emits for sm_89 assembles with ptxas, for every kernel
// (every encoding, granularity and record preset). sm_89 converts fp8 in
// hardware (SPEC §1), so the e4m3 decode uses cvt.rn.f16x2.e4m3x2; e5m2 is
// the top byte of an f16 and stays a shift, and sm_89 has no e2m1
// conversion, so e2m1 keeps its bit trick (asking for it would abort).
// REQUIRES: ptxas
// RUN: pattn-compile %S/Inputs/all-ops.mlir --chips=sm_89 --emit=ptx -o %t.ptx
// RUN: FileCheck %s < %t.ptx
// RUN: FileCheck %s --check-prefix=NONE < %t.ptx
// RUN: FileCheck %s --check-prefix=FP8 < %t.ptx
// The cache writes encode fp8 pairs with the chip's conversion, e5m2 too.
// RUN: FileCheck %s --check-prefix=ENC < %t.ptx
// RUN: %ptxas -arch=sm_89 %t.ptx -o %t.cubin
// The default backend (auto) lowers the eligible ops to the XQA kernel (mma.sync,
// ldmatrix, cp.async); the portable kernels of the same ops assemble too.
// RUN: FileCheck %s --check-prefix=XQA < %t.ptx
// RUN: pattn-compile %S/Inputs/all-ops.mlir --chips=sm_89 --backend=portable --emit=ptx -o %t.portable.ptx
// RUN: FileCheck %s --check-prefix=PORTABLE < %t.portable.ptx
// RUN: %ptxas -arch=sm_89 %t.portable.ptx -o %t.portable.cubin
// XQA: .entry pattn_xqa_decode
// XQA: mma.sync.aligned.m16n8k16.row.col.f32
// XQA: .entry pattn_xqa_mla_decode
// XQA: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// XQA: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// XQA: prmt.b32
// PORTABLE-NOT: pattn_xqa_mla_decode
// PORTABLE-NOT: pattn_xqa_decode
// PORTABLE-NOT: mma.sync

// CHECK: .target sm_89
// CHECK: .entry pattn_write_record
// FP8: cvt.rn.f16x2.e4m3x2
// NONE-NOT: f16x2.e5m2x2
// ENC-DAG: cvt.rn.satfinite.e4m3x2.f32
// ENC-DAG: cvt.rn.satfinite.e5m2x2.f32
// NONE-NOT: e2m1x2
