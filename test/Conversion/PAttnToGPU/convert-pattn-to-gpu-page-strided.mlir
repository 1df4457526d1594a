// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode=chips=sm_90a --convert-pattn-to-gpu=chips=sm_90a 2>/dev/null | FileCheck %s --check-prefix=XQA
// RUN: pattn-opt %s --pattn-select-backend="chips=sm_80 force=portable" --pattn-plan-decode=chips=sm_80 --convert-pattn-to-gpu=chips=sm_80 | FileCheck %s --check-prefix=PORTABLE

// An engine's cache: one [blocks, 2, block_size, kv_heads, head_dim]
// allocation (vLLM's and FlashInfer's NHD layout), K and V the two halves
// of each block. The views are page-strided: pages 32768 bytes apart, K at
// offset 0, V at 16384 (bind_cache's rule, BufferRules' hasPagedLayout),
// and bound to K and V caches of different types, which do not overlap.
//
// On XQA, the paged copies read each side as one byte array that keeps the
// view's offset, a page 32768 bytes on.
// XQA-LABEL: func.func @engine_step
// XQA: gpu.launch_func {{.*}}@pattn_write_cache_{{.*}}memref<?xi64>, %{{.*}} : memref<?x16x8x128xi8, strided<[32768, 1024, 128, 1]>>
// XQA: gpu.launch_func {{.*}}@pattn_write_cache_{{.*}}memref<?xi64>, %{{.*}} : memref<?x16x8x128xi8, strided<[32768, 1024, 128, 1], offset: 16384>>
// XQA: gpu.func @pattn_xqa_decode_{{[0-9a-f]+}}(
// XQA-DAG: memref.reinterpret_cast %{{.*}} to offset: [0], sizes: [%{{.*}}], strides: [1] : memref<?x16x8x128xi8, strided<[32768, 1024, 128, 1]>> to memref<?xi8>
// XQA-DAG: memref.reinterpret_cast %{{.*}} to offset: [16384], sizes: [%{{.*}}], strides: [1] : memref<?x16x8x128xi8, strided<[32768, 1024, 128, 1], offset: 16384>> to memref<?xi8, strided<[1], offset: 16384>>
// XQA: nvgpu.device_async_copy {{.*}} : memref<?xi8, strided<[1], offset: 16384>> to memref<{{.*}}, #gpu.address_space<workgroup>>
//
// The portable kernels index the views through their layouts.
// PORTABLE-LABEL: func.func @engine_step
// PORTABLE: gpu.func @pattn_decode_{{[0-9a-f]+}}({{.*}}memref<?x16x8x128xi8, strided<[32768, 1024, 128, 1]>>{{.*}}memref<?x16x8x128xi8, strided<[32768, 1024, 128, 1], offset: 16384>>
!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
!v = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f8e4m3, scale = tensor>
func.func @engine_step(%kv: memref<?x2x16x8x128xi8>, %k_new: memref<?x8x128xf16>, %v_new: memref<?x8x128xf16>, %slots: memref<?xi64>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %ks: memref<1xf32>, %vs: memref<1xf32>, %o: memref<?x32x128xf16>) {
  %c0 = arith.constant 0 : index
  %blocks = memref.dim %kv, %c0 : memref<?x2x16x8x128xi8>
  %kp = memref.subview %kv[0, 0, 0, 0, 0] [%blocks, 1, 16, 8, 128] [1, 1, 1, 1, 1] : memref<?x2x16x8x128xi8> to memref<?x16x8x128xi8, strided<[32768, 1024, 128, 1]>>
  %vp = memref.subview %kv[0, 1, 0, 0, 0] [%blocks, 1, 16, 8, 128] [1, 1, 1, 1, 1] : memref<?x2x16x8x128xi8> to memref<?x16x8x128xi8, strided<[32768, 1024, 128, 1], offset: 16384>>
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x128xi8, strided<[32768, 1024, 128, 1]>>) : !k
  %v = pattn.bind_cache storage(%vp : memref<?x16x8x128xi8, strided<[32768, 1024, 128, 1], offset: 16384>>) : !v
  pattn.write_cache values(%k_new : memref<?x8x128xf16>) into(%k : !k) slots(%slots : memref<?xi64>) scale(%ks : memref<1xf32>)
  pattn.write_cache values(%v_new : memref<?x8x128xf16>) into(%v : !v) slots(%slots : memref<?xi64>) scale(%vs : memref<1xf32>)
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%v : !v)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64}
  return
}
