// 128-head MLA decodes over the three record presets (bf16 queries): on an
// sm_90a-only build they take the warpgroup (wgmma) kernel.
func.func @fp8_ds_mla(%p: memref<?x64x656xi8>, %q: memref<?x128x576xbf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %o: memref<?x128x512xbf16>) {
  %c = pattn.bind_cache storage(%p : memref<?x64x656xi8>) : !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
  pattn.mla_decode query(%q : memref<?x128x576xbf16>) cache(%c : !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>) block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) outs(%o : memref<?x128x512xbf16>) {num_heads = 128 : i64}
  return
}
func.func @nvfp4_ds_mla(%p: memref<?x64x432xi8>, %q: memref<?x128x576xbf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %os: memref<1xf32>, %o: memref<?x128x512xbf16>) {
  %c = pattn.bind_cache storage(%p : memref<?x64x432xi8>) : !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla>>
  pattn.mla_decode query(%q : memref<?x128x576xbf16>) cache(%c : !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla>>) block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) outer_scale(%os : memref<1xf32>) outs(%o : memref<?x128x512xbf16>) {num_heads = 128 : i64}
  return
}
func.func @nvfp4_ds_mla_fp8_rope(%p: memref<?x64x368xi8>, %q: memref<?x64x576xbf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %o: memref<?x64x512xbf16>) {
  %c = pattn.bind_cache storage(%p : memref<?x64x368xi8>) : !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla_fp8_rope, token>>
  pattn.mla_decode query(%q : memref<?x64x576xbf16>) cache(%c : !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla_fp8_rope, token>>) block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) outs(%o : memref<?x64x512xbf16>) {num_heads = 64 : i64}
  return
}
