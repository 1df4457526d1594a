// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode="chips=sm_90a xqa-scores-ahead=true" --convert-pattn-to-gpu=chips=sm_90a 2>/dev/null | FileCheck %s

// The XQA decode that scores a tile ahead (--pattn-plan-decode's
// xqa-scores-ahead; docs/Lowering.md, "Scores a tile ahead"): tile 0 is
// scored before the loop, and iteration t waits for tiles t and t + 1,
// finishes tile t from the scores it carries, and computes tile t + 1's
// scores between tile t's softmax and its P V. Same op as
// convert-pattn-to-gpu-xqa.mlir (i8 K, nvfp4 V with token scales, g = 4:
// rows = 8).
//
// The plan (the planner's choice: pattn-plan-decode-scores-ahead.mlir):
// rows = 8, 4 stages, scores_ahead = true.
//
// The prologue copies tiles 0 ... 2 (three commit groups), waits for tile 0
// (at most 2 newer groups pending) and scores it: 8 k-steps of K Qᵀ in
// two chains from zero.
// CHECK-LABEL: gpu.func @pattn_xqa_decode_
// CHECK-COUNT-3: nvvm.cp.async.commit.group
// CHECK: nvvm.cp.async.wait.group 2
// CHECK-NEXT: gpu.barrier
// CHECK-COUNT-2: nvvm.mma.sync {{.*}} C[%cst
// CHECK-COUNT-6: nvvm.mma.sync
// The loop carries the scores (4 f32 after the softmax state) and the
// block-table entries; each iteration waits for tile t + 1 (at most 1 newer
// group pending), copies tile t + 3, then tile t's masks and softmax.
// CHECK: scf.for {{.*}} -> (f32, f32, f32, f32,
// CHECK-NEXT: nvvm.cp.async.wait.group 1
// CHECK-NEXT: gpu.barrier
// CHECK: nvvm.cp.async.commit.group
// CHECK: nvvm.vote.sync  all
// CHECK: nvvm.vote.sync  any
// CHECK: movmatrix.sync.aligned.m8n8.trans.b16
// CHECK: movmatrix.sync.aligned.m8n8.trans.b16
// Then tile t + 1's scores (two Sᵀ chains from zero) before tile t's P V
// (the eight Oᵀ tiles accumulate on the softmax's decayed state).
// CHECK-COUNT-2: nvvm.mma.sync {{.*}} C[%cst
// CHECK-COUNT-6: nvvm.mma.sync
// CHECK-NOT: gpu.barrier
// CHECK: nvvm.mma.sync {{.*}} C[%{{[0-9]+}}#0, %{{[0-9]+}}#1, %{{[0-9]+}}#2, %{{[0-9]+}}#3]
// CHECK: scf.yield
// CHECK: nvvm.cp.async.wait.group 0
!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
!v = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = nvfp4, scale = token>
func.func @decode(%kp: memref<?x16x8x128xi8>, %vp: memref<?x16x8x64xi8>, %vg: memref<?x16x8x8xf8E4M3FN>, %vt: memref<?x16x8xf32>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %ks: memref<1xf32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x128xi8>) : !k
  %v = pattn.bind_cache storage(%vp : memref<?x16x8x64xi8>) group_scales(%vg : memref<?x16x8x8xf8E4M3FN>) token_scales(%vt : memref<?x16x8xf32>) : !v
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%v : !v)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) k_scale(%ks : memref<1xf32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64}
  return
}
