// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode=chips=sm_90a --convert-pattn-to-gpu=chips=sm_90a --split-input-file 2>/dev/null | FileCheck %s
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_100a --pattn-plan-decode=chips=sm_100a --convert-pattn-to-gpu=chips=sm_100a --split-input-file 2>/dev/null | FileCheck %s --check-prefix=CVT

// NVFP4 in the XQA decode (docs/Lowering.md, "e2m1 pairs as subnormals"):
// without the chip's e2m1 conversion (sm_90a), the bit trick's pairs stay
// codes x 2^-14, exact f16 subnormals, and are multiplied only by their
// e4m3 group scale (still exact: a multiple of 2^-24 with 6 significant
// bits). The 2^14 moves to the fp32 side: the logit scale for K, the
// output (or, with per-token V scales, those scales) for V. One f16x2
// multiply a pair fewer than restoring every pair.

// Tensor outer scales: the softmax scale takes 2^14 once, no pair is
// multiplied by 2^14, and the output takes it before the V tensor scale.
// CHECK-LABEL: gpu.func @pattn_xqa_decode_
// CHECK:     %[[KR:.*]] = arith.constant 1.638400e+04 : f32
// CHECK-NEXT: arith.mulf %{{.*}}, %[[KR]] : f32
// CHECK-NOT: dense<1.638400e+04> : vector<2xf16>
// CHECK:     %[[VR:.*]] = arith.constant 1.638400e+04 : f32
// CHECK-NEXT: %[[O:.*]] = arith.mulf %{{.*}}, %[[VR]] : f32
// CHECK-NEXT: arith.mulf %[[O]], %{{.*}} : f32
// CHECK-LABEL: gpu.func @pattn_merge_
// With cvt.rn.f16x2.e2m1x2 (sm_100a) the pairs are exact values: no 2^14.
// CVT-LABEL: gpu.func @pattn_xqa_decode_
// CVT:       nvvm.convert.f4x2.to.f16x2
// CVT-NOT:   1.638400e+04
// CVT-LABEL: gpu.func @pattn_merge_
!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = nvfp4, scale = tensor>
!v = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = nvfp4, scale = tensor>
func.func @decode(%kp: memref<?x16x8x64xi8>, %kg: memref<?x16x8x8xf8E4M3FN>, %vp: memref<?x16x8x64xi8>, %vg: memref<?x16x8x8xf8E4M3FN>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %ks: memref<1xf32>, %vs: memref<1xf32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x64xi8>) group_scales(%kg : memref<?x16x8x8xf8E4M3FN>) : !k
  %v = pattn.bind_cache storage(%vp : memref<?x16x8x64xi8>) group_scales(%vg : memref<?x16x8x8xf8E4M3FN>) : !v
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%v : !v)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

// Per-token outer scales: K's still go through the logit scale; V's pair
// of token scales takes the 2^14 (fp32, exact) before it scales the
// pairs, so a value is rounded to f16 once at its true magnitude. The
// output is not multiplied again.
// CHECK-LABEL: gpu.func @pattn_xqa_decode_
// CHECK:     %[[KR:.*]] = arith.constant 1.638400e+04 : f32
// CHECK-NEXT: arith.mulf %{{.*}}, %[[KR]] : f32
// CHECK-NOT: dense<1.638400e+04> : vector<2xf16>
// CHECK:     %[[VR:.*]] = arith.constant dense<1.638400e+04> : vector<2xf32>
// CHECK-NEXT: %[[TS:.*]] = arith.mulf %{{.*}}, %[[VR]] : vector<2xf32>
// CHECK-NEXT: arith.mulf %{{.*}}, %[[TS]] : vector<2xf32>
// CHECK-NOT: 1.638400e+04 : f32
// CHECK-LABEL: gpu.func @pattn_merge_
// CVT-LABEL: gpu.func @pattn_xqa_decode_
// CVT:       nvvm.convert.f4x2.to.f16x2
// CVT-NOT:   1.638400e+04
// CVT-LABEL: gpu.func @pattn_merge_
!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = nvfp4, scale = token>
!v = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = nvfp4, scale = token>
func.func @decode(%kp: memref<?x16x8x64xi8>, %kg: memref<?x16x8x8xf8E4M3FN>, %kt: memref<?x16x8xf32>, %vp: memref<?x16x8x64xi8>, %vg: memref<?x16x8x8xf8E4M3FN>, %vt: memref<?x16x8xf32>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x64xi8>) group_scales(%kg : memref<?x16x8x8xf8E4M3FN>) token_scales(%kt : memref<?x16x8xf32>) : !k
  %v = pattn.bind_cache storage(%vp : memref<?x16x8x64xi8>) group_scales(%vg : memref<?x16x8x8xf8E4M3FN>) token_scales(%vt : memref<?x16x8xf32>) : !v
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%v : !v)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64}
  return
}
