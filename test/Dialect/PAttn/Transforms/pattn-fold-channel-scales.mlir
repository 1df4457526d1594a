// RUN: pattn-opt %s --split-input-file --pattn-fold-channel-scales --mlir-print-elementsattrs-with-hex-if-larger=1 | FileCheck %s
// The pass is idempotent: a second run changes nothing.
// RUN: pattn-opt %s --split-input-file --pattn-fold-channel-scales --mlir-print-elementsattrs-with-hex-if-larger=1 > %t.once
// RUN: pattn-opt %t.once --split-input-file --pattn-fold-channel-scales --mlir-print-elementsattrs-with-hex-if-larger=1 > %t.twice
// RUN: diff %t.once %t.twice

// The normalizer is printed exactly; the table itself stays as written
// (the device folds each query row against it, numerics::foldQueryRow).

// The seed example (ORT #32520): s = 1000 folds with N = 1024 (not 1000, not
// 2^10 = 1024 by accident: ilogb(1000) + 1 = 10). The folded query and its
// row exponents are new buffers; attention reads K at N and each row at 2^e.
// CHECK-DAG: memref.global "private" constant @__pattn_k_normalizer : memref<1xf32> = dense<1.024000e+03>
// CHECK-LABEL: func.func @seed
// CHECK-SAME: (%[[K:.*]]: !pattn.cache<{{.*}}scale = channel>, %[[Q:[^:]*]]: memref<2x4x8xf16>
// CHECK-DAG:   %[[S:.*]] = memref.get_global @k_scale : memref<1x8xf32>
// CHECK-DAG:   %[[N:.*]] = memref.get_global @__pattn_k_normalizer : memref<1xf32>
// CHECK-DAG:   %[[KT:.*]] = pattn.rescale_view %[[K]] : {{.*}}scale = channel> to {{.*}}scale = tensor>
// CHECK-DAG:   %[[QF:.*]] = memref.alloc() : memref<2x4x8xf16>
// CHECK-DAG:   %[[E:.*]] = memref.alloc() : memref<2x4xi32>
// CHECK:       pattn.fold_query query(%[[Q]] : memref<2x4x8xf16>) scales(%[[S]] : memref<1x8xf32>) normalizer(%[[N]] : memref<1xf32>) outs(%[[QF]] : memref<2x4x8xf16>) exponents(%[[E]] : memref<2x4xi32>) {num_heads = 4 : i64}
// CHECK-NEXT:  pattn.paged_attention query(%[[QF]] : {{.*}}) key(%[[KT]] : {{.*}}) {{.*}} k_scale(%[[N]] : memref<1xf32>) query_exponents(%[[E]] : memref<2x4xi32>) outs
// CHECK-NEXT:  memref.dealloc %[[QF]]
// CHECK-NEXT:  memref.dealloc %[[E]]
memref.global "private" constant @k_scale : memref<1x8xf32> = dense<[[1000.0, 0.0, -500.0, 1.0, 250.0, 0.5, 0.25, 999.0]]>
!kc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = i8, scale = channel>
!vc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = f16, scale = none>
func.func @seed(%k: !kc, %q: memref<2x4x8xf16>, %v: !vc, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x4x8xf16>) {
  %ks = memref.get_global @k_scale : memref<1x8xf32>
  pattn.paged_attention query(%q : memref<2x4x8xf16>) key(%k : !kc) value(%v : !vc)
      block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>)
      k_scale(%ks : memref<1x8xf32>) outs(%o : memref<2x4x8xf16>) {num_heads = 4 : i64}
  return
}

// -----

