// RUN: pattn-opt %s --pattn-fold-channel-scales --pattn-select-backend=chips=sm_90a --pattn-plan-decode=chips=sm_90a --convert-pattn-to-gpu=chips=sm_90a --split-input-file 2>/dev/null | FileCheck %s
// RUN: pattn-opt %s --pattn-fold-channel-scales --pattn-select-backend="chips=sm_90a force=portable" --pattn-plan-decode=chips=sm_90a --convert-pattn-to-gpu=chips=sm_90a --split-input-file 2>/dev/null | FileCheck %s --check-prefix=PORTABLE

// The fold inside the XQA decode (docs/Lowering.md, "The fold inside the
// decode"): the folded op's XQA kernel reads the query and the K channel
// table the fold would have read, folds its own query rows and keeps each
// row's exponent in the row's padding; no fold_query launch and no folded
// query or exponents are allocated.
//
// A dynamic table of 8 x 128 entries: its normalizer is fused too. Every
// block reduces the table (a block barrier), block (0, 0, 0) stores N and
// the flag for the portable fallback and the pair's merge, and the flag
// decides whether the XQA blocks run.
// CHECK-LABEL: func.func @dynamic_table
// CHECK-NOT: pattn_fold_query
// CHECK-NOT: pattn_scale_normalizer
// CHECK: %[[N:.*]], %{{.*}} = gpu.alloc async {{.*}} : memref<1xf32>
// CHECK: %[[FLAG:.*]], %{{.*}} = gpu.alloc async {{.*}} : memref<1xi32>
// CHECK-NOT: gpu.alloc async {{.*}} : memref<?x32x128xf16>
// CHECK-NOT: gpu.alloc async {{.*}} : memref<?x32xi32>
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels{{.*}}::@pattn_xqa_decode_{{[0-9a-f]+}} {{.*}} args(%arg2 : memref<?x32x128xf16>, %arg3 : memref<?x?xi32>, %arg4 : memref<?xi32>, %[[FLAG]] : memref<1xi32>, %arg5 : memref<8x128xf32>, %arg0 : memref<?x16x8x64xi8>, %[[N]] : memref<1xf32>,
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels{{.*}}::@pattn_decode_{{[0-9a-f]+}} {{.*}} args(%arg2 : memref<?x32x128xf16>,
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels{{.*}}::@pattn_merge_{{[0-9a-f]+}} {{.*}} args(%[[FLAG]] : memref<1xi32>
// CHECK-NOT: pattn_fold_query
// CHECK: gpu.func @pattn_xqa_decode_{{[0-9a-f]+}}(%[[Q:[a-z0-9]+]]: memref<?x32x128xf16>, %{{[a-z0-9]+}}: memref<?x?xi32>, %{{[a-z0-9]+}}: memref<?xi32>, %[[G:[a-z0-9]+]]: memref<1xi32>, %[[T:[a-z0-9]+]]: memref<8x128xf32>, %{{[a-z0-9]+}}: memref<?x16x8x64xi8>, %[[KN:[a-z0-9]+]]: memref<1xf32>,
// CHECK:   memref.load %[[T]]
// CHECK:   gpu.barrier
// CHECK:   gpu.block_id  x
// CHECK:   gpu.block_id  y
// CHECK:   gpu.block_id  z
// CHECK:   memref.store %{{.*}}, %[[KN]][%{{.*}}] : memref<1xf32>
// CHECK:   memref.store %{{.*}}, %[[G]][%{{.*}}] : memref<1xi32>
// CHECK:   gpu.barrier
// The rows, two a warp (8 rows): the lane's table entries, then both
// rows' query elements, loaded before any is used; per row the largest
// binade over the warp, each element rounded once, the exponent's halves.
// CHECK:     memref.load %[[T]]
// CHECK:     memref.load %[[Q]]
// CHECK:     memref.load %[[Q]]
// CHECK-NOT: gpu.shuffle
// CHECK:     memref.load %[[Q]]
// CHECK:     gpu.shuffle  xor
// CHECK:     llvm.intr.fma
// CHECK:     arith.trunci %{{.*}} : i32 to i16
// CHECK:     arith.bitcast %{{.*}} : i16 to f16
// CHECK:     gpu.shuffle  xor
// CHECK:     arith.trunci %{{.*}} : i32 to i16
// CHECK:   arith.bitcast %{{.*}} : f16 to i16
// CHECK:   arith.extui %{{.*}} : i16 to i32
// CHECK-NOT: memref<?x32xi32>
// CHECK: gpu.func @pattn_decode_
// The fallback kernel reads the flag the XQA blocks stored.
// PORTABLE-LABEL: func.func @dynamic_table
// PORTABLE: gpu.launch_func async {{.*}} @pattn_kernels{{.*}}::@pattn_fold_query_
!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = channel>
!v = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = tensor>
func.func @dynamic_table(%kp: memref<?x16x8x64xi8>, %vp: memref<?x16x8x64xi8>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %ks: memref<8x128xf32>, %vs: memref<1xf32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x64xi8>) : !k
  %v = pattn.bind_cache storage(%vp : memref<?x16x8x64xi8>) : !v
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%v : !v)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) k_scale(%ks : memref<8x128xf32>) v_scale(%vs : memref<1xf32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

// A static table: N is a compile-time constant the XQA kernel loads (no
// reduction, no barrier before the rows), and nothing is guarded; the
// kernel reads the table and N as constants of its module.
// CHECK-LABEL: func.func @static_table
// CHECK-NOT: pattn_fold_query
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels{{.*}}::@pattn_xqa_decode_{{[0-9a-f]+}} {{.*}} args(%arg2 : memref<4x32x128xf16>, %arg3 : memref<4x8xi32>, %arg4 : memref<4xi32>, %{{.*}} : memref<8x128xf32>,
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels{{.*}}::@pattn_merge_
// CHECK: gpu.func @pattn_xqa_decode_{{[0-9a-f]+}}(%{{[a-z0-9]+}}: memref<4x32x128xf16>, %{{[a-z0-9]+}}: memref<4x8xi32>, %{{[a-z0-9]+}}: memref<4xi32>, %{{[a-z0-9]+}}: memref<8x128xf32>, %{{[a-z0-9]+}}: memref<?x16x8x64xi8>, %{{[a-z0-9]+}}: memref<1xf32>,
// CHECK:   %[[KN:.*]] = memref.get_global @__pattn_k_normalizer : memref<1xf32>
// CHECK:   memref.load %[[KN]]
// CHECK-NOT: gpu.barrier
// CHECK:     memref.load %{{.*}} : memref<8x128xf32>
// CHECK:     memref.load %{{.*}} : memref<4x32x128xf16>
// PORTABLE-LABEL: func.func @static_table
// PORTABLE: gpu.launch_func async {{.*}} @pattn_kernels{{.*}}::@pattn_fold_query_
memref.global "private" constant @k_scale : memref<8x128xf32> = dense<0.05>
!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = channel>
!v = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
func.func @static_table(%kp: memref<?x16x8x64xi8>, %vp: memref<?x16x8x128xi8>, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %vs: memref<1xf32>, %o: memref<4x32x128xf16>) {
  %ks = memref.get_global @k_scale : memref<8x128xf32>
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x64xi8>) : !k
  %v = pattn.bind_cache storage(%vp : memref<?x16x8x128xi8>) : !v
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !k) value(%v : !v)
      block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>)
      k_scale(%ks : memref<8x128xf32>) v_scale(%vs : memref<1xf32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

// A table of more than 2048 entries keeps its single-block normalizer (each
// XQA block would read all of it); the fold itself is still the decode's,
// which reads N and the flag the normalizer wrote.
// CHECK-LABEL: func.func @large_table
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels{{.*}}::@pattn_scale_normalizer_{{[0-9a-f]+}} blocks in (%c1{{.*}}, %c1{{.*}}, %c1{{.*}})
// CHECK-NOT: pattn_fold_query
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels{{.*}}::@pattn_xqa_decode_
// CHECK: gpu.func @pattn_xqa_decode_{{[0-9a-f]+}}(%{{[a-z0-9]+}}: memref<?x16x256xf16>, %{{[a-z0-9]+}}: memref<?x?xi32>, %{{[a-z0-9]+}}: memref<?xi32>, %[[G:[a-z0-9]+]]: memref<1xi32>, %{{[a-z0-9]+}}: memref<16x256xf32>, %{{[a-z0-9]+}}: memref<?x16x16x128xi8>, %[[KN:[a-z0-9]+]]: memref<1xf32>,
// CHECK:   memref.load %[[KN]]
// CHECK:   memref.load %[[G]]
// CHECK:   arith.cmpi eq, %{{.*}}, %c1_i32
!kl = !pattn.cache<block_size = 16, kv_heads = 16, head_dim = 256, encoding = i4, scale = channel>
func.func @large_table(%kp: memref<?x16x16x128xi8>, %q: memref<?x16x256xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %ks: memref<16x256xf32>, %o: memref<?x16x256xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x16x128xi8>) : !kl
  pattn.paged_attention query(%q : memref<?x16x256xf16>) key(%k : !kl) value(%k : !kl)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) k_scale(%ks : memref<16x256xf32>)
      v_scale(%ks : memref<16x256xf32>) outs(%o : memref<?x16x256xf16>) {num_heads = 16 : i64}
  return
}

