// The MLA lane rows (M4-M6, M8) on custom records: the latent and rope
// widths, the lane formats, the lane alignment and the shared memory of a
// tile. Each op breaks one rule; the remark names it.
//
// RUN: pattn-opt %s --pattn-select-backend="chips=sm_90a" --verify-diagnostics --split-input-file
// RUN: pattn-opt %s --pattn-select-backend="chips=sm_86" --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=SM86

// M4: latent a multiple of 64 up to 512.
!r = !pattn.record_cache<block_size = 16, record = !pattn.record<144 bytes, none, {latent: 96 x f8E4M3FN at 0, rope: 16 x bf16 at 96}>>
func.func @latent96(%c: !r, %q: memref<2x16x112xbf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x16x96xbf16>) {
  // expected-remark @below {{portable: MLA latent 96 not a multiple of 64 up to 512}}
  pattn.mla_decode query(%q : memref<2x16x112xbf16>) cache(%c : !r) block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>) outs(%o : memref<2x16x96xbf16>) {num_heads = 16 : i64}
  return
}

// -----

// M4: P V reads the latent in chunks of 8 words per warp, so an e4m3
// latent (4 channels per word) needs 4 x 32 channels.
!r = !pattn.record_cache<block_size = 16, record = !pattn.record<96 bytes, none, {latent: 64 x f8E4M3FN at 0, rope: 16 x bf16 at 64}>>
func.func @e4m3_latent64(%c: !r, %q: memref<2x16x80xbf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x16x64xbf16>) {
  // expected-remark @below {{portable: MLA latent 64 not a multiple of 128 for its 4-channel words (4 warps x 8 words)}}
  pattn.mla_decode query(%q : memref<2x16x80xbf16>) cache(%c : !r) block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>) outs(%o : memref<2x16x64xbf16>) {num_heads = 16 : i64}
  return
}

// -----

// M4: rope a multiple of 16 up to 128.
!r = !pattn.record_cache<block_size = 16, record = !pattn.record<144 bytes, none, {latent: 128 x f8E4M3FN at 0, rope: 8 x bf16 at 128}>>
func.func @rope8(%c: !r, %q: memref<2x16x136xbf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x16x128xbf16>) {
  // expected-remark @below {{portable: MLA rope 8 not a multiple of 16 up to 128}}
  pattn.mla_decode query(%q : memref<2x16x136xbf16>) cache(%c : !r) block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>) outs(%o : memref<2x16x128xbf16>) {num_heads = 16 : i64}
  return
}

// -----

// M5: an i8 latent has no exact bf16 operand form here.
!r = !pattn.record_cache<block_size = 16, record = !pattn.record<176 bytes, none, {latent: 128 x i8 at 0 scaled_by s, s: 1 x f32 at 128, rope: 16 x bf16 at 144}>>
func.func @i8_latent(%c: !r, %q: memref<2x16x144xbf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x16x128xbf16>) {
  // expected-remark @below {{portable: MLA latent lane 128 x i8 scaled_by 1 x f32 not bf16, e4m3 (optionally with f32 scales per multiple of 32 channels) or e2m1 with e4m3 group-16 scales}}
  pattn.mla_decode query(%q : memref<2x16x144xbf16>) cache(%c : !r) block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>) outs(%o : memref<2x16x128xbf16>) {num_heads = 16 : i64}
  return
}

// -----

// M5: an f32 block scale per 8 channels splits a k-step.
!r = !pattn.record_cache<block_size = 16, record = !pattn.record<224 bytes, none, {latent: 128 x f8E4M3FN at 0 scaled_by s, s: 16 x f32 at 128, rope: 16 x bf16 at 192}>>
func.func @blocks_of_8(%c: !r, %q: memref<2x16x144xbf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x16x128xbf16>) {
  // expected-remark @below {{portable: MLA latent lane 128 x f8E4M3FN scaled_by 16 x f32 not bf16, e4m3}}
  pattn.mla_decode query(%q : memref<2x16x144xbf16>) cache(%c : !r) block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>) outs(%o : memref<2x16x128xbf16>) {num_heads = 16 : i64}
  return
}