// max |s| exactly a power of two (8 = 2^3) gives N = 2^4: strictly above.
// Two KV heads: the table is [kv_heads, head_dim].
// CHECK-DAG: memref.global "private" constant @__pattn_k_normalizer : memref<1xf32> = dense<1.600000e+01>
// CHECK-LABEL: func.func @power_of_two_max
memref.global "private" constant @k_scale : memref<2x8xf32> = dense<[[8.0, 4.0, 1.0, 0.5, 8.0, 4.0, 1.0, 0.5], [8.0, 4.0, 1.0, 0.5, 8.0, 4.0, 1.0, 0.5]]>
!kc = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 8, encoding = i4, scale = channel>
func.func @power_of_two_max(%k: !kc, %q: memref<2x4x8xbf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x4x8xbf16>) {
  %ks = memref.get_global @k_scale : memref<2x8xf32>
  // CHECK: pattn.fold_query
  pattn.paged_attention query(%q : memref<2x4x8xbf16>) key(%k : !kc) value(%k : !kc)
      block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>)
      k_scale(%ks : memref<2x8xf32>) v_scale(%ks : memref<2x8xf32>) outs(%o : memref<2x4x8xbf16>) {num_heads = 4 : i64}
  return
}

// -----

// An all-zero table folds with N = 1 (every q' is zero: the keys contribute
// nothing, exactly as the unfolded scales say).
// CHECK-DAG: memref.global "private" constant @__pattn_k_normalizer : memref<1xf32> = dense<1.000000e+00>
// CHECK-LABEL: func.func @all_zero
memref.global "private" constant @k_scale : memref<1x8xf32> = dense<0.0>
!kc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = f8e4m3, scale = channel>
!vc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = f16, scale = none>
func.func @all_zero(%k: !kc, %v: !vc, %q: memref<2x4x8xf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x4x8xf16>) {
  %ks = memref.get_global @k_scale : memref<1x8xf32>
  pattn.paged_attention query(%q : memref<2x4x8xf16>) key(%k : !kc) value(%v : !vc)
      block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>)
      k_scale(%ks : memref<1x8xf32>) outs(%o : memref<2x4x8xf16>) {num_heads = 4 : i64}
  return
}

// -----

// Negative entries: m = max |s| = 3000, N = 4096; signs are kept.
// Static table from bufferization.to_buffer of an arith.constant.
// CHECK-DAG: memref.global "private" constant @__pattn_k_normalizer : memref<1xf32> = dense<4.096000e+03>
// CHECK-LABEL: func.func @negative_entries
!kc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = f8e5m2, scale = channel>
!vc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = f16, scale = none>
func.func @negative_entries(%k: !kc, %v: !vc, %q: memref<2x4x8xf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x4x8xf16>) {
  %t = arith.constant dense<[[-3000.0, 1500.0, -3000.0, 1500.0, -3000.0, 1500.0, -3000.0, 1500.0]]> : tensor<1x8xf32>
  %ks = bufferization.to_buffer %t : tensor<1x8xf32> to memref<1x8xf32>
  pattn.paged_attention query(%q : memref<2x4x8xf16>) key(%k : !kc) value(%v : !vc)
      block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>)
      k_scale(%ks : memref<1x8xf32>) outs(%o : memref<2x4x8xf16>) {num_heads = 4 : i64}
  return
}

// -----

// Subnormal entries: ilogb(1e-40) + 1 = -132 is clamped to -126; the ratios
// s / 2^-126 are normal floats, exact.
// CHECK-DAG: memref.global "private" constant @__pattn_k_normalizer : memref<1xf32> = dense<1.17549435E-38>
// CHECK-LABEL: func.func @subnormal_entries
// CHECK: pattn.fold_query
memref.global "private" constant @k_scale : memref<1x8xf32> = dense<[[1.0e-40, -3.0e-41, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]>
!kc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = i8, scale = channel>
!vc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = f16, scale = none>
func.func @subnormal_entries(%k: !kc, %v: !vc, %q: memref<2x4x8xf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x4x8xf16>) {
  %ks = memref.get_global @k_scale : memref<1x8xf32>
  pattn.paged_attention query(%q : memref<2x4x8xf16>) key(%k : !kc) value(%v : !vc)
      block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>)
      k_scale(%ks : memref<1x8xf32>) outs(%o : memref<2x4x8xf16>) {num_heads = 4 : i64}
  return
}

// -----

