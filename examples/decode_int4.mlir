// One decode step of a Llama-style layer (32 query heads over 8 KV heads,
// head_dim 128) on a paged cache with 16-token pages: K is INT4 with
// per-channel scales, V is INT8 with one tensor scale. The step appends the
// new token's K and V rows, then attends over the whole cache.
!k_cache = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128,
                        encoding = i4, scale = channel>
!v_cache = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128,
                        encoding = i8, scale = tensor>

func.func @decode_step(%k_pages: memref<?x16x8x64xi8>,
                       %v_pages: memref<?x16x8x128xi8>,
                       %k_new: memref<4x8x128xf16>, %v_new: memref<4x8x128xf16>,
                       %slots: memref<4xi64>,
                       %k_scale: memref<8x128xf32>, %v_scale: memref<1xf32>,
                       %query: memref<4x32x128xf16>,
                       %block_table: memref<4x512xi32>, %seq_lens: memref<4xi32>,
                       %out: memref<4x32x128xf16>) {
  %k = pattn.bind_cache storage(%k_pages : memref<?x16x8x64xi8>) : !k_cache
  %v = pattn.bind_cache storage(%v_pages : memref<?x16x8x128xi8>) : !v_cache
  pattn.write_cache values(%k_new : memref<4x8x128xf16>) into(%k : !k_cache)
      slots(%slots : memref<4xi64>) scale(%k_scale : memref<8x128xf32>)
  pattn.write_cache values(%v_new : memref<4x8x128xf16>) into(%v : !v_cache)
      slots(%slots : memref<4xi64>) scale(%v_scale : memref<1xf32>)
  pattn.paged_attention query(%query : memref<4x32x128xf16>)
      key(%k : !k_cache) value(%v : !v_cache)
      block_table(%block_table : memref<4x512xi32>)
      seq_lens(%seq_lens : memref<4xi32>)
      k_scale(%k_scale : memref<8x128xf32>) v_scale(%v_scale : memref<1xf32>)
      outs(%out : memref<4x32x128xf16>) {num_heads = 32 : i64}
  return
}
