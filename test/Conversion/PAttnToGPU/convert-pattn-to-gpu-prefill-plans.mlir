// A written prefill plan is checked against the op and the chips before
// anything is rewritten (Planning/VerifyPlans.cpp), so a plan that the
// kernel cannot obey is a diagnostic, never a crash or a kernel that
// addresses past its shared memory.
// RUN: pattn-opt %s --split-input-file --convert-pattn-to-gpu="chips=sm_90a" --verify-diagnostics --mlir-print-op-on-diagnostic=false

// The wgmma kernel's copies give each pass of its 128 threads whole core
// matrices of every row segment: rows of at most 256 bytes (a bf16 row of
// head_dim 256 is 512).
!b = !pattn.cache<block_size = 64, kv_heads = 2, head_dim = 256, encoding = bf16, scale = none>
func.func @wide_rows(%bp: memref<?x64x2x512xi8>, %q: memref<?x8x256xbf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %o: memref<?x8x256xbf16>) {
  %b = pattn.bind_cache storage(%bp : memref<?x64x2x512xi8>) : !b
  // expected-error @below {{has a wgmma prefill plan, but a cache row of 512 bytes: its copies take rows of at most 256}}
  pattn.paged_attention query(%q : memref<?x8x256xbf16>) key(%b : !b) value(%b : !b)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>)
      outs(%o : memref<?x8x256xbf16>) {num_heads = 8 : i64, max_query_len = 512 : i64, backend = #pattn.backend<xqa>,
        plan = #pattn.prefill_plan<kernel = wgmma, operand = bf16, rows = 128, query_tile = 32, keys_per_tile = 32, stages = 2, keys_per_split = 4096, shared_bytes = 200000, resident_blocks = [1], threads = 256, targets = [sm_90a]>}
  return
}

// -----

// The wgmma kernel's tiles take more than the mma.sync kernel's (128 query
// rows and a second decoded V tile): a plan that promised the mma.sync
// kernel's bytes is too small.
!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = tensor>
func.func @small_shared(%kp: memref<?x16x8x64xi8>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %ks: memref<1xf32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x64xi8>) : !k
  // expected-error @below {{has a prefill plan of 94208 bytes of shared memory, but its tiles take 125952}}
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%k : !k)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>)
      k_scale(%ks : memref<1xf32>) v_scale(%ks : memref<1xf32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, max_query_len = 2048 : i64, backend = #pattn.backend<xqa>,
        plan = #pattn.prefill_plan<kernel = wgmma, operand = f16, rows = 128, query_tile = 32, keys_per_tile = 64, stages = 4, keys_per_split = 4096, shared_bytes = 94208, resident_blocks = [1], threads = 256, targets = [sm_90a]>}
  return
}
