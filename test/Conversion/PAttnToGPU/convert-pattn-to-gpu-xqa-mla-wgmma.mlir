// RUN: pattn-opt %s --pattn-select-backend=chip=sm_90a --pattn-plan-decode=chips=sm_90a --convert-pattn-to-gpu=chips=sm_90a 2>/dev/null | FileCheck %s

// The warpgroup (wgmma) lowerings of an MLA decode on an sm_90a-only build
// (docs/Lowering.md, "The warpgroup MLA kernels"): fp8_ds_mla records, bf16
// query.
!fp8 = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>

// 16 heads: the key-rows kernel. A block of two warpgroups (256 threads,
// one per SM) per (split, token x 16 heads) with 194400 bytes of dynamic
// shared memory, then the portable merge.
// CHECK-LABEL: func.func @mla16
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels_fp8::@pattn_xqa_mla_wgmma_keys_decode_0 blocks in ({{.*}}) threads in (%c256{{.*}}) dynamic_shared_memory_size %c194400_i32
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels_fp8::@pattn_merge_1
func.func @mla16(%p: memref<?x64x656xi8>, %q: memref<?x16x576xbf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %o: memref<?x16x512xbf16>) {
  %c = pattn.bind_cache storage(%p : memref<?x64x656xi8>) : !fp8
  pattn.mla_decode query(%q : memref<?x16x576xbf16>) cache(%c : !fp8) block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) outs(%o : memref<?x16x512xbf16>) {num_heads = 16 : i64}
  return
}

// 128 heads: the head-rows kernel, 64 heads per block (two blocks per
// token), 216704 bytes (two decoded 32-key slots).
// CHECK-LABEL: func.func @mla128
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels_fp8::@pattn_xqa_mla_wgmma_decode_2 blocks in ({{.*}}) threads in (%c256{{.*}}) dynamic_shared_memory_size %c216704_i32
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels_fp8::@pattn_merge_3
func.func @mla128(%p: memref<?x64x656xi8>, %q: memref<?x128x576xbf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %o: memref<?x128x512xbf16>) {
  %c = pattn.bind_cache storage(%p : memref<?x64x656xi8>) : !fp8
  pattn.mla_decode query(%q : memref<?x128x576xbf16>) cache(%c : !fp8) block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) outs(%o : memref<?x128x512xbf16>) {num_heads = 128 : i64}
  return
}

// The key-rows kernel: the shared-window address for the descriptors; per
// tile the decode, its hand-over to the async proxy and a block barrier;
// Sᵀ = K Qᵀ on m64n16 (the first k-step of a chain without accumulators),
// split over the two warpgroups (an scf.if on the warpgroup), waited for;
// after the softmax, Pᵀ into shared memory, the warpgroup's named barrier
// (128 threads), and Oᵀ += Vᵀ Pᵀ with A read transposed (col).
// CHECK: gpu.func @pattn_xqa_mla_wgmma_keys_decode_0({{[^)]*}}) kernel attributes {nvvm.maxntid = array<i32: 256, 1, 1>, nvvm.minctasm = 1 : i32}
// CHECK: memref.extract_aligned_pointer_as_index
// CHECK: scf.for
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: gpu.barrier
// CHECK: scf.if
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 16, k = 16>, D[<f32>, <zero>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 16, k = 16>, D[<f32>, <one>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: nvvm.barrier id = {{.*}} number_of_threads = %c128_i32
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 16, k = 16>, D[<f32>, <one>], A[<f16>, <one>, <col>], B[<f16>, <one>, <col>]
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0

// The head-rows kernel: S on m64n16 per warpgroup (16 of the 32 keys),
// P V on m64n128 (one e4m3 scale block of 128 channels) with B read
// transposed (row: the decoded tile is channel-contiguous).
// CHECK: gpu.func @pattn_xqa_mla_wgmma_decode_2({{[^)]*}}) kernel attributes {nvvm.maxntid = array<i32: 256, 1, 1>, nvvm.minctasm = 1 : i32}
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 16, k = 16>, D[<f32>, <zero>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<f16>, <one>, <row>], B[<f16>, <one>, <row>]
