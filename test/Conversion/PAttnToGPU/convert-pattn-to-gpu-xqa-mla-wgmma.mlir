// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode=chips=sm_90a --convert-pattn-to-gpu=chips=sm_90a 2>/dev/null | FileCheck %s

// The warpgroup (wgmma) lowering of a 128-head MLA decode on an sm_90a-only
// build (docs/Lowering.md, "The warpgroup MLA kernel"): fp8_ds_mla
// records, bf16 query, 64 heads per block (two blocks per token), a block
// of two warpgroups (256 threads, one block per SM) with 226944 bytes of
// dynamic shared memory (two decoded 32-key slots, two slots of partial
// logits), then the portable merge.
!fp8 = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>

// CHECK-LABEL: func.func @mla128
// CHECK: call @pattnRuntimeDeviceMultiprocessors()
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels_fp8::@pattn_xqa_mla_wgmma_decode_{{[0-9a-f]+}} blocks in ({{.*}}) threads in (%c256{{.*}}) dynamic_shared_memory_size %c226944_i32
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels_fp8::@pattn_merge_{{[0-9a-f]+}}
func.func @mla128(%p: memref<?x64x656xi8>, %q: memref<?x128x576xbf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %o: memref<?x128x512xbf16>) {
  %c = pattn.bind_cache storage(%p : memref<?x64x656xi8>) : !fp8
  pattn.mla_decode query(%q : memref<?x128x576xbf16>) cache(%c : !fp8) block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) outs(%o : memref<?x128x512xbf16>) {num_heads = 128 : i64}
  return
}

// The kernel: the prologue decodes tile 0 and hands it (and the query
// tile) to the async proxy; per tile S on m64n32 (all 32 keys; an scf.if
// on the warpgroup picks its half of the k-steps; the first k-step of each
// scale block's chain without accumulators), waited for before the
// softmax; P into the warpgroup's P tiles, its named barrier (128
// threads), then P V on m64n128 (one e4m3 scale block of 128 channels)
// with B read transposed (row: the decoded tile is channel-contiguous),
// committed; the next tile's decode into the other slot under it; the
// wait at the end of the iteration.
// CHECK: gpu.func @pattn_xqa_mla_wgmma_decode_{{[0-9a-f]+}}({{[^)]*}}) kernel attributes {nvvm.maxntid = array<i32: 256, 1, 1>, nvvm.minctasm = 1 : i32}
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: scf.for
// CHECK: gpu.barrier
// CHECK: scf.if
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 32, k = 16>, D[<f32>, <zero>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 32, k = 16>, D[<f32>, <one>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: nvvm.barrier id = {{.*}} number_of_threads = %c128_i32
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<f16>, <one>, <row>], B[<f16>, <one>, <row>]
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: scf.if
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: scf.yield
