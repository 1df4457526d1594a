// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode="chips=sm_90a prompt-kernel=prefill-wgmma" --convert-pattn-to-gpu=chips=sm_90a 2>/dev/null | FileCheck %s

// The wgmma prefill kernel over an f16 cache (prompt-kernel=prefill-wgmma;
// the default plans mma.sync there, which measured faster): the ring's
// rows, copied as core matrices, are read in place. Each landing waits for
// the copies, hands them to the async proxy and publishes them with one
// barrier; nothing is decoded. Since iteration i's P V reads V of tile
// i - 1 in its ring slot until the iteration's last wait, the copies that
// refill that slot are issued after that wait.
// CHECK: gpu.func @pattn_prefill_
// CHECK: scf.if
// CHECK: nvvm.cp.async.wait.group 2
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// CHECK-NEXT: gpu.barrier
// CHECK: nvvm.cp.async.commit.group
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-8: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: scf.for
// CHECK-NEXT: nvvm.cp.async.wait.group 2
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK-COUNT-8: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: llvm.inline_asm has_side_effects "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{.*}}, 1, 1, 1, 1;"
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: nvvm.vote.sync  any
// CHECK: nvgpu.device_async_copy
// CHECK: nvvm.cp.async.commit.group
// CHECK: scf.yield
!h = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @prompt_f16(%kp: memref<?x16x8x256xi8>, %vp: memref<?x16x8x256xi8>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x256xi8>) : !h
  %v = pattn.bind_cache storage(%vp : memref<?x16x8x256xi8>) : !h
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !h) value(%v : !h)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, max_query_len = 4096 : i64}
  return
}