// -----

// M5: an f32 block scale per 16 channels splits a 32-channel chunk of P V.
!r = !pattn.record_cache<block_size = 16, record = !pattn.record<192 bytes, none, {latent: 128 x f8E4M3FN at 0 scaled_by s, s: 8 x f32 at 128, rope: 16 x bf16 at 160}>>
func.func @blocks_of_16(%c: !r, %q: memref<2x16x144xbf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x16x128xbf16>) {
  // expected-remark @below {{portable: MLA latent lane 128 x f8E4M3FN scaled_by 8 x f32 not bf16, e4m3 (optionally with f32 scales per multiple of 32 channels)}}
  pattn.mla_decode query(%q : memref<2x16x144xbf16>) cache(%c : !r) block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>) outs(%o : memref<2x16x128xbf16>) {num_heads = 16 : i64}
  return
}

// -----

// M5: an f16 rope lane.
!r = !pattn.record_cache<block_size = 16, record = !pattn.record<160 bytes, none, {latent: 128 x f8E4M3FN at 0, rope: 16 x f16 at 128}>>
func.func @f16_rope(%c: !r, %q: memref<2x16x144xbf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x16x128xbf16>) {
  // expected-remark @below {{portable: MLA rope lane 16 x f16 not bf16 or e4m3 (optionally with one f32 scale)}}
  pattn.mla_decode query(%q : memref<2x16x144xbf16>) cache(%c : !r) block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>) outs(%o : memref<2x16x128xbf16>) {num_heads = 16 : i64}
  return
}

// -----

// M6: a bf16 rope lane off a 16-byte boundary.
!r = !pattn.record_cache<block_size = 16, record = !pattn.record<176 bytes, none, {latent: 128 x f8E4M3FN at 0, rope: 16 x bf16 at 136}>>
func.func @rope_at_136(%c: !r, %q: memref<2x16x144xbf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x16x128xbf16>) {
  // expected-remark @below {{portable: MLA lanes at bytes 0 and 136 not aligned to their 8-element pieces}}
  pattn.mla_decode query(%q : memref<2x16x144xbf16>) cache(%c : !r) block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>) outs(%o : memref<2x16x128xbf16>) {num_heads = 16 : i64}
  return
}

// -----

// A bf16 latent (FlashInfer's cache, as a record) and an unscaled e4m3
// rope are eligible.
!r = !pattn.record_cache<block_size = 16, record = !pattn.record<1088 bytes, none, {latent: 512 x bf16 at 0, rope: 64 x f8E4M3FN at 1024}>>
func.func @bf16_latent(%c: !r, %q: memref<2x16x576xbf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x16x512xbf16>) {
  // expected-remark @below {{xqa: eligible on sm_90a}}
  pattn.mla_decode query(%q : memref<2x16x576xbf16>) cache(%c : !r) block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>) outs(%o : memref<2x16x512xbf16>) {num_heads = 16 : i64}
  return
}

// -----

// M8: 2048-byte records need two slots of 32 x 2064 bytes of raw tile;
// sm_90a has room (227 KiB per block), sm_86 (99 KiB) does not.
// SM86: remark: portable: MLA tile needs {{[0-9]+}} bytes of shared memory > 101376 on sm_86
!r = !pattn.record_cache<block_size = 16, record = !pattn.record<2048 bytes, none, {latent: 512 x bf16 at 0, rope: 64 x bf16 at 1024}>>
func.func @big_record(%c: !r, %q: memref<2x16x576xbf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x16x512xbf16>) {
  // expected-remark @below {{xqa: eligible on sm_90a}}
  pattn.mla_decode query(%q : memref<2x16x576xbf16>) cache(%c : !r) block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>) outs(%o : memref<2x16x512xbf16>) {num_heads = 16 : i64}
  return
}
