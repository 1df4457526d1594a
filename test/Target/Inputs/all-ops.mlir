// Every encoding x granularity pattn lowers, and every MLA record preset.
// Used by the per-chip ptxas tests beside this folder.

func.func @enc_0_f16_none(%p: memref<?x16x2x128xi8>, %v: memref<?x2x64xf32>, %slots: memref<?xi64>, %q: memref<?x8x64xbf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %sinks: memref<8xf32>, %o: memref<?x8x64xbf16>) {
  %c = pattn.bind_cache storage(%p : memref<?x16x2x128xi8>) : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f16, scale = none>
  pattn.write_cache values(%v : memref<?x2x64xf32>) into(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f16, scale = none>) slots(%slots : memref<?xi64>)
  pattn.paged_attention query(%q : memref<?x8x64xbf16>) key(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f16, scale = none>) value(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f16, scale = none>) block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>) sinks(%sinks : memref<8xf32>) outs(%o : memref<?x8x64xbf16>) {num_heads = 8 : i64, max_query_len = 4 : i64, softcap = 30.0 : f32, window = 256 : i64}
  return
}

func.func @enc_1_bf16_none(%p: memref<?x16x2x128xi8>, %v: memref<?x2x64xf32>, %slots: memref<?xi64>, %q: memref<?x8x64xbf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %sinks: memref<8xf32>, %o: memref<?x8x64xbf16>) {
  %c = pattn.bind_cache storage(%p : memref<?x16x2x128xi8>) : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = bf16, scale = none>
  pattn.write_cache values(%v : memref<?x2x64xf32>) into(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = bf16, scale = none>) slots(%slots : memref<?xi64>)
  pattn.paged_attention query(%q : memref<?x8x64xbf16>) key(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = bf16, scale = none>) value(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = bf16, scale = none>) block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>) sinks(%sinks : memref<8xf32>) outs(%o : memref<?x8x64xbf16>) {num_heads = 8 : i64, max_query_len = 4 : i64, softcap = 30.0 : f32, window = 256 : i64}
  return
}

func.func @enc_2_i8_tensor(%p: memref<?x16x2x64xi8>, %v: memref<?x2x64xf32>, %slots: memref<?xi64>, %s: memref<1xf32>, %q: memref<?x8x64xbf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %sinks: memref<8xf32>, %o: memref<?x8x64xbf16>) {
  %c = pattn.bind_cache storage(%p : memref<?x16x2x64xi8>) : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = tensor>
  pattn.write_cache values(%v : memref<?x2x64xf32>) into(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = tensor>) slots(%slots : memref<?xi64>) scale(%s : memref<1xf32>)
  pattn.paged_attention query(%q : memref<?x8x64xbf16>) key(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = tensor>) value(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = tensor>) block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>) k_scale(%s : memref<1xf32>) v_scale(%s : memref<1xf32>) sinks(%sinks : memref<8xf32>) outs(%o : memref<?x8x64xbf16>) {num_heads = 8 : i64, max_query_len = 4 : i64, softcap = 30.0 : f32, window = 256 : i64}
  return
}

func.func @enc_3_i8_channel(%p: memref<?x16x2x64xi8>, %v: memref<?x2x64xf32>, %slots: memref<?xi64>, %s: memref<2x64xf32>, %q: memref<?x8x64xbf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %sinks: memref<8xf32>, %o: memref<?x8x64xbf16>) {
  %c = pattn.bind_cache storage(%p : memref<?x16x2x64xi8>) : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = channel>
  pattn.write_cache values(%v : memref<?x2x64xf32>) into(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = channel>) slots(%slots : memref<?xi64>) scale(%s : memref<2x64xf32>)
  pattn.paged_attention query(%q : memref<?x8x64xbf16>) key(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = channel>) value(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = channel>) block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>) k_scale(%s : memref<2x64xf32>) v_scale(%s : memref<2x64xf32>) sinks(%sinks : memref<8xf32>) outs(%o : memref<?x8x64xbf16>) {num_heads = 8 : i64, max_query_len = 4 : i64, softcap = 30.0 : f32, window = 256 : i64}
  return
}

func.func @enc_4_f8e4m3_token(%p: memref<?x16x2x64xi8>, %t: memref<?x16x2xf32>, %v: memref<?x2x64xf32>, %slots: memref<?xi64>, %q: memref<?x8x64xbf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %sinks: memref<8xf32>, %o: memref<?x8x64xbf16>) {
  %c = pattn.bind_cache storage(%p : memref<?x16x2x64xi8>) token_scales(%t : memref<?x16x2xf32>) : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f8e4m3, scale = token>
  pattn.write_cache values(%v : memref<?x2x64xf32>) into(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f8e4m3, scale = token>) slots(%slots : memref<?xi64>)
  pattn.paged_attention query(%q : memref<?x8x64xbf16>) key(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f8e4m3, scale = token>) value(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f8e4m3, scale = token>) block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>) sinks(%sinks : memref<8xf32>) outs(%o : memref<?x8x64xbf16>) {num_heads = 8 : i64, max_query_len = 4 : i64, softcap = 30.0 : f32, window = 256 : i64}
  return
}

