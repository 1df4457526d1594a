// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode=chips=sm_90a --convert-pattn-to-gpu=chips=sm_90a 2>/dev/null | FileCheck %s
// RUN: pattn-opt %s --pattn-select-backend="chips=sm_90a force=portable" --pattn-plan-decode --convert-pattn-to-gpu=chips=sm_90a 2>/dev/null | FileCheck %s --check-prefix=PORT

// The tensor-core lowering of an MLA decode (fp8_ds_mla records, bf16
// query, 16 heads), following its #pattn.xqa_mla_plan (docs/Lowering.md,
// "The tensor-core MLA decode").
//
// Host: the split count comes from the SM count and host-known sizes (the
// XQA search over candidate counts, 3 resident blocks per SM), then a block
// per (split, token x 16-head group) of 128 threads with the plan's 63680
// bytes of dynamic shared memory, and the portable merge over the 512
// latent channels.
// CHECK-LABEL: func.func @mla
// CHECK:   call @pattnRuntimeDeviceMultiprocessors()
// CHECK:   %[[BEST:.*]]:2 = scf.for {{.*}} -> (index, index)
// CHECK:   gpu.launch_func async {{.*}} @pattn_kernels_fp8::@pattn_xqa_mla_decode_{{[0-9a-f]+}} blocks in (%[[BEST]]#0, {{.*}}) threads in (%c128{{.*}}) dynamic_shared_memory_size %c63680_i32
// CHECK-SAME: memref<?x?x512xf32>
// CHECK:   gpu.launch_func async {{.*}} @pattn_kernels_fp8::@pattn_merge_{{[0-9a-f]+}}
//
// Kernel: 4 warps, 3 blocks per SM. The layout: the query tile [16][576 +
// 8] of 16-bit operands, two slots of 32 raw records, the logits [16][32 +
// 8], three slots of pages, the query rows' inverse normalizations.
// CHECK: gpu.func @pattn_xqa_mla_decode_{{[0-9a-f]+}}({{[^)]*}}) kernel attributes {nvvm.maxntid = array<i32: 128, 1, 1>, nvvm.minctasm = 3 : i32}
// CHECK:   memref.view {{.*}}[%c0{{.*}} to memref<16x584xf16, #gpu.address_space<workgroup>>
// The query: warp w loads rows 4w .. 4w + 3; per row, the largest
// magnitude of the e4m3 latent's channels (a warp reduction), its inverse
// power of two to shared memory, a barrier (lanes reread each other's
// stores), then each 16-channel group scaled into f16
// and permuted into the order the e4m3 decoder pairs channels (sm_90a's
// cvt pairs adjacent bytes: the thread's word holds logical columns 2t, 2t
// + 1, 2t + 8, 2t + 9). The bf16 rope stays as it is.
// CHECK:   gpu.shuffle  xor
// CHECK:   gpu.barrier
// CHECK:   arith.truncf {{.*}} : vector<16xf32> to vector<16xf16>
// CHECK:   vector.shuffle {{.*}} [0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15] : vector<16xf16>, vector<16xf16>
// Prologue: tile 0's pages, then 16-byte cp.async copies of whole records
// into raw slot 0, one commit group. Splits start on whole tiles and a
// 64-token page holds two, so a tile whose 32 keys end inside the split
// (tile end <= last) on a mapped page (its first key's entry >= 0) is one
// run of records of that page: the copies read a flat view of the cache
// from the tile's first byte (a per-thread offset plus a compile-time one
// per pass) and need no source size. Any other tile reads each key's entry
// and zero-fills dead keys (a source size operand).
// CHECK:   gpu.barrier
// CHECK:   %[[PAGE:.*]] = memref.load %{{.*}}[%{{.*}}] : memref<96xi32, #gpu.address_space<workgroup>>
// CHECK:   %[[WHOLE:.*]] = arith.cmpi sle, %{{.*}}, %{{.*}} : i32
// CHECK:   %[[MAPPED:.*]] = arith.cmpi sge, %[[PAGE]], %{{.*}} : i32
// CHECK:   %[[FAST:.*]] = arith.andi %[[WHOLE]], %[[MAPPED]] : i1
// CHECK:   scf.if %[[FAST]] {
// CHECK:     arith.index_cast %[[PAGE]] : i32 to index
// CHECK:     %[[FLAT:.*]] = memref.reinterpret_cast %{{.*}} to offset: [0], sizes: [%{{.*}}], strides: [1] : memref<?x64x656xi8> to memref<?xi8>
// CHECK:     nvgpu.device_async_copy %[[FLAT]][%{{.*}}], %{{.*}}[%{{.*}}], 16 {bypassL1} : memref<?xi8> to memref<63680xi8, #gpu.address_space<workgroup>>
// CHECK:   } else {
// CHECK:     memref.load %{{.*}}[%{{.*}}] : memref<96xi32, #gpu.address_space<workgroup>>
// CHECK:     nvgpu.device_async_copy {{.*}}, 16, {{.*}} {bypassL1} : memref<?x64x656xi8> to memref<63680xi8, #gpu.address_space<workgroup>>
// CHECK:   nvvm.cp.async.commit.group
// The tile loop: wait for tile i, then copy tile i + 1 into the other slot
// (the same two ways).
// CHECK:   scf.for
// CHECK:     nvvm.cp.async.wait.group 0
// CHECK:     gpu.barrier
// CHECK:     arith.cmpi sle
// CHECK:     nvgpu.device_async_copy {{.*}}, 16 {bypassL1}
// CHECK:     } else {
// CHECK:     nvgpu.device_async_copy {{.*}}, 16, {{.*}} {bypassL1}
// CHECK:     nvvm.cp.async.commit.group
// S = Q Kᵀ: per k-step, one word of the B key's record decoded straight
// into the B registers (two e4m3 pairs), the query by ldmatrix, f16 mma
// with fp32 accumulation; the bf16 rope as bf16 mma on the raw words.
// CHECK:     nvvm.convert.f8x2.to.f16x2
// CHECK:     nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false} : memref<16x584xf16
// CHECK:     nvvm.mma.sync {{.*}}shape = #nvvm.shape<m = 16, n = 8, k = 16>
// CHECK:     nvvm.mma.sync {{.*}}multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>
// CHECK:     gpu.barrier
// The online softmax (base 2; the warp votes on moving the maxima first),
// the value-block exponent's window (the accumulators move with the
// maxima in one branch), then P V: the same channels of keys 2t and 2t + 1
// gathered by one prmt into a B register, decoded, f16 mma accumulating
// straight into the loop's accumulators.
// CHECK:     nvvm.vote.sync any
// CHECK:     llvm.nvvm.ex2.approx.ftz.f32
// CHECK:     arith.cmpi sgt, {{.*}}, %c5_i32 : i32
// CHECK:     scf.if
// CHECK:       scf.if
// CHECK:         gpu.shuffle  xor
// CHECK:     nvvm.prmt <default>
// CHECK:     nvvm.convert.f8x2.to.f16x2
// CHECK:     nvvm.mma.sync
// CHECK:   scf.yield
// The split's partials: 8 contiguous channels per thread and chunk, as
// float4 stores of the unnormalized output.
// CHECK:   vector.store {{.*}} : memref<?x?x512xf32>, vector<4xf32>

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
