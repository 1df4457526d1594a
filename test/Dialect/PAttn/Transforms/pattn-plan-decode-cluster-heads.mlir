// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode="chips=sm_90a xqa-cluster-heads=8" 2>/dev/null | FileCheck %s --check-prefix=PLAN
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_80,sm_90a --pattn-plan-decode="chips=sm_80,sm_90a xqa-cluster-heads=8" 2>/dev/null | FileCheck %s --check-prefix=SM80
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode="chips=sm_90a xqa-cluster-heads=8 xqa-copy-warp=true" 2>/dev/null | FileCheck %s --check-prefix=WARP
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode="chips=sm_90a xqa-cluster-heads=8 prompt-kernel=xqa" 2>/dev/null | FileCheck %s --check-prefix=TILES
// RUN: not pattn-opt %s --pattn-plan-decode="chips=sm_90a xqa-cluster-heads=3" 2>&1 | FileCheck %s --check-prefix=BAD

// XQA decode plans whose blocks of C consecutive KV heads form one cluster
// (xqa-cluster-heads; the kernel: convert-pattn-to-gpu-xqa-cluster-heads.mlir).
// A plan takes the clusters where it is a decode of four warps, C divides
// the op's KV heads and every chip built for has clusters (sm_90 and up);
// otherwise it keeps its plain grid. The tiles, ring and residency are the
// planner's either way.
// PLAN: #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 64, stages = 4, {{[^>]*}}resident_blocks = [4], cluster_heads = 8, targets = [sm_90a]>
// PLAN: #pattn.xqa_plan<operand = f16, rows = 8, {{[^>]*}}resident_blocks = [4], targets = [sm_90a]>
// PLAN-NOT: cluster_heads
// A prompt: the prefill family's plan has none; the split's decode plan
// (its sequences of at most 4 query tokens) takes them.
// PLAN: #pattn.xqa_plan<operand = f16, rows = 16, {{[^>]*}}cluster_heads = 8,
// PLAN: #pattn.prefill_plan<
// PLAN-NOT: cluster_heads
//
// The prompt on the XQA kernel's query tiles (its grid is (query tiles,
// splits, KV heads)): no clusters.
// TILES: #pattn.xqa_plan<operand = f16, rows = 8, {{[^>]*}}cluster_heads = 8,
// TILES: #pattn.xqa_plan<operand = f16, rows = 8,
// TILES-NOT: cluster_heads
// TILES: #pattn.xqa_plan<operand = f16, rows = 32, {{[^>]*}}query_tile = 8,
// TILES-NOT: cluster_heads
//
// sm_80 has no clusters: no plan takes them.
// SM80-NOT: cluster_heads
//
// A copy warp's plan (160 threads) keeps its own loop, without clusters.
// WARP: threads = 160
// WARP-NOT: cluster_heads
//
// BAD: xqa-cluster-heads=3 must be 0 or 1 (none), 2, 4 or 8

// i4 K and V, 8 KV heads: clusters of 8.
!i4 = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = tensor>
func.func @int4(%kp: memref<?x16x8x64xi8>, %s: memref<1xf32>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x64xi8>) : !i4
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !i4) value(%k : !i4)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>)
      k_scale(%s : memref<1xf32>) v_scale(%s : memref<1xf32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64}
  return
}

// 2 KV heads: 8 does not divide them.
!i4h2 = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 128, encoding = i4, scale = tensor>
func.func @two_heads(%kp: memref<?x16x2x64xi8>, %s: memref<1xf32>, %q: memref<?x8x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %o: memref<?x8x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x2x64xi8>) : !i4h2
  pattn.paged_attention query(%q : memref<?x8x128xf16>) key(%k : !i4h2) value(%k : !i4h2)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>)
      k_scale(%s : memref<1xf32>) v_scale(%s : memref<1xf32>)
      outs(%o : memref<?x8x128xf16>) {num_heads = 8 : i64}
  return
}

// A prompt of up to 64 query tokens a sequence.
func.func @prompt(%kp: memref<?x16x8x64xi8>, %s: memref<1xf32>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x64xi8>) : !i4
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !i4) value(%k : !i4)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>)
      k_scale(%s : memref<1xf32>) v_scale(%s : memref<1xf32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, max_query_len = 64 : i64}
  return
}
