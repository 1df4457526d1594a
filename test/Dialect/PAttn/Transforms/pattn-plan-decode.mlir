// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode="chips=sm_90a prompt-kernel=xqa" --mlir-print-op-on-diagnostic=false 2>/dev/null | FileCheck %s --check-prefix=H200
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_80 --pattn-plan-decode=prompt-kernel=xqa --mlir-print-op-on-diagnostic=false 2>/dev/null | FileCheck %s --check-prefix=ALL
// RUN: pattn-opt %s --pattn-select-backend="chips=sm_90a force=portable" --pattn-plan-decode=keys-per-split=1024 --mlir-print-op-on-diagnostic=false 2>/dev/null | FileCheck %s --check-prefix=PORT
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a "--pattn-plan-decode=chips=sm_90a xqa-keys-per-tile=128" --mlir-print-op-on-diagnostic=false 2>/dev/null | FileCheck %s --check-prefix=TILE128
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a "--pattn-plan-decode=chips=sm_90a xqa-stages=6" --mlir-print-op-on-diagnostic=false 2>/dev/null | FileCheck %s --check-prefix=STAGES6
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a "--pattn-plan-decode=chips=sm_90a xqa-stages=8" --mlir-print-op-on-diagnostic=false 2>/dev/null | FileCheck %s --check-prefix=STAGES8
// RUN: not pattn-opt %s --pattn-plan-decode 2>&1 | FileCheck %s --check-prefix=NOBACKEND

// The plan of each backend, per shape and chip: the tile and ring depth
// that keep the most cache bytes in flight per SM (resident blocks x
// (stages - 1) x stage bytes). On sm_90a alone (227 KiB per block, 228 per
// SM) the f16 D128 ring takes 3 stages of 64 keys, 2 blocks per SM; the
// default chip list includes sm_86/89/120 (99 KiB), which caps it at 2.

// H200-LABEL: func.func @f16_d128_g4
// H200: plan = #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 64, stages = 3, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 107392, resident_blocks = [2], targets = [sm_90a]>
// ALL-LABEL: func.func @f16_d128_g4
// ALL: plan = #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 64, stages = 2, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 72320, resident_blocks = [2, 1, 1, 3, 3, 1], targets = [sm_80, sm_86, sm_89, sm_90a, sm_100a, sm_120a]>
// PORT-LABEL: func.func @f16_d128_g4
// xqa-keys-per-tile=128: the tile asked for, with the ring depth that keeps
// the most bytes in flight (one 210 KiB block per SM).
// TILE128-LABEL: func.func @f16_d128_g4
// TILE128: plan = #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 128, stages = 3, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 212608, resident_blocks = [1], targets = [sm_90a]>
// PORT: plan = #pattn.portable_plan<heads_per_block = 4, keys_per_split = 1024, targets = [sm_80, sm_86, sm_89, sm_90a, sm_100a, sm_120a]>
// xqa-stages=6: the depth asked for, with the tile that keeps the most bytes
// in flight at that depth (one 208 KiB block per SM). At 8 stages no tile
// of 4 key warps fits, so the planner chooses as if nothing was asked.
// STAGES6-LABEL: func.func @f16_d128_g4
// STAGES6: plan = #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 64, stages = 6, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 212608, resident_blocks = [1], targets = [sm_90a]>
// STAGES8-LABEL: func.func @f16_d128_g4
// STAGES8: plan = #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 64, stages = 3, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 107392, resident_blocks = [2], targets = [sm_90a]>
!f16c = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f16_d128_g4(%kp: memref<?x16x8x256xi8>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x256xi8>) : !f16c
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !f16c) value(%k : !f16c)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64}
  return
}

// f16 D256, g = 6: two value warps; 64-key tiles would leave one 211 KiB
// block per SM, 32-key tiles keep as many bytes in flight with two.
// H200-LABEL: func.func @f16_d256_g6
// H200: plan = #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 32, stages = 3, key_warps = 2, value_warps = 2, keys_per_split = 4096, shared_bytes = 105984, resident_blocks = [2], targets = [sm_90a]>
// Two stages of 128 D256 keys (270 KiB) do not fit a block: a tile asked
// for that does not fit leaves the planner's choice.
// TILE128-LABEL: func.func @f16_d256_g6
// TILE128: plan = #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 32, stages = 3, key_warps = 2, value_warps = 2, keys_per_split = 4096, shared_bytes = 105984, resident_blocks = [2], targets = [sm_90a]>
!f16d256 = !pattn.cache<block_size = 16, kv_heads = 4, head_dim = 256, encoding = f16, scale = none>
func.func @f16_d256_g6(%kp: memref<?x16x4x512xi8>, %q: memref<?x24x256xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %o: memref<?x24x256xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x4x512xi8>) : !f16d256
  pattn.paged_attention query(%q : memref<?x24x256xf16>) key(%k : !f16d256) value(%k : !f16d256)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>)
      outs(%o : memref<?x24x256xf16>) {num_heads = 24 : i64}
  return
}

