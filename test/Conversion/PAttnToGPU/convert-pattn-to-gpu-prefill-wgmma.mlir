// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode=chips=sm_90a --convert-pattn-to-gpu=chips=sm_90a 2>/dev/null | FileCheck %s

// The prefill family on wgmma (sm_90a, #pattn.prefill_plan<kernel = wgmma>,
// planned where both caches are quantized): the block's four warps are one
// warpgroup, its 64 rows the M of wgmma.mma_async. The query tile is stored
// as core matrices ([channel / 8][row / 8][row % 8][channel % 8]) and
// handed to the async proxy before the block barrier. Per tile, the ring
// (raw rows copied as core matrices) is landed with a plain barrier, and
// the int4 cache decoded once into core-matrix tiles (a chunk per thread:
// key = chunk % 64, so consecutive threads fill consecutive rows of a core
// matrix), fenced and published. S = Q Kᵀ is one chain of head_dim / 16 =
// 8 m64n64k16 (the first with D = 0), committed and waited for; the masks
// and the online softmax are the mma.sync kernel's (the warp votes); P goes
// to the shared P tile (i32 words), is fenced and published; O += P V is
// one chain of keys / 16 = 4 m64n128k16 with V read MN-major (B <row>:
// imm-trans-b), waited for before the next tile.
// CHECK: gpu.func @pattn_prefill_
// CHECK: memref.store %{{.*}} : memref<16x8x8x8xf16, #gpu.address_space<workgroup>>
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: gpu.barrier
// CHECK: scf.for
// CHECK: nvvm.cp.async.wait.group
// CHECK-NEXT: gpu.barrier
// CHECK: vector.load %{{.*}} : memref<{{[0-9]+}}xi32, #gpu.address_space<workgroup>>, vector<4xi32>
// CHECK: vector.store %{{.*}} : memref<{{[0-9]+}}xi32, #gpu.address_space<workgroup>>, vector<4xi32>
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// CHECK-NEXT: gpu.barrier
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>, D[<f32>, <zero>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// CHECK-COUNT-7: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>, D[<f32>, <one>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: nvvm.vote.sync  all
// CHECK: nvvm.vote.sync  any
// CHECK: memref.store %{{.*}} : memref<{{[0-9]+}}xi32, #gpu.address_space<workgroup>>
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// CHECK-NEXT: gpu.barrier
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<f16>, <one>, <row>], B[<f16>, <one>, <row>]
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: scf.yield
!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = tensor>
func.func @prompt_i4(%kp: memref<?x16x8x64xi8>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %ks: memref<1xf32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x64xi8>) : !k
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%k : !k)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>)
      k_scale(%ks : memref<1xf32>) v_scale(%ks : memref<1xf32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, max_query_len = 2048 : i64}
  return
}
