// RUN: pattn-opt %s --pattn-select-backend="chips=sm_80 force=portable" --pattn-plan-decode=chips=sm_80,sm_86,sm_90a,sm_120a --convert-pattn-to-gpu="chips=sm_80,sm_86,sm_90a,sm_120a" | FileCheck %s
// RUN: pattn-opt %s --pattn-select-backend="chips=sm_90a force=portable" --pattn-plan-decode=chips=sm_90a --convert-pattn-to-gpu="chips=sm_90a" | FileCheck %s --check-prefix=ONE
// RUN: pattn-opt %s --pattn-select-backend="chips=sm_80 force=portable" --pattn-plan-decode=chips=sm_80,sm_90a --convert-pattn-to-gpu="chips=sm_80,sm_90a hardware-conversions=false" | FileCheck %s --check-prefix=SOFT
// RUN: not pattn-opt %s --convert-pattn-to-gpu="chips=sm_80,sm_70" 2>&1 | FileCheck %s --check-prefix=BAD
// (The split size is --pattn-plan-decode's: the conversion never plans.)
// RUN: not pattn-opt %s --pattn-plan-decode="chips=sm_70" 2>&1 | FileCheck %s --check-prefix=PLAN-CHIP
// RUN: not pattn-opt %s --pattn-plan-decode="chips=sm_90a keys-per-split=100" 2>&1 | FileCheck %s --check-prefix=PLAN-SPLIT
// RUN: not pattn-opt %s --pattn-plan-decode="chips=sm_90a xqa-keys-per-split=8" 2>&1 | FileCheck %s --check-prefix=PLAN-XQA-SPLIT
// RUN: not pattn-opt %s --pattn-plan-decode="chips=sm_90a xqa-keys-per-tile=48" 2>&1 | FileCheck %s --check-prefix=PLAN-XQA-TILE
// RUN: not pattn-compile %s --chips=sm_90a --xqa-keys-per-tile=256 -o %t.so 2>&1 | FileCheck %s --check-prefix=COMPILE-XQA-TILE
// RUN: pattn-opt %s --pattn-select-backend="chips=sm_100a force=portable" --pattn-plan-decode=chips=sm_100a,sm_120 --convert-pattn-to-gpu="chips=sm_100a,sm_120" | FileCheck %s --check-prefix=CC120

