// RUN: pattn-opt %s --convert-pattn-to-gpu="chips=sm_80,sm_86,sm_90a,sm_120a" | FileCheck %s
// RUN: pattn-opt %s --convert-pattn-to-gpu="chips=sm_90a" | FileCheck %s --check-prefix=ONE
// RUN: pattn-opt %s --convert-pattn-to-gpu="chips=sm_80,sm_90a hardware-conversions=false" | FileCheck %s --check-prefix=SOFT
// RUN: not pattn-opt %s --convert-pattn-to-gpu="chips=sm_80,sm_70" 2>&1 | FileCheck %s --check-prefix=BAD

// The chips are grouped by conversion class of the target table: sm_80 and
// sm_86 decode e4m3 with bit tricks, sm_90a and sm_120a with
// cvt.rn.f16x2.e4m3x2. Each class gets its own kernel module carrying its
// chips' targets, and the host asks the runtime for the device's compute
// capability once and launches the kernels of its class.
// CHECK-LABEL: func.func @decode
// CHECK: %[[ARCH:.*]] = call @pattnRuntimeDeviceArch() : () -> i32
// CHECK: %[[OLD:.*]] = arith.cmpi ult, %[[ARCH]], %c89_i32 : i32
// CHECK: scf.if %[[OLD]] {
// CHECK:   gpu.launch_func async {{.*}} @pattn_kernels::@pattn_decode_0
// CHECK:   gpu.launch_func async {{.*}} @pattn_kernels::@pattn_merge_1
// CHECK: } else {
// CHECK:   gpu.launch_func async {{.*}} @pattn_kernels_fp8::@pattn_decode_0
// CHECK:   gpu.launch_func async {{.*}} @pattn_kernels_fp8::@pattn_merge_1
// CHECK: gpu.module @pattn_kernels [#nvvm.target<O = 3, chip = "sm_80", features = "+ptx80">, #nvvm.target<O = 3, chip = "sm_86", features = "+ptx80">]
// CHECK-NOT: nvvm.convert.f8x2.to.f16x2
// CHECK: gpu.module @pattn_kernels_fp8 [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">, #nvvm.target<O = 3, chip = "sm_120a", features = "+ptx87">]
// CHECK: nvvm.convert.f8x2.to.f16x2 %{{.*}} : vector<2xi8>(f8E4M3FN) -> vector<2xf16>

// One class needs no dispatch.
// ONE-NOT: pattnRuntimeDeviceArch
// ONE: gpu.module @pattn_kernels_fp8 [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">]
// ONE-NOT: gpu.module

// Without hardware conversions every chip shares the bit-trick module.
// SOFT-NOT: pattnRuntimeDeviceArch
// SOFT: gpu.module @pattn_kernels [#nvvm.target<O = 3, chip = "sm_80", features = "+ptx80">, #nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">]
// SOFT-NOT: nvvm.convert
// SOFT-NOT: gpu.module

// BAD: error: unsupported chip 'sm_70'; supported chips: sm_80, sm_86, sm_87, sm_89, sm_90, sm_90a, sm_100, sm_100a, sm_120, sm_120a
!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f8e4m3, scale = tensor>
!v = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = token>
func.func @decode(%kp: memref<?x16x8x128xi8>, %vp: memref<?x16x8x128xi8>, %vt: memref<?x16x8xf32>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %ks: memref<1xf32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x128xi8>) : !k
  %v = pattn.bind_cache storage(%vp : memref<?x16x8x128xi8>) token_scales(%vt : memref<?x16x8xf32>) : !v
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%v : !v)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) k_scale(%ks : memref<1xf32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64}
  return
}