// -----

// A fold into buffers of the caller (function arguments, which it may read
// after the call) is not fused: the fold kernel still writes them, and the
// XQA decode reads the folded query and its exponents.
// CHECK-LABEL: func.func @caller_buffers
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels{{.*}}::@pattn_fold_query_{{[0-9a-f]+}} {{.*}} args(%arg1 : memref<4x32x128xf16>, %arg6 : memref<8x128xf32>, %arg2 : memref<4x32x128xf16>, %arg7 : memref<1xf32>, %arg3 : memref<4x32xi32>)
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels{{.*}}::@pattn_xqa_decode_{{[0-9a-f]+}} {{.*}} args(%arg2 : memref<4x32x128xf16>, %arg4 : memref<4x8xi32>, %arg5 : memref<4xi32>, %arg3 : memref<4x32xi32>,
// PORTABLE-LABEL: func.func @caller_buffers
// PORTABLE: @pattn_fold_query_
!kt = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = tensor>
func.func @caller_buffers(%kp: memref<?x16x8x64xi8>, %q: memref<4x32x128xf16>, %qf: memref<4x32x128xf16>, %e: memref<4x32xi32>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %ks: memref<8x128xf32>, %n: memref<1xf32>, %o: memref<4x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x64xi8>) : !kt
  pattn.fold_query query(%q : memref<4x32x128xf16>) scales(%ks : memref<8x128xf32>) normalizer(%n : memref<1xf32>) outs(%qf : memref<4x32x128xf16>) exponents(%e : memref<4x32xi32>) {num_heads = 32 : i64}
  pattn.paged_attention query(%qf : memref<4x32x128xf16>) key(%k : !kt) value(%k : !kt)
      block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) k_scale(%n : memref<1xf32>) v_scale(%n : memref<1xf32>)
      query_exponents(%e : memref<4x32xi32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

// The fold is fused only into the op right after it: here the query is
// overwritten between the two, so the fold kernel must read it before.
// CHECK-LABEL: func.func @write_between
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels{{.*}}::@pattn_fold_query_
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels{{.*}}::@pattn_xqa_decode_
// PORTABLE-LABEL: func.func @write_between
!kw = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = tensor>
func.func @write_between(%kp: memref<?x16x8x64xi8>, %q: memref<4x32x128xf16>, %q2: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %ks: memref<8x128xf32>, %n: memref<1xf32>, %o: memref<4x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x64xi8>) : !kw
  %qf = memref.alloc() : memref<4x32x128xf16>
  %e = memref.alloc() : memref<4x32xi32>
  pattn.fold_query query(%q : memref<4x32x128xf16>) scales(%ks : memref<8x128xf32>) normalizer(%n : memref<1xf32>) outs(%qf : memref<4x32x128xf16>) exponents(%e : memref<4x32xi32>) {num_heads = 32 : i64}
  memref.copy %q2, %q : memref<4x32x128xf16> to memref<4x32x128xf16>
  pattn.paged_attention query(%qf : memref<4x32x128xf16>) key(%k : !kw) value(%k : !kw)
      block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) k_scale(%n : memref<1xf32>) v_scale(%n : memref<1xf32>)
      query_exponents(%e : memref<4x32xi32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64}
  memref.dealloc %qf : memref<4x32x128xf16>
  memref.dealloc %e : memref<4x32xi32>
  return
}

