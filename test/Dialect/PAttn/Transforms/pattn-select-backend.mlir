// RUN: pattn-opt %s --split-input-file --pattn-select-backend="chips=sm_90a" --verify-diagnostics | FileCheck %s

// One case just inside and just outside each row of the eligibility table
// (SPEC §6, docs/Passes.md); the remark names every failed condition and the
// decision is recorded as #pattn.backend.

// Row "chip": every supported chip is >= sm_80 (sm_75 is a chip error, see pattn-select-backend-errors.mlir).
// CHECK-LABEL: func.func @row_chip_sm90a
// CHECK: pattn.paged_attention {{.*}}backend = #pattn.backend<xqa>
func.func @row_chip_sm90a(%k: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>, %v: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>, %q: memref<2x32x128xf16>, %bt: memref<2x8xi32>, %sl: memref<2xi32>, %o: memref<2x32x128xf16>) {
  // expected-remark @below {{xqa: eligible on sm_90a}}
  pattn.paged_attention query(%q : memref<2x32x128xf16>) key(%k : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>) value(%v : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>)
      block_table(%bt : memref<2x8xi32>) seq_lens(%sl : memref<2xi32>)
      outs(%o : memref<2x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

// Row "activations": f16 and bf16 (anything else is rejected by the verifier; the unit tests cover f32).
// CHECK-LABEL: func.func @row_activation_f16
// CHECK: pattn.paged_attention {{.*}}backend = #pattn.backend<xqa>
func.func @row_activation_f16(%k: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>, %v: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>, %q: memref<2x32x128xf16>, %bt: memref<2x8xi32>, %sl: memref<2xi32>, %o: memref<2x32x128xf16>) {
  // expected-remark @below {{xqa: eligible on sm_90a}}
  pattn.paged_attention query(%q : memref<2x32x128xf16>) key(%k : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>) value(%v : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>)
      block_table(%bt : memref<2x8xi32>) seq_lens(%sl : memref<2xi32>)
      outs(%o : memref<2x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

// CHECK-LABEL: func.func @row_activation_bf16
// CHECK: pattn.paged_attention {{.*}}backend = #pattn.backend<xqa>
func.func @row_activation_bf16(%k: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = bf16, scale = none>, %v: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = bf16, scale = none>, %q: memref<2x32x128xbf16>, %bt: memref<2x8xi32>, %sl: memref<2xi32>, %o: memref<2x32x128xbf16>) {
  // expected-remark @below {{xqa: eligible on sm_90a}}
  pattn.paged_attention query(%q : memref<2x32x128xbf16>) key(%k : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = bf16, scale = none>) value(%v : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = bf16, scale = none>)
      block_table(%bt : memref<2x8xi32>) seq_lens(%sl : memref<2xi32>)
      outs(%o : memref<2x32x128xbf16>) {num_heads = 32 : i64}
  return
}

// -----

// Row "16-bit caches": the mma operands are the activation's type, so a
// 16-bit cache of the other type would be rounded; quantized codes are
// exact in both.
// CHECK-LABEL: func.func @row_mixed_16_bit
// CHECK: pattn.paged_attention {{.*}}backend = #pattn.backend<portable>
func.func @row_mixed_16_bit(%k: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = bf16, scale = none>, %v: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>, %q: memref<2x32x128xf16>, %bt: memref<2x8xi32>, %sl: memref<2xi32>, %o: memref<2x32x128xf16>) {
  // expected-remark @below {{portable: K cache bf16 with f16 activations}}
  pattn.paged_attention query(%q : memref<2x32x128xf16>) key(%k : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = bf16, scale = none>) value(%v : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>)
      block_table(%bt : memref<2x8xi32>) seq_lens(%sl : memref<2xi32>)
      outs(%o : memref<2x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

// Row "head_dim": 64, 128, 256 inside; 96 and 512 outside.
// CHECK-LABEL: func.func @row_head_dim_64
// CHECK: pattn.paged_attention {{.*}}backend = #pattn.backend<xqa>
func.func @row_head_dim_64(%k: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 64, encoding = f16, scale = none>, %v: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 64, encoding = f16, scale = none>, %q: memref<2x32x64xf16>, %bt: memref<2x8xi32>, %sl: memref<2xi32>, %o: memref<2x32x64xf16>) {
  // expected-remark @below {{xqa: eligible on sm_90a}}
  pattn.paged_attention query(%q : memref<2x32x64xf16>) key(%k : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 64, encoding = f16, scale = none>) value(%v : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 64, encoding = f16, scale = none>)
      block_table(%bt : memref<2x8xi32>) seq_lens(%sl : memref<2xi32>)
      outs(%o : memref<2x32x64xf16>) {num_heads = 32 : i64}
  return
}

// -----

// CHECK-LABEL: func.func @row_head_dim_256
// CHECK: pattn.paged_attention {{.*}}backend = #pattn.backend<xqa>
func.func @row_head_dim_256(%k: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 256, encoding = f16, scale = none>, %v: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 256, encoding = f16, scale = none>, %q: memref<2x32x256xf16>, %bt: memref<2x8xi32>, %sl: memref<2xi32>, %o: memref<2x32x256xf16>) {
  // expected-remark @below {{xqa: eligible on sm_90a}}
  pattn.paged_attention query(%q : memref<2x32x256xf16>) key(%k : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 256, encoding = f16, scale = none>) value(%v : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 256, encoding = f16, scale = none>)
      block_table(%bt : memref<2x8xi32>) seq_lens(%sl : memref<2xi32>)
      outs(%o : memref<2x32x256xf16>) {num_heads = 32 : i64}
  return
}

// -----

// CHECK-LABEL: func.func @row_head_dim_96
// CHECK: pattn.paged_attention {{.*}}backend = #pattn.backend<portable>
func.func @row_head_dim_96(%k: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 96, encoding = f16, scale = none>, %v: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 96, encoding = f16, scale = none>, %q: memref<2x32x96xf16>, %bt: memref<2x8xi32>, %sl: memref<2xi32>, %o: memref<2x32x96xf16>) {
  // expected-remark @below {{portable: head_dim 96 not in}}
  pattn.paged_attention query(%q : memref<2x32x96xf16>) key(%k : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 96, encoding = f16, scale = none>) value(%v : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 96, encoding = f16, scale = none>)
      block_table(%bt : memref<2x8xi32>) seq_lens(%sl : memref<2xi32>)
      outs(%o : memref<2x32x96xf16>) {num_heads = 32 : i64}
  return
}

// -----

// CHECK-LABEL: func.func @row_head_dim_512
// CHECK: pattn.paged_attention {{.*}}backend = #pattn.backend<portable>
func.func @row_head_dim_512(%k: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 512, encoding = f16, scale = none>, %v: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 512, encoding = f16, scale = none>, %q: memref<2x32x512xf16>, %bt: memref<2x8xi32>, %sl: memref<2xi32>, %o: memref<2x32x512xf16>) {
  // expected-remark @below {{portable: head_dim 512 not in}}
  pattn.paged_attention query(%q : memref<2x32x512xf16>) key(%k : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 512, encoding = f16, scale = none>) value(%v : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 512, encoding = f16, scale = none>)
      block_table(%bt : memref<2x8xi32>) seq_lens(%sl : memref<2xi32>)
      outs(%o : memref<2x32x512xf16>) {num_heads = 32 : i64}
  return
}

// -----

// Row "g x query tokens <= 32": 32 x 1 and 4 x 8 inside; 33 x 1 and 8 x 5 outside.
// CHECK-LABEL: func.func @row_group_32
// CHECK: pattn.paged_attention {{.*}}backend = #pattn.backend<xqa>
func.func @row_group_32(%k: !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 128, encoding = f16, scale = none>, %v: !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 128, encoding = f16, scale = none>, %q: memref<2x32x128xf16>, %bt: memref<2x8xi32>, %sl: memref<2xi32>, %o: memref<2x32x128xf16>) {
  // expected-remark @below {{xqa: eligible on sm_90a}}
  pattn.paged_attention query(%q : memref<2x32x128xf16>) key(%k : !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 128, encoding = f16, scale = none>) value(%v : !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 128, encoding = f16, scale = none>)
      block_table(%bt : memref<2x8xi32>) seq_lens(%sl : memref<2xi32>)
      outs(%o : memref<2x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

// CHECK-LABEL: func.func @row_group_4_tokens_8
// CHECK: pattn.paged_attention {{.*}}backend = #pattn.backend<xqa>
func.func @row_group_4_tokens_8(%k: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>, %v: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>, %q: memref<16x32x128xf16>, %bt: memref<2x8xi32>, %sl: memref<2xi32>, %qs: memref<3xi32>, %o: memref<16x32x128xf16>) {
  // expected-remark @below {{xqa: eligible on sm_90a}}
  pattn.paged_attention query(%q : memref<16x32x128xf16>) key(%k : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>) value(%v : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>)
      block_table(%bt : memref<2x8xi32>) seq_lens(%sl : memref<2xi32>) query_start(%qs : memref<3xi32>)
      outs(%o : memref<16x32x128xf16>) {num_heads = 32 : i64, max_query_len = 8 : i64}
  return
}

// -----

// CHECK-LABEL: func.func @row_group_33
// CHECK: pattn.paged_attention {{.*}}backend = #pattn.backend<portable>
func.func @row_group_33(%k: !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 128, encoding = f16, scale = none>, %v: !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 128, encoding = f16, scale = none>, %q: memref<2x33x128xf16>, %bt: memref<2x8xi32>, %sl: memref<2xi32>, %o: memref<2x33x128xf16>) {
  // expected-remark @below {{portable: g x query tokens = 33 x 1 = 33 > 32}}
  pattn.paged_attention query(%q : memref<2x33x128xf16>) key(%k : !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 128, encoding = f16, scale = none>) value(%v : !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 128, encoding = f16, scale = none>)
      block_table(%bt : memref<2x8xi32>) seq_lens(%sl : memref<2xi32>)
      outs(%o : memref<2x33x128xf16>) {num_heads = 33 : i64}
  return
}

// -----

// CHECK-LABEL: func.func @row_group_8_tokens_5
// CHECK: pattn.paged_attention {{.*}}backend = #pattn.backend<portable>
func.func @row_group_8_tokens_5(%k: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>, %v: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>, %q: memref<10x64x128xf16>, %bt: memref<2x8xi32>, %sl: memref<2xi32>, %qs: memref<3xi32>, %o: memref<10x64x128xf16>) {
  // expected-remark @below {{portable: g x query tokens = 8 x 5 = 40 > 32}}
  pattn.paged_attention query(%q : memref<10x64x128xf16>) key(%k : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>) value(%v : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>)
      block_table(%bt : memref<2x8xi32>) seq_lens(%sl : memref<2xi32>) query_start(%qs : memref<3xi32>)
      outs(%o : memref<10x64x128xf16>) {num_heads = 64 : i64, max_query_len = 5 : i64}
  return
}

// -----

// Row "block_size": any legal size, 16 (the smallest) and 256 inside; 8 is a verifier error (unit tests cover the rule).
// CHECK-LABEL: func.func @row_block_size_16
// CHECK: pattn.paged_attention {{.*}}backend = #pattn.backend<xqa>
func.func @row_block_size_16(%k: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>, %v: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>, %q: memref<2x32x128xf16>, %bt: memref<2x8xi32>, %sl: memref<2xi32>, %o: memref<2x32x128xf16>) {
  // expected-remark @below {{xqa: eligible on sm_90a}}
  pattn.paged_attention query(%q : memref<2x32x128xf16>) key(%k : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>) value(%v : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>)
      block_table(%bt : memref<2x8xi32>) seq_lens(%sl : memref<2xi32>)
      outs(%o : memref<2x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

// CHECK-LABEL: func.func @row_block_size_256
// CHECK: pattn.paged_attention {{.*}}backend = #pattn.backend<xqa>
func.func @row_block_size_256(%k: !pattn.cache<block_size = 256, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>, %v: !pattn.cache<block_size = 256, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>, %q: memref<2x32x128xf16>, %bt: memref<2x8xi32>, %sl: memref<2xi32>, %o: memref<2x32x128xf16>) {
  // expected-remark @below {{xqa: eligible on sm_90a}}
  pattn.paged_attention query(%q : memref<2x32x128xf16>) key(%k : !pattn.cache<block_size = 256, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>) value(%v : !pattn.cache<block_size = 256, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>)
      block_table(%bt : memref<2x8xi32>) seq_lens(%sl : memref<2xi32>)
      outs(%o : memref<2x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

// Row "K/V encodings": every encoding, asymmetric K/V included.
// CHECK-LABEL: func.func @row_encodings_i4_nvfp4
// CHECK: pattn.paged_attention {{.*}}backend = #pattn.backend<xqa>
func.func @row_encodings_i4_nvfp4(%k: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = tensor>, %v: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = nvfp4, scale = tensor>, %q: memref<2x32x128xf16>, %bt: memref<2x8xi32>, %sl: memref<2xi32>, %ks: memref<1xf32>, %vs: memref<1xf32>, %o: memref<2x32x128xf16>) {
  // expected-remark @below {{xqa: eligible on sm_90a}}
  pattn.paged_attention query(%q : memref<2x32x128xf16>) key(%k : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = tensor>) value(%v : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = nvfp4, scale = tensor>)
      block_table(%bt : memref<2x8xi32>) seq_lens(%sl : memref<2xi32>) k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>)
      outs(%o : memref<2x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

// CHECK-LABEL: func.func @row_encodings_fp8
// CHECK: pattn.paged_attention {{.*}}backend = #pattn.backend<xqa>
func.func @row_encodings_fp8(%k: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f8e4m3, scale = tensor>, %v: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f8e5m2, scale = tensor>, %q: memref<2x32x128xf16>, %bt: memref<2x8xi32>, %sl: memref<2xi32>, %ks: memref<1xf32>, %vs: memref<1xf32>, %o: memref<2x32x128xf16>) {
  // expected-remark @below {{xqa: eligible on sm_90a}}
  pattn.paged_attention query(%q : memref<2x32x128xf16>) key(%k : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f8e4m3, scale = tensor>) value(%v : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f8e5m2, scale = tensor>)
      block_table(%bt : memref<2x8xi32>) seq_lens(%sl : memref<2xi32>) k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>)
      outs(%o : memref<2x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

// CHECK-LABEL: func.func @row_encodings_i8_bf16
// CHECK: pattn.paged_attention {{.*}}backend = #pattn.backend<xqa>
func.func @row_encodings_i8_bf16(%k: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>, %v: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = bf16, scale = none>, %q: memref<2x32x128xbf16>, %bt: memref<2x8xi32>, %sl: memref<2xi32>, %ks: memref<1xf32>, %o: memref<2x32x128xbf16>) {
  // expected-remark @below {{xqa: eligible on sm_90a}}
  pattn.paged_attention query(%q : memref<2x32x128xbf16>) key(%k : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>) value(%v : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = bf16, scale = none>)
      block_table(%bt : memref<2x8xi32>) seq_lens(%sl : memref<2xi32>) k_scale(%ks : memref<1xf32>)
      outs(%o : memref<2x32x128xbf16>) {num_heads = 32 : i64}
  return
}

// -----

// Row "query tokens 1-8": 8 inside (9 is a verifier error; the unit tests cover the rule).
// CHECK-LABEL: func.func @row_query_tokens_8
// CHECK: pattn.paged_attention {{.*}}backend = #pattn.backend<xqa>
func.func @row_query_tokens_8(%k: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>, %v: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>, %q: memref<16x8x128xf16>, %bt: memref<2x8xi32>, %sl: memref<2xi32>, %qs: memref<3xi32>, %o: memref<16x8x128xf16>) {
  // expected-remark @below {{xqa: eligible on sm_90a}}
  pattn.paged_attention query(%q : memref<16x8x128xf16>) key(%k : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>) value(%v : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>)
      block_table(%bt : memref<2x8xi32>) seq_lens(%sl : memref<2xi32>) query_start(%qs : memref<3xi32>)
      outs(%o : memref<16x8x128xf16>) {num_heads = 8 : i64, max_query_len = 8 : i64}
  return
}

// -----

// Row "softcap": supported on XQA.
// CHECK-LABEL: func.func @row_softcap
// CHECK: pattn.paged_attention {{.*}}backend = #pattn.backend<xqa>
func.func @row_softcap(%k: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>, %v: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>, %q: memref<2x32x128xf16>, %bt: memref<2x8xi32>, %sl: memref<2xi32>, %o: memref<2x32x128xf16>) {
  // expected-remark @below {{xqa: eligible on sm_90a}}
  pattn.paged_attention query(%q : memref<2x32x128xf16>) key(%k : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>) value(%v : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>)
      block_table(%bt : memref<2x8xi32>) seq_lens(%sl : memref<2xi32>)
      outs(%o : memref<2x32x128xf16>) {num_heads = 32 : i64, softcap = 30.0 : f32}
  return
}

// -----

// Row "channel K scale": unfolded tables go portable (folded, guarded and static cases follow).
// CHECK-LABEL: func.func @row_channel_k_dynamic_unfolded
// CHECK: pattn.paged_attention {{.*}}backend = #pattn.backend<portable>
func.func @row_channel_k_dynamic_unfolded(%k: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = channel>, %v: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>, %q: memref<2x32x128xf16>, %bt: memref<2x8xi32>, %sl: memref<2xi32>, %ks: memref<8x128xf32>, %o: memref<2x32x128xf16>) {
  // expected-remark @below {{portable: dynamic K channel scales not folded (run --pattn-fold-channel-scales)}}
  pattn.paged_attention query(%q : memref<2x32x128xf16>) key(%k : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = channel>) value(%v : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>)
      block_table(%bt : memref<2x8xi32>) seq_lens(%sl : memref<2xi32>) k_scale(%ks : memref<8x128xf32>)
      outs(%o : memref<2x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

// Every failed condition is named.
// CHECK-LABEL: func.func @row_several_failures
// CHECK: pattn.paged_attention {{.*}}backend = #pattn.backend<portable>
func.func @row_several_failures(%k: !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 96, encoding = f16, scale = none>, %v: !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 96, encoding = f16, scale = none>, %q: memref<2x33x96xf16>, %bt: memref<2x8xi32>, %sl: memref<2xi32>, %o: memref<2x33x96xf16>) {
  // expected-remark @below {{portable: head_dim 96 not in {64, 128, 256}; g x query tokens = 33 x 1 = 33 > 32}}
  pattn.paged_attention query(%q : memref<2x33x96xf16>) key(%k : !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 96, encoding = f16, scale = none>) value(%v : !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 96, encoding = f16, scale = none>)
      block_table(%bt : memref<2x8xi32>) seq_lens(%sl : memref<2xi32>)
      outs(%o : memref<2x33x96xf16>) {num_heads = 33 : i64}
  return
}

// -----

// A prompt (up to 32768 query tokens per sequence) runs on tensor cores in
// query tiles of 32 / g tokens.
// CHECK-LABEL: func.func @prompt_512
// CHECK: pattn.paged_attention {{.*}}backend = #pattn.backend<xqa>
func.func @prompt_512(%k: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = tensor>, %q: memref<?x32x128xf16>, %bt: memref<2x64xi32>, %sl: memref<2xi32>, %qs: memref<3xi32>, %s: memref<1xf32>, %o: memref<?x32x128xf16>) {
  // expected-remark @below {{xqa: eligible on sm_90a}}
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = tensor>) value(%k : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = tensor>)
      block_table(%bt : memref<2x64xi32>) seq_lens(%sl : memref<2xi32>) query_start(%qs : memref<3xi32>) k_scale(%s : memref<1xf32>) v_scale(%s : memref<1xf32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, max_query_len = 512 : i64}
  return
}

// -----

// A prompt's query tile holds one token's g rows at least: g <= 32.
// CHECK-LABEL: func.func @prompt_g33
// CHECK: pattn.paged_attention {{.*}}backend = #pattn.backend<portable>
func.func @prompt_g33(%k: !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 128, encoding = f16, scale = none>, %q: memref<?x33x128xf16>, %bt: memref<2x64xi32>, %sl: memref<2xi32>, %qs: memref<3xi32>, %o: memref<?x33x128xf16>) {
  // expected-remark @below {{portable: g = 33 > 32: a prompt's query tile of one token has more rows than the kernel's 32}}
  pattn.paged_attention query(%q : memref<?x33x128xf16>) key(%k : !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 128, encoding = f16, scale = none>) value(%k : !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 128, encoding = f16, scale = none>)
      block_table(%bt : memref<2x64xi32>) seq_lens(%sl : memref<2xi32>) query_start(%qs : memref<3xi32>)
      outs(%o : memref<?x33x128xf16>) {num_heads = 33 : i64, max_query_len = 100 : i64}
  return
}
