// RUN: pattn-opt %s --pattn-select-backend="chips=sm_80 force=portable" --pattn-plan-decode=chips=sm_80 --convert-pattn-to-gpu="chips=sm_80" --mlir-print-debuginfo --mlir-print-local-scope | FileCheck %s

// A kernel module stands at the ops its kernels came from, so that a failure
// while serializing it (ptxas: registers, shared memory) is reported there
// and not at file:0:0.
// CHECK: gpu.module @pattn_kernels
// CHECK: } loc(fused["{{.*}}locations.mlir":15:3, "{{.*}}locations.mlir":16:3])
!c = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64,
                  encoding = i8, scale = tensor>
func.func @step(%pages: memref<?x16x2x64xi8>, %values: memref<4x2x64xf16>,
                %slots: memref<4xi64>, %scale: memref<1xf32>,
                %q: memref<4x4x64xf16>, %bt: memref<4x8xi32>,
                %lens: memref<4xi32>, %o: memref<4x4x64xf16>) {
  %cache = pattn.bind_cache storage(%pages : memref<?x16x2x64xi8>) : !c
  pattn.write_cache values(%values : memref<4x2x64xf16>) into(%cache : !c) slots(%slots : memref<4xi64>) scale(%scale : memref<1xf32>)
  pattn.paged_attention query(%q : memref<4x4x64xf16>) key(%cache : !c) value(%cache : !c) block_table(%bt : memref<4x8xi32>) seq_lens(%lens : memref<4xi32>) k_scale(%scale : memref<1xf32>) v_scale(%scale : memref<1xf32>) outs(%o : memref<4x4x64xf16>) {num_heads = 4 : i64, backend = #pattn.backend<portable>}
  return
}
