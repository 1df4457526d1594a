// RUN: pattn-opt %s --split-input-file --pattn-fold-and-select="chips=sm_80" --verify-diagnostics | FileCheck %s

// The named pipeline: the fold runs first, so the selector sees folded K
// scales. Row "channel K scale" of the eligibility table, case by case.

// A static table within budget is folded, and the op runs on XQA.
// CHECK-LABEL: func.func @static_folded
// CHECK: pattn.fold_query
// CHECK: pattn.paged_attention {{.*}}backend = #pattn.backend<xqa>
memref.global "private" constant @k_scale : memref<8x128xf32> = dense<0.05>
!kc = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = channel>
!vc = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = channel>
func.func @static_folded(%k: !kc, %v: !vc, %q: memref<4x48x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %vs: memref<8x128xf32>, %o: memref<4x48x128xf16>) {
  %ks = memref.get_global @k_scale : memref<8x128xf32>
  // expected-remark @below {{xqa: eligible on sm_80}}
  pattn.paged_attention query(%q : memref<4x48x128xf16>) key(%k : !kc) value(%v : !vc)
      block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>)
      k_scale(%ks : memref<8x128xf32>) v_scale(%vs : memref<8x128xf32>) outs(%o : memref<4x48x128xf16>) {num_heads = 48 : i64}
  return
}

// -----

// 25 binades: not folded, portable, and the remark gives the span.
// CHECK-LABEL: func.func @static_too_wide
// CHECK-NOT: pattn.fold_query
// CHECK: pattn.paged_attention {{.*}}backend = #pattn.backend<portable>
memref.global "private" constant @k_scale : memref<1x64xf32> = dense<[[1.0, 0x33000000, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]]>
!kc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 64, encoding = i4, scale = channel>
!vc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 64, encoding = f16, scale = none>
func.func @static_too_wide(%k: !kc, %v: !vc, %q: memref<4x8x64xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x8x64xf16>) {
  %ks = memref.get_global @k_scale : memref<1x64xf32>
  // expected-remark @below {{portable: K channel scales span 25 binades > 24}}
  pattn.paged_attention query(%q : memref<4x8x64xf16>) key(%k : !kc) value(%v : !vc)
      block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>)
      k_scale(%ks : memref<1x64xf32>) outs(%o : memref<4x8x64xf16>) {num_heads = 8 : i64}
  return
}

// -----

// FLT_MAX with softmax_scale 2: the normalizer is clamped to 2^125 and the
// row exponents take the rest; XQA.
// CHECK-LABEL: func.func @static_clamped
// CHECK: pattn.fold_query
// CHECK: pattn.paged_attention {{.*}}query_exponents{{.*}}backend = #pattn.backend<xqa>
memref.global "private" constant @k_scale : memref<1x64xf32> = dense<0x7F7FFFFF>
!kc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 64, encoding = i8, scale = channel>
!vc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 64, encoding = f16, scale = none>
func.func @static_clamped(%k: !kc, %v: !vc, %q: memref<4x8x64xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x8x64xf16>) {
  %ks = memref.get_global @k_scale : memref<1x64xf32>
  // expected-remark @below {{xqa: eligible on sm_80}}
  pattn.paged_attention query(%q : memref<4x8x64xf16>) key(%k : !kc) value(%v : !vc)
      block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>)
      k_scale(%ks : memref<1x64xf32>) outs(%o : memref<4x8x64xf16>) {num_heads = 8 : i64, softmax_scale = 2.0 : f32}
  return
}

// -----

// A dynamic table: both halves of the guarded pair are decided; the device
// flag picks which one runs.
// CHECK-LABEL: func.func @dynamic_guarded
// CHECK: pattn.paged_attention {{.*}}backend = #pattn.backend<xqa>, guard_value = 1 : i32
// CHECK: pattn.paged_attention {{.*}}backend = #pattn.backend<portable>, guard_value = 0 : i32
!kc = !pattn.cache<block_size = 32, kv_heads = 2, head_dim = 256, encoding = nvfp4, scale = tensor>
!ic = !pattn.cache<block_size = 32, kv_heads = 2, head_dim = 256, encoding = i4, scale = channel>
func.func @dynamic_guarded(%k: !ic, %v: !kc, %q: memref<3x12x256xbf16>, %bt: memref<3x8xi32>, %sl: memref<3xi32>, %ks: memref<2x256xf32>, %vs: memref<1xf32>, %o: memref<3x12x256xbf16>) {
  // expected-remark @below {{xqa: eligible on sm_80}}
  // expected-remark @below {{portable: device-guarded fallback for K channel scales that do not fold}}
  pattn.paged_attention query(%q : memref<3x12x256xbf16>) key(%k : !ic) value(%v : !kc)
      block_table(%bt : memref<3x8xi32>) seq_lens(%sl : memref<3xi32>)
      k_scale(%ks : memref<2x256xf32>) v_scale(%vs : memref<1xf32>) outs(%o : memref<3x12x256xbf16>) {num_heads = 12 : i64}
  return
}

// -----

// MLA (DeepSeek: 128 heads): one latent KV head of 512 + 64 channels,
// every head in one group.
// CHECK-LABEL: func.func @mla
// CHECK: pattn.mla_decode {{.*}}backend = #pattn.backend<xqa>
!r = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
func.func @mla(%c: !r, %q: memref<4x128x576xbf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x128x512xbf16>) {
  // expected-remark @below {{xqa: eligible on sm_80}}
  pattn.mla_decode query(%q : memref<4x128x576xbf16>) cache(%c : !r) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x128x512xbf16>) {num_heads = 128 : i64}
  return
}
