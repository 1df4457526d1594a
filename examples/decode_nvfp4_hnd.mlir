// Decode with an NVFP4 K cache (E2M1 codes, E4M3 scales per 16 channels,
// per-token outer scales) and an FP8 E4M3 V cache with per-token scales, in
// the HND page layout, with attention sinks, a 4096-token sliding window and
// logit softcapping (Gemma/GPT-OSS style), 64 query heads over 8 KV heads.
!k_cache = !pattn.cache<block_size = 32, kv_heads = 8, head_dim = 64,
                        encoding = nvfp4, scale = token, layout = hnd>
!v_cache = !pattn.cache<block_size = 32, kv_heads = 8, head_dim = 64,
                        encoding = f8e4m3, scale = token, layout = hnd>

func.func @decode_sliding(%k_pages: memref<?x8x32x32xi8>,
                          %k_groups: memref<?x8x32x4xf8E4M3FN>,
                          %k_tokens: memref<?x32x8xf32>,
                          %v_pages: memref<?x8x32x64xi8>,
                          %v_tokens: memref<?x32x8xf32>,
                          %query: memref<?x64x64xbf16>,
                          %block_table: memref<?x128xi32>, %seq_lens: memref<?xi32>,
                          %sinks: memref<64xf32>,
                          %out: memref<?x64x64xbf16>) {
  %k = pattn.bind_cache storage(%k_pages : memref<?x8x32x32xi8>)
         group_scales(%k_groups : memref<?x8x32x4xf8E4M3FN>)
         token_scales(%k_tokens : memref<?x32x8xf32>) : !k_cache
  %v = pattn.bind_cache storage(%v_pages : memref<?x8x32x64xi8>)
         token_scales(%v_tokens : memref<?x32x8xf32>) : !v_cache
  pattn.paged_attention query(%query : memref<?x64x64xbf16>)
      key(%k : !k_cache) value(%v : !v_cache)
      block_table(%block_table : memref<?x128xi32>)
      seq_lens(%seq_lens : memref<?xi32>) sinks(%sinks : memref<64xf32>)
      outs(%out : memref<?x64x64xbf16>)
      {num_heads = 64 : i64, softcap = 30.0 : f32, window = 4096 : i64}
  return
}
