// RUN: pattn-opt %s --convert-pattn-to-gpu=chips=sm_90a 2>/dev/null | FileCheck %s

// The wgmma prefill kernel over an f16 cache, from a written plan
// (--pattn-plan-decode plans mma.sync there, which measured faster): the
// ring's rows, copied as core matrices, are read in place. Per tile the
// copies are waited for, handed to the async proxy and published by one
// barrier; S = Q Kᵀ is one chain
// of head_dim / 16 = 8 m64n64k16 (the first with D = 0), committed and
// waited for; the masks and the online softmax are the mma.sync kernel's
// (the warp votes); P goes to the shared P tile (i32 words), is fenced and
// published; O += P V is one chain of keys / 16 = 4 m64n128k16 with V read
// MN-major (B <row>: imm-trans-b), waited for before the next tile.
// CHECK: gpu.func @pattn_prefill_
// CHECK: memref.store %{{.*}} : memref<16x8x8x8xf16, #gpu.address_space<workgroup>>
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: gpu.barrier
// CHECK: scf.for
// CHECK: nvvm.cp.async.wait.group
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
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
!h = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @prompt_f16(%kp: memref<?x16x8x256xi8>, %vp: memref<?x16x8x256xi8>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x256xi8>) : !h
  %v = pattn.bind_cache storage(%vp : memref<?x16x8x256xi8>) : !h
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !h) value(%v : !h)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, max_query_len = 4096 : i64,
        backend = #pattn.backend<xqa>, decode_plan = #pattn.xqa_plan<operand = f16, rows = 16, keys_per_tile = 64, stages = 3, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 109568, resident_blocks = [2], targets = [sm_90a]>, plan = #pattn.prefill_plan<kernel = wgmma, operand = f16, rows = 64, query_tile = 16, keys_per_tile = 64, stages = 2, keys_per_split = 4096, shared_bytes = 95744, resident_blocks = [2], targets = [sm_90a]>}
  return
}

