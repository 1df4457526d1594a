// RUN: pattn-opt %s --split-input-file --pattn-fold-channel-scales --verify-diagnostics

// A static table with a non-finite entry is an error at the op, naming the
// entry; nothing is folded.
memref.global "private" constant @k_scale : memref<2x8xf32> = dense<[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 0x7FC00000, 5.0, 6.0, 7.0, 8.0]]>
!kc = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 8, encoding = i8, scale = channel>
!vc = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 8, encoding = f16, scale = none>
func.func @nan_entry(%k: !kc, %v: !vc, %q: memref<2x4x8xf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x4x8xf16>) {
  %ks = memref.get_global @k_scale : memref<2x8xf32>
  // expected-error @below {{K channel scale table holds a non-finite value nan at [kv_head 1, channel 3]}}
  pattn.paged_attention query(%q : memref<2x4x8xf16>) key(%k : !kc) value(%v : !vc)
      block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>)
      k_scale(%ks : memref<2x8xf32>) outs(%o : memref<2x4x8xf16>) {num_heads = 4 : i64}
  return
}

// -----

memref.global "private" constant @k_scale : memref<1x8xf32> = dense<[[1.0, 2.0, 0x7F800000, 4.0, 5.0, 6.0, 7.0, 8.0]]>
!kc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = i8, scale = channel>
!vc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = f16, scale = none>
func.func @inf_entry(%k: !kc, %v: !vc, %q: memref<2x4x8xf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x4x8xf16>) {
  %ks = memref.get_global @k_scale : memref<1x8xf32>
  // expected-error @below {{K channel scale table holds a non-finite value INF at [kv_head 0, channel 2]}}
  pattn.paged_attention query(%q : memref<2x4x8xf16>) key(%k : !kc) value(%v : !vc)
      block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>)
      k_scale(%ks : memref<1x8xf32>) outs(%o : memref<2x4x8xf16>) {num_heads = 4 : i64}
  return
}

// -----

!kc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = i8, scale = tensor>
!vc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = i8, scale = channel>
func.func @out_scale_and_v_channel(%k: !kc, %v: !vc, %q: memref<2x4x8xf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %ks: memref<1xf32>, %vs: memref<1x8xf32>, %o: memref<2x4x8xf16>) {
  // expected-error @below {{has both out_scale and V channel scales; the fold cannot combine them}}
  pattn.paged_attention query(%q : memref<2x4x8xf16>) key(%k : !kc) value(%v : !vc)
      block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>)
      k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1x8xf32>) out_scale(%vs : memref<1x8xf32>)
      outs(%o : memref<2x4x8xf16>) {num_heads = 4 : i64}
  return
}

// -----

// SPEC §2: every static scale is finite, not only K channel tables.
memref.global "private" constant @k_tensor : memref<1xf32> = dense<0x7FC00000>
!kc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = i8, scale = tensor>
!vc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = f16, scale = none>
func.func @nan_tensor_scale(%k: !kc, %v: !vc, %q: memref<2x4x8xf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x4x8xf16>) {
  %ks = memref.get_global @k_tensor : memref<1xf32>
  // expected-error @below {{K scale holds a non-finite value nan at [0]}}
  pattn.paged_attention query(%q : memref<2x4x8xf16>) key(%k : !kc) value(%v : !vc)
      block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>)
      k_scale(%ks : memref<1xf32>) outs(%o : memref<2x4x8xf16>) {num_heads = 4 : i64}
  return
}

// -----

memref.global "private" constant @v_channel : memref<1x8xf32> = dense<[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 0xFF800000, 8.0]]>
!kc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = f16, scale = none>
!vc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = i8, scale = channel>
func.func @inf_value_channel(%k: !kc, %v: !vc, %q: memref<2x4x8xf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x4x8xf16>) {
  %vs = memref.get_global @v_channel : memref<1x8xf32>
  // expected-error @below {{V channel scale table holds a non-finite value -INF at [kv_head 0, channel 6]}}
  pattn.paged_attention query(%q : memref<2x4x8xf16>) key(%k : !kc) value(%v : !vc)
      block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>)
      v_scale(%vs : memref<1x8xf32>) outs(%o : memref<2x4x8xf16>) {num_heads = 4 : i64}
  return
}

// -----

memref.global "private" constant @write_scale : memref<1xf32> = dense<0x7FC00000>
!kc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = i8, scale = tensor>
func.func @nan_write_scale(%k: !kc, %vals: memref<4x1x8xf16>, %s: memref<4xi64>) {
  %ws = memref.get_global @write_scale : memref<1xf32>
  // expected-error @below {{write scale holds a non-finite value nan at [0]}}
  pattn.write_cache values(%vals : memref<4x1x8xf16>) into(%k : !kc) slots(%s : memref<4xi64>) scale(%ws : memref<1xf32>)
  return
}

// -----

memref.global "private" constant @outer : memref<1xf32> = dense<0x7F800000>
!nvrec = !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla>>
func.func @inf_mla_outer_scale(%n: !nvrec, %q: memref<4x16x576xbf16>, %bt: memref<4x16xi32>, %sl: memref<4xi32>, %o: memref<4x16x512xbf16>) {
  %os = memref.get_global @outer : memref<1xf32>
  // expected-error @below {{outer scale holds a non-finite value INF at [0]}}
  pattn.mla_decode query(%q : memref<4x16x576xbf16>) cache(%n : !nvrec)
      block_table(%bt : memref<4x16xi32>) seq_lens(%sl : memref<4xi32>)
      outer_scale(%os : memref<1xf32>) outs(%o : memref<4x16x512xbf16>) {num_heads = 16 : i64}
  return
}
