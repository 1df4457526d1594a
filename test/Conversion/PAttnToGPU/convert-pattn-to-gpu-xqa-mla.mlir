// RUN: pattn-opt %s --pattn-select-backend=chip=sm_90a --pattn-plan-decode=chips=sm_90a --convert-pattn-to-gpu=chips=sm_90a 2>/dev/null | FileCheck %s
// RUN: pattn-opt %s --pattn-select-backend="chip=sm_90a force=portable" --pattn-plan-decode --convert-pattn-to-gpu=chips=sm_90a 2>/dev/null | FileCheck %s --check-prefix=PORT

// The tensor-core lowering of an MLA decode (fp8_ds_mla records, bf16
// query, 16 heads), following its #pattn.xqa_mla_plan (docs/Lowering.md,
// "The tensor-core MLA decode").
//
// Host: the split count comes from the SM count and host-known sizes (the
// XQA search over candidate counts), then a block per (split, token x
// 16-head group) of 128 threads with the plan's 80640 bytes of dynamic
// shared memory, and
// the portable merge over the 512 latent channels.
// CHECK-LABEL: func.func @mla
// CHECK:   call @pattnRuntimeDeviceMultiprocessors()
// CHECK:   %[[BEST:.*]]:2 = scf.for {{.*}} -> (index, index)
// CHECK:   gpu.launch_func async {{.*}} @pattn_kernels_fp8::@pattn_xqa_mla_decode_0 blocks in (%[[BEST]]#0, {{.*}}) threads in (%c128{{.*}}) dynamic_shared_memory_size %c80640_i32
// CHECK-SAME: memref<?x?x512xf32>
// CHECK:   gpu.launch_func async {{.*}} @pattn_kernels_fp8::@pattn_merge_1
//
// Kernel: 4 warps, 2 blocks per SM (80640 bytes each of the H200's
// 228 KiB). The layout: the query tile [16][576 + 8], the operand tile
// [32][576 + 8], 32 raw records, the logits [16][32 + 8], pages, live
// flags and per key 4 block scales + the rope scale.
// CHECK: gpu.func @pattn_xqa_mla_decode_0({{[^)]*}}) kernel attributes {nvvm.maxntid = array<i32: 128, 1, 1>, nvvm.minctasm = 2 : i32}
// CHECK:   memref.view {{.*}}[%c0{{.*}} to memref<16x584xf16, #gpu.address_space<workgroup>>
// Prologue: tile 0's pages, then 16-byte cp.async copies of whole records
// that zero-fill dead keys (a source size operand), one commit group.
// CHECK:   gpu.barrier
// CHECK:   nvgpu.device_async_copy {{.*}}, 16, {{.*}} {bypassL1} : memref<?x64x656xi8> to memref<80640xi8, #gpu.address_space<workgroup>>
// CHECK:   nvvm.cp.async.commit.group
// CHECK:   memref.view {{.*}}[%c18688{{.*}} to memref<32x584xf16, #gpu.address_space<workgroup>>
// The tile loop: wait, decode into the operand tile, issue the next copy.
// CHECK:   scf.for
// CHECK:     nvvm.cp.async.wait.group 0
// CHECK:     gpu.barrier
// CHECK:     nvvm.convert.f8x2.to.f16x2
// CHECK:     vector.store {{.*}} : memref<32x584xf16, #gpu.address_space<workgroup>>, vector<8xf16>
// CHECK:     gpu.barrier
// CHECK:     nvgpu.device_async_copy
// CHECK:     nvvm.cp.async.commit.group
// S = Q Kᵀ: the warp's 8 keys (ldmatrix of the operand tile) times the
// query tile, bf16 mma with fp32 accumulation (two chains).
// CHECK:     nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false} : memref<32x584xf16
// CHECK:     nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false} : memref<16x584xf16
// CHECK:     nvvm.mma.sync {{.*}}multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>
// CHECK:     gpu.barrier
// The online softmax (base 2), then P V from ldmatrix.trans of the same
// operand tile.
// CHECK:     llvm.nvvm.ex2.approx.f32
// CHECK:     nvvm.vote.sync any
// CHECK:     nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = true} : memref<32x584xf16
// CHECK:     nvvm.mma.sync
// CHECK:   scf.yield
// The split's partials: float2 stores of the unnormalized output.
// CHECK:   vector.store {{.*}} : memref<?x?x512xf32>, vector<2xf32>

// PORT-LABEL: func.func @mla
// PORT-NOT: pattn_xqa_mla_decode
// PORT: gpu.launch_func async {{.*}}@pattn_decode

!rec = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
func.func @mla(%c: memref<?x64x656xi8>, %q: memref<?x16x576xbf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %o: memref<?x16x512xbf16>) {
  %r = pattn.bind_cache storage(%c : memref<?x64x656xi8>) : !rec
  pattn.mla_decode query(%q : memref<?x16x576xbf16>) cache(%r : !rec)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>)
      outs(%o : memref<?x16x512xbf16>) {num_heads = 16 : i64}
  return
}
