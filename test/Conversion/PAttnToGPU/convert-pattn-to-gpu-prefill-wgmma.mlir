// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode=chips=sm_90a --convert-pattn-to-gpu=chips=sm_90a 2>/dev/null | FileCheck %s

// The prefill family on wgmma (sm_90a, #pattn.prefill_plan<kernel = wgmma>,
// planned where both caches are quantized): the block's eight warps are two
// warpgroups, each of its 64 rows the M of wgmma.mma_async (a 256-thread
// launch; the second warpgroup's query descriptor starts 8 core matrices,
// 1024 bytes, on). The query tile is stored
// as core matrices ([channel / 8][row / 8][row % 8][channel % 8]) and
// handed to the async proxy before the block barrier. The ring (raw rows
// copied as core matrices) is landed with a plain barrier, and the int4
// cache decoded once per tile into core-matrix tiles (key = chunk % 128, so
// consecutive threads fill consecutive rows of a core matrix), fenced and
// published. S = Q Kᵀ is one chain of head_dim / 16 = 8 m64n128k16 (the
// first with D = 0).
//
// Prologue (a block with tiles): tile 0 landed, K decoded, its S issued,
// V decoded under it (into buffer 0: fenced, published by the next
// barrier), S waited for, its softmax (the mma.sync kernel's: the warp
// votes) forms P; nothing to decay yet.
// CHECK: gpu.launch_func {{.*}}@pattn_prefill_{{[0-9a-f]+}} blocks in ({{.*}}) threads in (%c256,
// CHECK: gpu.func @pattn_prefill_
// CHECK: memref.store %{{.*}} : memref<16x16x8x8xf16, #gpu.address_space<workgroup>>
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: gpu.barrier
// CHECK: scf.if
// CHECK: nvvm.cp.async.wait.group 2
// CHECK-NEXT: gpu.barrier
// CHECK: vector.store %{{.*}} : memref<{{[0-9]+}}xi32, #gpu.address_space<workgroup>>, vector<4xi32>
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>, D[<f32>, <zero>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// CHECK-COUNT-7: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: vector.store %{{.*}} : memref<{{[0-9]+}}xi32, #gpu.address_space<workgroup>>, vector<4xi32>
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: nvvm.vote.sync  all
// CHECK-NOT: nvvm.vote.sync  any
// CHECK: scf.yield
// The loop from tile 1: tile i lands (the slot of tile i - 1 refilled:
// its V was decoded), K decoded; S(i) issued, then O += P(i - 1) V(i - 1)
// with P from registers (wgmma's register-A form, inline PTX: 8
// m64n128k16, V read MN-major, imm-trans-b 1); V(i) decoded under both;
// wait for S(i) only (group 1), the softmax of tile i under P V; then wait
// for P V and decay the accumulators (the warp vote any).
// CHECK: scf.for
// CHECK-NEXT: nvvm.cp.async.wait.group 2
// CHECK-NEXT: gpu.barrier
// CHECK: nvvm.cp.async.commit.group
// CHECK: vector.store %{{.*}} : memref<{{[0-9]+}}xi32, #gpu.address_space<workgroup>>, vector<4xi32>
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK-COUNT-8: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK-COUNT-8: llvm.inline_asm has_side_effects "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {$0, {{.*}}, $63}, {$128, $129, $130, $131}, $132, 1, 1, 1, 1;"
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK: vector.store %{{.*}} : memref<{{[0-9]+}}xi32, #gpu.address_space<workgroup>>, vector<4xi32>
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: nvvm.vote.sync  all
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: nvvm.vote.sync  any
// CHECK: scf.yield
// The last tile's P V (a block with tiles), after a barrier that
// publishes its decoded V.
// CHECK: scf.if
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK-COUNT-8: llvm.inline_asm has_side_effects "wgmma.mma_async.sync.aligned.m64n128k16
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: nvvm.cp.async.wait.group 0
!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = tensor>
func.func @prompt_i4(%kp: memref<?x16x8x64xi8>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %ks: memref<1xf32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x64xi8>) : !k
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%k : !k)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>)
      k_scale(%ks : memref<1xf32>) v_scale(%ks : memref<1xf32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, max_query_len = 2048 : i64}
  return
}
