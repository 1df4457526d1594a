// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode="chips=sm_90a xqa-merge-unsplit=true" --convert-pattn-to-gpu=chips=sm_90a 2>/dev/null | FileCheck %s
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_80 --pattn-plan-decode="chips=sm_80 xqa-merge-unsplit=true" 2>/dev/null | FileCheck %s --check-prefix=PLAN

// The XQA decode whose lone split merges its own rows (--pattn-plan-decode's
// xqa-merge-unsplit; #pattn.xqa_plan<merges_unsplit = true>, on any chip:
// no cluster). The host keeps its split search and launches the merge only
// with several splits; the kernel takes the op's sinks and output, and
// where the grid has one split (gridDim.x = 1) the block meets a block
// barrier after its partial results and merges its rows from the workspace
// with the merge kernel's code into the output. The default plans
// (convert-pattn-to-gpu-xqa-cluster-splits.mlir's DEFAULT) launch the merge
// always.
// PLAN: #pattn.xqa_plan<operand = f16, rows = 8, {{[^>]*}}merges_unsplit = true, targets = [sm_80]>
//
// CHECK-LABEL: func.func @int8
// CHECK: %[[DECODE:.*]] = gpu.launch_func async {{.*}} @pattn_kernels{{.*}}::@pattn_xqa_decode_{{[0-9a-f]+}} blocks in (%[[SPLITS:[^,]+]],
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1 : index
// CHECK-NEXT: %[[SEVERAL:.*]] = arith.cmpi sgt, %[[SPLITS]], %[[ONE]] : index
// CHECK-NEXT: scf.if %[[SEVERAL]] {
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels{{.*}}::@pattn_merge_
// CHECK: gpu.func @pattn_xqa_decode_{{[0-9a-f]+}}({{.*}}%{{.*}}: memref<32xf32>, %{{.*}}: memref<?x32x128xf16>, %{{.*}}: memref<?x?x128xf32>, %{{.*}}: memref<?x?x2xf32>)
// CHECK-NOT: nvvm.cluster
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<?x?x2xf32>
// CHECK: %[[GRID:.*]] = gpu.grid_dim x
// CHECK-NEXT: %[[C1:.*]] = arith.constant 1 : index
// CHECK-NEXT: %[[LONE:.*]] = arith.cmpi eq, %[[GRID]], %[[C1]] : index
// CHECK-NEXT: scf.if %[[LONE]] {
// CHECK-NEXT: gpu.barrier
// CHECK: scf.for
// CHECK: gpu.shuffle xor
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<?x32x128xf16>
// CHECK: gpu.return
!i8 = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
func.func @int8(%kp: memref<?x16x8x128xi8>, %s: memref<1xf32>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %sinks: memref<32xf32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x128xi8>) : !i8
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !i8) value(%k : !i8)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>)
      k_scale(%s : memref<1xf32>) v_scale(%s : memref<1xf32>) sinks(%sinks : memref<32xf32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64}
  return
}
