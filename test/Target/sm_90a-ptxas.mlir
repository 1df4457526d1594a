// The PTX pattn emits for sm_90a assembles with ptxas, for every kernel
// (every encoding, granularity and record preset). sm_90a converts fp8 in
// hardware (SPEC §1), so the e4m3 decode uses cvt.rn.f16x2.e4m3x2; e5m2 is
// the top byte of an f16 and stays a shift, and sm_90a has no e2m1
// conversion, so e2m1 keeps its bit trick (asking for it would abort).
// REQUIRES: ptxas
// RUN: pattn-compile %S/Inputs/all-ops.mlir --chips=sm_90a --emit=ptx -o %t.ptx
// RUN: FileCheck %s < %t.ptx
// RUN: FileCheck %s --check-prefix=NONE < %t.ptx
// RUN: FileCheck %s --check-prefix=FP8 < %t.ptx
// The cache writes encode fp8 pairs with the chip's conversion, e5m2 too.
// RUN: FileCheck %s --check-prefix=ENC < %t.ptx
// RUN: %ptxas -arch=sm_90a %t.ptx -o %t.cubin
// The tensor-core kernels keep everything in registers at their launch
// bounds (3 resident MLA blocks at 168 registers, XQA at its planned count):
// ptxas reports no stack frame and no spills for any of them.
// RUN: %ptxas -arch=sm_90a -v %t.ptx -o %t.v.cubin 2>&1 | grep -A1 "Function properties for pattn_xqa" > %t.props
// RUN: FileCheck %s --check-prefix=PROPS < %t.props
// RUN: not grep -E "[1-9][0-9]* bytes (stack frame|spill)" %t.props
// PROPS: Function properties for pattn_xqa_mla_decode
// PROPS-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PROPS: Function properties for pattn_xqa_mla_wgmma_decode
// PROPS-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PROPS: Function properties for pattn_xqa_decode
// PROPS-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// The default backend (auto) lowers the eligible ops to the XQA kernel (mma.sync,
// ldmatrix, cp.async); the portable kernels of the same ops assemble too.
// RUN: FileCheck %s --check-prefix=XQA < %t.ptx
// The 128-head MLA decode takes the warpgroup kernel (an sm_90a-only
// build): the decoded tile handed to the async proxy, S on wgmma m64n32
// with a wait before the softmax, P V on wgmma m64n256 (nvfp4: one value
// block per warpgroup), waited for after the next tile's decode.
// RUN: FileCheck %s --check-prefix=WGMMA < %t.ptx
// Every record preset's warpgroup kernel assembles with no stack frame,
// no spills, and no wgmma serialized by ptxas (C7514: a register of an
// in-flight wgmma read before its wait).
// RUN: pattn-compile %S/Inputs/mla-wgmma.mlir --chips=sm_90a --emit=ptx -o %t.wgmma.ptx
// RUN: %ptxas -arch=sm_90a -v %t.wgmma.ptx -o %t.wgmma.cubin > %t.wgmma.log 2>&1
// RUN: FileCheck %s --check-prefix=WGPROPS < %t.wgmma.log
// RUN: not grep -E "C7514|[1-9][0-9]* bytes (stack frame|spill)" %t.wgmma.log
// WGPROPS-COUNT-3: Function properties for pattn_xqa_mla_wgmma_decode
// WGMMA: .entry pattn_xqa_mla_wgmma_decode
// WGMMA: fence.proxy.async.shared::cta
// WGMMA: wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16
// WGMMA: wgmma.commit_group.sync.aligned
// WGMMA: wgmma.wait_group.sync.aligned{{[[:space:]]+}}0;
// WGMMA: wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16
// WGMMA: wgmma.commit_group.sync.aligned
// RUN: pattn-compile %S/Inputs/all-ops.mlir --chips=sm_90a --backend=portable --emit=ptx -o %t.portable.ptx
// RUN: FileCheck %s --check-prefix=PORTABLE < %t.portable.ptx
// RUN: %ptxas -arch=sm_90a %t.portable.ptx -o %t.portable.cubin
// XQA: .entry pattn_xqa_decode
// XQA: mma.sync.aligned.m16n8k16.row.col.f32
// XQA: .entry pattn_xqa_mla_decode
// XQA: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// XQA: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// XQA: prmt.b32
// PORTABLE-NOT: pattn_xqa_mla_decode
// PORTABLE-NOT: pattn_xqa_decode
// PORTABLE-NOT: mma.sync
// With --hardware-conversions=false the same chip reaches none.
// RUN: pattn-compile %S/Inputs/all-ops.mlir --chips=sm_90a --hardware-conversions=false --emit=ptx -o %t.soft.ptx
// RUN: FileCheck %s --check-prefix=SOFT < %t.soft.ptx
// RUN: %ptxas -arch=sm_90a %t.soft.ptx -o %t.soft.cubin

// CHECK: .target sm_90a
// CHECK: .entry pattn_write_record
// CHECK: .entry pattn_rotary
// FP8: cvt.rn.f16x2.e4m3x2
// NONE-NOT: f16x2.e5m2x2
// ENC-DAG: cvt.rn.satfinite.e4m3x2.f32
// ENC-DAG: cvt.rn.satfinite.e5m2x2.f32
// NONE-NOT: e2m1x2
// SOFT: .target sm_90a
// SOFT-NOT: e4m3x2
// SOFT-NOT: e5m2x2
// SOFT-NOT: e2m1x2