// The chips are grouped by conversion class of the target table: sm_80 and
// sm_86 decode with bit tricks, sm_90a converts e4m3 with
// cvt.rn.f16x2.e4m3x2, sm_120a also e2m1 with cvt.rn.f16x2.e2m1x2. Each
// class gets its own kernel module carrying its chips' targets; the host
// asks the runtime for the device's compute capability once and picks the
// module holding a chip of exactly that capability, else the module of the
// highest generic (not arch-specific) chip below it, else the first
// (pattn::chipForDevice). The routes become one module number, tested
// lowest route first so the exact ones win; each module is launched once.
// CHECK-LABEL: func.func @decode(
// CHECK: %[[ARCH:.*]] = call @pattnRuntimeDeviceArch() : () -> i32
// CHECK-DAG: %[[GE80:.*]] = arith.cmpi uge, %[[ARCH]], %c80_i32{{.*}} : i32
// CHECK-DAG: %[[GE86:.*]] = arith.cmpi uge, %[[ARCH]], %c86_i32{{.*}} : i32
// CHECK-DAG: %[[EQ80:.*]] = arith.cmpi eq, %[[ARCH]], %c80_i32{{.*}} : i32
// CHECK-DAG: %[[EQ86:.*]] = arith.cmpi eq, %[[ARCH]], %c86_i32{{.*}} : i32
// CHECK-DAG: %[[EQ90:.*]] = arith.cmpi eq, %[[ARCH]], %c90_i32{{.*}} : i32
// CHECK-DAG: %[[EQ120:.*]] = arith.cmpi eq, %[[ARCH]], %c120_i32{{.*}} : i32
// CHECK: %[[R0:.*]] = arith.select %[[GE80]], %c0_i32{{.*}}, %c0_i32{{.*}} : i32
// CHECK: %[[R1:.*]] = arith.select %[[GE86]], %c0_i32{{.*}}, %[[R0]] : i32
// CHECK: %[[R2:.*]] = arith.select %[[EQ80]], %c0_i32{{.*}}, %[[R1]] : i32
// CHECK: %[[R3:.*]] = arith.select %[[EQ86]], %c0_i32{{.*}}, %[[R2]] : i32
// CHECK: %[[R4:.*]] = arith.select %[[EQ90]], %c1_i32{{.*}}, %[[R3]] : i32
// CHECK: %[[CHOICE:.*]] = arith.select %[[EQ120]], %c2_i32{{.*}}, %[[R4]] : i32
// CHECK: %[[IS0:.*]] = arith.cmpi eq, %[[CHOICE]], %c0_i32{{.*}} : i32
// CHECK: scf.if %[[IS0]] {
// CHECK:   gpu.launch_func async {{.*}} @pattn_kernels::@pattn_decode_{{[0-9a-f]+}}
// CHECK:   gpu.launch_func async {{.*}} @pattn_kernels::@pattn_merge_{{[0-9a-f]+}}
// CHECK: } else {
// CHECK:   %[[IS1:.*]] = arith.cmpi eq, %[[CHOICE]], %c1_i32{{.*}} : i32
// CHECK:   scf.if %[[IS1]] {
// CHECK:     gpu.launch_func async {{.*}} @pattn_kernels_fp8::@pattn_decode_{{[0-9a-f]+}}
// CHECK:     gpu.launch_func async {{.*}} @pattn_kernels_fp8::@pattn_merge_{{[0-9a-f]+}}
// CHECK:   } else {
// CHECK:     gpu.launch_func async {{.*}} @pattn_kernels_fp4::@pattn_decode_{{[0-9a-f]+}}
// CHECK:     gpu.launch_func async {{.*}} @pattn_kernels_fp4::@pattn_merge_{{[0-9a-f]+}}
// CHECK-LABEL: func.func @decode_nvfp4(
// CHECK: gpu.module @pattn_kernels [#nvvm.target<O = 3, chip = "sm_80", features = "+ptx80">, #nvvm.target<O = 3, chip = "sm_86", features = "+ptx80">]
// CHECK-NOT: nvvm.convert
// CHECK: gpu.module @pattn_kernels_fp8 [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">]
// CHECK-NOT: nvvm.convert.f4x2
// CHECK: nvvm.convert.f8x2.to.f16x2 %{{.*}} : vector<2xi8>(f8E4M3FN) -> vector<2xf16>
// CHECK-NOT: nvvm.convert.f4x2
// CHECK: gpu.module @pattn_kernels_fp4 [#nvvm.target<O = 3, chip = "sm_120a", features = "+ptx87">]
// CHECK: nvvm.convert.f8x2.to.f16x2
// CHECK: gpu.func @pattn_decode_{{[0-9a-f]+}}
// CHECK: nvvm.convert.f4x2.to.f16x2 %{{.*}} : i8(f4E2M1FN) -> vector<2xf16>

// One class needs no dispatch.
// ONE-NOT: pattnRuntimeDeviceArch
// ONE: gpu.module @pattn_kernels_fp8 [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">]
// ONE-NOT: gpu.module

// Without hardware conversions every chip shares the bit-trick module.
// SOFT-NOT: pattnRuntimeDeviceArch
// SOFT: gpu.module @pattn_kernels [#nvvm.target<O = 3, chip = "sm_80", features = "+ptx80">, #nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">]
// SOFT-NOT: nvvm.convert
// SOFT-NOT: gpu.module

