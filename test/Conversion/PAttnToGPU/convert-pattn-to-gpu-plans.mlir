// The conversion lowers the plans --pattn-plan-decode recorded and never
// plans itself; each plan is checked against every chip it is lowered for
// before anything is rewritten (Planning/VerifyPlans.cpp).
// RUN: pattn-opt %s --split-input-file --convert-pattn-to-gpu="chips=sm_86" --verify-diagnostics --mlir-print-op-on-diagnostic=false
// A plan names the chips it was made for: one made for sm_90a (227 KiB of
// shared memory per block) lowered for sm_86 (99 KiB) is an error at the
// op; planned for sm_86 it lowers. Plans written by hand that name a chip
// they do not fit are held to the chip's shared memory, instructions and
// residency, and to the operand type the op's data needs.
// RUN: not pattn-opt %S/Inputs/xqa-256.mlir --pattn-select-backend=chips=sm_90a --pattn-plan-decode=chips=sm_90a --convert-pattn-to-gpu=chips=sm_86 --mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=SM90A-ON-SM86
// RUN: pattn-opt %S/Inputs/xqa-256.mlir --pattn-select-backend=chips=sm_90a --pattn-plan-decode=chips=sm_86 --convert-pattn-to-gpu=chips=sm_86 2>/dev/null | FileCheck %s --check-prefix=SM86

// SM90A-ON-SM86: xqa-256.mlir:{{[0-9]+}}:3: error: 'pattn.paged_attention' op has a plan made for [sm_90a], but is lowered for sm_86: plan it for the chips it is lowered for (--pattn-plan-decode=chips=...)
// SM86: gpu.launch_func {{.*}}@pattn_kernels::@pattn_xqa_decode

!c = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f16, scale = none>
func.func @no_plan(%kp: memref<?x16x2x128xi8>, %q: memref<?x8x64xf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %o: memref<?x8x64xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x2x128xi8>) : !c
  // expected-error @below {{has no decode plan: run --pattn-plan-decode (with the chips it is lowered for) before --convert-pattn-to-gpu, as pattn-compile and --pattn-compile do}}
  pattn.paged_attention query(%q : memref<?x8x64xf16>) key(%k : !c) value(%k : !c) block_table(%bt : memref<?x?xi32>) seq_lens(%lens : memref<?xi32>) outs(%o : memref<?x8x64xf16>) {num_heads = 8 : i64, backend = #pattn.backend<portable>}
  return
}

// -----

!r = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
func.func @wgmma_plan(%s: memref<?x64x656xi8>, %q: memref<4x128x576xbf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x128x512xbf16>) {
  %c = pattn.bind_cache storage(%s : memref<?x64x656xi8>) : !r
  // expected-error @below {{has the warpgroup plan (wgmma), but sm_86 has no wgmma}}
  pattn.mla_decode query(%q : memref<4x128x576xbf16>) cache(%c : !r) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x128x512xbf16>) {num_heads = 128 : i64, backend = #pattn.backend<xqa>, plan = #pattn.xqa_mla_plan<kernel = wgmma, heads_per_block = 64, keys_per_tile = 32, shared_bytes = 99000, resident_blocks = [1], threads = 256, targets = [sm_86]>}
  return
}

// -----

// A chip_plans entry is the plan of its chip's kernels: sm_86 gets the
// warpgroup plan here, which it cannot run.
!r = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
func.func @chip_plan(%s: memref<?x64x656xi8>, %q: memref<4x128x576xbf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x128x512xbf16>) {
  %c = pattn.bind_cache storage(%s : memref<?x64x656xi8>) : !r
  // expected-error @below {{has the warpgroup plan (wgmma), but sm_86 has no wgmma}}
  pattn.mla_decode query(%q : memref<4x128x576xbf16>) cache(%c : !r) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x128x512xbf16>) {num_heads = 128 : i64, backend = #pattn.backend<xqa>, plan = #pattn.xqa_mla_plan<heads_per_block = 16, keys_per_tile = 32, shared_bytes = 63680, resident_blocks = [1], targets = [sm_86]>, chip_plans = {sm_86 = #pattn.xqa_mla_plan<kernel = wgmma, heads_per_block = 64, keys_per_tile = 32, shared_bytes = 99000, resident_blocks = [1], threads = 256, targets = [sm_86]>}}
  return
}

