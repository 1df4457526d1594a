// pattn-compile refuses, with a location or a message that says what to do,
// what used to compile and fail later (issue 32): entry arguments a loader
// cannot pass, static sizes past the int64 byte range, an empty chip list,
// and a library without entry points (pattn-compile-cubin-stdout.mlir: -o -
// for cubins).

// RUN: split-file %s %t

// Element types no loader passes (f64, i1, complex, vector), at the argument.
// RUN: not pattn-compile %t/f64.mlir --chips=sm_80 --emit=mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=F64
// F64: f64.mlir:3:18: error: entry point argument #4 has type 'memref<4xf64>'; loaders pass buffers of f16, bf16, f32, i8, i32, i64, f8E4M3FN, f8E5M2 elements
// RUN: not pattn-compile %t/i1.mlir --chips=sm_80 -o %t/i1.so 2>&1 | FileCheck %s --check-prefix=I1
// I1: i1.mlir:3:18: error: entry point argument #4 has type 'memref<i1>'
// RUN: not pattn-compile %t/complex.mlir --chips=sm_80 -o %t/complex.so 2>&1 | FileCheck %s --check-prefix=COMPLEX
// COMPLEX: complex.mlir:3:18: error: entry point argument #4 has type 'memref<2xcomplex<f32>>'
// RUN: not pattn-compile %t/vector.mlir --chips=sm_80 -o %t/vector.so 2>&1 | FileCheck %s --check-prefix=VECTOR
// VECTOR: vector.mlir:3:18: error: entry point argument #4 has type 'memref<2xvector<4xf32>>'

// A strided argument: loaders pass contiguous tensors.
// RUN: not pattn-compile %t/strided.mlir --chips=sm_80 -o %t/strided.so 2>&1 | FileCheck %s --check-prefix=STRIDED
// STRIDED: strided.mlir:3:18: error: entry point argument #4 has type 'memref<4xf32, strided<[2]>>'; loaders pass contiguous buffers

// Static sizes past 2^63 - 1 bytes: an argument no op uses (at the argument),
// and a query of 2^60 tokens, whose grid used to wrap to INT64_MIN (at the
// op, by its verifier).
// RUN: not pattn-compile %t/huge-argument.mlir --chips=sm_80 -o %t/huge.so 2>&1 | FileCheck %s --check-prefix=HUGE-ARG
// HUGE-ARG: huge-argument.mlir:3:18: error: entry point argument #4 of type 'memref<4611686018427387904x4xf32>' spans more than 2^63 - 1 bytes
// RUN: not pattn-compile %t/huge-query.mlir --chips=sm_80 -o %t/huge.so 2>&1 | FileCheck %s --check-prefix=HUGE-QUERY
// HUGE-QUERY: huge-query.mlir:8:3: error: 'pattn.paged_attention' op operand #0 of type 'memref<1152921504606846976x4x64xf16>' spans more than 2^63 - 1 bytes

// An empty chip list is an error in pattn-compile and in pattn-opt's
// --pattn-compile (it used to mean the default chips there).
// RUN: not pattn-compile %t/good.mlir --chips= --emit=mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=NO-CHIPS
// NO-CHIPS: pattn-compile: the chip list has an empty name; supported chips: sm_80,
// RUN: not pattn-opt %t/good.mlir --pattn-compile=chips= -o /dev/null 2>&1 | FileCheck %s --check-prefix=OPT-NO-CHIPS
// RUN: not pattn-opt %t/good.mlir '--pattn-compile=chips= format=isa' -o /dev/null 2>&1 | FileCheck %s --check-prefix=OPT-NO-CHIPS
// OPT-NO-CHIPS: error: pattn-compile: chips= names no chip; name at least one (sm_80, sm_86, sm_89, sm_90a, sm_100a, sm_120a, ...) or leave the option out for those

// A module without pattn functions: no library (an error), and a warning for
// the inspection forms.
// RUN: not pattn-compile %t/empty.mlir --chips=sm_80 -o %t/empty.so 2>&1 | FileCheck %s --check-prefix=EMPTY-SO
// EMPTY-SO: empty.mlir:1:1: error: no function in the module uses pattn ops, so the library would have no entry points
// RUN: not ls %t/empty.so
// RUN: pattn-compile %t/empty.mlir --chips=sm_80 --emit=mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=EMPTY-MLIR
// EMPTY-MLIR: empty.mlir:1:1: warning: no function in the module uses pattn ops: the output has no entry points

