// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode="chips=sm_90a xqa-copy-warp=true" --convert-pattn-to-gpu=chips=sm_90a 2>/dev/null | FileCheck %s
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_80 --pattn-plan-decode="chips=sm_80 xqa-copy-warp=true" --convert-pattn-to-gpu=chips=sm_80 2>/dev/null | FileCheck %s --check-prefix=SM80
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode="chips=sm_90a xqa-copy-warp=true" 2>/dev/null | FileCheck %s --check-prefix=PLAN

// The XQA decode with a copy warp (--pattn-plan-decode's xqa-copy-warp):
// the plan's 160 threads are the four compute warps and a fifth that looks
// up and copies every tile into the ring; a full and an empty mbarrier per
// stage replace the block barrier of each tile (docs/Lowering.md, "The XQA
// decode"). Same op as convert-pattn-to-gpu-xqa.mlir.
// PLAN: #pattn.xqa_plan<{{.*}}resident_blocks = [3], threads = 160,
//
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels_fp8::@pattn_xqa_decode_{{[0-9a-f]+}} blocks in ({{.*}}) threads in (%c160{{.*}})
// CHECK: gpu.func @pattn_xqa_decode_{{[0-9a-f]+}}({{[^)]*}}) kernel attributes {nvvm.maxntid = array<i32: 160, 1, 1>, nvvm.minctasm = 3 : i32}
// Thread 0 initializes the 4 stages' barriers: full counts the copy
// warp's 32 lanes, empty the 128 compute threads; then one block barrier.
// CHECK: llvm.inline_asm has_side_effects "mbarrier.init.shared.b64 [$0], $1;", "r,r,~{memory}" %{{.*}}, %c32_i32
// CHECK: llvm.inline_asm has_side_effects "mbarrier.init.shared.b64 [$0], $1;", "r,r,~{memory}" %{{.*}}, %c128_i32
// CHECK: gpu.barrier
// The copy warp: the next tile's block-table entries, then (from the
// fifth tile on) a wait for the stage's release, the tile's cp.async
// copies, and the lane's two arrivals at the stage's full barrier (one
// completed by its copies landing).
// CHECK: scf.for {{.*}} -> (i32, i32, i32, i32) {
// CHECK:   memref.load %{{.*}} : memref<?x?xi32>
// CHECK:   mbarrier.try_wait.parity.shared.b64
// CHECK:   nvgpu.device_async_copy
// CHECK:   llvm.inline_asm has_side_effects "cp.async.mbarrier.arrive.shared.b64 [$0];"
// CHECK:   mbarrier.arrive.shared.b64
// CHECK-NOT: nvvm.cp.async.commit.group
// The compute warps: the query tile under a barrier of theirs alone
// (named barrier 1 of 128 threads), then per tile a wait for the stage's
// bytes, the steps and the release; no block barrier in the loop.
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32
// CHECK: scf.for
// CHECK:   mbarrier.try_wait.parity.shared.b64
// CHECK-NOT: gpu.barrier
// CHECK:   nvvm.mma.sync
// CHECK-NOT: gpu.barrier
// CHECK:   mbarrier.arrive.shared.b64
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32
// CHECK: gpu.func @pattn_merge_{{[0-9a-f]+}}
//
// sm_80 has no mbarrier.try_wait: the waits poll test_wait.
// SM80: gpu.func @pattn_xqa_decode_{{[0-9a-f]+}}({{[^)]*}}) kernel attributes {nvvm.maxntid = array<i32: 160, 1, 1>
// SM80-NOT: try_wait
// SM80: mbarrier.test_wait.parity.shared.b64
// SM80-NOT: try_wait
!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
!v = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = nvfp4, scale = token>
func.func @decode(%kp: memref<?x16x8x128xi8>, %vp: memref<?x16x8x64xi8>, %vg: memref<?x16x8x8xf8E4M3FN>, %vt: memref<?x16x8xf32>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %ks: memref<1xf32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x128xi8>) : !k
  %v = pattn.bind_cache storage(%vp : memref<?x16x8x64xi8>) group_scales(%vg : memref<?x16x8x8xf8E4M3FN>) token_scales(%vt : memref<?x16x8xf32>) : !v
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%v : !v)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) k_scale(%ks : memref<1xf32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64}
  return
}
