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
