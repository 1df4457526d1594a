// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode=chips=sm_80,sm_89,sm_90a --convert-pattn-to-gpu=chips=sm_80,sm_89,sm_90a 2>/dev/null | FileCheck %s
// The conversion never plans: without --pattn-plan-decode it stops at the
// op (convert-pattn-to-gpu-plans.mlir).
// sm_90 (no wgmma) and sm_90a share a compute capability: a 9.0 device
// runs sm_90a's module, the arch-specific one.
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode=chips=sm_90,sm_90a --convert-pattn-to-gpu=chips=sm_90,sm_90a 2>/dev/null | FileCheck %s --check-prefix=HOPPER
// A chip alone in its conversion class keeps the class's module.
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode=chips=sm_80,sm_90a --convert-pattn-to-gpu=chips=sm_80,sm_90a 2>/dev/null | FileCheck %s --check-prefix=ALONE

// A 128-head MLA decode built for sm_80, sm_89 and sm_90a: the plan is the
// mma.sync kernel (16 heads per block) and chip_plans give sm_90a the
// warpgroup (wgmma) kernel. sm_89 and sm_90a share a conversion class
// (hardware e4m3 conversion), but their kernels differ, so sm_90a gets a
// module of its own: pattn_kernels (sm_80), pattn_kernels_fp8 (sm_89),
// pattn_kernels_sm_90a. Each module's branch of the host dispatch picks its
// own split count (the SM count times the blocks resident per SM: two
// mma.sync blocks on sm_80's 164 KiB, one on sm_89's 100 KiB, one warpgroup
// block) and workspace, and launches its kernel: 128 threads per block and
// 8 blocks per token, or 256 threads and 2 blocks per token.
!fp8 = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>

// CHECK-LABEL: func.func @mla128
// CHECK: %[[ARCH:.*]] = call @pattnRuntimeDeviceArch() : () -> i32
// CHECK: %[[EQ90:.*]] = arith.cmpi eq, %[[ARCH]], %c90_i32{{.*}} : i32
// CHECK: %[[CHOICE:.*]] = arith.select %[[EQ90]], %c2_i32{{.*}}, %{{.*}} : i32
// CHECK: scf.if
// CHECK: func.call @pattnRuntimeDeviceMultiprocessors()
// CHECK: %[[SM80:.*]] = arith.index_cast %{{.*}} : i32 to index
// CHECK-NEXT: %[[TWO:.*]] = arith.constant 2 : index
// CHECK-NEXT: arith.muli %[[SM80]], %[[TWO]] : index
// CHECK: gpu.alloc async
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels::@pattn_xqa_mla_decode_{{[0-9a-f]+}} blocks in ({{.*}}) threads in (%c128{{.*}}) dynamic_shared_memory_size %c63680_i32
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels::@pattn_merge_{{[0-9a-f]+}}
// CHECK: gpu.dealloc async
// CHECK: } else {
// CHECK: scf.if
// CHECK: func.call @pattnRuntimeDeviceMultiprocessors()
// CHECK: %[[SM89:.*]] = arith.index_cast %{{.*}} : i32 to index
// CHECK-NEXT: %[[ONE89:.*]] = arith.constant 1 : index
// CHECK-NEXT: arith.muli %[[SM89]], %[[ONE89]] : index
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels_fp8::@pattn_xqa_mla_decode_{{[0-9a-f]+}} blocks in ({{.*}}) threads in (%c128{{.*}}) dynamic_shared_memory_size %c63680_i32
// CHECK: } else {
// CHECK: func.call @pattnRuntimeDeviceMultiprocessors()
// CHECK: %[[SM90:.*]] = arith.index_cast %{{.*}} : i32 to index
// CHECK-NEXT: %[[ONE90:.*]] = arith.constant 1 : index
// CHECK-NEXT: arith.muli %[[SM90]], %[[ONE90]] : index
// CHECK: gpu.alloc async
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels_sm_90a::@pattn_xqa_mla_wgmma_decode_{{[0-9a-f]+}} blocks in ({{.*}}) threads in (%c256{{.*}}) dynamic_shared_memory_size %c226944_i32
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels_sm_90a::@pattn_merge_{{[0-9a-f]+}}
// CHECK: gpu.dealloc async

// CHECK: gpu.module @pattn_kernels [#nvvm.target<O = 3, chip = "sm_80", features = "+ptx80">]
// CHECK-NOT: nvvm.wgmma
// CHECK: gpu.module @pattn_kernels_fp8 [#nvvm.target<O = 3, chip = "sm_89", features = "+ptx81">]
// CHECK-NOT: nvvm.wgmma
// CHECK: gpu.module @pattn_kernels_sm_90a [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">]
// CHECK: gpu.func @pattn_xqa_mla_wgmma_decode_{{[0-9a-f]+}}({{[^)]*}}) kernel attributes {nvvm.maxntid = array<i32: 256, 1, 1>, nvvm.minctasm = 1 : i32}
// CHECK: nvvm.wgmma.mma_async

// ALONE: gpu.launch_func async {{.*}} @pattn_kernels::@pattn_xqa_mla_decode_{{[0-9a-f]+}} blocks in ({{.*}}) threads in (%c128{{.*}})
// ALONE: gpu.launch_func async {{.*}} @pattn_kernels_fp8::@pattn_xqa_mla_wgmma_decode_{{[0-9a-f]+}} blocks in ({{.*}}) threads in (%c256{{.*}})
// ALONE: gpu.module @pattn_kernels [#nvvm.target<O = 3, chip = "sm_80", features = "+ptx80">]
// ALONE-NOT: nvvm.wgmma
// ALONE: gpu.module @pattn_kernels_fp8 [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">]
// ALONE: nvvm.wgmma.mma_async
// HOPPER: %[[ARCH:.*]] = call @pattnRuntimeDeviceArch() : () -> i32
// HOPPER: %[[EQ90:.*]] = arith.cmpi eq, %[[ARCH]], %c90_i32{{.*}} : i32
// HOPPER: %[[CHOICE:.*]] = arith.select %[[EQ90]], %c1_i32{{.*}}, %{{.*}} : i32
// HOPPER-NOT: arith.select
// HOPPER: arith.cmpi eq, %[[CHOICE]], %c0_i32
// HOPPER: gpu.launch_func async {{.*}} @pattn_kernels_fp8::@pattn_xqa_mla_decode_{{[0-9a-f]+}}
// HOPPER: gpu.launch_func async {{.*}} @pattn_kernels_sm_90a::@pattn_xqa_mla_wgmma_decode_{{[0-9a-f]+}}
// HOPPER: gpu.module @pattn_kernels_fp8 [#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">]
// HOPPER: gpu.module @pattn_kernels_sm_90a [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">]
func.func @mla128(%p: memref<?x64x656xi8>, %q: memref<?x128x576xbf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %o: memref<?x128x512xbf16>) {
  %c = pattn.bind_cache storage(%p : memref<?x64x656xi8>) : !fp8
  pattn.mla_decode query(%q : memref<?x128x576xbf16>) cache(%c : !fp8) block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) outs(%o : memref<?x128x512xbf16>) {num_heads = 128 : i64}
  return
}
