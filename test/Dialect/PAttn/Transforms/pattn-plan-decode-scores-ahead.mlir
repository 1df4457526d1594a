// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode="chips=sm_90a xqa-scores-ahead=true" 2>/dev/null | FileCheck %s --check-prefix=PLAN
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode="chips=sm_90a" 2>/dev/null | FileCheck %s --check-prefix=DEFAULT
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode="chips=sm_90a xqa-scores-ahead=true xqa-stages=2" 2>/dev/null | FileCheck %s --check-prefix=TWO

// XQA plans that score a tile ahead (xqa-scores-ahead; the kernel:
// convert-pattn-to-gpu-xqa-scores-ahead.mlir). The loop holds two landed
// tiles, so the planner adds a stage to its usual ring where that keeps the
// resident blocks: the i4 op's 8 KiB stages go from 4 to 5 at 4 blocks an
// SM, while for the i8/nvfp4 op a fifth stage would cost a block and its
// ring keeps 4. Rows above 8 keep the plain loop, and so does a ring asked
// to be 2 stages deep.
// PLAN: #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 64, stages = 4, {{[^>]*}}resident_blocks = [3], scores_ahead = true, targets = [sm_90a]>
// PLAN: #pattn.xqa_plan<operand = f16, rows = 16, keys_per_tile = 64, stages = 4, {{[^>]*}}resident_blocks = [3], targets = [sm_90a]>
// PLAN: #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 64, stages = 5, {{[^>]*}}resident_blocks = [4], scores_ahead = true, targets = [sm_90a]>
// DEFAULT: #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 64, stages = 4, {{[^>]*}}resident_blocks = [3], targets = [sm_90a]>
// DEFAULT: #pattn.xqa_plan<operand = f16, rows = 16,
// DEFAULT: #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 64, stages = 4, {{[^>]*}}resident_blocks = [4], targets = [sm_90a]>
//
// TWO: #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 64, stages = 2,
// TWO-NOT: scores_ahead
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


// Four query tokens x g = 4: 16 rows, the plain loop.
func.func @speculative(%kp: memref<?x16x8x128xi8>, %vp: memref<?x16x8x64xi8>, %vg: memref<?x16x8x8xf8E4M3FN>, %vt: memref<?x16x8xf32>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %ks: memref<1xf32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x128xi8>) : !k
  %v = pattn.bind_cache storage(%vp : memref<?x16x8x64xi8>) group_scales(%vg : memref<?x16x8x8xf8E4M3FN>) token_scales(%vt : memref<?x16x8xf32>) : !v
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%v : !v)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>) k_scale(%ks : memref<1xf32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, max_query_len = 4 : i64}
  return
}

// i4 K and V at tensor scales: 8 KiB stages.
!i4 = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = tensor>
func.func @int4(%kp: memref<?x16x8x64xi8>, %s: memref<1xf32>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x64xi8>) : !i4
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !i4) value(%k : !i4)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>)
      k_scale(%s : memref<1xf32>) v_scale(%s : memref<1xf32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64}
  return
}
