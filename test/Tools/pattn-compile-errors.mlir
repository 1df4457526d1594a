// pattn-compile's errors point at what caused them and exit non-zero.

// A scalar entry argument: the C entry takes one descriptor per buffer, so
// it is an error at the function (it used to be described as a rank-0
// memref, and the Python loader then declared the wrong C signature).
// RUN: not pattn-compile %s --chips=sm_80 --emit=mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=SCALAR
// RUN: not pattn-compile %s --chips=sm_80 -o %t.so 2>&1 | FileCheck %s --check-prefix=SCALAR
// SCALAR: pattn-compile-errors.mlir:[[@LINE+3]]:1: error: entry point argument #1 has type 'i32'; pattn entry points take buffers (memrefs) only
!c = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64,
                  encoding = i8, scale = tensor>
func.func @write(%pages: memref<?x16x2x64xi8>, %count: i32,
                 %values: memref<4x2x64xf16>, %slots: memref<4xi64>,
                 %scale: memref<1xf32>) {
  %cache = pattn.bind_cache storage(%pages : memref<?x16x2x64xi8>) : !c
  pattn.write_cache values(%values : memref<4x2x64xf16>) into(%cache : !c)
      slots(%slots : memref<4xi64>) scale(%scale : memref<1xf32>)
  return
}
