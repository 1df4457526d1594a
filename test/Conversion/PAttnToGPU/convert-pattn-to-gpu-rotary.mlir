// RUN: pattn-opt %s --split-input-file --convert-pattn-to-gpu="chips=sm_90a" | FileCheck %s

// pattn.rotary on its own: a position check (one block per 2048 tokens, at
// most 32, each writing its verdict), then one warp per (token, output
// head), 4 per block, gated by the verdicts.
// First the dynamic sizes the verifier could not compare (SPEC §7): outs
// against input tokens, sin against cos rows, input tokens against seq_lens.
// CHECK-LABEL: func.func @rotary_alone
// CHECK-COUNT-3: func.call @pattnRuntimeRejectSizes
// CHECK:   %[[CHECKS:.*]] = arith.maxsi %{{.*}}, %c1{{.*}} : index
// CHECK:   %[[VERDICTS:.*]], %{{.*}} = gpu.alloc async [%{{.*}}] (%[[CHECKS]]) : memref<?xi32>
// CHECK:   gpu.launch_func async [%{{.*}}] @pattn_kernels_fp8::@pattn_check_positions_{{[0-9a-f]+}} blocks in (%[[CHECKS]], %c1{{.*}}, %c1{{.*}})
// CHECK:   gpu.launch_func async [%{{.*}}] @pattn_kernels_fp8::@pattn_rotary_{{[0-9a-f]+}} blocks in (%{{.*}}, %c8{{.*}}, %c1{{.*}}) threads in (%c128
// CHECK:   gpu.func @pattn_rotary_{{[0-9a-f]+}}
// The norm's sum of squares is f64, reduced over the warp in 32-bit halves.
// CHECK:     arith.mulf %{{.*}}, %{{.*}} : f64
// CHECK:     gpu.shuffle  xor
// CHECK:     math.sqrt %{{.*}} : f64
// CHECK:   gpu.func @pattn_check_positions_{{[0-9a-f]+}}
// CHECK:     memref.atomic_rmw ori %c2_i32
func.func @rotary_alone(%q: memref<?x32x128xf16>, %cos: memref<?x64xf16>, %sin: memref<?x64xf16>, %sl: memref<?xi32>, %w: memref<128xf16>, %o: memref<?x32x128xf16>) {
  pattn.rotary input(%q : memref<?x32x128xf16>) cos(%cos : memref<?x64xf16>) sin(%sin : memref<?x64xf16>) seq_lens(%sl : memref<?xi32>) norm_weight(%w : memref<128xf16>) outs(%o : memref<?x32x128xf16>)
  return
}

// -----

// K rotated into a temporary that only the cache write reads: the write
// kernel rotates the row itself (each warp its own row, into a shared f32
// row of its own, synchronized per warp), the slot check also checks the
// positions, and neither the rotary kernel nor the temporary is left.
// CHECK-LABEL: func.func @fused
// CHECK-NOT: alloc{{.*}}memref<?x8x128xf16>
// CHECK-NOT: pattn_rotary
// CHECK:   gpu.launch_func async [%{{.*}}] @pattn_kernels_fp8::@pattn_check_slots_{{[0-9a-f]+}} {{.*}} args(%{{.*}} : memref<?xi32>, %{{.*}} : memref<?x16x8x128xi8>, %[[K:.*]] : memref<?x8x128xf16>, %{{.*}} : memref<4096x64xf16>, %{{.*}} : memref<4096x64xf16>
// CHECK:   gpu.launch_func async [%{{.*}}] @pattn_kernels_fp8::@pattn_write_cache_{{[0-9a-f]+}}
// CHECK-NOT: memref.dealloc
// CHECK:   gpu.func @pattn_write_cache_{{[0-9a-f]+}}({{.*}}) workgroup(%{{.*}} : memref<4x128xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// CHECK-NOT: gpu.barrier
// CHECK:     nvvm.bar.warp.sync
// CHECK-NOT: gpu.barrier
// CHECK:   gpu.func @pattn_check_slots_{{[0-9a-f]+}}
// CHECK:     memref.atomic_rmw ori %c1_i32
// CHECK:     memref.atomic_rmw ori %c2_i32
func.func @fused(%k: memref<?x8x128xf16>, %cos: memref<4096x64xf16>, %sin: memref<4096x64xf16>, %pages: memref<?x16x8x128xi8>, %slots: memref<?xi32>, %sl: memref<?xi32>, %ks: memref<1xf32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %k, %c0 : memref<?x8x128xf16>
  %kr = memref.alloc(%n) : memref<?x8x128xf16>
  %c = pattn.bind_cache storage(%pages : memref<?x16x8x128xi8>) : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
  pattn.rotary input(%k : memref<?x8x128xf16>) cos(%cos : memref<4096x64xf16>) sin(%sin : memref<4096x64xf16>) seq_lens(%sl : memref<?xi32>) outs(%kr : memref<?x8x128xf16>)
  pattn.write_cache values(%kr : memref<?x8x128xf16>) into(%c : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>) slots(%slots : memref<?xi32>) scale(%ks : memref<1xf32>)
  memref.dealloc %kr : memref<?x8x128xf16>
  return
}