// A 12.0 device runs the sm_120 build (the fp8 module), never the sm_100a
// cubin of the fp4 module: the exact route for 120 names module 0.
// CC120-LABEL: func.func @decode(
// CC120: %[[ARCH:.*]] = call @pattnRuntimeDeviceArch() : () -> i32
// CC120-DAG: %[[GE120:.*]] = arith.cmpi uge, %[[ARCH]], %c120_i32{{.*}} : i32
// CC120-DAG: %[[EQ100:.*]] = arith.cmpi eq, %[[ARCH]], %c100_i32{{.*}} : i32
// CC120-DAG: %[[EQ120:.*]] = arith.cmpi eq, %[[ARCH]], %c120_i32{{.*}} : i32
// CC120: %[[R0:.*]] = arith.select %[[GE120]], %c0_i32{{.*}}, %c0_i32{{.*}} : i32
// CC120: %[[R1:.*]] = arith.select %[[EQ100]], %c1_i32{{.*}}, %[[R0]] : i32
// CC120: %[[CHOICE:.*]] = arith.select %[[EQ120]], %c0_i32{{.*}}, %[[R1]] : i32
// CC120: scf.if
// CC120:   @pattn_kernels_fp8::@pattn_decode_{{[0-9a-f]+}}
// CC120: } else {
// CC120:   @pattn_kernels_fp4::@pattn_decode_{{[0-9a-f]+}}
// CC120: gpu.module @pattn_kernels_fp8 [#nvvm.target<O = 3, chip = "sm_120", features = "+ptx87">]
// CC120: gpu.module @pattn_kernels_fp4 [#nvvm.target<O = 3, chip = "sm_100a", features = "+ptx86">]

// Option errors name the pass and the option, and do not print the module.
// BAD: error: convert-pattn-to-gpu: chips: unsupported chip 'sm_70'; supported chips: sm_80, sm_86, sm_87, sm_89, sm_90, sm_90a, sm_100, sm_100a, sm_120, sm_120a
// BAD-NOT: see current operation
// PLAN-CHIP: error: pattn-plan-decode: chips: unsupported chip 'sm_70'
// The split size is the plan's; the conversion has no keys-per-split option.
// PLAN-SPLIT: error: pattn-plan-decode: keys-per-split=100 must be a positive multiple of 128
// PLAN-XQA-SPLIT: error: pattn-plan-decode: xqa-keys-per-split=8 must be at least 64
// PLAN-XQA-TILE: error: pattn-plan-decode: xqa-keys-per-tile=48 must be 0 (the planner's choice), 16, 32, 64 or 128
// COMPILE-XQA-TILE: xqa-keys-per-tile must be 0, 16, 32, 64 or 128, got 256
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

!k4 = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = nvfp4, scale = tensor>
func.func @decode_nvfp4(%kp: memref<?x16x2x32xi8>, %kg: memref<?x16x2x4xf8E4M3FN>, %q: memref<?x4x64xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %ks: memref<1xf32>, %o: memref<?x4x64xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x2x32xi8>) group_scales(%kg : memref<?x16x2x4xf8E4M3FN>) : !k4
  pattn.paged_attention query(%q : memref<?x4x64xf16>) key(%k : !k4) value(%k : !k4)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) k_scale(%ks : memref<1xf32>) v_scale(%ks : memref<1xf32>)
      outs(%o : memref<?x4x64xf16>) {num_heads = 4 : i64}
  return
}

// The ring depth asked of the XQA plans: 2 to 8, or 0 for the planner's.
// RUN: not pattn-opt %s --pattn-plan-decode="chips=sm_90a xqa-stages=9" 2>&1 | FileCheck %s --check-prefix=PLAN-XQA-STAGES
// RUN: not pattn-compile %s --chips=sm_90a --xqa-stages=1 -o %t.so 2>&1 | FileCheck %s --check-prefix=COMPILE-XQA-STAGES
// PLAN-XQA-STAGES: error: pattn-plan-decode: xqa-stages=9 must be 0 (the planner's choice) or 2 to 8
// COMPILE-XQA-STAGES: xqa-stages must be 0 or 2 to 8, got 1
