// RUN: pattn-opt %s --pass-pipeline='builtin.module(gpu.module(convert-gpu-to-nvvm,pattn-extern-dynamic-shared-memory))' | FileCheck %s
// RUN: pattn-opt %s --pattn-compile="chips=sm_90a format=isa" | FileCheck %s --check-prefix=PTX

// convert-gpu-to-nvvm makes the dynamic window an internal zero-length
// global; NVPTX would print that as a one-byte static variable that ptxas
// places *before* the kernel's static arrays, so that dynamic offsets alias
// them. The pass makes it an external declaration: `.extern ... []`.
// Static shared arrays and zero-length globals in other address spaces are
// left alone.

// CHECK-DAG: llvm.mlir.global external @__dynamic_shmem__0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
// CHECK-DAG: llvm.mlir.global internal @global_zero_length() {addr_space = 1 : i32} : !llvm.array<0 x i8>
// CHECK-DAG: llvm.mlir.global internal @static_shared() {addr_space = 3 : i32} : !llvm.array<4 x i32>

// PTX-DAG: .extern .shared .align 16 .b8 __dynamic_shmem__0[];
// PTX-DAG: .shared .align 4 .b8 __wg_window_and_ring_0[64];

module attributes {gpu.container_module} {
  gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx80">] {
    llvm.mlir.global internal @global_zero_length() {addr_space = 1 : i32} : !llvm.array<0 x i8>
    llvm.mlir.global internal @static_shared() {addr_space = 3 : i32} : !llvm.array<4 x i32>
    gpu.func @window_and_ring(%out: memref<16xi32>)
        workgroup(%ring: memref<16xi32, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : i32
      %tid = gpu.thread_id x
      %window = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
      %view = memref.view %window[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<16xi32, #gpu.address_space<workgroup>>
      memref.store %c1, %view[%c0] : memref<16xi32, #gpu.address_space<workgroup>>
      memref.store %c1, %ring[%c0] : memref<16xi32, #gpu.address_space<workgroup>>
      gpu.barrier
      %x = memref.load %view[%tid] : memref<16xi32, #gpu.address_space<workgroup>>
      %y = memref.load %ring[%tid] : memref<16xi32, #gpu.address_space<workgroup>>
      %sum = arith.addi %x, %y : i32
      memref.store %sum, %out[%c0] : memref<16xi32>
      gpu.return
    }
  }
}