// 24 binades between the largest and the smallest nonzero |s| still fold
// (N = 2) ...
// CHECK-DAG: memref.global "private" constant @__pattn_k_normalizer : memref<1xf32> = dense<2.000000e+00>
// CHECK-LABEL: func.func @span_24_binades
// CHECK: pattn.fold_query
memref.global "private" constant @k_scale : memref<1x8xf32> = dense<[[1.0, 0x33800000, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]]>
!kc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = i8, scale = channel>
!vc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = f16, scale = none>
func.func @span_24_binades(%k: !kc, %v: !vc, %q: memref<2x4x8xf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x4x8xf16>) {
  %ks = memref.get_global @k_scale : memref<1x8xf32>
  pattn.paged_attention query(%q : memref<2x4x8xf16>) key(%k : !kc) value(%v : !vc)
      block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>)
      k_scale(%ks : memref<1x8xf32>) outs(%o : memref<2x4x8xf16>) {num_heads = 4 : i64}
  return
}

// -----

// ... 25 do not: the fold cannot see the K codes, and a channel 25 binades
// below the largest can carry the whole logit while flushing in the folded
// row. The op is left as written (select-backend sends it to the portable
// path).
// CHECK-LABEL: func.func @span_25_binades
// CHECK-NOT: pattn.fold_query
// CHECK-NOT: pattn.rescale_view
// CHECK: pattn.paged_attention {{.*}}k_scale(%{{.*}} : memref<1x8xf32>)
memref.global "private" constant @k_scale : memref<1x8xf32> = dense<[[1.0, 0x33000000, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]]>
!kc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = i8, scale = channel>
!vc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = f16, scale = none>
func.func @span_25_binades(%k: !kc, %v: !vc, %q: memref<2x4x8xf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x4x8xf16>) {
  %ks = memref.get_global @k_scale : memref<1x8xf32>
  pattn.paged_attention query(%q : memref<2x4x8xf16>) key(%k : !kc) value(%v : !vc)
      block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>)
      k_scale(%ks : memref<1x8xf32>) outs(%o : memref<2x4x8xf16>) {num_heads = 4 : i64}
  return
}

// -----

// FLT_MAX with softmax_scale 2: N would be 2^128; the clamp 2^125 keeps
// softmax_scale * N finite. |s / N| reaches 8, but the row exponents keep
// every folded row in [1, 2], so the table folds like any other.
// CHECK-DAG: memref.global "private" constant @__pattn_k_normalizer : memref<1xf32> = dense<4.25352959E+37>
// CHECK-LABEL: func.func @flt_max_scale
// CHECK: pattn.fold_query
// CHECK: pattn.paged_attention {{.*}}k_scale(%{{.*}} : memref<1xf32>) query_exponents({{.*}}softmax_scale = 2.000000e+00
memref.global "private" constant @k_scale : memref<1x8xf32> = dense<[[0x7F7FFFFF, 1.0e38, 1.0e38, 1.0e38, 1.0e38, 1.0e38, 1.0e38, 1.0e38]]>
!kc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = i8, scale = channel>
!vc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = f16, scale = none>
func.func @flt_max_scale(%k: !kc, %v: !vc, %q: memref<2x4x8xf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x4x8xf16>) {
  %ks = memref.get_global @k_scale : memref<1x8xf32>
  pattn.paged_attention query(%q : memref<2x4x8xf16>) key(%k : !kc) value(%v : !vc)
      block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>)
      k_scale(%ks : memref<1x8xf32>) outs(%o : memref<2x4x8xf16>) {num_heads = 4 : i64, softmax_scale = 2.0 : f32}
  return
}

// -----

