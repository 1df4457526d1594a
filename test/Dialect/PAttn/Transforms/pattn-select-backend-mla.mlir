// MLA decode has no tensor-core kernel yet: the selector says so (not the
// paged kernel's head_dim rule), force=xqa is an error naming the reason,
// and force=portable or auto records portable.
//
// RUN: pattn-opt %s --pattn-select-backend="chip=sm_90a" --verify-diagnostics
// RUN: not pattn-opt %s --pattn-select-backend="chip=sm_90a force=xqa" -o /dev/null 2>&1 | FileCheck %s --check-prefix=XQA

// XQA: error: force=xqa, but the op is not eligible for XQA on sm_90a: MLA decode has no tensor-core kernel yet (the portable kernel runs it)

!r = !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla_fp8_rope, token>>
func.func @mla(%c: !r, %q: memref<4x16x576xbf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x16x512xbf16>) {
  // expected-remark @below {{portable: MLA decode has no tensor-core kernel yet (the portable kernel runs it)}}
  pattn.mla_decode query(%q : memref<4x16x576xbf16>) cache(%c : !r) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x16x512xbf16>) {num_heads = 16 : i64}
  return
}