// -----

// With the normalizer fused, the decode stores the flag it computes: only
// into the op's own guard. An op guarded by another flag keeps the fold
// kernel (which computes N and the flag) and reads its guard as before.
// CHECK-LABEL: func.func @other_guard
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels{{.*}}::@pattn_fold_query_
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels{{.*}}::@pattn_xqa_decode_{{[0-9a-f]+}} {{.*}} args(%{{.*}}, %{{.*}}, %{{.*}}, %arg9 : memref<1xi32>,
// PORTABLE-LABEL: func.func @other_guard
!kg = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = tensor>
func.func @other_guard(%kp: memref<?x16x8x64xi8>, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %ks: memref<8x128xf32>, %n: memref<1xf32>, %ok: memref<1xi32>, %o: memref<4x32x128xf16>, %vs: memref<1xf32>, %g: memref<1xi32>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x64xi8>) : !kg
  %qf = memref.alloc() : memref<4x32x128xf16>
  %e = memref.alloc() : memref<4x32xi32>
  pattn.scale_normalizer scales(%ks : memref<8x128xf32>) outs(%n : memref<1xf32>) flag(%ok : memref<1xi32>) {softmax_scale = 8.838834764831845e-02 : f32}
  pattn.fold_query query(%q : memref<4x32x128xf16>) scales(%ks : memref<8x128xf32>) normalizer(%n : memref<1xf32>) outs(%qf : memref<4x32x128xf16>) exponents(%e : memref<4x32xi32>) {num_heads = 32 : i64}
  pattn.paged_attention query(%qf : memref<4x32x128xf16>) key(%k : !kg) value(%k : !kg)
      block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) k_scale(%n : memref<1xf32>) v_scale(%vs : memref<1xf32>)
      guard(%g : memref<1xi32>) query_exponents(%e : memref<4x32xi32>) outs(%o : memref<4x32x128xf16>) {guard_value = 1 : i32, num_heads = 32 : i64}
  memref.dealloc %qf : memref<4x32x128xf16>
  memref.dealloc %e : memref<4x32xi32>
  return
}