func.func @enc_5_f8e5m2_tensor(%p: memref<?x16x2x64xi8>, %v: memref<?x2x64xf32>, %slots: memref<?xi64>, %s: memref<1xf32>, %q: memref<?x8x64xbf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %sinks: memref<8xf32>, %o: memref<?x8x64xbf16>) {
  %c = pattn.bind_cache storage(%p : memref<?x16x2x64xi8>) : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f8e5m2, scale = tensor>
  pattn.write_cache values(%v : memref<?x2x64xf32>) into(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f8e5m2, scale = tensor>) slots(%slots : memref<?xi64>) scale(%s : memref<1xf32>)
  pattn.paged_attention query(%q : memref<?x8x64xbf16>) key(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f8e5m2, scale = tensor>) value(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f8e5m2, scale = tensor>) block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>) k_scale(%s : memref<1xf32>) v_scale(%s : memref<1xf32>) sinks(%sinks : memref<8xf32>) outs(%o : memref<?x8x64xbf16>) {num_heads = 8 : i64, max_query_len = 4 : i64, softcap = 30.0 : f32, window = 256 : i64}
  return
}

func.func @enc_6_i4_channel(%p: memref<?x16x2x32xi8>, %v: memref<?x2x64xf32>, %slots: memref<?xi64>, %s: memref<2x64xf32>, %q: memref<?x8x64xbf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %sinks: memref<8xf32>, %o: memref<?x8x64xbf16>) {
  %c = pattn.bind_cache storage(%p : memref<?x16x2x32xi8>) : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i4, scale = channel>
  pattn.write_cache values(%v : memref<?x2x64xf32>) into(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i4, scale = channel>) slots(%slots : memref<?xi64>) scale(%s : memref<2x64xf32>)
  pattn.paged_attention query(%q : memref<?x8x64xbf16>) key(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i4, scale = channel>) value(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i4, scale = channel>) block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>) k_scale(%s : memref<2x64xf32>) v_scale(%s : memref<2x64xf32>) sinks(%sinks : memref<8xf32>) outs(%o : memref<?x8x64xbf16>) {num_heads = 8 : i64, max_query_len = 4 : i64, softcap = 30.0 : f32, window = 256 : i64}
  return
}

func.func @enc_7_i4_token(%p: memref<?x16x2x32xi8>, %t: memref<?x16x2xf32>, %v: memref<?x2x64xf32>, %slots: memref<?xi64>, %q: memref<?x8x64xbf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %sinks: memref<8xf32>, %o: memref<?x8x64xbf16>) {
  %c = pattn.bind_cache storage(%p : memref<?x16x2x32xi8>) token_scales(%t : memref<?x16x2xf32>) : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i4, scale = token>
  pattn.write_cache values(%v : memref<?x2x64xf32>) into(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i4, scale = token>) slots(%slots : memref<?xi64>)
  pattn.paged_attention query(%q : memref<?x8x64xbf16>) key(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i4, scale = token>) value(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i4, scale = token>) block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>) sinks(%sinks : memref<8xf32>) outs(%o : memref<?x8x64xbf16>) {num_heads = 8 : i64, max_query_len = 4 : i64, softcap = 30.0 : f32, window = 256 : i64}
  return
}

func.func @enc_8_nvfp4_tensor(%p: memref<?x16x2x32xi8>, %g: memref<?x16x2x4xf8E4M3FN>, %v: memref<?x2x64xf32>, %slots: memref<?xi64>, %s: memref<1xf32>, %q: memref<?x8x64xbf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %sinks: memref<8xf32>, %o: memref<?x8x64xbf16>) {
  %c = pattn.bind_cache storage(%p : memref<?x16x2x32xi8>) group_scales(%g : memref<?x16x2x4xf8E4M3FN>) : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = nvfp4, scale = tensor>
  pattn.write_cache values(%v : memref<?x2x64xf32>) into(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = nvfp4, scale = tensor>) slots(%slots : memref<?xi64>) scale(%s : memref<1xf32>)
  pattn.paged_attention query(%q : memref<?x8x64xbf16>) key(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = nvfp4, scale = tensor>) value(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = nvfp4, scale = tensor>) block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>) k_scale(%s : memref<1xf32>) v_scale(%s : memref<1xf32>) sinks(%sinks : memref<8xf32>) outs(%o : memref<?x8x64xbf16>) {num_heads = 8 : i64, max_query_len = 4 : i64, softcap = 30.0 : f32, window = 256 : i64}
  return
}

