// RUN: pattn-opt %s --split-input-file --pattn-select-backend=chips=sm_90a --pattn-plan-decode="chips=sm_90a xqa-cluster-heads=8" --convert-pattn-to-gpu=chips=sm_90a 2>/dev/null | FileCheck %s
// RUN: pattn-opt %s --split-input-file --pattn-select-backend=chips=sm_90a --pattn-plan-decode="chips=sm_90a" --convert-pattn-to-gpu=chips=sm_90a 2>/dev/null | FileCheck %s --check-prefix=DEFAULT

// The XQA decode whose blocks of 8 consecutive KV heads form one
// thread-block cluster (--pattn-plan-decode's xqa-cluster-heads; the
// plans: pattn-plan-decode-cluster-heads.mlir). The kernel declares the
// cluster's shape, (1, 8, 1) over the grid's (splits, sequences x KV heads),
// and each iteration of its tile loop meets the cluster once the tile has
// landed and before it copies the next one, so that the 8 blocks copy the
// rows of each page's key together (a D128 int4 key's 8 heads: 512
// adjacent bytes on NHD pages).
// CHECK-LABEL: gpu.func @pattn_xqa_decode_
// CHECK-SAME: nvvm.cluster_dim = array<i32: 1, 8, 1>
// CHECK: scf.for
// CHECK: nvvm.cp.async.wait.group 2
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: nvvm.cluster.arrive.relaxed {aligned}
// CHECK-NEXT: nvvm.cluster.wait {aligned}
// CHECK: nvvm.cp.async.commit.group
// Only the tile loop meets the cluster.
// CHECK-NOT: nvvm.cluster.wait
// CHECK: gpu.return
//
// Without the option: no cluster.
// DEFAULT-NOT: nvvm.cluster
!i4 = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = tensor>
func.func @int4(%kp: memref<?x16x8x64xi8>, %s: memref<1xf32>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x64xi8>) : !i4
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !i4) value(%k : !i4)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>)
      k_scale(%s : memref<1xf32>) v_scale(%s : memref<1xf32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64}
  return
}
