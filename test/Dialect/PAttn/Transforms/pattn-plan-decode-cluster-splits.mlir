// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode="chips=sm_90a xqa-cluster-splits=8" 2>/dev/null | FileCheck %s --check-prefix=PLAN
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_80,sm_90a --pattn-plan-decode="chips=sm_80,sm_90a xqa-cluster-splits=8" 2>/dev/null | FileCheck %s --check-prefix=SM80
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode="chips=sm_90a xqa-cluster-splits=8 xqa-copy-warp=true" 2>/dev/null | FileCheck %s --check-prefix=WARP
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode="chips=sm_90a xqa-cluster-splits=8 xqa-cluster-heads=8" 2>/dev/null | FileCheck %s --check-prefix=HEADS
// RUN: not pattn-opt %s --pattn-plan-decode="chips=sm_90a xqa-cluster-splits=16" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode="chips=sm_90a xqa-merge-unsplit=true" 2>/dev/null | FileCheck %s --check-prefix=UNSPLIT

// XQA decode plans whose C splits of a (sequence, KV head) form one
// cluster that merges them into the output (xqa-cluster-splits; the
// kernel: convert-pattn-to-gpu-xqa-cluster-splits.mlir). A plan takes them
// where it is a decode of four warps without a cluster of KV heads, every
// chip built for has clusters (sm_90 and up), the op has no guard (a
// guarded pair's merge reads both ops' workspaces) and the plan is not a
// split prompt's decode side (whose rows the merge maps to tokens). The
// tiles, ring and residency are the planner's either way.
// PLAN: #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 64, stages = 3, {{[^>]*}}resident_blocks = [3], cluster_splits = 8, targets = [sm_90a]>
// A guarded op keeps the merge kernel.
// PLAN: guard_value = 1 : i32, {{.*}}#pattn.xqa_plan<operand = f16, rows = 8, {{[^>]*}}resident_blocks = [3], targets = [sm_90a]>
// PLAN-NOT: cluster_splits
// A prompt: neither the split's decode plan nor the prefill family's.
// PLAN: decode_plan = #pattn.xqa_plan<operand = f16, rows = 16, {{[^>]*}}resident_blocks = [3], targets = [sm_90a]>
// PLAN: #pattn.prefill_plan<
// PLAN-NOT: cluster_splits
//
// sm_80 has no clusters: no plan takes them.
// SM80-NOT: cluster_splits
//
// A copy warp's plan (160 threads) keeps the merge kernel.
// WARP: threads = 160
// WARP-NOT: cluster_splits
//
// With clusters of KV heads as well, the KV heads' take the cluster.
// HEADS: cluster_heads = 8
// HEADS-NOT: cluster_splits
//
// BAD: xqa-cluster-splits=16 must be 0 or 1 (none), 2, 4 or 8
//
// A lone split that merges its own rows (xqa-merge-unsplit) has the same
// rules but for the clusters: the plain decode takes it, the guarded op
// and the prompt's plans do not.
// UNSPLIT: #pattn.xqa_plan<operand = f16, rows = 8, {{[^>]*}}resident_blocks = [3], merges_unsplit = true, targets = [sm_90a]>
// UNSPLIT: guard_value = 1 : i32, {{.*}}#pattn.xqa_plan<operand = f16, rows = 8, {{[^>]*}}resident_blocks = [3], targets = [sm_90a]>
// UNSPLIT-NOT: merges_unsplit

// i8 K and V, 8 KV heads.
!i8 = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
func.func @int8(%kp: memref<?x16x8x128xi8>, %s: memref<1xf32>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x128xi8>) : !i8
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !i8) value(%k : !i8)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>)
      k_scale(%s : memref<1xf32>) v_scale(%s : memref<1xf32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64}
  return
}

// The same decode under a guard.
func.func @guarded(%kp: memref<?x16x8x128xi8>, %s: memref<1xf32>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %flag: memref<1xi32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x128xi8>) : !i8
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !i8) value(%k : !i8)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>)
      k_scale(%s : memref<1xf32>) v_scale(%s : memref<1xf32>) guard(%flag : memref<1xi32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, guard_value = 1 : i32}
  return
}

// A prompt of up to 64 query tokens a sequence.
func.func @prompt(%kp: memref<?x16x8x128xi8>, %s: memref<1xf32>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x128xi8>) : !i8
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !i8) value(%k : !i8)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>)
      k_scale(%s : memref<1xf32>) v_scale(%s : memref<1xf32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, max_query_len = 64 : i64}
  return
}
