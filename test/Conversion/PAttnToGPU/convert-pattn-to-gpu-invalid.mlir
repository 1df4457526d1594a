// RUN: pattn-opt %s --split-input-file --convert-pattn-to-gpu --verify-diagnostics

!c = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = tensor>
func.func @cache_argument(%c: !c, %v: memref<4x2x64xf16>, %slots: memref<4xi64>, %s: memref<1xf32>) {
  // expected-error @below {{reads a cache that is not bound with pattn.bind_cache in the same function}}
  pattn.write_cache values(%v : memref<4x2x64xf16>) into(%c : !c) slots(%slots : memref<4xi64>) scale(%s : memref<1xf32>)
  return
}

// -----

!c = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = tensor>
// expected-error @below {{uses pattn ops and returns values}}
func.func @returns(%p: memref<?x16x2x64xi8>, %v: memref<4x2x64xf16>, %slots: memref<4xi64>, %s: memref<1xf32>) -> i32 {
  %c = pattn.bind_cache storage(%p : memref<?x16x2x64xi8>) : !c
  pattn.write_cache values(%v : memref<4x2x64xf16>) into(%c : !c) slots(%slots : memref<4xi64>) scale(%s : memref<1xf32>)
  %z = arith.constant 0 : i32
  return %z : i32
}

// -----

!c = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = tensor>
// expected-error @below {{uses pattn ops and is called from the module}}
func.func @callee(%p: memref<?x16x2x64xi8>, %v: memref<4x2x64xf16>, %slots: memref<4xi64>, %s: memref<1xf32>) {
  %c = pattn.bind_cache storage(%p : memref<?x16x2x64xi8>) : !c
  pattn.write_cache values(%v : memref<4x2x64xf16>) into(%c : !c) slots(%slots : memref<4xi64>) scale(%s : memref<1xf32>)
  return
}
func.func @caller(%p: memref<?x16x2x64xi8>, %v: memref<4x2x64xf16>, %slots: memref<4xi64>, %s: memref<1xf32>) {
  call @callee(%p, %v, %slots, %s) : (memref<?x16x2x64xi8>, memref<4x2x64xf16>, memref<4xi64>, memref<1xf32>) -> ()
  return
}

// -----

// A non-finite static scale is refused by the lowering too (a pipeline
// without the fold: pattn-compile --no-fold).
memref.global "private" constant @write_scale : memref<1xf32> = dense<0x7FC00000>
!c = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = tensor>
func.func @nan_static_scale(%kp: memref<?x16x2x64xi8>, %v: memref<4x2x64xf16>, %slots: memref<4xi64>) {
  %c = pattn.bind_cache storage(%kp : memref<?x16x2x64xi8>) : !c
  %s = memref.get_global @write_scale : memref<1xf32>
  // expected-error @below {{write scale holds a non-finite value nan at [0]}}
  pattn.write_cache values(%v : memref<4x2x64xf16>) into(%c : !c) slots(%slots : memref<4xi64>) scale(%s : memref<1xf32>)
  return
}
