// The pattn-compile pipeline lowers the NVGPU ops that tensor-core kernels
// use (cp.async, ldmatrix, mma.sync m16n8k16) through convert-nvgpu-to-nvvm;
// without that pass the fragments stay unrealized casts and serialization
// fails. pattn-opt registers everything the lowering needs.
// RUN: pattn-opt %s --pattn-compile="chips=sm_80 format=isa" | FileCheck %s

// CHECK: gpu.binary @kernels
// CHECK-SAME: .target sm_80
// CHECK-SAME: cp.async.ca.shared.global
// CHECK-SAME: cp.async.commit_group
// CHECK-SAME: cp.async.wait_group
// CHECK-SAME: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// CHECK-SAME: ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16
// CHECK-SAME: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32

module attributes {gpu.container_module} {
  gpu.module @kernels [#nvvm.target<chip = "sm_80", features = "+ptx80">] {
    gpu.func @tensor_core(%g: memref<256xf16>, %out: memref<2xf32>)
        workgroup(%s: memref<16x16xf16, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %t = nvgpu.device_async_copy %g[%c0], %s[%c0, %c0], 8 : memref<256xf16> to memref<16x16xf16, #gpu.address_space<workgroup>>
      %group = nvgpu.device_async_create_group %t
      nvgpu.device_async_wait %group
      %a = nvgpu.ldmatrix %s[%c0, %c0] {numTiles = 4 : i32, transpose = false} : memref<16x16xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
      %b = nvgpu.ldmatrix %s[%c0, %c0] {numTiles = 2 : i32, transpose = true} : memref<16x16xf16, #gpu.address_space<workgroup>> -> vector<2x2xf16>
      %acc = arith.constant dense<0.0> : vector<2x2xf32>
      %d = nvgpu.mma.sync (%a, %b, %acc) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
      %row = vector.extract %d[0] : vector<2xf32> from vector<2x2xf32>
      vector.store %row, %out[%c0] : memref<2xf32>, vector<2xf32>
      gpu.return
    }
  }
}
