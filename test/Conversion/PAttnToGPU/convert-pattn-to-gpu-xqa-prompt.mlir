// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode="chips=sm_90a prompt-kernel=xqa" --convert-pattn-to-gpu=chips=sm_90a 2>/dev/null | FileCheck %s

// A prompt on tensor cores: the XQA kernel over query tiles of 32 / g = 8
// tokens (two m-tiles of rows). The host launches a bound on the tiles,
// (tokens + batch x 7) / 8, on the grid's x, the splits on y and the KV
// heads on z; a block finds its tile's sequence by a scan over query_start,
// and sees only the keys up to its tile's last token.
// CHECK-LABEL: func.func @prompt
// CHECK: %[[PAD:.*]] = arith.muli %{{.*}}, %c7 : index
// CHECK: %[[SUM:.*]] = arith.addi %{{.*}}, %[[PAD]]
// CHECK: %[[TILES:.*]] = arith.divsi %[[SUM]], %c8
// CHECK: gpu.launch_func async [%{{.*}}] @pattn_kernels{{.*}}::@pattn_xqa_decode_{{[0-9a-f]+}} blocks in (%[[TILES]], %{{.*}}, %c8{{.*}})
// CHECK: gpu.func @pattn_xqa_decode_{{[0-9a-f]+}}
// CHECK: %[[TILE:.*]] = gpu.block_id  x
// CHECK: %[[TILE32:.*]] = arith.index_cast %[[TILE]] : index to i32
// CHECK: %[[HEAD:.*]] = gpu.block_id  z
// CHECK: %[[SPLIT:.*]] = gpu.block_id  y
// The scan: sequence b has ceil(n_b / 8) tiles.
// CHECK: scf.for
// CHECK:   arith.addi %{{.*}}, %c7_i32 : i32
// CHECK:   arith.divsi %{{.*}}, %c8_i32 : i32
// CHECK:   arith.subi %[[TILE32]], %{{.*}} : i32
// The splits are on y.
// CHECK: arith.index_cast %[[SPLIT]] : index to i32
// CHECK: gpu.grid_dim  y
!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = tensor>
func.func @prompt(%kp: memref<?x16x8x64xi8>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %ks: memref<1xf32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x64xi8>) : !k
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%k : !k)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>)
      k_scale(%ks : memref<1xf32>) v_scale(%ks : memref<1xf32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, max_query_len = 2048 : i64}
  return
}
