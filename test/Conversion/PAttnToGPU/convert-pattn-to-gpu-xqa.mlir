// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode=chips=sm_90a --convert-pattn-to-gpu=chips=sm_90a 2>/dev/null | FileCheck %s

// The XQA lowering of one op (i8 K at a tensor scale, nvfp4 V with
// per-token scales, g = 4, D128), following its #pattn.xqa_plan
// (docs/Lowering.md, "The XQA decode").
//
// Host: the split count is chosen on the host from the device's SM count
// and host-known sizes only (a loop over candidate counts: waves x tiles
// per split), then one XQA block per (split, sequence x KV head) with the
// plan's dynamic shared memory, and the shared merge kernel.
// CHECK: func.func private @pattnRuntimeDeviceMultiprocessors() -> i32
// CHECK-LABEL: func.func @decode
// CHECK:   call @pattnRuntimeDeviceMultiprocessors()
// CHECK:   %[[BEST:.*]]:2 = scf.for {{.*}} iter_args({{.*}}) -> (index, index)
// CHECK:   gpu.launch_func async {{.*}} @pattn_kernels_fp8::@pattn_xqa_decode_{{[0-9a-f]+}} blocks in (%[[BEST]]#0, {{.*}}) threads in (%c128{{.*}}) dynamic_shared_memory_size %c63616_i32
// CHECK:   gpu.launch_func async {{.*}} @pattn_kernels_fp8::@pattn_merge_{{[0-9a-f]+}}
//
// Kernel: 128 threads, as many blocks per SM as the plan's shared memory
// allows (minctasm: 3). Everything in shared memory is in the plan's one
// dynamic window (so its shared_bytes is the whole per-block budget),
// including a key-liveness flag per key of the 4-stage ring of 64-key tiles.
// CHECK: gpu.func @pattn_xqa_decode_{{[0-9a-f]+}}({{[^)]*}}) kernel attributes {nvvm.maxntid = array<i32: 128, 1, 1>, nvvm.minctasm = 3 : i32}
// CHECK:   gpu.dynamic_shared_memory
// CHECK:   memref.reinterpret_cast %{{.*}} to offset: [0], sizes: [%{{.*}}], strides: [1] : memref<?x16x8x128xi8> to memref<?xi8>
// CHECK:   memref.view {{.*}} to memref<256xi32, #gpu.address_space<workgroup>>
// g = 4 rows (one token): the plan has rows = 8, keys as the mma's M.
// The query tile (8 rows), then its B fragments kept in registers, two
// registers a k-step.
// CHECK:   gpu.barrier
// CHECK-COUNT-8: nvgpu.ldmatrix {{.*}} {numTiles = 2 : i32, transpose = false} : memref<8x136xf16
// The ring's prologue: 16-byte cp.async copies that zero-fill dead keys
// (a source size operand), nvfp4 group scales (8 bytes a row) and per-token
// scales, one commit group per stage; the storage is read as one byte
// array (above), so a thread's copies differ by a page and a constant.
// CHECK:   nvgpu.device_async_copy %{{.*}}, 16, %{{.*}} {bypassL1} : memref<?xi8> to memref<63616xi8
// CHECK:   nvgpu.device_async_copy %{{.*}}, 8, %{{.*}} : memref<?x16x8x8xf8E4M3FN> to memref<63616xf8E4M3FN
// CHECK:   nvgpu.device_async_copy %{{.*}}, 1, %{{.*}} : memref<?x16x8xf32> to memref<15904xf32
// CHECK:   nvvm.cp.async.commit.group
// The tile loop: wait for the oldest stage, one barrier, refill the ring
// with the block-table entries loaded one iteration earlier (carried as i32
// iter_args), then load the next tile's entries before computing this one.
// CHECK:   scf.for {{.*}} iter_args({{.*}}) -> ({{(f32, )+}}{{(i32, )*}}i32)
// CHECK:     nvvm.cp.async.wait.group 2
// CHECK:     gpu.barrier
// CHECK:     nvgpu.device_async_copy
// CHECK:     nvvm.cp.async.commit.group
// CHECK:     memref.load %{{.*}} : memref<?x?xi32>
// CHECK-NOT: nvgpu.device_async_copy
// Sᵀ = K Qᵀ: raw K codes by ldmatrix, decoded in registers, the A
// operand of mma.sync (16 keys x 16 channels) against the query's B.
// CHECK:     nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false} : memref<64x72xf16
// CHECK:     nvvm.mma.sync {{.*}} shape = #nvvm.shape<m = 16, n = 8, k = 16>
// Interior steps skip the masks (a warp vote over the keys' liveness);
// the softmax runs in base 2 on ex2.approx and rescales only on a vote.
// CHECK:     nvvm.vote.sync  all
// CHECK:     llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK:     nvvm.vote.sync  any
// Pᵀ per 8 keys, transposed by movmatrix into the B operand of Oᵀ += Vᵀ Pᵀ.
// CHECK-COUNT-2: llvm.inline_asm has_side_effects "movmatrix.sync.aligned.m8n8.trans.b16 $0, $1;"
// Vᵀ: V codes by ldmatrix.trans, decoded in registers.
// CHECK:     nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = true} : memref<64x40xf16
// CHECK:     nvvm.mma.sync
// The key warps merge through shared memory once every copy has landed.
// CHECK:   nvvm.cp.async.wait.group 0
// CHECK:   gpu.barrier
// CHECK: gpu.func @pattn_merge_{{[0-9a-f]+}}
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
