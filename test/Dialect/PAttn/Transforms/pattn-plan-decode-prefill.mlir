// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode=chips=sm_90a 2>/dev/null | FileCheck %s --check-prefix=H200
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode="chips=sm_90a prompt-kernel=prefill" --mlir-print-op-on-diagnostic=false 2>&1 >/dev/null | FileCheck %s --check-prefix=WHY
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a,sm_86 --pattn-plan-decode="chips=sm_90a,sm_86 prompt-kernel=prefill" --mlir-print-op-on-diagnostic=false 2>/dev/null | FileCheck %s --check-prefix=MIXED
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode="chips=sm_90a prompt-kernel=xqa" --mlir-print-op-on-diagnostic=false 2>/dev/null | FileCheck %s --check-prefix=TILES
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode="chips=sm_90a prompt-kernel=prefill-mma-sync" --mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=MMA
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a,sm_86 --pattn-plan-decode="chips=sm_90a,sm_86" --mlir-print-op-on-diagnostic=false 2>&1 >/dev/null | FileCheck %s --check-prefix=WHY-MIXED
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode="chips=sm_90a prompt-kernel=prefill-wgmma" --mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=WGMMA
// RUN: not pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode="chips=sm_90a prompt-kernel=fast" 2>&1 | FileCheck %s --check-prefix=BAD

// By default (prompt-kernel=prefill), a prompt gets the prefill family's
// plan: 64 rows a block (query tiles of 64 / g tokens), 64-key tiles, the
// deepest ring that keeps the blocks per SM of two stages; with
// prompt-kernel=xqa, XQA's query tiles (32 / g tokens). A decode keeps its XQA plan either way. The
// prefill plan comes with a decode_plan: sequences of at most 16 / g query
// tokens (a mixed batch's decode tokens) run on the XQA decode kernel, one
// m16 tile of rows, instead of taking a 64-row prefill block each.
// Where every chip built for has wgmma (sm_90a) and both caches are
// quantized, the prefill plan is the wgmma kernel's (kernel = wgmma:
// core-matrix tiles, unpadded, and an 8 KB P tile); prompt-kernel=
// prefill-mma-sync keeps mma.sync, and so does a build with a chip without
// wgmma, or an f16/bf16 cache (which mma.sync reads faster). The remark
// names the kernel and why not wgmma.
// BAD: prompt-kernel=fast is not prefill, prefill-mma-sync, prefill-wgmma or xqa

// WHY: remark: prefill plan: wgmma, 128 rows a block, query tiles of 32 tokens x g = 4, 128-key tiles x 4 stages; sequences of at most 4 query tokens run on the decode kernel (16 rows, 64-key tiles x 4 stages)
// WHY: remark: prefill plan: mma.sync (not wgmma: an f16 or bf16 cache, which mma.sync reads faster), 64 rows a block, query tiles of 8 tokens x g = 8, 64-key tiles x 2 stages; sequences of at most 2 query tokens run on the decode kernel (16 rows, 64-key tiles x 3 stages)
// WHY: remark: prefill plan: wgmma, 128 rows a block, query tiles of 128 tokens x g = 1, {{.*}}; sequences of at most 8 query tokens run on the decode kernel (8 rows,
// WHY: remark: prefill plan: mma.sync (not wgmma: a row of 512 bytes, more than 256), 64 rows a block
// WHY-NOT: prefill plan
// WHY-MIXED: remark: prefill plan: mma.sync (not wgmma: a chip built for has no wgmma (sm_90a only)), 64 rows a block
// MMA: remark: prefill plan: mma.sync (not wgmma: prompt-kernel=prefill-mma-sync), 64 rows a block
// prompt-kernel=prefill-wgmma plans wgmma for 16-bit caches too, but for
// rows its copies do not cover (bf16 of head_dim 256: 512 bytes).
// WGMMA: remark: prefill plan: mma.sync (not wgmma: a row of 512 bytes, more than 256), 64 rows a block
// WGMMA-LABEL: func.func @prompt_bf16
// WGMMA: plan = #pattn.prefill_plan<kernel = wgmma, operand = bf16,
// WGMMA-LABEL: func.func @prompt_bf16_d256
// WGMMA: plan = #pattn.prefill_plan<operand = bf16,
// MMA-LABEL: func.func @prompt_i4
// MMA: decode_plan = #pattn.xqa_plan<operand = f16, rows = 16, keys_per_tile = 64, stages = 4, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 46336, resident_blocks = [4], targets = [sm_90a]>
// MMA-SAME: plan = #pattn.prefill_plan<operand = f16, rows = 64, query_tile = 16, keys_per_tile = 64, stages = 4, keys_per_split = 4096, shared_bytes = 94208, resident_blocks = [2], targets = [sm_90a]>
// H200-LABEL: func.func @prompt_i4
// H200: decode_plan = #pattn.xqa_plan<operand = f16, rows = 16, keys_per_tile = 64, stages = 4, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 46336, resident_blocks = [4], targets = [sm_90a]>
// H200-SAME: plan = #pattn.prefill_plan<kernel = wgmma, operand = f16, rows = 128, query_tile = 32, keys_per_tile = 128, stages = 4, keys_per_split = 4096, shared_bytes = 217088, resident_blocks = [1], threads = 256, targets = [sm_90a]>
// A chip of 99 KiB per block bounds the ring of both.
// MIXED-LABEL: func.func @prompt_i4
// MIXED: decode_plan = #pattn.xqa_plan<operand = f16, rows = 16, keys_per_tile = 64, stages = 4, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 46336, resident_blocks = [4, 2], targets = [sm_90a, sm_86]>
// MIXED-SAME: plan = #pattn.prefill_plan<operand = f16, rows = 64, query_tile = 16, keys_per_tile = 64, stages = 4, keys_per_split = 4096, shared_bytes = 94208, resident_blocks = [2, 1], targets = [sm_90a, sm_86]>
// TILES-LABEL: func.func @prompt_i4
// TILES-NOT: decode_plan
// TILES: plan = #pattn.xqa_plan<{{.*}}query_tile = 8
!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = tensor>
func.func @prompt_i4(%kp: memref<?x16x8x64xi8>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %ks: memref<1xf32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x64xi8>) : !k
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%k : !k)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>)
      k_scale(%ks : memref<1xf32>) v_scale(%ks : memref<1xf32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, max_query_len = 2048 : i64}
  return
}

