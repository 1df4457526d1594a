// RUN: pattn-opt %s --split-input-file --convert-pattn-to-gpu="chips=sm_90a" --verify-diagnostics --mlir-print-op-on-diagnostic=false

// A cluster of splits writes the op's output itself (Planning/VerifyPlans.cpp),
// so the planner never gives one to an op with a guard: the merge of its
// guarded pair reads both ops' workspaces and writes the output of the op
// the flag names. A hand-written plan is rejected before any rewriting.
!i8 = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
func.func @guarded(%kp: memref<?x16x8x128xi8>, %s: memref<1xf32>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %flag: memref<1xi32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x128xi8>) : !i8
  // expected-error @below {{has an XQA plan whose clusters of 8 splits write its output, but it has a guard (the merge of its guarded pair reads its workspace)}}
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !i8) value(%k : !i8)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>)
      k_scale(%s : memref<1xf32>) v_scale(%s : memref<1xf32>) guard(%flag : memref<1xi32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, guard_value = 1 : i32, backend = #pattn.backend<xqa>, plan = #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 64, stages = 3, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 58240, resident_blocks = [3], cluster_splits = 8, targets = [sm_90a]>}
  return
}

// -----

// The same for a lone split that merges its own rows (merges_unsplit).
!i8 = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
func.func @guarded(%kp: memref<?x16x8x128xi8>, %s: memref<1xf32>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %flag: memref<1xi32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x128xi8>) : !i8
  // expected-error @below {{has an XQA plan whose lone split (merges_unsplit) writes its output, but it has a guard (the merge of its guarded pair reads its workspace)}}
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !i8) value(%k : !i8)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>)
      k_scale(%s : memref<1xf32>) v_scale(%s : memref<1xf32>) guard(%flag : memref<1xi32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, guard_value = 1 : i32, backend = #pattn.backend<xqa>, plan = #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 64, stages = 3, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 58240, resident_blocks = [3], merges_unsplit = true, targets = [sm_90a]>}
  return
}

// -----

// A split prompt's decode side leaves its rows (the merge's compact token
// slots) to the merge: its decode plan may not merge them itself.
!i8 = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
func.func @prompt(%kp: memref<?x16x8x128xi8>, %s: memref<1xf32>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x128xi8>) : !i8
  // expected-error @below {{has a decode plan whose lone split (merges_unsplit) writes its output, but a split prompt's decode side leaves its rows to the merge}}
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !i8) value(%k : !i8)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>)
      k_scale(%s : memref<1xf32>) v_scale(%s : memref<1xf32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, max_query_len = 64 : i64, backend = #pattn.backend<xqa>, decode_plan = #pattn.xqa_plan<operand = f16, rows = 16, keys_per_tile = 64, stages = 3, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 60416, resident_blocks = [3], merges_unsplit = true, targets = [sm_90a]>, plan = #pattn.prefill_plan<kernel = wgmma, operand = f16, rows = 128, query_tile = 32, keys_per_tile = 128, stages = 2, keys_per_split = 4096, shared_bytes = 207872, resident_blocks = [1], threads = 256, targets = [sm_90a]>}
  return
}
