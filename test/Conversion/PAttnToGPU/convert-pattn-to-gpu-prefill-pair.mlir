// RUN: pattn-opt %s --convert-pattn-to-gpu=chips=sm_86 | FileCheck %s

// A guarded pair of prefill ops (two forms of one attention under one
// guard, as the fold pass writes for a dynamic K table) keeps both
// workspaces whole: its one merge picks the workspace the guard names, so
// neither kernel may finish its rows itself, even with one split. (A lone
// prefill op gets a workspace without rows then, and no merge:
// convert-pattn-to-gpu-prefill.mlir.)
// CHECK-LABEL: func.func @pair_prefill
// CHECK: %[[ROWS:.*]] = arith.muli %{{.*}}, %c8 : index
// CHECK-NEXT: gpu.alloc async [%{{.*}}] (%{{.*}}, %[[ROWS]]) : memref<?x?x64xf32>
// CHECK-NEXT: gpu.alloc async [%{{.*}}] (%{{.*}}, %[[ROWS]]) : memref<?x?x2xf32>
// CHECK: %[[ROWS2:.*]] = arith.muli %{{.*}}, %c8{{.*}} : index
// CHECK-NEXT: gpu.alloc async [%{{.*}}] (%{{.*}}, %[[ROWS2]]) : memref<?x?x64xf32>
// CHECK: gpu.launch_func async [%{{.*}}] @pattn_kernels::@pattn_prefill_
// CHECK: gpu.launch_func async [%{{.*}}] @pattn_kernels::@pattn_prefill_
// CHECK-NOT: scf.if
// CHECK: gpu.launch_func async [%{{.*}}] @pattn_kernels::@pattn_merge_
!c = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f16, scale = none>
func.func @pair_prefill(%kp: memref<?x16x2x128xi8>, %q: memref<?x8x64xf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %qs: memref<?xi32>, %ok: memref<1xi32>, %o: memref<?x8x64xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x2x128xi8>) : !c
  pattn.paged_attention query(%q : memref<?x8x64xf16>) key(%k : !c) value(%k : !c) block_table(%bt : memref<?x?xi32>) seq_lens(%lens : memref<?xi32>) query_start(%qs : memref<?xi32>) guard(%ok : memref<1xi32>) outs(%o : memref<?x8x64xf16>) {guard_value = 1 : i32, num_heads = 8 : i64, max_query_len = 64 : i64, backend = #pattn.backend<xqa>, plan = #pattn.prefill_plan<operand = f16, rows = 64, query_tile = 16, keys_per_tile = 64, stages = 2, keys_per_split = 4096, shared_bytes = 46592, resident_blocks = [2], targets = [sm_86]>}
  pattn.paged_attention query(%q : memref<?x8x64xf16>) key(%k : !c) value(%k : !c) block_table(%bt : memref<?x?xi32>) seq_lens(%lens : memref<?xi32>) query_start(%qs : memref<?xi32>) guard(%ok : memref<1xi32>) outs(%o : memref<?x8x64xf16>) {guard_value = 0 : i32, num_heads = 8 : i64, max_query_len = 64 : i64, backend = #pattn.backend<xqa>, plan = #pattn.prefill_plan<operand = f16, rows = 64, query_tile = 16, keys_per_tile = 64, stages = 2, keys_per_split = 4096, shared_bytes = 46592, resident_blocks = [2], targets = [sm_86]>}
  return
}
