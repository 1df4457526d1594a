// RUN: pattn-opt %s --convert-pattn-to-gpu=chips=sm_86 | FileCheck %s

// A prompt on the portable kernel (#pattn.portable_plan<prompt = true>: the
// fold's fallback for a dynamic K table, or the portable backend) finishes
// its rows itself with one split, as the prefill family does: the host
// allocates the workspace without rows then and launches the merge only
// with several splits; the kernel takes the op's sinks and output, and
// given a workspace without rows writes the output with the merge's
// arithmetic, else its split's partial results. (A decode's portable
// kernel always writes partial results for its merge.)
// CHECK-LABEL: func.func @portable_prompt
// CHECK: %[[SPLIT:.*]] = arith.cmpi sgt, %[[SPLITS:.*]], %c1{{.*}} : index
// CHECK: %[[ROWS:.*]] = arith.select %[[SPLIT]], %{{.*}}, %c0{{.*}} : index
// CHECK-NEXT: gpu.alloc async [%{{.*}}] (%[[SPLITS]], %[[ROWS]]) : memref<?x?x64xf32>
// CHECK: gpu.launch_func async [%{{.*}}] @pattn_kernels::@pattn_decode_{{[0-9a-f]+}} {{.*}} args({{.*}}, %{{.*}} : memref<8xf32>, %{{.*}} : memref<?x8x64xf16>, %{{.*}} : memref<?x?x64xf32>, %{{.*}} : memref<?x?x2xf32>)
// CHECK: %[[MERGES:.*]] = arith.cmpi sgt, %[[SPLITS]], %c1{{.*}} : index
// CHECK-NEXT: scf.if %[[MERGES]] {
// CHECK: gpu.launch_func async [%{{.*}}] @pattn_kernels::@pattn_merge_
// CHECK: gpu.func @pattn_decode_{{[0-9a-f]+}}({{.*}}, %[[SINKS:.*]]: memref<8xf32>, %[[OUT:.*]]: memref<?x8x64xf16>, %[[POUT:.*]]: memref<?x?x64xf32>, %[[STATS:.*]]: memref<?x?x2xf32>)
// CHECK: %[[HELD:.*]] = memref.dim %[[STATS]], %c1{{.*}} : memref<?x?x2xf32>
// CHECK: %[[UNSPLIT:.*]] = arith.cmpi eq, %[[HELD]], %c0{{.*}} : index
// CHECK-NEXT: scf.if %[[UNSPLIT]] {
// CHECK: memref.load %[[SINKS]]
// CHECK: memref.store %{{.*}}, %[[OUT]][
// CHECK: } else {
// CHECK: memref.store %{{.*}}, %[[STATS]][
// CHECK: memref.store %{{.*}}, %[[POUT]][
!c = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = tensor>
func.func @portable_prompt(%kp: memref<?x16x2x64xi8>, %q: memref<?x8x64xf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %qs: memref<?xi32>, %ks: memref<1xf32>, %sinks: memref<8xf32>, %o: memref<?x8x64xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x2x64xi8>) : !c
  pattn.paged_attention query(%q : memref<?x8x64xf16>) key(%k : !c) value(%k : !c) block_table(%bt : memref<?x?xi32>) seq_lens(%lens : memref<?xi32>) query_start(%qs : memref<?xi32>) k_scale(%ks : memref<1xf32>) v_scale(%ks : memref<1xf32>) sinks(%sinks : memref<8xf32>) outs(%o : memref<?x8x64xf16>) {num_heads = 8 : i64, max_query_len = 64 : i64, backend = #pattn.backend<portable>, plan = #pattn.portable_plan<heads_per_block = 4, keys_per_split = 4096, prompt = true, targets = [sm_86]>}
  return
}