//--- good.mlir
!c = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = tensor>
func.func @write(%pages: memref<?x16x2x64xi8>, %values: memref<4x2x64xf16>,
                 %slots: memref<4xi64>, %scale: memref<1xf32>) {
  %cache = pattn.bind_cache storage(%pages : memref<?x16x2x64xi8>) : !c
  pattn.write_cache values(%values : memref<4x2x64xf16>) into(%cache : !c) slots(%slots : memref<4xi64>) scale(%scale : memref<1xf32>)
  return
}
//--- f64.mlir
!c = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = tensor>
func.func @write(%pages: memref<?x16x2x64xi8>, %values: memref<4x2x64xf16>, %slots: memref<4xi64>, %scale: memref<1xf32>,
                 %extra: memref<4xf64>) {
  %cache = pattn.bind_cache storage(%pages : memref<?x16x2x64xi8>) : !c
  pattn.write_cache values(%values : memref<4x2x64xf16>) into(%cache : !c) slots(%slots : memref<4xi64>) scale(%scale : memref<1xf32>)
  return
}
//--- i1.mlir
!c = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = tensor>
func.func @write(%pages: memref<?x16x2x64xi8>, %values: memref<4x2x64xf16>, %slots: memref<4xi64>, %scale: memref<1xf32>,
                 %extra: memref<i1>) {
  %cache = pattn.bind_cache storage(%pages : memref<?x16x2x64xi8>) : !c
  pattn.write_cache values(%values : memref<4x2x64xf16>) into(%cache : !c) slots(%slots : memref<4xi64>) scale(%scale : memref<1xf32>)
  return
}
//--- complex.mlir
!c = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = tensor>
func.func @write(%pages: memref<?x16x2x64xi8>, %values: memref<4x2x64xf16>, %slots: memref<4xi64>, %scale: memref<1xf32>,
                 %extra: memref<2xcomplex<f32>>) {
  %cache = pattn.bind_cache storage(%pages : memref<?x16x2x64xi8>) : !c
  pattn.write_cache values(%values : memref<4x2x64xf16>) into(%cache : !c) slots(%slots : memref<4xi64>) scale(%scale : memref<1xf32>)
  return
}
//--- vector.mlir
!c = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = tensor>
func.func @write(%pages: memref<?x16x2x64xi8>, %values: memref<4x2x64xf16>, %slots: memref<4xi64>, %scale: memref<1xf32>,
                 %extra: memref<2xvector<4xf32>>) {
  %cache = pattn.bind_cache storage(%pages : memref<?x16x2x64xi8>) : !c
  pattn.write_cache values(%values : memref<4x2x64xf16>) into(%cache : !c) slots(%slots : memref<4xi64>) scale(%scale : memref<1xf32>)
  return
}
//--- strided.mlir
!c = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = tensor>
func.func @write(%pages: memref<?x16x2x64xi8>, %values: memref<4x2x64xf16>, %slots: memref<4xi64>, %scale: memref<1xf32>,
                 %extra: memref<4xf32, strided<[2]>>) {
  %cache = pattn.bind_cache storage(%pages : memref<?x16x2x64xi8>) : !c
  pattn.write_cache values(%values : memref<4x2x64xf16>) into(%cache : !c) slots(%slots : memref<4xi64>) scale(%scale : memref<1xf32>)
  return
}
//--- huge-argument.mlir
!c = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = tensor>
func.func @write(%pages: memref<?x16x2x64xi8>, %values: memref<4x2x64xf16>, %slots: memref<4xi64>, %scale: memref<1xf32>,
                 %extra: memref<4611686018427387904x4xf32>) {
  %cache = pattn.bind_cache storage(%pages : memref<?x16x2x64xi8>) : !c
  pattn.write_cache values(%values : memref<4x2x64xf16>) into(%cache : !c) slots(%slots : memref<4xi64>) scale(%scale : memref<1xf32>)
  return
}
//--- huge-query.mlir
!c = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = tensor>
func.func @decode(%k_pages: memref<?x16x2x64xi8>, %v_pages: memref<?x16x2x64xi8>,
                  %query: memref<1152921504606846976x4x64xf16>,
                  %block_table: memref<1152921504606846976x4xi32>, %seq_lens: memref<1152921504606846976xi32>,
                  %k_scale: memref<1xf32>, %v_scale: memref<1xf32>, %out: memref<1152921504606846976x4x64xf16>) {
  %k = pattn.bind_cache storage(%k_pages : memref<?x16x2x64xi8>) : !c
  %v = pattn.bind_cache storage(%v_pages : memref<?x16x2x64xi8>) : !c
  pattn.paged_attention query(%query : memref<1152921504606846976x4x64xf16>) key(%k : !c) value(%v : !c)
      block_table(%block_table : memref<1152921504606846976x4xi32>) seq_lens(%seq_lens : memref<1152921504606846976xi32>)
      k_scale(%k_scale : memref<1xf32>) v_scale(%v_scale : memref<1xf32>)
      outs(%out : memref<1152921504606846976x4x64xf16>) {num_heads = 4 : i64}
  return
}
//--- empty.mlir
module {}
