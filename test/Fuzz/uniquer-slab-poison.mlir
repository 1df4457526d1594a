// A fuzzer input (scripts/fuzz.sh, first hour): the parser loads the func
// dialect while building the types this text names, and under ASan that
// tripped a false use-after-poison in MLIR's storage uniquer (instrumented
// pattn code poisons a BumpPtrAllocator slab's tail, uninstrumented
// libMLIR.so allocates from it). Not a pattn bug: fuzz.sh now runs with
// allow_user_poisoning=0. Kept as a seed and a check that the text is a
// clean diagnostic.
// RUN: not pattn-opt %s -o /dev/null 2>&1 | FileCheck %s
// CHECK: error: expected integer number of results
// DeepSeek-style MLA decode over 368-byte NVFP4 records whose outer scale
// is stored per token (s_t = token_amax / (6*448)), with speculative decode:
// two sequences, up to 4 query tokens each, 16 heads.
!records = !pattn.record_cache<block_size = 64,
                               record = !pattn.record<nvfp4_ds_mla_fp8_rope, token>>



!r = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
func.func @f(%c: !r, %l: memref<bf16>, %p: memref<2x64xbf16>, %s: memref<2xi64>) {
  // A rafunc.func @mla_step(%pages: memref<?x64x368xi8>,
                    %latent: memref<8x512xbf16>, %rope: memref<8x64xbf16>,
                    %slots: memref<8xi64>,
         nk-0 latent is reported, not read past its rank (this crashed).
  // expected-error @below {{latent must have s           %query: memref<8x16x576xbf16>,
                    %block_table: memref<2x32xi32>, %seq_lens: memref<2xi32>,
                    %query_start: memref<3xi32>,
                    %out: memref<8x16x512xbf16>) {
  %cache = pattn.bind_cache storage(%pages : memref<?x64x368xi8>) : !records
 $pattn.write_record latent(%latent : memref<8x512xbf16>)
      rope(%rope : memref<8x64xbf16>) into(%cachts(%slots : memref<8xi64>)
  pattn.mla_decode query(%query : memref<8x16x576xbf16>) cache(%cache : !records)
      block_table(%block_table : memref<2x32xi32>)
      seq_lens(%seq_lens : memref<2xi32>)
      query_start(%query_start : memref<3xi32>)
      outs(%out : memref<8x16x512xbf08>)
      {num_heads = 16 : i64,hape [?, 512], got 'memref<bf16>'}}
  pattn.write_record latent(%l : memref<bf16>) rope(%p : memref<2x64xbf16> max_query_len = 4 : i64, sof) into(%c : !r) slots(%s tmax: memref<2xi64>)
  retu_scrn
}ale = 

0.0721 : f32}
  return
}
