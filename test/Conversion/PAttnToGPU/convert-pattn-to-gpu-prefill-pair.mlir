// RUN: pattn-opt %s --convert-pattn-to-gpu=chips=sm_86 | FileCheck %s

// A guarded pair of prefill ops (two forms of one attention under one
// guard, as the fold pass writes for a dynamic K table): each prefill
// kernel finishes its rows itself with one split, as a lone prefill op
// does (convert-pattn-to-gpu-prefill.mlir), so each workspace has rows only
// with several splits, and the pair's one merge runs only where one of
// them has: it skips a named workspace without rows (its op, the one the
// guard let run, wrote the output).
// CHECK-LABEL: func.func @pair_prefill
// CHECK: %[[SPLIT1:.*]] = arith.cmpi sgt, %[[SPLITS1:.*]], %c1{{.*}} : index
// CHECK: %[[ROWS1:.*]] = arith.select %[[SPLIT1]], %{{.*}}, %c0{{.*}} : index
// CHECK-NEXT: gpu.alloc async [%{{.*}}] (%[[SPLITS1]], %[[ROWS1]]) : memref<?x?x64xf32>
// CHECK-NEXT: gpu.alloc async [%{{.*}}] (%[[SPLITS1]], %[[ROWS1]]) : memref<?x?x2xf32>
// CHECK: %[[SPLIT2:.*]] = arith.cmpi sgt, %[[SPLITS2:.*]], %c1{{.*}} : index
// CHECK: %[[ROWS2:.*]] = arith.select %[[SPLIT2]], %{{.*}}, %c0{{.*}} : index
// CHECK-NEXT: gpu.alloc async [%{{.*}}] (%[[SPLITS2]], %[[ROWS2]]) : memref<?x?x64xf32>
// CHECK: gpu.launch_func async [%{{.*}}] @pattn_kernels::@pattn_prefill_
// CHECK: gpu.launch_func async [%{{.*}}] @pattn_kernels::@pattn_prefill_
// CHECK: %[[MERGE1:.*]] = arith.cmpi sgt, %[[SPLITS1]], %c1{{.*}} : index
// CHECK: %[[MERGE2:.*]] = arith.cmpi sgt, %[[SPLITS2]], %c1{{.*}} : index
// CHECK-NEXT: %[[EITHER:.*]] = arith.ori %[[MERGE1]], %[[MERGE2]] : i1
// CHECK-NEXT: scf.if %[[EITHER]] {
// CHECK: gpu.launch_func async [%{{.*}}] @pattn_kernels::@pattn_merge_
// The merge: the flag names the first op (guard value 1) or the second
// (0); each branch also needs its workspace to have rows.
// CHECK: gpu.func @pattn_merge_{{[0-9a-f]+}}(%[[FLAG:.*]]: memref<1xi32>, %{{.*}}: memref<?x8x64xf16>, %{{.*}}: memref<?x?x64xf32>, %[[STATS1:.*]]: memref<?x?x2xf32>, %{{.*}}: memref<?x?x64xf32>, %[[STATS2:.*]]: memref<?x?x2xf32>)
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %{{.*}}, %c1_i32 : i32
// CHECK: %[[HELD1:.*]] = memref.dim %[[STATS1]], %c1 : memref<?x?x2xf32>
// CHECK: %[[HAS1:.*]] = arith.cmpi sgt, %[[HELD1]], %c0{{.*}} : index
// CHECK-NEXT: %[[RUN1:.*]] = arith.andi %[[FIRST]], %[[HAS1]] : i1
// CHECK: scf.if %[[RUN1]] {
// CHECK: memref.dim %[[STATS2]], %c1{{.*}} : memref<?x?x2xf32>
!c = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f16, scale = none>
func.func @pair_prefill(%kp: memref<?x16x2x128xi8>, %q: memref<?x8x64xf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %qs: memref<?xi32>, %ok: memref<1xi32>, %o: memref<?x8x64xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x2x128xi8>) : !c
  pattn.paged_attention query(%q : memref<?x8x64xf16>) key(%k : !c) value(%k : !c) block_table(%bt : memref<?x?xi32>) seq_lens(%lens : memref<?xi32>) query_start(%qs : memref<?xi32>) guard(%ok : memref<1xi32>) outs(%o : memref<?x8x64xf16>) {guard_value = 1 : i32, num_heads = 8 : i64, max_query_len = 64 : i64, backend = #pattn.backend<xqa>, plan = #pattn.prefill_plan<operand = f16, rows = 64, query_tile = 16, keys_per_tile = 64, stages = 2, keys_per_split = 4096, shared_bytes = 46592, resident_blocks = [2], targets = [sm_86]>}
  pattn.paged_attention query(%q : memref<?x8x64xf16>) key(%k : !c) value(%k : !c) block_table(%bt : memref<?x?xi32>) seq_lens(%lens : memref<?xi32>) query_start(%qs : memref<?xi32>) guard(%ok : memref<1xi32>) outs(%o : memref<?x8x64xf16>) {guard_value = 0 : i32, num_heads = 8 : i64, max_query_len = 64 : i64, backend = #pattn.backend<xqa>, plan = #pattn.prefill_plan<operand = f16, rows = 64, query_tile = 16, keys_per_tile = 64, stages = 2, keys_per_split = 4096, shared_bytes = 46592, resident_blocks = [2], targets = [sm_86]>}
  return
}
