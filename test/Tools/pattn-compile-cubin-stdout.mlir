// pattn-compile --emit=cubin -o - (issue 32): one chip writes its cubin (an
// ELF file) to stdout; several are an error, and no file named
// "-.<chip>.cubin" appears.
// REQUIRES: ptxas

// RUN: split-file %s %t
// RUN: cd %t && pattn-compile %t/good.mlir --chips=sm_80 --emit=cubin -o - > %t/stdout.cubin
// RUN: od -A n -c -N 4 %t/stdout.cubin | FileCheck %s --check-prefix=CUBIN
// CUBIN: 177   E   L   F
// RUN: cd %t && not pattn-compile %t/good.mlir --chips=sm_80,sm_90a --emit=cubin -o - 2>&1 | FileCheck %s --check-prefix=CUBINS
// RUN: cd %t && not pattn-compile %t/good.mlir --chips=sm_80,sm_90a --emit=cubin 2>&1 | FileCheck %s --check-prefix=CUBINS
// RUN: not ls %t/-.sm_80.cubin %t/-.sm_90a.cubin
// CUBINS: pattn-compile: --emit=cubin -o - writes one cubin to stdout, and 2 chips are built: give one chip (--chips=sm_90a) or -o <path> (one <path>.<chip>.cubin each)

//--- good.mlir
!c = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = tensor>
func.func @write(%pages: memref<?x16x2x64xi8>, %values: memref<4x2x64xf16>,
                 %slots: memref<4xi64>, %scale: memref<1xf32>) {
  %cache = pattn.bind_cache storage(%pages : memref<?x16x2x64xi8>) : !c
  pattn.write_cache values(%values : memref<4x2x64xf16>) into(%cache : !c) slots(%slots : memref<4xi64>) scale(%scale : memref<1xf32>)
  return
}