// A dynamic table (a function argument, or a global that is not constant)
// gets the device-side normalizer and a guarded pair: the folded form runs
// when the table folds (finite, at most 24 binades: flag 1), the original
// form otherwise.
// CHECK-LABEL: func.func @dynamic_table
// CHECK-SAME: (%[[K:[^:]*]]: !pattn.cache<{{.*}}>, %[[V:[^:]*]]: {{.*}}, %[[Q:[^:]*]]: memref<?x4x8xf16>, %{{.*}}, %{{.*}}, %[[KS:[^:]*]]: memref<1x8xf32>
// CHECK-DAG:  %[[KT:.*]] = pattn.rescale_view %[[K]]
// CHECK-DAG:  %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:  %[[T:.*]] = memref.dim %[[Q]], %[[C0]]
// CHECK-DAG:  %[[QF:.*]] = memref.alloc(%[[T]]) : memref<?x4x8xf16>
// CHECK-DAG:  %[[E:.*]] = memref.alloc(%{{.*}}) : memref<?x4xi32>
// CHECK-DAG:  %[[N:.*]] = memref.alloc() : memref<1xf32>
// CHECK-DAG:  %[[FLAG:.*]] = memref.alloc() : memref<1xi32>
// CHECK:      pattn.scale_normalizer scales(%[[KS]] : memref<1x8xf32>) outs(%[[N]] : memref<1xf32>) flag(%[[FLAG]] : memref<1xi32>) {softmax_scale = 0.353553385 : f32}
// CHECK-NEXT: pattn.fold_query query(%[[Q]] : memref<?x4x8xf16>) scales(%[[KS]] : memref<1x8xf32>) normalizer(%[[N]] : memref<1xf32>) outs(%[[QF]] : memref<?x4x8xf16>) exponents(%[[E]] : memref<?x4xi32>)
// CHECK-NEXT: pattn.paged_attention query(%[[QF]] : {{.*}}) key(%[[KT]] : {{.*}}) {{.*}}k_scale(%[[N]] : memref<1xf32>) guard(%[[FLAG]] : memref<1xi32>) query_exponents(%[[E]] : memref<?x4xi32>) {{.*}}guard_value = 1 : i32
// CHECK-NEXT: pattn.paged_attention query(%[[Q]] : {{.*}}) key(%[[K]] : {{.*}}) {{.*}}k_scale(%[[KS]] : memref<1x8xf32>) guard(%[[FLAG]] : memref<1xi32>) {{.*}}guard_value = 0 : i32
// CHECK-DAG:  memref.dealloc %[[QF]]
// CHECK-DAG:  memref.dealloc %[[E]]
// CHECK-DAG:  memref.dealloc %[[N]]
// CHECK-DAG:  memref.dealloc %[[FLAG]]
!kc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = i4, scale = channel>
!vc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = f16, scale = none>
func.func @dynamic_table(%k: !kc, %v: !vc, %q: memref<?x4x8xf16>, %bt: memref<?x4xi32>, %sl: memref<?xi32>, %ks: memref<1x8xf32>, %o: memref<?x4x8xf16>) {
  pattn.paged_attention query(%q : memref<?x4x8xf16>) key(%k : !kc) value(%v : !vc)
      block_table(%bt : memref<?x4xi32>) seq_lens(%sl : memref<?xi32>)
      k_scale(%ks : memref<1x8xf32>) outs(%o : memref<?x4x8xf16>) {num_heads = 4 : i64}
  return
}

// -----

// CHECK-LABEL: func.func @mutable_global_is_dynamic
// CHECK: pattn.scale_normalizer
memref.global "private" @k_scale : memref<1x8xf32> = dense<1.0>
!kc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = i4, scale = channel>
!vc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = f16, scale = none>
func.func @mutable_global_is_dynamic(%k: !kc, %v: !vc, %q: memref<2x4x8xf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x4x8xf16>) {
  %ks = memref.get_global @k_scale : memref<1x8xf32>
  pattn.paged_attention query(%q : memref<2x4x8xf16>) key(%k : !kc) value(%v : !vc)
      block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>)
      k_scale(%ks : memref<1x8xf32>) outs(%o : memref<2x4x8xf16>) {num_heads = 4 : i64}
  return
}

// -----

