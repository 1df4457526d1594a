// The MLA rows of the eligibility table (checkMlaRows): each rule, one op
// that breaks it, and the remark naming the condition. The three record
// presets with bf16 queries and 16 x k heads take the tensor-core kernel;
// force=xqa on an ineligible op is an error naming the reason, and
// force=portable records portable.
//
// RUN: pattn-opt %s --pattn-select-backend="chips=sm_90a" --verify-diagnostics --split-input-file
// RUN: not pattn-opt %s --pattn-select-backend="chips=sm_90a force=xqa" --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=XQA
// RUN: pattn-opt %s --pattn-select-backend="chips=sm_90a force=portable" --split-input-file 2>/dev/null | FileCheck %s --check-prefix=PORT

// XQA: error: force=xqa, but the op is not eligible for XQA on sm_90a: MLA query f16 is not bf16
// XQA: error: force=xqa, but the op is not eligible for XQA on sm_90a: MLA num_heads 8 not a multiple of 16
// PORT-COUNT-5: backend = #pattn.backend<portable>

!fp8 = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
!nv = !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla>>
!nvr = !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla_fp8_rope, token>>
func.func @presets(%a: !fp8, %b: !nv, %c: !nvr, %q: memref<4x16x576xbf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %qs: memref<5xi32>, %s: memref<1xf32>, %o: memref<4x16x512xbf16>) {
  // expected-remark @below {{xqa: eligible on sm_90a}}
  pattn.mla_decode query(%q : memref<4x16x576xbf16>) cache(%a : !fp8) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x16x512xbf16>) {num_heads = 16 : i64}
  // expected-remark @below {{xqa: eligible on sm_90a}}
  pattn.mla_decode query(%q : memref<4x16x576xbf16>) cache(%b : !nv) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outer_scale(%s : memref<1xf32>) outs(%o : memref<4x16x512xbf16>) {num_heads = 16 : i64}
  // expected-remark @below {{xqa: eligible on sm_90a}}
  pattn.mla_decode query(%q : memref<4x16x576xbf16>) cache(%c : !nvr) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) query_start(%qs : memref<5xi32>) outs(%o : memref<4x16x512xbf16>) {num_heads = 16 : i64, max_query_len = 8 : i64}
  return
}

// -----

// M2: bf16 operands only.
!fp8 = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
func.func @f16_query(%a: !fp8, %q: memref<4x16x576xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x16x512xf16>) {
  // expected-remark @below {{portable: MLA query f16 is not bf16}}
  pattn.mla_decode query(%q : memref<4x16x576xf16>) cache(%a : !fp8) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x16x512xf16>) {num_heads = 16 : i64}
  return
}

// -----

// M3: 16 heads of a token are one m16 tile.
!fp8 = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
func.func @eight_heads(%a: !fp8, %q: memref<4x8x576xbf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x8x512xbf16>) {
  // expected-remark @below {{portable: MLA num_heads 8 not a multiple of 16}}
  pattn.mla_decode query(%q : memref<4x8x576xbf16>) cache(%a : !fp8) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x8x512xbf16>) {num_heads = 8 : i64}
  return
}