// A bf16 cache is read from the ring as it is (no decoded tile): bf16
// operands, and g = 8 makes query tiles of 8 tokens.
// H200-LABEL: func.func @prompt_bf16
// H200: decode_plan = #pattn.xqa_plan<operand = bf16, rows = 16,
// H200-SAME: plan = #pattn.prefill_plan<operand = bf16, rows = 64, query_tile = 8, keys_per_tile = 64
!b = !pattn.cache<block_size = 16, kv_heads = 4, head_dim = 128, encoding = bf16, scale = none>
func.func @prompt_bf16(%bp: memref<?x16x4x256xi8>, %q: memref<?x32x128xbf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %o: memref<?x32x128xbf16>) {
  %b = pattn.bind_cache storage(%bp : memref<?x16x4x256xi8>) : !b
  pattn.paged_attention query(%q : memref<?x32x128xbf16>) key(%b : !b) value(%b : !b)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>)
      outs(%o : memref<?x32x128xbf16>) {num_heads = 32 : i64, max_query_len = 512 : i64}
  return
}

// g = 1 (multi-head attention): the decode kernel takes sequences of up
// to 8 query tokens (16 / g is capped at a decode's 8), 8 rows: keys as
// the mma's M.
// H200-LABEL: func.func @prompt_mha
// H200: decode_plan = #pattn.xqa_plan<operand = f16, rows = 8,
// H200-SAME: plan = #pattn.prefill_plan<kernel = wgmma, operand = f16, rows = 128, query_tile = 128,
func.func @prompt_mha(%kp: memref<?x16x8x64xi8>, %q: memref<?x8x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %ks: memref<1xf32>, %o: memref<?x8x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x64xi8>) : !k
  pattn.paged_attention query(%q : memref<?x8x128xf16>) key(%k : !k) value(%k : !k)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>)
      k_scale(%ks : memref<1xf32>) v_scale(%ks : memref<1xf32>)
      outs(%o : memref<?x8x128xf16>) {num_heads = 8 : i64, max_query_len = 1024 : i64}
  return
}

// bf16 rows of 512 bytes (head_dim 256).
!w = !pattn.cache<block_size = 16, kv_heads = 4, head_dim = 256, encoding = bf16, scale = none>
func.func @prompt_bf16_d256(%bp: memref<?x16x4x512xi8>, %q: memref<?x32x256xbf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %o: memref<?x32x256xbf16>) {
  %b = pattn.bind_cache storage(%bp : memref<?x16x4x512xi8>) : !w
  pattn.paged_attention query(%q : memref<?x32x256xbf16>) key(%b : !w) value(%b : !w)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>)
      outs(%o : memref<?x32x256xbf16>) {num_heads = 32 : i64, max_query_len = 512 : i64}
  return
}

// A decode (max_query_len <= 8) keeps the XQA decode plan.
// H200-LABEL: func.func @decode
// H200-NOT: decode_plan
// H200: plan = #pattn.xqa_plan<
// H200-NOT: query_tile
func.func @decode(%kp: memref<?x16x8x64xi8>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %ks: memref<1xf32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x64xi8>) : !k
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%k : !k)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>)
      k_scale(%ks : memref<1xf32>) v_scale(%ks : memref<1xf32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64}
  return
}
