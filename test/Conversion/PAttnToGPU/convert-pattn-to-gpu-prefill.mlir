// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode="chips=sm_90a prompt-kernel=prefill-mma-sync" --convert-pattn-to-gpu=chips=sm_90a 2>/dev/null | FileCheck %s

// A prompt on the prefill family: 64 rows a block, query tiles of 64 / g =
// 16 tokens. The host launches a bound on the tiles, (tokens + batch x 15)
// / 16, on the grid's x, the splits on y and the KV heads on z, then the
// shared merge where there are several splits. In the kernel, each int4 tile is decoded once into shared
// memory (one 16-byte chunk of 32 codes per thread and pass, stored as four
// words of f16 pairs) before the warps' ldmatrix, mma and softmax.
// The batch is split (the op's decode_plan): sequences of at most 16 / g =
// 4 query tokens are the XQA decode kernel's. The prefill family runs
// first: with one split their blocks stop at once, with several they
// give their rows no keys (zeros); the decode kernel and its merge then
// write them. The decode side's workspace has batch x 4
// token slots, not the query's tokens, which are mostly the prefill
// family's.
// CHECK-LABEL: func.func @prompt
// CHECK: %[[PAD:.*]] = arith.muli %{{.*}}, %c15 : index
// CHECK: %[[SUM:.*]] = arith.addi %{{.*}}, %[[PAD]]
// CHECK: %[[TILES:.*]] = arith.divsi %[[SUM]], %c16
// With one split the prefill kernel finishes its rows itself: the
// workspace has no rows then, and the merge runs only with several splits.
// CHECK: %[[SPLIT:.*]] = arith.cmpi sgt, %[[SPLITS:.*]], %c1{{.*}} : index
// CHECK: %[[WROWS:.*]] = arith.select %[[SPLIT]], %{{.*}}, %c0{{.*}} : index
// CHECK: gpu.alloc async [%{{.*}}] (%[[SPLITS]], %[[WROWS]]) : memref<?x?x128xf32>
// CHECK: gpu.launch_func async [%{{.*}}] @pattn_kernels{{.*}}::@pattn_prefill_{{[0-9a-f]+}} blocks in (%[[TILES]], %[[SPLITS]], %c8{{.*}})
// CHECK: %[[MERGES:.*]] = arith.cmpi sgt, %[[SPLITS]], %c1{{.*}} : index
// CHECK-NEXT: scf.if %[[MERGES]] {
// CHECK: gpu.launch_func async [%{{.*}}] @pattn_kernels{{.*}}::@pattn_merge_{{[0-9a-f]+}}
// CHECK: gpu.dealloc
// CHECK: scf.yield %{{.*}}, %{{.*}} : index, index
// CHECK: %[[BATCH:.*]] = memref.dim %{{.*}}, %c0{{.*}} : memref<?x?xi32>
// CHECK: %[[SLOTS:.*]] = arith.muli %[[BATCH]], %c4{{.*}} : index
// CHECK: %[[ROWS:.*]] = arith.muli %[[SLOTS]], %c32{{.*}} : index
// CHECK: gpu.alloc async [%{{.*}}] (%{{.*}}, %[[ROWS]]) : memref<?x?x128xf32>
// CHECK: gpu.launch_func async [%{{.*}}] @pattn_kernels{{.*}}::@pattn_xqa_decode_{{[0-9a-f]+}}
// CHECK: gpu.launch_func async [%{{.*}}] @pattn_kernels{{.*}}::@pattn_merge_{{[0-9a-f]+}}
// CHECK: gpu.func @pattn_prefill_{{[0-9a-f]+}}
// CHECK-SAME: nvvm.maxntid = array<i32: 128, 1, 1>, nvvm.minctasm = 2 : i32
// CHECK: gpu.block_id  x
// CHECK: gpu.block_id  y
// CHECK: gpu.block_id  z
// The scan over query_start: sequence b has ceil(n_b / 16) tiles. A tile
// of a sequence of n_b <= 4 (the decode kernel's) stops there with one
// split (a workspace without rows): only a longer sequence's block or one
// with several splits runs on, the latter with no keys for a short one.
// CHECK: scf.for
// CHECK:   arith.addi %{{.*}}, %c15_i32 : i32
// CHECK:   arith.divsi %{{.*}}, %c16_i32 : i32
// CHECK: %[[LONG:.*]] = arith.cmpi sgt, %[[TOKENS:.*]], %c4_i32{{.*}} : i32
// CHECK: %[[HELD:.*]] = memref.dim %arg{{[0-9]+}}, %c1{{.*}} : memref<?x?x2xf32>
// CHECK: %[[HAS:.*]] = arith.cmpi sgt, %[[HELD]], %c0{{.*}} : index
// CHECK: %[[RUNS:.*]] = arith.ori %[[LONG]], %[[HAS]] : i1
// CHECK: arith.cmpi sle, %[[TOKENS]], %c4_i32{{.*}} : i32
// CHECK: arith.select
// CHECK: scf.if %[[RUNS]] {
// The tile loop: the decode into shared memory, a barrier, the steps.
// CHECK: scf.for
// CHECK: nvvm.cp.async.wait.group
// CHECK: vector.load %{{.*}} : memref<{{[0-9]+}}xi32, #gpu.address_space<workgroup>>, vector<4xi32>
// CHECK: vector.store %{{.*}} : memref<{{[0-9]+}}xi32, #gpu.address_space<workgroup>>, vector<4xi32>
// CHECK: gpu.barrier
// CHECK: nvgpu.ldmatrix
// CHECK: nvvm.mma.sync
// CHECK: nvvm.vote.sync  all
// CHECK: nvvm.vote.sync  any
// CHECK: nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = true}
// Each real row: given a workspace without rows (one split), normalized
// with the merge's arithmetic and rounded once into the output; else into
// the workspace.
// CHECK: %[[WROWS:.*]] = memref.dim %arg{{[0-9]+}}, %c1{{.*}} : memref<?x?x2xf32>
// CHECK: %[[UNSPLIT:.*]] = arith.cmpi eq, %[[WROWS]], %c0{{.*}} : index
// CHECK: scf.if %[[UNSPLIT]] {
// CHECK: math.exp
// CHECK: arith.divf
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK: memref.store %{{.*}}, %arg{{[0-9]+}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<?x32x128xf16>
// CHECK: } else {
// CHECK: memref.store %{{.*}}, %arg{{[0-9]+}}[%block_id_y, %{{.*}}, %{{.*}}] : memref<?x?x128xf32>
// The decode side's merge, last: a block per token slot b x 4 + k of
// sequence b, a real row where k < n_b <= 4, written to token
// query_start[b] + k.
// CHECK: gpu.func @pattn_xqa_decode_
// CHECK: gpu.func @pattn_merge_
// CHECK: %[[SLOT:.*]] = arith.divsi %block_id_x, %c32 : index
// CHECK: %[[SEQ:.*]] = arith.divsi %[[SLOT]], %c4 : index
// CHECK: memref.load %arg0[%[[SEQ]]] : memref<?xi32>
// CHECK: arith.cmpi sle, %{{.*}}, %c4_i32 : i32
// CHECK: arith.remsi %[[SLOT]], %c4 : index
!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = tensor>
func.func @prompt(%kp: memref<?x16x8x64xi8>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %ks: memref<1xf32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x64xi8>) : !k
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%k : !k)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>)
      k_scale(%ks : memref<1xf32>) v_scale(%ks : memref<1xf32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, max_query_len = 2048 : i64}
  return
}
