// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode="chips=sm_90a xqa-cluster-splits=8" --convert-pattn-to-gpu=chips=sm_90a 2>/dev/null | FileCheck %s
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode="chips=sm_90a" --convert-pattn-to-gpu=chips=sm_90a 2>/dev/null | FileCheck %s --check-prefix=DEFAULT

// The XQA decode whose 8 splits of a (sequence, KV head) form one
// thread-block cluster that merges them (--pattn-plan-decode's
// xqa-cluster-splits; the plans: pattn-plan-decode-cluster-splits.mlir).
// The host fixes the split count at 8 (the grid's x, the cluster's shape
// (8, 1, 1)) and launches no merge: the kernel takes the op's sinks and
// output, and after its split's partial results meets the cluster at a
// barrier (arrive releases, wait acquires: not the relaxed arrive of the
// tile loop's clusters) and merges its share of the (row, 128 channels)
// pieces, r, r + 8, ..., with the merge kernel's code into the output.
// CHECK-LABEL: func.func @int8
// CHECK: %[[SPLITS:.*]] = arith.constant 8 : index
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels{{.*}}::@pattn_xqa_decode_{{[0-9a-f]+}} blocks in (%[[SPLITS]], %{{.*}}, %{{.*}})
// CHECK-NOT: gpu.launch_func
// CHECK: return
// CHECK: gpu.func @pattn_xqa_decode_{{[0-9a-f]+}}({{.*}}%{{.*}}: memref<32xf32>, %{{.*}}: memref<?x32x128xf16>, %{{.*}}: memref<?x?x128xf32>, %{{.*}}: memref<?x?x2xf32>)
// CHECK-SAME: nvvm.cluster_dim = array<i32: 8, 1, 1>
// The split's partial results, then the cluster barrier.
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<?x?x2xf32>
// CHECK: nvvm.cluster.arrive {aligned}
// CHECK-NEXT: nvvm.cluster.wait {aligned}
// The pieces of the cluster's rows, 8 blocks apart; a piece's output.
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK: gpu.shuffle xor
// CHECK: gpu.barrier
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<?x32x128xf16>
// CHECK: gpu.return
// No merge kernel in the module.
// CHECK-NOT: gpu.func @pattn_merge
//
// Without the option: the split search, the merge kernel and its launch.
// DEFAULT-LABEL: func.func @int8
// DEFAULT: gpu.launch_func async {{.*}} @pattn_kernels{{.*}}::@pattn_xqa_decode_
// DEFAULT: gpu.launch_func async {{.*}} @pattn_kernels{{.*}}::@pattn_merge_
// DEFAULT-NOT: nvvm.cluster
// DEFAULT: gpu.func @pattn_merge_
!i8 = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
func.func @int8(%kp: memref<?x16x8x128xi8>, %s: memref<1xf32>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %sinks: memref<32xf32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x128xi8>) : !i8
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !i8) value(%k : !i8)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>)
      k_scale(%s : memref<1xf32>) v_scale(%s : memref<1xf32>) sinks(%sinks : memref<32xf32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64}
  return
}
