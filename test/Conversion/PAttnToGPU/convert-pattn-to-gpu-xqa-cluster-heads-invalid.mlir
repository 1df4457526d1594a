// RUN: pattn-opt %s --split-input-file --convert-pattn-to-gpu="chips=sm_90a" --verify-diagnostics --mlir-print-op-on-diagnostic=false

// A cluster spans consecutive KV heads' blocks of one sequence, so its
// heads must divide the op's (Planning/VerifyPlans.cpp); the planner never
// writes such a plan, a hand-written one is rejected before any rewriting.
!i4 = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 128, encoding = i4, scale = tensor>
func.func @int4(%kp: memref<?x16x2x64xi8>, %s: memref<1xf32>, %q: memref<?x8x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %o: memref<?x8x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x2x64xi8>) : !i4
  // expected-error @below {{has an XQA plan of clusters of 4 KV heads' blocks, which do not divide its 2 KV heads}}
  pattn.paged_attention query(%q : memref<?x8x128xf16>) key(%k : !i4) value(%k : !i4)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>)
      k_scale(%s : memref<1xf32>) v_scale(%s : memref<1xf32>)
      outs(%o : memref<?x8x128xf16>) {num_heads = 8 : i64, backend = #pattn.backend<xqa>, plan = #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 64, stages = 4, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 44160, resident_blocks = [4], cluster_heads = 4, targets = [sm_90a]>}
  return
}