// Mixed granularity, K tensor + V channel: only V moves, to out_scale, and V
// is read at unit scale.
// CHECK-LABEL: func.func @k_tensor_v_channel
// CHECK-SAME: (%[[K:[^:]*]]: {{.*}}, %[[V:[^:]*]]: {{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[KS:[^:]*]]: memref<1xf32>, %[[VS:[^:]*]]: memref<1x8xf32>
// CHECK-NOT: pattn.fold_query
// CHECK: %[[VU:.*]] = pattn.rescale_view %[[V]] : {{.*}}scale = channel> to {{.*}}scale = none>
// CHECK: pattn.paged_attention {{.*}}key(%[[K]] : {{.*}}) value(%[[VU]] : {{.*}}) {{.*}}k_scale(%[[KS]] : memref<1xf32>) out_scale(%[[VS]] : memref<1x8xf32>) outs
!kc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = i8, scale = tensor>
!vc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = i4, scale = channel>
func.func @k_tensor_v_channel(%k: !kc, %v: !vc, %q: memref<2x4x8xf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %ks: memref<1xf32>, %vs: memref<1x8xf32>, %o: memref<2x4x8xf16>) {
  pattn.paged_attention query(%q : memref<2x4x8xf16>) key(%k : !kc) value(%v : !vc)
      block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>)
      k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1x8xf32>) outs(%o : memref<2x4x8xf16>) {num_heads = 4 : i64}
  return
}

// -----

// Mixed granularity, K channel (static) + V tensor: only K folds.
// CHECK-LABEL: func.func @k_channel_v_tensor
// CHECK: pattn.fold_query
// CHECK: pattn.paged_attention {{.*}}v_scale(%{{.*}} : memref<1xf32>) query_exponents
// CHECK-NOT: out_scale
memref.global "private" constant @k_scale : memref<1x8xf32> = dense<3.0>
!kc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = i4, scale = channel>
!vc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = i8, scale = tensor>
func.func @k_channel_v_tensor(%k: !kc, %v: !vc, %q: memref<2x4x8xf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %vs: memref<1xf32>, %o: memref<2x4x8xf16>) {
  %ks = memref.get_global @k_scale : memref<1x8xf32>
  pattn.paged_attention query(%q : memref<2x4x8xf16>) key(%k : !kc) value(%v : !vc)
      block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>)
      k_scale(%ks : memref<1x8xf32>) v_scale(%vs : memref<1xf32>) outs(%o : memref<2x4x8xf16>) {num_heads = 4 : i64}
  return
}

// -----

// tensor, token and nvfp4 scales are left alone.
// CHECK-LABEL: func.func @untouched
// CHECK-NOT: pattn.fold_query
// CHECK-NOT: pattn.rescale_view
// CHECK-NOT: out_scale
!kc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 16, encoding = nvfp4, scale = token>
!vc = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 16, encoding = f8e4m3, scale = tensor>
func.func @untouched(%k: !kc, %v: !vc, %q: memref<2x4x16xf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %vs: memref<1xf32>, %o: memref<2x4x16xf16>) {
  pattn.paged_attention query(%q : memref<2x4x16xf16>) key(%k : !kc) value(%v : !vc)
      block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>)
      v_scale(%vs : memref<1xf32>) outs(%o : memref<2x4x16xf16>) {num_heads = 4 : i64}
  return
}

// -----

// In a nested module the fold's globals go into that module and are renamed
// against its symbols: the user's own @__pattn_k_normalizer stays, the fold's
// gets a fresh name, and both get_globals resolve in the inner module.
// CHECK-LABEL: module @inner
// CHECK-DAG:   memref.global "private" constant @__pattn_k_normalizer : memref<1xf32> = dense<7.000000e+00>
// CHECK-DAG:   memref.global "private" constant @[[NORM:__pattn_k_normalizer_[0-9]+]] : memref<1xf32> = dense<1.024000e+03>
// CHECK:       func.func @nested
// CHECK:         memref.get_global @[[NORM]] : memref<1xf32>
module {
  module @inner {
    memref.global "private" constant @__pattn_k_normalizer : memref<1xf32> = dense<7.0>
    memref.global "private" constant @k_scale : memref<1x8xf32> = dense<[[1000.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]]>
    func.func @nested(%k: !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = i8, scale = channel>, %q: memref<2x4x8xf16>, %v: !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = f16, scale = none>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x4x8xf16>) {
      %ks = memref.get_global @k_scale : memref<1x8xf32>
      pattn.paged_attention query(%q : memref<2x4x8xf16>) key(%k : !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = i8, scale = channel>) value(%v : !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 8, encoding = f16, scale = none>)
          block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>)
          k_scale(%ks : memref<1x8xf32>) outs(%o : memref<2x4x8xf16>) {num_heads = 4 : i64}
      return
    }
  }
}