func.func @enc_9_nvfp4_token(%p: memref<?x16x2x32xi8>, %g: memref<?x16x2x4xf8E4M3FN>, %t: memref<?x16x2xf32>, %v: memref<?x2x64xf32>, %slots: memref<?xi64>, %q: memref<?x8x64xbf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %sinks: memref<8xf32>, %o: memref<?x8x64xbf16>) {
  %c = pattn.bind_cache storage(%p : memref<?x16x2x32xi8>) group_scales(%g : memref<?x16x2x4xf8E4M3FN>) token_scales(%t : memref<?x16x2xf32>) : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = nvfp4, scale = token>
  pattn.write_cache values(%v : memref<?x2x64xf32>) into(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = nvfp4, scale = token>) slots(%slots : memref<?xi64>)
  pattn.paged_attention query(%q : memref<?x8x64xbf16>) key(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = nvfp4, scale = token>) value(%c : !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = nvfp4, scale = token>) block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>) sinks(%sinks : memref<8xf32>) outs(%o : memref<?x8x64xbf16>) {num_heads = 8 : i64, max_query_len = 4 : i64, softcap = 30.0 : f32, window = 256 : i64}
  return
}

func.func @mla_fp8_ds_mla(%p: memref<?x64x656xi8>, %l: memref<?x512xf16>, %r: memref<?x64xf16>, %slots: memref<?xi32>, %q: memref<?x16x576xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %o: memref<?x16x512xf16>) {
  %c = pattn.bind_cache storage(%p : memref<?x64x656xi8>) : !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
  pattn.write_record latent(%l : memref<?x512xf16>) rope(%r : memref<?x64xf16>) into(%c : !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>) slots(%slots : memref<?xi32>)
  pattn.mla_decode query(%q : memref<?x16x576xf16>) cache(%c : !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>) block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) outs(%o : memref<?x16x512xf16>) {num_heads = 16 : i64}
  return
}

func.func @mla_nvfp4_ds_mla(%p: memref<?x64x432xi8>, %l: memref<?x512xf16>, %r: memref<?x64xf16>, %slots: memref<?xi32>, %os: memref<1xf32>, %q: memref<?x16x576xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %o: memref<?x16x512xf16>) {
  %c = pattn.bind_cache storage(%p : memref<?x64x432xi8>) : !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla>>
  pattn.write_record latent(%l : memref<?x512xf16>) rope(%r : memref<?x64xf16>) into(%c : !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla>>) slots(%slots : memref<?xi32>) outer_scale(%os : memref<1xf32>)
  pattn.mla_decode query(%q : memref<?x16x576xf16>) cache(%c : !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla>>) block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) outer_scale(%os : memref<1xf32>) outs(%o : memref<?x16x512xf16>) {num_heads = 16 : i64}
  return
}

func.func @mla_nvfp4_ds_mla_fp8_rope(%p: memref<?x64x368xi8>, %l: memref<?x512xf16>, %r: memref<?x64xf16>, %slots: memref<?xi32>, %q: memref<?x16x576xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %o: memref<?x16x512xf16>) {
  %c = pattn.bind_cache storage(%p : memref<?x64x368xi8>) : !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla_fp8_rope, token>>
  pattn.write_record latent(%l : memref<?x512xf16>) rope(%r : memref<?x64xf16>) into(%c : !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla_fp8_rope, token>>) slots(%slots : memref<?xi32>)
  pattn.mla_decode query(%q : memref<?x16x576xf16>) cache(%c : !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla_fp8_rope, token>>) block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) outs(%o : memref<?x16x512xf16>) {num_heads = 16 : i64}
  return
}

// The tensor-core MLA decode (bf16 queries, 16 x k heads): each record
// preset, a bf16 latent with an unscaled e4m3 rope, 128 heads and
// speculative decode.
func.func @mla_xqa_fp8_ds_mla(%p: memref<?x64x656xi8>, %q: memref<?x16x576xbf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %o: memref<?x16x512xbf16>) {
  %c = pattn.bind_cache storage(%p : memref<?x64x656xi8>) : !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
  pattn.mla_decode query(%q : memref<?x16x576xbf16>) cache(%c : !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>) block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) outs(%o : memref<?x16x512xbf16>) {num_heads = 16 : i64}
  return
}

func.func @mla_xqa_nvfp4_ds_mla(%p: memref<?x64x432xi8>, %os: memref<1xf32>, %q: memref<?x128x576xbf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %o: memref<?x128x512xbf16>) {
  %c = pattn.bind_cache storage(%p : memref<?x64x432xi8>) : !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla>>
  pattn.mla_decode query(%q : memref<?x128x576xbf16>) cache(%c : !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla>>) block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>) outer_scale(%os : memref<1xf32>) outs(%o : memref<?x128x512xbf16>) {num_heads = 128 : i64, max_query_len = 4 : i64}
  return
}

