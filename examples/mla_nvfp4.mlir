// DeepSeek-style MLA decode over 368-byte NVFP4 records whose outer scale
// is stored per token (s_t = token_amax / (6*448)), with speculative decode:
// two sequences, up to 4 query tokens each, 16 heads.
!records = !pattn.record_cache<block_size = 64,
                               record = !pattn.record<nvfp4_ds_mla_fp8_rope, token>>

func.func @mla_step(%pages: memref<?x64x368xi8>,
                    %latent: memref<8x512xbf16>, %rope: memref<8x64xbf16>,
                    %slots: memref<8xi64>,
                    %query: memref<8x16x576xbf16>,
                    %block_table: memref<2x32xi32>, %seq_lens: memref<2xi32>,
                    %query_start: memref<3xi32>,
                    %out: memref<8x16x512xbf16>) {
  %cache = pattn.bind_cache storage(%pages : memref<?x64x368xi8>) : !records
  pattn.write_record latent(%latent : memref<8x512xbf16>)
      rope(%rope : memref<8x64xbf16>) into(%cache : !records)
      slots(%slots : memref<8xi64>)
  pattn.mla_decode query(%query : memref<8x16x576xbf16>) cache(%cache : !records)
      block_table(%block_table : memref<2x32xi32>)
      seq_lens(%seq_lens : memref<2xi32>)
      query_start(%query_start : memref<3xi32>)
      outs(%out : memref<8x16x512xbf16>)
      {num_heads = 16 : i64, max_query_len = 4 : i64, softmax_scale = 0.0721 : f32}
  return
}