// -----

!r = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
func.func @shared_memory(%s: memref<?x64x656xi8>, %q: memref<4x128x576xbf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x128x512xbf16>) {
  %c = pattn.bind_cache storage(%s : memref<?x64x656xi8>) : !r
  // expected-error @below {{has a plan that needs 200000 bytes of shared memory per block, but sm_86 allows 101376}}
  pattn.mla_decode query(%q : memref<4x128x576xbf16>) cache(%c : !r) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x128x512xbf16>) {num_heads = 128 : i64, backend = #pattn.backend<xqa>, plan = #pattn.xqa_mla_plan<heads_per_block = 16, keys_per_tile = 32, shared_bytes = 200000, resident_blocks = [1], targets = [sm_86]>}
  return
}

// -----

// sm_86's 100 KiB per SM hold one block of 63680 bytes, not three.
!r = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
func.func @residency(%s: memref<?x64x656xi8>, %q: memref<4x128x576xbf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x128x512xbf16>) {
  %c = pattn.bind_cache storage(%s : memref<?x64x656xi8>) : !r
  // expected-error @below {{has a plan of 3 resident blocks per SM, but sm_86 holds 1 of its blocks}}
  pattn.mla_decode query(%q : memref<4x128x576xbf16>) cache(%c : !r) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x128x512xbf16>) {num_heads = 128 : i64, backend = #pattn.backend<xqa>, plan = #pattn.xqa_mla_plan<heads_per_block = 16, keys_per_tile = 32, shared_bytes = 63680, resident_blocks = [3], targets = [sm_86]>}
  return
}

// -----

// bf16 operands would round an f16 query and cache.
!c = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f16, scale = none>
func.func @operand(%kp: memref<?x16x2x128xi8>, %q: memref<?x8x64xf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %o: memref<?x8x64xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x2x128xi8>) : !c
  // expected-error @below {{has a tensor-core plan over 'bf16' operands, but its query and caches need f16}}
  pattn.paged_attention query(%q : memref<?x8x64xf16>) key(%k : !c) value(%k : !c) block_table(%bt : memref<?x?xi32>) seq_lens(%lens : memref<?xi32>) outs(%o : memref<?x8x64xf16>) {num_heads = 8 : i64, backend = #pattn.backend<xqa>, plan = #pattn.xqa_plan<operand = bf16, rows = 16, keys_per_tile = 64, stages = 2, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 40000, resident_blocks = [2], targets = [sm_86]>}
  return
}

// -----

// The prefill plan is held to the chip as XQA's: its shared memory, its
// residency and its operand type.
!c = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f16, scale = none>
func.func @prefill_shared(%kp: memref<?x16x2x128xi8>, %q: memref<?x8x64xf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %qs: memref<?xi32>, %o: memref<?x8x64xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x2x128xi8>) : !c
  // expected-error @below {{has a plan that needs 150000 bytes of shared memory per block, but sm_86 allows 101376}}
  pattn.paged_attention query(%q : memref<?x8x64xf16>) key(%k : !c) value(%k : !c) block_table(%bt : memref<?x?xi32>) seq_lens(%lens : memref<?xi32>) query_start(%qs : memref<?xi32>) outs(%o : memref<?x8x64xf16>) {num_heads = 8 : i64, max_query_len = 64 : i64, backend = #pattn.backend<xqa>, plan = #pattn.prefill_plan<operand = f16, rows = 64, query_tile = 16, keys_per_tile = 64, stages = 2, keys_per_split = 4096, shared_bytes = 150000, resident_blocks = [1], targets = [sm_86]>}
  return
}

// -----

