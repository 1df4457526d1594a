// Kernels are named by what they are: `<family>_<16 hex digits>`, a hash of
// the kernel's text, so the same kernel has the same name in every build
// (profiles stay comparable), and ops that build the same kernel share one:
// the two identical decodes below launch one decode and one merge kernel;
// the third (a 64-key sliding window) gets a decode kernel of its own and
// shares the merge.
// RUN: pattn-opt %s --pattn-select-backend="chips=sm_90a force=portable" --pattn-plan-decode=chips=sm_90a --convert-pattn-to-gpu=chips=sm_90a | FileCheck %s

// CHECK-LABEL: func.func @three_decodes(
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels_fp8::@[[DECODE:pattn_decode_[0-9a-f]+]]
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels_fp8::@[[MERGE:pattn_merge_[0-9a-f]+]]
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels_fp8::@[[DECODE]]
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels_fp8::@[[MERGE]]
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels_fp8::@[[OTHER:pattn_decode_[0-9a-f]+]]
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels_fp8::@[[MERGE]]
// CHECK: gpu.module @pattn_kernels_fp8
// CHECK-COUNT-1: gpu.func @[[DECODE]](
// CHECK-COUNT-1: gpu.func @[[MERGE]](
// CHECK-COUNT-1: gpu.func @[[OTHER]](
// CHECK-NOT: gpu.func

!c = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = tensor>
func.func @three_decodes(%kp: memref<?x16x2x64xi8>, %ks: memref<1xf32>, %q: memref<?x8x64xf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %o1: memref<?x8x64xf16>, %o2: memref<?x8x64xf16>, %o3: memref<?x8x64xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x2x64xi8>) : !c
  pattn.paged_attention query(%q : memref<?x8x64xf16>) key(%k : !c) value(%k : !c) block_table(%bt : memref<?x?xi32>) seq_lens(%lens : memref<?xi32>) k_scale(%ks : memref<1xf32>) v_scale(%ks : memref<1xf32>) outs(%o1 : memref<?x8x64xf16>) {num_heads = 8 : i64}
  pattn.paged_attention query(%q : memref<?x8x64xf16>) key(%k : !c) value(%k : !c) block_table(%bt : memref<?x?xi32>) seq_lens(%lens : memref<?xi32>) k_scale(%ks : memref<1xf32>) v_scale(%ks : memref<1xf32>) outs(%o2 : memref<?x8x64xf16>) {num_heads = 8 : i64}
  pattn.paged_attention query(%q : memref<?x8x64xf16>) key(%k : !c) value(%k : !c) block_table(%bt : memref<?x?xi32>) seq_lens(%lens : memref<?xi32>) k_scale(%ks : memref<1xf32>) v_scale(%ks : memref<1xf32>) outs(%o3 : memref<?x8x64xf16>) {num_heads = 8 : i64, window = 64 : i64}
  return
}
