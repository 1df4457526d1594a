// The tensor-core MLA plan takes the warpgroup (wgmma) kernel, 64 heads per
// block, on the chips built for that have wgmma (sm_90a), where num_heads is
// a multiple of 64 and the latent's scale blocks are whole wgmma chains; the
// mma.sync kernel (16 heads per block) everywhere else. In a build for chips
// with and without wgmma, `plan` is the mma.sync kernel and `chip_plans`
// gives sm_90a the warpgroup kernel.
//
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode=chips=sm_90a 2>/dev/null | FileCheck %s --check-prefix=H200
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode=chips=sm_90a,sm_100a 2>/dev/null | FileCheck %s --check-prefix=FLEET
// Each choice is explained in a remark (pattn-compile --remarks).
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode=chips=sm_90a 2>&1 >/dev/null | FileCheck %s --check-prefix=WHY
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode=chips=sm_90a,sm_100a 2>&1 >/dev/null | FileCheck %s --check-prefix=FLEET-WHY
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode=chips=sm_80,sm_100a 2>&1 >/dev/null | FileCheck %s --check-prefix=NO-WGMMA
// Planned again for one chip, an op loses the chip_plans of a fleet.
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode=chips=sm_90a,sm_100a --pattn-plan-decode=chips=sm_90a 2>/dev/null | FileCheck %s --check-prefix=H200

!fp8 = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
!rope8 = !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla_fp8_rope, token>>
// e4m3 latent scaled per 32 channels: 16 S chains, more than wgmma's
// registers hold.
!small = !pattn.record_cache<block_size = 16, record = !pattn.record<704 bytes, none, {latent: 512 x f8E4M3FN at 0 scaled_by latent_scale, latent_scale: 16 x f32 at 512, rope: 64 x bf16 at 576}>>

// WHY: :[[@LINE+10]]:3: remark: xqa plan: the warpgroup (wgmma) kernel, 64 heads per block
// FLEET-WHY: :[[@LINE+9]]:3: remark: xqa plan: the warpgroup (wgmma) kernel, 64 heads per block, on sm_90a; the mma.sync kernel, 16 heads per block, on sm_100a (not the warpgroup kernel: no wgmma)
// NO-WGMMA: :[[@LINE+8]]:3: remark: xqa plan: the mma.sync kernel, 16 heads per block (not the warpgroup kernel: no chip built for has wgmma (sm_90a only))
// H200-LABEL: func.func @fp8_128_heads
// H200-NOT: chip_plans
// H200: plan = #pattn.xqa_mla_plan<kernel = wgmma, heads_per_block = 64, keys_per_tile = 32, shared_bytes = 226944, resident_blocks = [1], threads = 256, targets = [sm_90a]>
// FLEET-LABEL: func.func @fp8_128_heads
// FLEET: chip_plans = {sm_90a = #pattn.xqa_mla_plan<kernel = wgmma, heads_per_block = 64, keys_per_tile = 32, shared_bytes = 226944, resident_blocks = [1], threads = 256, targets = [sm_90a]>}
// FLEET-SAME: plan = #pattn.xqa_mla_plan<heads_per_block = 16, keys_per_tile = 32, shared_bytes = 63680, resident_blocks = [3, 3], targets = [sm_90a, sm_100a]>
func.func @fp8_128_heads(%c: !fp8, %q: memref<2x128x576xbf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x128x512xbf16>) {
  pattn.mla_decode query(%q : memref<2x128x576xbf16>) cache(%c : !fp8) block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>) outs(%o : memref<2x128x512xbf16>) {num_heads = 128 : i64}
  return
}

// WHY: :[[@LINE+4]]:3: remark: xqa plan: the warpgroup (wgmma) kernel, 64 heads per block
// H200-LABEL: func.func @nvfp4_64_heads
// H200: plan = #pattn.xqa_mla_plan<kernel = wgmma, heads_per_block = 64, keys_per_tile = 32,
func.func @nvfp4_64_heads(%c: !rope8, %q: memref<4x64x576xbf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %qs: memref<3xi32>, %o: memref<4x64x512xbf16>) {
  pattn.mla_decode query(%q : memref<4x64x576xbf16>) cache(%c : !rope8) block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>) query_start(%qs : memref<3xi32>) outs(%o : memref<4x64x512xbf16>) {num_heads = 64 : i64, max_query_len = 2 : i64}
  return
}