!c = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f16, scale = none>
func.func @prefill_residency(%kp: memref<?x16x2x128xi8>, %q: memref<?x8x64xf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %qs: memref<?xi32>, %o: memref<?x8x64xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x2x128xi8>) : !c
  // expected-error @below {{has a plan of 2 resident blocks per SM, but sm_86 holds 1 of its blocks}}
  pattn.paged_attention query(%q : memref<?x8x64xf16>) key(%k : !c) value(%k : !c) block_table(%bt : memref<?x?xi32>) seq_lens(%lens : memref<?xi32>) query_start(%qs : memref<?xi32>) outs(%o : memref<?x8x64xf16>) {num_heads = 8 : i64, max_query_len = 64 : i64, backend = #pattn.backend<xqa>, plan = #pattn.prefill_plan<operand = f16, rows = 64, query_tile = 16, keys_per_tile = 64, stages = 2, keys_per_split = 4096, shared_bytes = 80000, resident_blocks = [2], targets = [sm_86]>}
  return
}

// -----

!c = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f16, scale = none>
func.func @prefill_operand(%kp: memref<?x16x2x128xi8>, %q: memref<?x8x64xf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %qs: memref<?xi32>, %o: memref<?x8x64xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x2x128xi8>) : !c
  // expected-error @below {{has a tensor-core plan over 'bf16' operands, but its query and caches need f16}}
  pattn.paged_attention query(%q : memref<?x8x64xf16>) key(%k : !c) value(%k : !c) block_table(%bt : memref<?x?xi32>) seq_lens(%lens : memref<?xi32>) query_start(%qs : memref<?xi32>) outs(%o : memref<?x8x64xf16>) {num_heads = 8 : i64, max_query_len = 64 : i64, backend = #pattn.backend<xqa>, plan = #pattn.prefill_plan<operand = bf16, rows = 64, query_tile = 16, keys_per_tile = 64, stages = 2, keys_per_split = 4096, shared_bytes = 40000, resident_blocks = [1], targets = [sm_86]>}
  return
}


// -----

// A plan's shared memory must hold the window its kernel lays out: here the
// four-warp window of this op (63616 bytes) under a copy-warp plan, whose
// 4 stages add 64 bytes of full and empty barriers.
!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
!v = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = nvfp4, scale = token>
func.func @copy_warp_window(%kp: memref<?x16x8x128xi8>, %vp: memref<?x16x8x64xi8>, %vg: memref<?x16x8x8xf8E4M3FN>, %vt: memref<?x16x8xf32>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %ks: memref<1xf32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x128xi8>) : !k
  %v = pattn.bind_cache storage(%vp : memref<?x16x8x64xi8>) group_scales(%vg : memref<?x16x8x8xf8E4M3FN>) token_scales(%vt : memref<?x16x8xf32>) : !v
  // expected-error @below {{has an XQA plan of 63616 bytes of shared memory, but its tiles, ring, copy-warp barriers and merge take 63680}}
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%v : !v)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) k_scale(%ks : memref<1xf32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, backend = #pattn.backend<xqa>, plan = #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 64, stages = 4, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 63616, resident_blocks = [1], threads = 160, targets = [sm_86]>}
  return
}

// -----

// The prefill family's wgmma plan, too, runs only where the chip has wgmma.
!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 64, encoding = i4, scale = tensor>
func.func @prefill_wgmma_plan(%kp: memref<?x16x8x32xi8>, %q: memref<?x32x64xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %ks: memref<1xf32>, %o: memref<?x32x64xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x32xi8>) : !k
  // expected-error @below {{has the warpgroup plan (wgmma), but sm_86 has no wgmma}}
  pattn.paged_attention query(%q : memref<?x32x64xf16>) key(%k : !k) value(%k : !k)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>)
      k_scale(%ks : memref<1xf32>) v_scale(%ks : memref<1xf32>)
      outs(%o : memref<?x32x64xf16>) {num_heads = 32 : i64, max_query_len = 2048 : i64, backend = #pattn.backend<xqa>,
        plan = #pattn.prefill_plan<kernel = wgmma, operand = f16, rows = 128, query_tile = 32, keys_per_tile = 64, stages = 2, keys_per_split = 4096, shared_bytes = 60000, resident_blocks = [1], threads = 256, targets = [sm_86]>}
  return
}