// 8 query tokens x g = 4: 32 rows, two m-tiles; D256 outputs need the four
// warps split over the value channels. Two m-tiles hold at most 3 blocks
// per SM (168 registers; 128 spilled), so the ring takes 64-key tiles.
// H200-LABEL: func.func @i4_d256_spec
// H200: plan = #pattn.xqa_plan<operand = bf16, rows = 32, keys_per_tile = 64, stages = 3, key_warps = 1, value_warps = 4, keys_per_split = 4096, shared_bytes = 72960, resident_blocks = [3], targets = [sm_90a]>
// PORT-LABEL: func.func @i4_d256_spec
// One key warp: 32-key tiles fit 8 stages.
// STAGES8-LABEL: func.func @i4_d256_spec
// STAGES8: plan = #pattn.xqa_plan<operand = bf16, rows = 32, keys_per_tile = 32, stages = 8, key_warps = 1, value_warps = 4, keys_per_split = 4096, shared_bytes = 91648, resident_blocks = [2], targets = [sm_90a]>
// PORT: plan = #pattn.portable_plan<heads_per_block = 4, keys_per_split = 1024, targets = [sm_80, sm_86, sm_89, sm_90a, sm_100a, sm_120a]>
!i4c = !pattn.cache<block_size = 16, kv_heads = 4, head_dim = 256, encoding = i4, scale = tensor>
func.func @i4_d256_spec(%kp: memref<?x16x4x128xi8>, %s: memref<1xf32>, %q: memref<?x16x256xbf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %o: memref<?x16x256xbf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x4x128xi8>) : !i4c
  pattn.paged_attention query(%q : memref<?x16x256xbf16>) key(%k : !i4c) value(%k : !i4c)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>)
      k_scale(%s : memref<1xf32>) v_scale(%s : memref<1xf32>)
      outs(%o : memref<?x16x256xbf16>) {num_heads = 16 : i64, max_query_len = 8 : i64}
  return
}

// MLA on tensor cores: 16 heads of one token per block, 32-key tiles; the
// 368-byte records take two slots of 32 x 368 bytes of the 45 KB of shared
// memory.
// H200-LABEL: func.func @mla
// H200: plan = #pattn.xqa_mla_plan<heads_per_block = 16, keys_per_tile = 32, shared_bytes = 45248, resident_blocks = [3], targets = [sm_90a]>
// PORT-LABEL: func.func @mla
// PORT: plan = #pattn.portable_plan<heads_per_block = 8, keys_per_split = 1024, targets = [sm_80, sm_86, sm_89, sm_90a, sm_100a, sm_120a]>
!rec = !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla_fp8_rope, token>>
func.func @mla(%c: memref<?x64x368xi8>, %q: memref<?x16x576xbf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %o: memref<?x16x512xbf16>) {
  %r = pattn.bind_cache storage(%c : memref<?x64x368xi8>) : !rec
  pattn.mla_decode query(%q : memref<?x16x576xbf16>) cache(%r : !rec)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>)
      outs(%o : memref<?x16x512xbf16>) {num_heads = 16 : i64}
  return
}

// NOBACKEND: error: 'pattn.paged_attention' op has no backend; run --pattn-select-backend before --pattn-plan-decode

// A prompt (max_query_len > 8) with prompt-kernel=xqa: the XQA kernel in
// query tiles of 32 / g = 8 tokens (two m-tiles of rows; the default plan,
// the prefill family's, is in pattn-plan-decode-prefill.mlir); the portable kernel with its (token, head
// group) blocks on the grid's x, one split of up to 32768 keys each,
// whatever keys-per-split says.
// H200-LABEL: func.func @prompt_2048
// H200: plan = #pattn.xqa_plan<operand = f16, rows = 32, keys_per_tile = 64, stages = 3, key_warps = 2, value_warps = 2, keys_per_split = 4096, shared_bytes = 113920, resident_blocks = [2], query_tile = 8, targets = [sm_90a]>
// ALL-LABEL: func.func @prompt_2048
// ALL: plan = #pattn.xqa_plan<operand = f16, rows = 32, keys_per_tile = 32, stages = 4, key_warps = 2, value_warps = 2, keys_per_split = 4096, shared_bytes = 78848, resident_blocks = [2, 1, 1, 2, 2, 1], query_tile = 8, targets = [sm_80, sm_86, sm_89, sm_90a, sm_100a, sm_120a]>
// PORT-LABEL: func.func @prompt_2048
// PORT: plan = #pattn.portable_plan<heads_per_block = 4, keys_per_split = 32768, prompt = true, targets = [sm_80, sm_86, sm_89, sm_90a, sm_100a, sm_120a]>
func.func @prompt_2048(%kp: memref<?x16x8x256xi8>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x256xi8>) : !f16c
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !f16c) value(%k : !f16c)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, max_query_len = 2048 : i64}
  return
}