// 48 heads: not a multiple of 64, on any chip.
// WHY: :[[@LINE+8]]:3: remark: xqa plan: the mma.sync kernel, 16 heads per block (not the warpgroup kernel: num_heads 48 not a multiple of 64)
// FLEET-WHY: :[[@LINE+7]]:3: remark: xqa plan: the mma.sync kernel, 16 heads per block (not the warpgroup kernel: num_heads 48 not a multiple of 64)
// H200-LABEL: func.func @fp8_48_heads
// H200: plan = #pattn.xqa_mla_plan<heads_per_block = 16,
// FLEET-LABEL: func.func @fp8_48_heads
// FLEET-NOT: chip_plans
// FLEET: plan = #pattn.xqa_mla_plan<heads_per_block = 16,
func.func @fp8_48_heads(%c: !fp8, %q: memref<2x48x576xbf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x48x512xbf16>) {
  pattn.mla_decode query(%q : memref<2x48x576xbf16>) cache(%c : !fp8) block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>) outs(%o : memref<2x48x512xbf16>) {num_heads = 48 : i64}
  return
}

// WHY: :[[@LINE+4]]:3: remark: xqa plan: the mma.sync kernel, 16 heads per block (not the warpgroup kernel: latent scale blocks of 32 channels, not a multiple of 128 that tiles half the latent)
// H200-LABEL: func.func @small_blocks
// H200: plan = #pattn.xqa_mla_plan<heads_per_block = 16,
func.func @small_blocks(%c: !small, %q: memref<2x128x576xbf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x128x512xbf16>) {
  pattn.mla_decode query(%q : memref<2x128x576xbf16>) cache(%c : !small) block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>) outs(%o : memref<2x128x512xbf16>) {num_heads = 128 : i64}
  return
}

// A 32-channel rope: not the 64-channel stripes the warpgroup kernel's
// decode passes cover, so the mma.sync kernel.
!rope32 = !pattn.record_cache<block_size = 16, record = !pattn.record<1088 bytes, none, {latent: 512 x bf16 at 0, rope: 32 x bf16 at 1024}>>
// WHY: :[[@LINE+4]]:3: remark: xqa plan: the mma.sync kernel, 16 heads per block (not the warpgroup kernel: latent 512 and rope 32 not multiples of 64 with latent <= 512)
// H200-LABEL: func.func @rope32
// H200: plan = #pattn.xqa_mla_plan<heads_per_block = 16, keys_per_tile = 32,
func.func @rope32(%c: !rope32, %q: memref<2x128x544xbf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x128x512xbf16>) {
  pattn.mla_decode query(%q : memref<2x128x544xbf16>) cache(%c : !rope32) block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>) outs(%o : memref<2x128x512xbf16>) {num_heads = 128 : i64}
  return
}

// A 128-channel rope next to a bf16 latent: the query tile, two decoded
// slots and the raw ring outgrow the H200's 227 KiB, so the mma.sync kernel.
!wide = !pattn.record_cache<block_size = 16, record = !pattn.record<1280 bytes, none, {latent: 512 x bf16 at 0, rope: 128 x bf16 at 1024}>>
// WHY: :[[@LINE+4]]:3: remark: xqa plan: the mma.sync kernel, 16 heads per block (not the warpgroup kernel: the tile needs 276096 bytes of shared memory > 232448 on sm_90a)
// H200-LABEL: func.func @rope128
// H200: plan = #pattn.xqa_mla_plan<heads_per_block = 16, keys_per_tile = 32,
func.func @rope128(%c: !wide, %q: memref<2x128x640xbf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x128x512xbf16>) {
  pattn.mla_decode query(%q : memref<2x128x640xbf16>) cache(%c : !wide) block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>) outs(%o : memref<2x128x512xbf16>) {num_heads = 128 : i64}
  return
}