// -----

// Not fused: the rotated rows are the caller's (an argument), or something
// between the two writes what the rotary op reads (here its input, rotated
// in place): each op keeps its own kernels.
// CHECK-LABEL: func.func @into_an_argument
// CHECK:   @pattn_check_positions_
// CHECK:   @pattn_rotary_
// CHECK:   @pattn_check_slots_
// CHECK:   @pattn_write_cache_
// CHECK-LABEL: func.func @input_written_between
// CHECK:   gpu.alloc async [%{{.*}}] (%{{.*}}) : memref<?x8x128xf16>
// CHECK-COUNT-2: @pattn_rotary_
// CHECK:   @pattn_write_cache_
!c = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @into_an_argument(%k: memref<?x8x128xf16>, %cos: memref<4096x64xf16>, %sin: memref<4096x64xf16>, %pages: memref<?x16x8x256xi8>, %slots: memref<?xi32>, %sl: memref<?xi32>, %kr: memref<?x8x128xf16>) {
  %c = pattn.bind_cache storage(%pages : memref<?x16x8x256xi8>) : !c
  pattn.rotary input(%k : memref<?x8x128xf16>) cos(%cos : memref<4096x64xf16>) sin(%sin : memref<4096x64xf16>) seq_lens(%sl : memref<?xi32>) outs(%kr : memref<?x8x128xf16>)
  pattn.write_cache values(%kr : memref<?x8x128xf16>) into(%c : !c) slots(%slots : memref<?xi32>)
  return
}

func.func @input_written_between(%k: memref<?x8x128xf16>, %cos: memref<4096x64xf16>, %sin: memref<4096x64xf16>, %pages: memref<?x16x8x256xi8>, %slots: memref<?xi32>, %sl: memref<?xi32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %k, %c0 : memref<?x8x128xf16>
  %kr = memref.alloc(%n) : memref<?x8x128xf16>
  %c = pattn.bind_cache storage(%pages : memref<?x16x8x256xi8>) : !c
  pattn.rotary input(%k : memref<?x8x128xf16>) cos(%cos : memref<4096x64xf16>) sin(%sin : memref<4096x64xf16>) seq_lens(%sl : memref<?xi32>) outs(%kr : memref<?x8x128xf16>)
  pattn.rotary input(%k : memref<?x8x128xf16>) cos(%cos : memref<4096x64xf16>) sin(%sin : memref<4096x64xf16>) seq_lens(%sl : memref<?xi32>) outs(%k : memref<?x8x128xf16>)
  pattn.write_cache values(%kr : memref<?x8x128xf16>) into(%c : !c) slots(%slots : memref<?xi32>)
  memref.dealloc %kr : memref<?x8x128xf16>
  return
}