func.func @mla_xqa_nvfp4_ds_mla_fp8_rope(%p: memref<?x64x368xi8>, %q: memref<?x16x576xbf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %o: memref<?x16x512xbf16>) {
  %c = pattn.bind_cache storage(%p : memref<?x64x368xi8>) : !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla_fp8_rope, token>>
  pattn.mla_decode query(%q : memref<?x16x576xbf16>) cache(%c : !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla_fp8_rope, token>>) block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) outs(%o : memref<?x16x512xbf16>) {num_heads = 16 : i64}
  return
}

func.func @mla_xqa_bf16_latent(%p: memref<?x16x1088xi8>, %q: memref<?x32x576xbf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %o: memref<?x32x512xbf16>) {
  %c = pattn.bind_cache storage(%p : memref<?x16x1088xi8>) : !pattn.record_cache<block_size = 16, record = !pattn.record<1088 bytes, none, {latent: 512 x bf16 at 0, rope: 64 x f8E4M3FN at 1024}>>
  pattn.mla_decode query(%q : memref<?x32x576xbf16>) cache(%c : !pattn.record_cache<block_size = 16, record = !pattn.record<1088 bytes, none, {latent: 512 x bf16 at 0, rope: 64 x f8E4M3FN at 1024}>>) block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) outs(%o : memref<?x32x512xbf16>) {num_heads = 32 : i64}
  return
}

// Rotary embedding: QK-norm + neox on a packed QKV buffer's K heads (f16
// tables, seq_lens positions with query_start), interleaved partial rotary
// with explicit i64 positions (bf16, f32 tables), and in place (f32).
func.func @rotary_packed_norm_neox(%qkv: memref<?x48x128xf16>, %cos: memref<?x64xf16>, %sin: memref<?x64xf16>, %sl: memref<?xi32>, %qs: memref<?xi32>, %w: memref<128xbf16>, %k: memref<?x8x128xf16>) {
  pattn.rotary input(%qkv : memref<?x48x128xf16>) cos(%cos : memref<?x64xf16>) sin(%sin : memref<?x64xf16>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>) norm_weight(%w : memref<128xbf16>) outs(%k : memref<?x8x128xf16>) {first_head = 32 : i64}
  return
}

func.func @rotary_interleaved_partial(%q: memref<?x32x96xbf16>, %cos: memref<?x16xf32>, %sin: memref<?x16xf32>, %pos: memref<?xi64>, %o: memref<?x32x96xbf16>) {
  pattn.rotary input(%q : memref<?x32x96xbf16>) cos(%cos : memref<?x16xf32>) sin(%sin : memref<?x16xf32>) positions(%pos : memref<?xi64>) outs(%o : memref<?x32x96xbf16>) {interleaved = true, position_offset = 3 : i64}
  return
}

func.func @rotary_in_place(%x: memref<?x4x64xf32>, %cos: memref<?x32xbf16>, %sin: memref<?x32xbf16>, %sl: memref<?xi32>, %w: memref<64xf32>) {
  pattn.rotary input(%x : memref<?x4x64xf32>) cos(%cos : memref<?x32xbf16>) sin(%sin : memref<?x32xbf16>) seq_lens(%sl : memref<?xi32>) norm_weight(%w : memref<64xf32>) outs(%x : memref<?x4x64xf32>) {norm_epsilon = 1.0e-05 : f32}
  return
}

// Rotary fused into the cache write it alone feeds (QK-norm, an int4
// channel-scaled cache, the K heads of a packed buffer).
func.func @rotary_fused_into_write(%qkv: memref<?x24x64xbf16>, %cos: memref<?x32xf32>, %sin: memref<?x32xf32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %w: memref<64xbf16>, %pages: memref<?x16x4x32xi8>, %slots: memref<?xi64>, %s: memref<4x64xf32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %qkv, %c0 : memref<?x24x64xbf16>
  %k = memref.alloc(%n) : memref<?x4x64xbf16>
  %c = pattn.bind_cache storage(%pages : memref<?x16x4x32xi8>) : !pattn.cache<block_size = 16, kv_heads = 4, head_dim = 64, encoding = i4, scale = channel>
  pattn.rotary input(%qkv : memref<?x24x64xbf16>) cos(%cos : memref<?x32xf32>) sin(%sin : memref<?x32xf32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>) norm_weight(%w : memref<64xbf16>) outs(%k : memref<?x4x64xbf16>) {first_head = 16 : i64}
  pattn.write_cache values(%k : memref<?x4x64xbf16>) into(%c : !pattn.cache<block_size = 16, kv_heads = 4, head_dim = 64, encoding = i4, scale = channel>) slots(%slots : memref<?xi64>) scale(%s : memref<4x64xf32>)
  memref.dealloc %k : memref<?x4x64xbf16>
  return
}
