// An f16 decode whose XQA plan on sm_90a needs more shared memory than sm_86
// has (convert-pattn-to-gpu-plans.mlir).
!c = !pattn.cache<block_size = 16, kv_heads = 4, head_dim = 256, encoding = f16, scale = none>
func.func @big(%kp: memref<?x16x4x512xi8>, %vp: memref<?x16x4x512xi8>, %q: memref<?x32x256xf16>, %bt: memref<?x?xi32>, %lens: memref<?xi32>, %o: memref<?x32x256xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x4x512xi8>) : !c
  %v = pattn.bind_cache storage(%vp : memref<?x16x4x512xi8>) : !c
  pattn.paged_attention query(%q : memref<?x32x256xf16>) key(%k : !c) value(%v : !c) block_table(%bt : memref<?x?xi32>) seq_lens(%lens : memref<?xi32>) outs(%o : memref<?x32x256xf16>) {num_heads = 32 : i64}
  return
}
