// RUN: pattn-opt %s --split-input-file --verify-diagnostics

// One case per verifier rule of the pattn dialect, in the order of SPEC §2-4:
// lanes, records, caches, then each op.

//===----------------------------------------------------------------------===//
// #pattn.lane
//===----------------------------------------------------------------------===//

// expected-error @below {{lane 'x' has element type 'f64'; expected f32, f16, bf16, f8E4M3FN, f8E5M2, f4E2M1FN or i8}}
func.func private @f() attributes {a = #pattn.lane<x: 4 x f64 at 0>}

// -----

// expected-error @below {{lane 'x' is empty}}
func.func private @f() attributes {a = #pattn.lane<x: 0 x f32 at 0>}

// -----

// expected-error @below {{lane 'x' of 3 x 'f4E2M1FN' does not fill whole bytes}}
func.func private @f() attributes {a = #pattn.lane<x: 3 x f4E2M1FN at 0>}

// -----

// expected-error @below {{lane 's' at byte 2 is misaligned for 'f32' (needs 4-byte alignment)}}
func.func private @f() attributes {a = #pattn.lane<s: 1 x f32 at 2>}

// -----

// expected-error @below {{lane 'h' at byte 5 is misaligned for 'bf16' (needs 2-byte alignment)}}
func.func private @f() attributes {a = #pattn.lane<h: 4 x bf16 at 5>}

// -----

// expected-error @below {{lane 'x' cannot scale itself}}
func.func private @f() attributes {a = #pattn.lane<x: 4 x f32 at 0 scaled_by x>}

// -----

// expected-error @below {{record lane needs a name}}
func.func private @f() attributes {a = #pattn.lane<"": 4 x f32 at 0>}

//===----------------------------------------------------------------------===//
// !pattn.record
//===----------------------------------------------------------------------===//

// -----

// expected-error @below {{record size 40 must be a positive multiple of 16 bytes}}
func.func private @f(!pattn.record<40 bytes, none, {a: 8 x f32 at 0}>)

// -----

// SPEC §3's size limits.
// expected-error @below {{record size 8192 exceeds the limit of 4096 bytes}}
func.func private @f(!pattn.record<8192 bytes, none, {a: 8 x f32 at 0}>)

// -----

// A lane's end is 32-bit arithmetic; it is bounded before it can wrap.
// expected-error @below {{lane 'a' (1073741824 x 'f32' at byte 0) reaches past the 4096-byte record limit}}
func.func private @f(!pattn.record<16 bytes, none, {a: 1073741824 x f32 at 0}>)

// -----

// expected-error @below {{lane 'a' (4 x 'f32' at byte 4294967280) reaches past the 4096-byte record limit}}
func.func private @f(!pattn.record<16 bytes, none, {a: 4 x f32 at 4294967280}>)

// -----

// expected-error @below {{head_dim 2048 exceeds the limit of 1024}}
func.func private @f(!pattn.cache<block_size = 16, kv_heads = 8, head_dim = 2048, encoding = i8, scale = tensor>)

// -----

// head_dim 2^62: its row bytes would wrap.
// expected-error @below {{head_dim 4611686018427387904 exceeds the limit of 1024}}
func.func private @f(!pattn.cache<block_size = 16, kv_heads = 8, head_dim = 4611686018427387904, encoding = f16, scale = none>)

// -----

// expected-error @below {{block_size 8192 exceeds the limit of 4096}}
func.func private @f(!pattn.cache<block_size = 8192, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>)

// -----

// block_size 2^40 (it truncated to an i32 0 in the decode kernel).
// expected-error @below {{block_size 1099511627776 exceeds the limit of 4096}}
func.func private @f(!pattn.record_cache<block_size = 1099511627776, record = !pattn.record<fp8_ds_mla>>)

// -----

// expected-error @below {{kv_heads 8192 must be in [1, 4096]}}
func.func private @f(!pattn.cache<block_size = 16, kv_heads = 8192, head_dim = 128, encoding = i8, scale = tensor>)

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<4x?x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x?x128xf16>) {
  // g x query tokens wrapped to 0 and "xqa: eligible" before the limit.
  // expected-error @below {{num_heads 2305843009213693952 must be in [1, 4096]}}
  pattn.paged_attention query(%q : memref<4x?x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x?x128xf16>) {num_heads = 2305843009213693952 : i64}
  return
}

// -----

// expected-error @below {{record needs at least one lane}}
func.func private @f(!pattn.record<16 bytes, none, {}>)

// -----

// expected-error @below {{record has two lanes named 'a'}}
func.func private @f(!pattn.record<32 bytes, none, {a: 4 x f32 at 0, a: 4 x f32 at 16}>)

// -----

// expected-error @below {{lane 'b' spans bytes [16, 48) and overruns the 32-byte record}}
func.func private @f(!pattn.record<32 bytes, none, {a: 4 x f32 at 0, b: 8 x f32 at 16}>)

// -----

// expected-error @below {{lanes 'a' [0, 16) and 'b' [12, 20) overlap}}
func.func private @f(!pattn.record<32 bytes, none, {b: 2 x f32 at 12, a: 4 x f32 at 0}>)

// -----

// expected-error @below {{lane 'v' is scaled by unknown lane 'sc'}}
func.func private @f(!pattn.record<32 bytes, none, {v: 16 x f8E4M3FN at 0 scaled_by sc}>)

// -----

// expected-error @below {{scale lane 's' must hold unscaled f32 or f8E4M3FN values}}
func.func private @f(!pattn.record<32 bytes, none, {v: 16 x f8E4M3FN at 0 scaled_by s, s: 1 x bf16 at 16}>)

// -----

// expected-error @below {{scale lane 's' must hold unscaled f32 or f8E4M3FN values}}
func.func private @f(!pattn.record<32 bytes, none, {v: 16 x f8E4M3FN at 0 scaled_by s, s: 1 x f32 at 16 scaled_by t, t: 1 x f32 at 20}>)

// -----

// A scale lane of the wrong count: 16 values cannot share 3 scales.
// expected-error @below {{lane 'v' has 16 elements, not a multiple of the 3 scales in lane 's'}}
func.func private @f(!pattn.record<32 bytes, none, {v: 16 x f8E4M3FN at 0 scaled_by s, s: 3 x f32 at 16}>)

// -----

// expected-error @below {{e2m1 lane 'q' needs a lane of e4m3 group scales}}
func.func private @f(!pattn.record<32 bytes, tensor, {q: 32 x f4E2M1FN at 0}>)

// -----

// expected-error @below {{e2m1 lane 'q' needs one f8E4M3FN scale per 16 elements, but lane 'sf' holds 1 x 'f8E4M3FN'}}
func.func private @f(!pattn.record<32 bytes, tensor, {q: 32 x f4E2M1FN at 0 scaled_by sf, sf: 1 x f8E4M3FN at 16}>)

// -----

// expected-error @below {{e2m1 lane 'q' needs one f8E4M3FN scale per 16 elements, but lane 'sf' holds 2 x 'f32'}}
func.func private @f(!pattn.record<32 bytes, tensor, {q: 32 x f4E2M1FN at 0 scaled_by sf, sf: 2 x f32 at 16}>)

// -----

// expected-error @below {{a record with e2m1 lanes needs a 'tensor' or 'token' outer scale}}
func.func private @f(!pattn.record<32 bytes, none, {q: 32 x f4E2M1FN at 0 scaled_by sf, sf: 2 x f8E4M3FN at 16}>)

// -----

// expected-error @below {{an outer scale ('tensor') applies to e2m1 lanes, and this record has none}}
func.func private @f(!pattn.record<32 bytes, tensor, {v: 16 x f8E4M3FN at 0 scaled_by s, s: 1 x f32 at 16}>)

// -----

// expected-error @below {{a record in 'token' mode needs a 'token_scale' lane of 1 x f32}}
func.func private @f(!pattn.record<32 bytes, token, {q: 32 x f4E2M1FN at 0 scaled_by sf, sf: 2 x f8E4M3FN at 16}>)

// -----

// expected-error @below {{a record's outer scale is 'none', 'tensor' or 'token', not 'channel'}}
func.func private @f(!pattn.record<32 bytes, channel, {a: 4 x f32 at 0}>)

// -----

// expected-error @below {{expected record mode 'none', 'tensor' or 'token'}}
func.func private @f(!pattn.record<32 bytes, static, {a: 4 x f32 at 0}>)

// -----

// expected-error @below {{unknown record preset 'fp4_ds_mla'; expected fp8_ds_mla, nvfp4_ds_mla or nvfp4_ds_mla_fp8_rope}}
func.func private @f(!pattn.record<fp4_ds_mla>)

// -----

// Only the 368-byte record has room for a per-token outer scale.
// expected-error @below {{record preset 'nvfp4_ds_mla' cannot be used in 'token' mode}}
func.func private @f(!pattn.record<nvfp4_ds_mla, token>)

// -----

// expected-error @below {{record preset 'fp8_ds_mla' cannot be used in 'tensor' mode}}
func.func private @f(!pattn.record<fp8_ds_mla, tensor>)

// -----

// expected-error @below {{record preset 'nvfp4_ds_mla_fp8_rope' cannot be used in 'none' mode}}
func.func private @f(!pattn.record<nvfp4_ds_mla_fp8_rope, none>)

//===----------------------------------------------------------------------===//
// !pattn.record_cache and !pattn.cache
//===----------------------------------------------------------------------===//

// -----

// expected-error @below {{block_size 24 must be a power of two >= 16}}
func.func private @f(!pattn.record_cache<block_size = 24, record = !pattn.record<fp8_ds_mla>>)

// -----

// expected-error @below {{block_size 8 must be a power of two >= 16}}
func.func private @f(!pattn.cache<block_size = 8, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>)

// -----

// expected-error @below {{block_size 48 must be a power of two >= 16}}
func.func private @f(!pattn.cache<block_size = 48, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>)

// -----

// expected-error @below {{kv_heads 0 must be in [1, 4096]}}
func.func private @f(!pattn.cache<block_size = 16, kv_heads = 0, head_dim = 128, encoding = i8, scale = tensor>)

// -----

// expected-error @below {{head_dim 100 must be a positive multiple of 8 for i4}}
func.func private @f(!pattn.cache<block_size = 16, kv_heads = 8, head_dim = 100, encoding = i4, scale = channel>)

// -----

// expected-error @below {{head_dim 0 must be a positive multiple of 8 for f16}}
func.func private @f(!pattn.cache<block_size = 16, kv_heads = 8, head_dim = 0, encoding = f16, scale = none>)

// -----

// expected-error @below {{head_dim 24 must be a positive multiple of 16 for nvfp4}}
func.func private @f(!pattn.cache<block_size = 16, kv_heads = 8, head_dim = 24, encoding = nvfp4, scale = tensor>)

// -----

// expected-error @below {{bf16 caches store values and take no scale (got tensor)}}
func.func private @f(!pattn.cache<block_size = 16, kv_heads = 8, head_dim = 64, encoding = bf16, scale = tensor>)

// -----

// expected-error @below {{nvfp4's outer scale must be 'tensor' or 'token' (got channel)}}
func.func private @f(!pattn.cache<block_size = 16, kv_heads = 8, head_dim = 64, encoding = nvfp4, scale = channel>)

// -----

// expected-error @below {{nvfp4's outer scale must be 'tensor' or 'token' (got none)}}
func.func private @f(!pattn.cache<block_size = 16, kv_heads = 8, head_dim = 64, encoding = nvfp4, scale = none>)

//===----------------------------------------------------------------------===//
// pattn.bind_cache
//===----------------------------------------------------------------------===//

// -----

func.func @f(%s: memref<?x16x8x64xf16>) {
  // expected-error @below {{'pattn.bind_cache' op storage must hold i8 (byte) elements, got 'f16'}}
  %c = pattn.bind_cache storage(%s : memref<?x16x8x64xf16>) : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = channel>
  return
}

// -----

// An i4 row of 128 elements is 64 bytes, not 128.
func.func @f(%s: memref<?x16x8x128xi8>) {
  // expected-error @below {{storage must have shape [?, 16, 8, 64], got 'memref<?x16x8x128xi8>'}}
  %c = pattn.bind_cache storage(%s : memref<?x16x8x128xi8>) : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = channel>
  return
}

// -----

func.func @f(%s: memref<?x16x8x256xi8>) {
  // expected-error @below {{storage must have shape [?, 8, 16, 256], got 'memref<?x16x8x256xi8>'}}
  %c = pattn.bind_cache storage(%s : memref<?x16x8x256xi8>) : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = bf16, scale = none, layout = hnd>
  return
}

// -----

func.func @f(%s: memref<?x16x8xi8>) {
  // expected-error @below {{storage must have shape [?, 16, 8, 128]}}
  %c = pattn.bind_cache storage(%s : memref<?x16x8xi8>) : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
  return
}

// -----

func.func @f(%s: memref<4x16x8x128xi8, strided<[16384, 1024, 128, 1], offset: 7>>) {
  // expected-error @below {{storage must be contiguous within each page: an identity layout, or strided<[S, ...], offset: O>}}
  %c = pattn.bind_cache storage(%s : memref<4x16x8x128xi8, strided<[16384, 1024, 128, 1], offset: 7>>) : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
  return
}

// -----

// Pages a stride apart must still be row-major inside (here the heads and
// tokens are swapped).
func.func @f(%s: memref<?x16x8x128xi8, strided<[32768, 128, 2048, 1]>>) {
  // expected-error @below {{storage must be contiguous within each page}}
  %c = pattn.bind_cache storage(%s : memref<?x16x8x128xi8, strided<[32768, 128, 2048, 1]>>) : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
  return
}

// -----

// Pages closer than one page would overlap.
func.func @f(%s: memref<?x16x8x128xi8, strided<[8192, 1024, 128, 1]>>) {
  // expected-error @below {{storage must be contiguous within each page}}
  %c = pattn.bind_cache storage(%s : memref<?x16x8x128xi8, strided<[8192, 1024, 128, 1]>>) : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
  return
}

// -----

// Every page starts 16-byte aligned.
func.func @f(%s: memref<?x16x8x128xi8, strided<[16392, 1024, 128, 1]>>) {
  // expected-error @below {{both multiples of 16 bytes}}
  %c = pattn.bind_cache storage(%s : memref<?x16x8x128xi8, strided<[16392, 1024, 128, 1]>>) : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
  return
}

// -----

// The page stride is static: the kernels address pages with it.
func.func @f(%s: memref<?x16x8x128xi8, strided<[?, 1024, 128, 1]>>) {
  // expected-error @below {{storage must be contiguous within each page}}
  %c = pattn.bind_cache storage(%s : memref<?x16x8x128xi8, strided<[?, 1024, 128, 1]>>) : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
  return
}

// -----

// Scale buffers stay contiguous.
func.func @f(%s: memref<?x16x8x128xi8, strided<[32768, 1024, 128, 1]>>, %t: memref<?x16x8xf32, strided<[256, 8, 1]>>) {
  // expected-error @below {{token_scales must be a contiguous memref (identity layout)}}
  %c = pattn.bind_cache storage(%s : memref<?x16x8x128xi8, strided<[32768, 1024, 128, 1]>>) token_scales(%t : memref<?x16x8xf32, strided<[256, 8, 1]>>) : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = token>
  return
}

// -----

func.func @f(%s: memref<?x16x8x64xi8>) {
  // expected-error @below {{group_scales required by a nvfp4 cache}}
  %c = pattn.bind_cache storage(%s : memref<?x16x8x64xi8>) : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = nvfp4, scale = tensor>
  return
}

// -----

func.func @f(%s: memref<?x16x8x128xi8>, %g: memref<?x16x8x8xf8E4M3FN>) {
  // expected-error @below {{group_scales given for a i8 cache}}
  %c = pattn.bind_cache storage(%s : memref<?x16x8x128xi8>) group_scales(%g : memref<?x16x8x8xf8E4M3FN>) : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
  return
}

// -----

func.func @f(%s: memref<?x16x8x64xi8>, %g: memref<?x16x8x16xf8E4M3FN>) {
  // expected-error @below {{group_scales must have shape [?, 16, 8, 8], got 'memref<?x16x8x16xf8E4M3FN>'}}
  %c = pattn.bind_cache storage(%s : memref<?x16x8x64xi8>) group_scales(%g : memref<?x16x8x16xf8E4M3FN>) : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = nvfp4, scale = tensor>
  return
}

// -----

func.func @f(%s: memref<?x16x8x64xi8>, %g: memref<?x16x8x8xi8>) {
  // expected-error @below {{group_scales must hold f8E4M3FN elements, got 'i8'}}
  %c = pattn.bind_cache storage(%s : memref<?x16x8x64xi8>) group_scales(%g : memref<?x16x8x8xi8>) : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = nvfp4, scale = tensor>
  return
}

// -----

func.func @f(%s: memref<?x16x8x128xi8>) {
  // expected-error @below {{token_scales required by a cache with 'token' scales}}
  %c = pattn.bind_cache storage(%s : memref<?x16x8x128xi8>) : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f8e4m3, scale = token>
  return
}

// -----

func.func @f(%s: memref<?x16x8x128xi8>, %t: memref<?x16x8xf32>) {
  // expected-error @below {{token_scales given for a cache with 'tensor' scales}}
  %c = pattn.bind_cache storage(%s : memref<?x16x8x128xi8>) token_scales(%t : memref<?x16x8xf32>) : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f8e4m3, scale = tensor>
  return
}

// -----

func.func @f(%s: memref<?x16x8x128xi8>, %t: memref<?x8x16xf32>) {
  // expected-error @below {{token_scales must have shape [?, 16, 8], got 'memref<?x8x16xf32>'}}
  %c = pattn.bind_cache storage(%s : memref<?x16x8x128xi8>) token_scales(%t : memref<?x8x16xf32>) : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = token>
  return
}

// -----

func.func @f(%s: memref<?x16x8x128xi8>, %t: memref<?x16x8xf16>) {
  // expected-error @below {{token_scales must hold f32 elements, got 'f16'}}
  %c = pattn.bind_cache storage(%s : memref<?x16x8x128xi8>) token_scales(%t : memref<?x16x8xf16>) : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = token>
  return
}

// -----

func.func @f(%s: memref<10x16x8x128xi8>, %t: memref<12x16x8xf32>) {
  // expected-error @below {{buffers disagree on the number of pages (10 vs 12)}}
  %c = pattn.bind_cache storage(%s : memref<10x16x8x128xi8>) token_scales(%t : memref<12x16x8xf32>) : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = token>
  return
}

// -----

func.func @f(%s: memref<?x64x656xi8>, %t: memref<?x64x1xf32>) {
  // expected-error @below {{a record cache keeps its scales inside the records and binds no scale buffers}}
  %c = pattn.bind_cache storage(%s : memref<?x64x656xi8>) token_scales(%t : memref<?x64x1xf32>) : !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
  return
}

// -----

// K and V of an engine's [blocks, 2, ...] buffer interleave page by page:
// bound as two cache types, they share no byte (no error, though each
// view's extent reaches past the other's start).
!i8k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
!e4v = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f8e4m3, scale = tensor>
func.func @f(%kv: memref<4x2x16x8x128xi8>) {
  %kp = memref.subview %kv[0, 0, 0, 0, 0] [4, 1, 16, 8, 128] [1, 1, 1, 1, 1] : memref<4x2x16x8x128xi8> to memref<4x16x8x128xi8, strided<[32768, 1024, 128, 1]>>
  %vp = memref.subview %kv[0, 1, 0, 0, 0] [4, 1, 16, 8, 128] [1, 1, 1, 1, 1] : memref<4x2x16x8x128xi8> to memref<4x16x8x128xi8, strided<[32768, 1024, 128, 1], offset: 16384>>
  %k = pattn.bind_cache storage(%kp : memref<4x16x8x128xi8, strided<[32768, 1024, 128, 1]>>) : !i8k
  %v = pattn.bind_cache storage(%vp : memref<4x16x8x128xi8, strided<[32768, 1024, 128, 1], offset: 16384>>) : !e4v
  return
}

// -----

// ... but views of that stride whose pages overlap within it do.
!i8k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
!e4v = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f8e4m3, scale = tensor>
func.func @f(%kv: memref<4x2x16x8x128xi8>) {
  %kp = memref.subview %kv[0, 0, 0, 0, 0] [4, 1, 16, 8, 128] [1, 1, 1, 1, 1] : memref<4x2x16x8x128xi8> to memref<4x16x8x128xi8, strided<[32768, 1024, 128, 1]>>
  %vp = memref.reinterpret_cast %kv to offset: [8192], sizes: [4, 16, 8, 128], strides: [32768, 1024, 128, 1] : memref<4x2x16x8x128xi8> to memref<4x16x8x128xi8, strided<[32768, 1024, 128, 1], offset: 8192>>
  // expected-error @below {{binds storage that is also bound as}}
  %k = pattn.bind_cache storage(%kp : memref<4x16x8x128xi8, strided<[32768, 1024, 128, 1]>>) : !i8k
  %v = pattn.bind_cache storage(%vp : memref<4x16x8x128xi8, strided<[32768, 1024, 128, 1], offset: 8192>>) : !e4v
  return
}

// -----

// A page-strided buffer spans its page stride per page: four pages 2^62
// bytes apart pass 2^63 - 1 bytes, whatever the pages hold.
func.func @f(%s: memref<4x16x8x128xi8, strided<[4611686018427387904, 1024, 128, 1]>>) {
  // expected-error @below {{spans more than 2^63 - 1 bytes}}
  %c = pattn.bind_cache storage(%s : memref<4x16x8x128xi8, strided<[4611686018427387904, 1024, 128, 1]>>) : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
  return
}

// -----

// Record caches take contiguous records.
func.func @f(%s: memref<?x64x656xi8, strided<[83968, 656, 1]>>) {
  // expected-error @below {{storage must be a contiguous memref (identity layout)}}
  %c = pattn.bind_cache storage(%s : memref<?x64x656xi8, strided<[83968, 656, 1]>>) : !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
  return
}

// -----

func.func @f(%s: memref<?x64x432xi8>) {
  // expected-error @below {{storage must have shape [?, 64, 368], got 'memref<?x64x432xi8>'}}
  %c = pattn.bind_cache storage(%s : memref<?x64x432xi8>) : !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla_fp8_rope, token>>
  return
}

// -----

// Records written with per-token outer scales must not be read in tensor mode.
func.func @f(%s: memref<?x64x368xi8>) {
  // expected-error @below {{binds storage that is also bound as '!pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla_fp8_rope>>'}}
  %w = pattn.bind_cache storage(%s : memref<?x64x368xi8>) : !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla_fp8_rope, token>>
  %r = pattn.bind_cache storage(%s : memref<?x64x368xi8>) : !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla_fp8_rope, tensor>>
  return
}

// -----

// ... also when the second binding goes through a cast or a reshape of the
// same pages.
func.func @f(%s: memref<8x64x368xi8>) {
  // expected-error @below {{binds storage that is also bound as '!pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla_fp8_rope>>'}}
  %w = pattn.bind_cache storage(%s : memref<8x64x368xi8>) : !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla_fp8_rope, token>>
  %c = memref.cast %s : memref<8x64x368xi8> to memref<?x64x368xi8>
  %r = pattn.bind_cache storage(%c : memref<?x64x368xi8>) : !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla_fp8_rope, tensor>>
  return
}

// -----

!i8 = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = tensor>
!e4 = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f8e4m3, scale = tensor>
func.func @f(%s: memref<4x16x128xi8>) {
  %e = memref.expand_shape %s [[0], [1], [2, 3]] output_shape [4, 16, 2, 64] : memref<4x16x128xi8> into memref<4x16x2x64xi8>
  %c = memref.cast %e : memref<4x16x2x64xi8> to memref<?x16x2x64xi8>
  // expected-error @below {{binds storage that is also bound as '!pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f8e4m3, scale = tensor>'}}
  %a = pattn.bind_cache storage(%c : memref<?x16x2x64xi8>) : !i8
  %b = pattn.bind_cache storage(%e : memref<4x16x2x64xi8>) : !e4
  return
}

// -----

// ... also through a full subview or a reinterpret_cast of the same pages.
!token = !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla_fp8_rope, token>>
!tensor = !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla_fp8_rope, tensor>>
func.func @f(%s: memref<8x64x368xi8>) {
  // expected-error @below {{binds storage that is also bound as '!pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla_fp8_rope>>'}}
  %w = pattn.bind_cache storage(%s : memref<8x64x368xi8>) : !token
  %v = memref.subview %s[0, 0, 0] [8, 64, 368] [1, 1, 1] : memref<8x64x368xi8> to memref<8x64x368xi8, strided<[23552, 368, 1]>>
  %c = memref.cast %v : memref<8x64x368xi8, strided<[23552, 368, 1]>> to memref<8x64x368xi8>
  %r = pattn.bind_cache storage(%c : memref<8x64x368xi8>) : !tensor
  return
}

// -----

!token = !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla_fp8_rope, token>>
!tensor = !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla_fp8_rope, tensor>>
func.func @f(%s: memref<8x64x368xi8>) {
  // expected-error @below {{binds storage that is also bound as '!pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla_fp8_rope>>'}}
  %w = pattn.bind_cache storage(%s : memref<8x64x368xi8>) : !token
  %c = memref.reinterpret_cast %s to offset: [0], sizes: [8, 64, 368], strides: [23552, 368, 1] : memref<8x64x368xi8> to memref<8x64x368xi8>
  %r = pattn.bind_cache storage(%c : memref<8x64x368xi8>) : !tensor
  return
}

// -----

// Subviews that share pages 3 and 4 (at static offsets).
!i8 = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = tensor>
!e4 = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f8e4m3, scale = tensor>
func.func @f(%pages: memref<8x16x2x64xi8>) {
  %lo = memref.subview %pages[0, 0, 0, 0] [5, 16, 2, 64] [1, 1, 1, 1] : memref<8x16x2x64xi8> to memref<5x16x2x64xi8, strided<[2048, 128, 64, 1]>>
  %lo_pages = memref.cast %lo : memref<5x16x2x64xi8, strided<[2048, 128, 64, 1]>> to memref<5x16x2x64xi8>
  %hi = memref.subview %pages[3, 0, 0, 0] [5, 16, 2, 64] [1, 1, 1, 1] : memref<8x16x2x64xi8> to memref<5x16x2x64xi8, strided<[2048, 128, 64, 1], offset: 6144>>
  %hi_any = memref.cast %hi : memref<5x16x2x64xi8, strided<[2048, 128, 64, 1], offset: 6144>> to memref<5x16x2x64xi8, strided<[2048, 128, 64, 1], offset: ?>>
  %hi_pages = memref.cast %hi_any : memref<5x16x2x64xi8, strided<[2048, 128, 64, 1], offset: ?>> to memref<5x16x2x64xi8>
  // expected-error @below {{binds storage that is also bound as '!pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f8e4m3, scale = tensor>'}}
  %a = pattn.bind_cache storage(%lo_pages : memref<5x16x2x64xi8>) : !i8
  %b = pattn.bind_cache storage(%hi_pages : memref<5x16x2x64xi8>) : !e4
  return
}

// -----

// Static sizes past 2^63 - 1 bytes (2^62 pages of 2048 bytes; 2^60 tokens
// of 256 bytes) would wrap the generated offsets and grid.
!c = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = tensor>
func.func @f(%pages: memref<4611686018427387904x16x2x64xi8>) {
  // expected-error @below {{operand #0 of type 'memref<4611686018427387904x16x2x64xi8>' spans more than 2^63 - 1 bytes}}
  %c = pattn.bind_cache storage(%pages : memref<4611686018427387904x16x2x64xi8>) : !c
  return
}

// -----

!c = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = tensor>
func.func @f(%c: !c, %v: memref<1152921504606846976x2x64xf16>, %s: memref<1152921504606846976xi64>, %k: memref<1xf32>) {
  // expected-error @below {{'pattn.write_cache' op operand #0 of type 'memref<1152921504606846976x2x64xf16>' spans more than 2^63 - 1 bytes}}
  pattn.write_cache values(%v : memref<1152921504606846976x2x64xf16>) into(%c : !c) slots(%s : memref<1152921504606846976xi64>) scale(%k : memref<1xf32>)
  return
}

//===----------------------------------------------------------------------===//
// pattn.write_cache
//===----------------------------------------------------------------------===//

// -----

!c = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
func.func @f(%c: !c, %v: memref<4x8x64xf16>, %s: memref<4xi64>, %k: memref<1xf32>) {
  // expected-error @below {{'pattn.write_cache' op values must have shape [?, 8, 128], got 'memref<4x8x64xf16>'}}
  pattn.write_cache values(%v : memref<4x8x64xf16>) into(%c : !c) slots(%s : memref<4xi64>) scale(%k : memref<1xf32>)
  return
}

// -----

!c = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
func.func @f(%c: !c, %v: memref<4x8x128xi32>, %s: memref<4xi64>, %k: memref<1xf32>) {
  // expected-error @below {{values must hold f16, bf16 or f32 elements, got 'i32'}}
  pattn.write_cache values(%v : memref<4x8x128xi32>) into(%c : !c) slots(%s : memref<4xi64>) scale(%k : memref<1xf32>)
  return
}

// -----

!c = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
func.func @f(%c: !c, %v: memref<4x8x128xf16>, %s: memref<5xi64>, %k: memref<1xf32>) {
  // expected-error @below {{slots must have shape [4], got 'memref<5xi64>'}}
  pattn.write_cache values(%v : memref<4x8x128xf16>) into(%c : !c) slots(%s : memref<5xi64>) scale(%k : memref<1xf32>)
  return
}

// -----

!c = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
func.func @f(%c: !c, %v: memref<4x8x128xf16>, %s: memref<4xf32>, %k: memref<1xf32>) {
  // expected-error @below {{slots must hold i32 or i64 elements, got 'f32'}}
  pattn.write_cache values(%v : memref<4x8x128xf16>) into(%c : !c) slots(%s : memref<4xf32>) scale(%k : memref<1xf32>)
  return
}

// -----

!c = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
func.func @f(%c: !c, %v: memref<4x8x128xf16>, %s: memref<4xi64>) {
  // expected-error @below {{scale is required by the cache's 'tensor' scale granularity}}
  pattn.write_cache values(%v : memref<4x8x128xf16>) into(%c : !c) slots(%s : memref<4xi64>)
  return
}

// -----

!c = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = nvfp4, scale = tensor>
func.func @f(%c: !c, %v: memref<4x8x128xf16>, %s: memref<4xi64>) {
  // expected-error @below {{scale is required by the cache's 'tensor' scale granularity}}
  pattn.write_cache values(%v : memref<4x8x128xf16>) into(%c : !c) slots(%s : memref<4xi64>)
  return
}

// -----

!c = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%c: !c, %v: memref<4x8x128xf16>, %s: memref<4xi64>, %k: memref<1xf32>) {
  // expected-error @below {{scale given, but the cache's scale granularity is 'none'}}
  pattn.write_cache values(%v : memref<4x8x128xf16>) into(%c : !c) slots(%s : memref<4xi64>) scale(%k : memref<1xf32>)
  return
}

// -----

!c = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = token>
func.func @f(%c: !c, %v: memref<4x8x128xf16>, %s: memref<4xi64>, %k: memref<1xf32>) {
  // expected-error @below {{scale given, but the cache's scale granularity is 'token' (token scales are bound with the cache)}}
  pattn.write_cache values(%v : memref<4x8x128xf16>) into(%c : !c) slots(%s : memref<4xi64>) scale(%k : memref<1xf32>)
  return
}

// -----

!c = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = channel>
func.func @f(%c: !c, %v: memref<4x8x128xf16>, %s: memref<4xi64>, %k: memref<1024xf32>) {
  // expected-error @below {{scale must have shape [8, 128], got 'memref<1024xf32>'}}
  pattn.write_cache values(%v : memref<4x8x128xf16>) into(%c : !c) slots(%s : memref<4xi64>) scale(%k : memref<1024xf32>)
  return
}

// -----

!c = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
func.func @f(%c: !c, %v: memref<4x8x128xf16>, %s: memref<4xi64>, %k: memref<1xf16>) {
  // expected-error @below {{scale must hold f32 elements, got 'f16'}}
  pattn.write_cache values(%v : memref<4x8x128xf16>) into(%c : !c) slots(%s : memref<4xi64>) scale(%k : memref<1xf16>)
  return
}

// -----

!c = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%c: !c, %v: memref<4x48x128xf16>, %s: memref<4xi64>) {
  // expected-error @below {{'pattn.write_cache' op first_head 41 with the cache's 8 kv heads must lie within the values' static heads, got 'memref<4x48x128xf16>'}}
  pattn.write_cache values(%v : memref<4x48x128xf16>) into(%c : !c) slots(%s : memref<4xi64>) {first_head = 41 : i64}
  return
}

// -----

!c = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%c: !c, %v: memref<4x?x128xf16>, %s: memref<4xi64>) {
  // expected-error @below {{'pattn.write_cache' op first_head 40 with the cache's 8 kv heads must lie within the values' static heads, got 'memref<4x?x128xf16>'}}
  pattn.write_cache values(%v : memref<4x?x128xf16>) into(%c : !c) slots(%s : memref<4xi64>) {first_head = 40 : i64}
  return
}

//===----------------------------------------------------------------------===//
// pattn.write_record
//===----------------------------------------------------------------------===//

// -----

!r = !pattn.record_cache<block_size = 16, record = !pattn.record<32 bytes, none, {vals: 16 x f8E4M3FN at 0 scaled_by s, s: 1 x f32 at 16}>>
func.func @f(%c: !r, %l: memref<2x16xf32>, %p: memref<2x4xf32>, %s: memref<2xi64>) {
  // expected-error @below {{'pattn.write_record' op needs a record with 'latent' and 'rope' lanes}}
  pattn.write_record latent(%l : memref<2x16xf32>) rope(%p : memref<2x4xf32>) into(%c : !r) slots(%s : memref<2xi64>)
  return
}

// -----

!r = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
func.func @f(%c: !r, %l: memref<2x576xbf16>, %p: memref<2x64xbf16>, %s: memref<2xi64>) {
  // expected-error @below {{latent must have shape [?, 512], got 'memref<2x576xbf16>'}}
  pattn.write_record latent(%l : memref<2x576xbf16>) rope(%p : memref<2x64xbf16>) into(%c : !r) slots(%s : memref<2xi64>)
  return
}

// -----

!r = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
func.func @f(%c: !r, %l: memref<bf16>, %p: memref<2x64xbf16>, %s: memref<2xi64>) {
  // A rank-0 latent is reported, not read past its rank (this crashed).
  // expected-error @below {{latent must have shape [?, 512], got 'memref<bf16>'}}
  pattn.write_record latent(%l : memref<bf16>) rope(%p : memref<2x64xbf16>) into(%c : !r) slots(%s : memref<2xi64>)
  return
}

// -----

!r = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
func.func @f(%c: !r, %l: memref<2x512xbf16>, %p: memref<3x64xbf16>, %s: memref<2xi64>) {
  // expected-error @below {{rope must have shape [2, 64], got 'memref<3x64xbf16>'}}
  pattn.write_record latent(%l : memref<2x512xbf16>) rope(%p : memref<3x64xbf16>) into(%c : !r) slots(%s : memref<2xi64>)
  return
}

// -----

!r = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
func.func @f(%c: !r, %l: memref<2x512xi8>, %p: memref<2x64xbf16>, %s: memref<2xi64>) {
  // expected-error @below {{latent must hold f16, bf16 or f32 elements, got 'i8'}}
  pattn.write_record latent(%l : memref<2x512xi8>) rope(%p : memref<2x64xbf16>) into(%c : !r) slots(%s : memref<2xi64>)
  return
}

// -----

!r = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
func.func @f(%c: !r, %l: memref<2x512xbf16>, %p: memref<2x64xbf16>, %s: memref<2xi16>) {
  // expected-error @below {{slots must hold i32 or i64 elements, got 'i16'}}
  pattn.write_record latent(%l : memref<2x512xbf16>) rope(%p : memref<2x64xbf16>) into(%c : !r) slots(%s : memref<2xi16>)
  return
}

// -----

!r = !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla>>
func.func @f(%c: !r, %l: memref<2x512xbf16>, %p: memref<2x64xbf16>, %s: memref<2xi64>) {
  // expected-error @below {{outer_scale is required by a record in 'tensor' mode}}
  pattn.write_record latent(%l : memref<2x512xbf16>) rope(%p : memref<2x64xbf16>) into(%c : !r) slots(%s : memref<2xi64>)
  return
}

// -----

!r = !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla_fp8_rope, token>>
func.func @f(%c: !r, %l: memref<2x512xbf16>, %p: memref<2x64xbf16>, %s: memref<2xi64>, %o: memref<1xf32>) {
  // expected-error @below {{outer_scale given for a record in 'token' mode}}
  pattn.write_record latent(%l : memref<2x512xbf16>) rope(%p : memref<2x64xbf16>) into(%c : !r) slots(%s : memref<2xi64>) outer_scale(%o : memref<1xf32>)
  return
}

// -----

!r = !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla>>
func.func @f(%c: !r, %l: memref<2x512xbf16>, %p: memref<2x64xbf16>, %s: memref<2xi64>, %o: memref<2xf32>) {
  // expected-error @below {{outer_scale must have shape [1], got 'memref<2xf32>'}}
  pattn.write_record latent(%l : memref<2x512xbf16>) rope(%p : memref<2x64xbf16>) into(%c : !r) slots(%s : memref<2xi64>) outer_scale(%o : memref<2xf32>)
  return
}

//===----------------------------------------------------------------------===//
// #pattn.portable_plan and #pattn.xqa_plan
//===----------------------------------------------------------------------===//

// -----

// expected-error @below {{heads_per_block 9 not in [1, 8]}}
func.func private @f() attributes {a = #pattn.portable_plan<heads_per_block = 9, keys_per_split = 512, targets = [sm_90a]>}

// -----

// expected-error @below {{keys_per_split 100 must be a positive multiple of 128}}
func.func private @f() attributes {a = #pattn.portable_plan<heads_per_block = 4, keys_per_split = 100, targets = [sm_90a]>}

// -----

// expected-error @below {{rows 24 must be 8, 16 or 32}}
func.func private @f() attributes {a = #pattn.xqa_plan<operand = f16, rows = 24, keys_per_tile = 64, stages = 3, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], targets = [sm_90a]>}

// -----

// Keys as the mma's M (rows = 8) serves decodes only.
// expected-error @below {{rows 8 (keys as the mma's M) serves decodes only, not query tiles}}
func.func private @f() attributes {a = #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 64, stages = 3, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], query_tile = 2, targets = [sm_90a]>}

// -----

// expected-error @below {{key_warps x value_warps = 2 x 1 must be the block's 4 warps}}
func.func private @f() attributes {a = #pattn.xqa_plan<operand = f16, rows = 16, keys_per_tile = 64, stages = 3, key_warps = 2, value_warps = 1, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], targets = [sm_90a]>}

// -----

// expected-error @below {{keys_per_tile 48 must be a multiple of 16 x key_warps, at most 256}}
func.func private @f() attributes {a = #pattn.xqa_plan<operand = f16, rows = 16, keys_per_tile = 48, stages = 3, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], targets = [sm_90a]>}

// -----

// expected-error @below {{stages 1 not in [2, 8]}}
func.func private @f() attributes {a = #pattn.xqa_plan<operand = f16, rows = 16, keys_per_tile = 64, stages = 1, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], targets = [sm_90a]>}

// -----

// expected-error @below {{keys_per_split 4000 must be a positive multiple of keys_per_tile 64}}
func.func private @f() attributes {a = #pattn.xqa_plan<operand = f16, rows = 16, keys_per_tile = 64, stages = 3, key_warps = 4, value_warps = 1, keys_per_split = 4000, shared_bytes = 1024, resident_blocks = [2], targets = [sm_90a]>}

// -----

// expected-error @below {{shared_bytes -1 is negative}}
func.func private @f() attributes {a = #pattn.xqa_plan<operand = f16, rows = 16, keys_per_tile = 64, stages = 3, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = -1, resident_blocks = [2], targets = [sm_90a]>}

// -----

//===----------------------------------------------------------------------===//
// pattn.rotary
//===----------------------------------------------------------------------===//

func.func @f(%x: memref<4x8x64xf64>, %c: memref<16x32xf16>, %p: memref<4xi32>, %o: memref<4x8x64xf64>) {
  // expected-error @below {{'pattn.rotary' op input must hold f16, bf16 or f32 elements, got 'f64'}}
  pattn.rotary input(%x : memref<4x8x64xf64>) cos(%c : memref<16x32xf16>) sin(%c : memref<16x32xf16>) positions(%p : memref<4xi32>) outs(%o : memref<4x8x64xf64>)
  return
}

// -----

func.func @f(%x: memref<4x8x64xf16>, %c: memref<16x32xf16>, %p: memref<4xi32>, %o: memref<4x8x32xf16>) {
  // expected-error @below {{'pattn.rotary' op outs must have shape [4, ?, 64], got 'memref<4x8x32xf16>'}}
  pattn.rotary input(%x : memref<4x8x64xf16>) cos(%c : memref<16x32xf16>) sin(%c : memref<16x32xf16>) positions(%p : memref<4xi32>) outs(%o : memref<4x8x32xf16>)
  return
}

// -----

func.func @f(%x: memref<4x8x64xf16>, %c: memref<16x32xf16>, %p: memref<4xi32>, %o: memref<4x8x64xbf16>) {
  // expected-error @below {{'pattn.rotary' op outs must hold the input's element type ('f16'), got 'memref<4x8x64xbf16>'}}
  pattn.rotary input(%x : memref<4x8x64xf16>) cos(%c : memref<16x32xf16>) sin(%c : memref<16x32xf16>) positions(%p : memref<4xi32>) outs(%o : memref<4x8x64xbf16>)
  return
}

// -----

func.func @f(%x: memref<4x?x64xf16>, %c: memref<16x32xf16>, %p: memref<4xi32>, %o: memref<4x8x64xf16>) {
  // expected-error @below {{'pattn.rotary' op input and outs need static heads and head_dim, got 'memref<4x?x64xf16>' and 'memref<4x8x64xf16>'}}
  pattn.rotary input(%x : memref<4x?x64xf16>) cos(%c : memref<16x32xf16>) sin(%c : memref<16x32xf16>) positions(%p : memref<4xi32>) outs(%o : memref<4x8x64xf16>)
  return
}

// -----

func.func @f(%x: memref<4x8x64xf16>, %c: memref<16x32xf16>, %p: memref<4xi32>, %o: memref<4x2x64xf16>) {
  // expected-error @below {{'pattn.rotary' op first_head 7 with 2 output heads must lie within the input's 8 heads}}
  pattn.rotary input(%x : memref<4x8x64xf16>) cos(%c : memref<16x32xf16>) sin(%c : memref<16x32xf16>) positions(%p : memref<4xi32>) outs(%o : memref<4x2x64xf16>) {first_head = 7 : i64}
  return
}

// -----

func.func @f(%x: memref<4x0x64xf16>, %c: memref<16x32xf16>, %p: memref<4xi32>, %o: memref<4x0x64xf16>) {
  // expected-error @below {{'pattn.rotary' op outs must have at least one head and channel, got 'memref<4x0x64xf16>'}}
  pattn.rotary input(%x : memref<4x0x64xf16>) cos(%c : memref<16x32xf16>) sin(%c : memref<16x32xf16>) positions(%p : memref<4xi32>) outs(%o : memref<4x0x64xf16>)
  return
}

// -----

func.func @f(%x: memref<4x8x64xf16>, %c: memref<16x32xf16>, %p: memref<4xi32>, %w: memref<64xi8>, %o: memref<4x8x64xf16>) {
  // expected-error @below {{'pattn.rotary' op norm_weight must hold f16, bf16 or f32 elements, got 'i8'}}
  pattn.rotary input(%x : memref<4x8x64xf16>) cos(%c : memref<16x32xf16>) sin(%c : memref<16x32xf16>) positions(%p : memref<4xi32>) norm_weight(%w : memref<64xi8>) outs(%o : memref<4x8x64xf16>)
  return
}

// -----

// In place, the output heads are the input's: a first_head > 0 cannot fit.
func.func @f(%x: memref<4x8x64xf16>, %c: memref<16x32xf16>, %p: memref<4xi32>) {
  // expected-error @below {{'pattn.rotary' op first_head 1 with 8 output heads must lie within the input's 8 heads}}
  pattn.rotary input(%x : memref<4x8x64xf16>) cos(%c : memref<16x32xf16>) sin(%c : memref<16x32xf16>) positions(%p : memref<4xi32>) outs(%x : memref<4x8x64xf16>) {first_head = 1 : i64}
  return
}

// -----

func.func @f(%x: memref<4x8x64xf16>, %c: memref<16x32xf16>, %s: memref<16x32xbf16>, %p: memref<4xi32>, %o: memref<4x8x64xf16>) {
  // expected-error @below {{'pattn.rotary' op sin must have the type of cos ('memref<16x32xf16>'), got 'memref<16x32xbf16>'}}
  pattn.rotary input(%x : memref<4x8x64xf16>) cos(%c : memref<16x32xf16>) sin(%s : memref<16x32xbf16>) positions(%p : memref<4xi32>) outs(%o : memref<4x8x64xf16>)
  return
}

// -----

func.func @f(%x: memref<4x8x64xf16>, %c: memref<16x33xf16>, %p: memref<4xi32>, %o: memref<4x8x64xf16>) {
  // expected-error @below {{'pattn.rotary' op cos and sin must be [max_position, R/2] with a static R/2 in [1, head_dim/2 = 32], got 'memref<16x33xf16>'}}
  pattn.rotary input(%x : memref<4x8x64xf16>) cos(%c : memref<16x33xf16>) sin(%c : memref<16x33xf16>) positions(%p : memref<4xi32>) outs(%o : memref<4x8x64xf16>)
  return
}

// -----

func.func @f(%x: memref<4x8x64xf16>, %c: memref<16x32xi32>, %p: memref<4xi32>, %o: memref<4x8x64xf16>) {
  // expected-error @below {{'pattn.rotary' op cos must hold f16, bf16 or f32 elements, got 'i32'}}
  pattn.rotary input(%x : memref<4x8x64xf16>) cos(%c : memref<16x32xi32>) sin(%c : memref<16x32xi32>) positions(%p : memref<4xi32>) outs(%o : memref<4x8x64xf16>)
  return
}

// -----

func.func @f(%x: memref<4x8x64xf16>, %c: memref<16x32xf16>, %o: memref<4x8x64xf16>) {
  // expected-error @below {{'pattn.rotary' op takes exactly one of positions (per token) and seq_lens (positions of the appended tokens)}}
  pattn.rotary input(%x : memref<4x8x64xf16>) cos(%c : memref<16x32xf16>) sin(%c : memref<16x32xf16>) outs(%o : memref<4x8x64xf16>)
  return
}

// -----

func.func @f(%x: memref<4x8x64xf16>, %c: memref<16x32xf16>, %p: memref<3xi32>, %o: memref<4x8x64xf16>) {
  // expected-error @below {{'pattn.rotary' op positions must have shape [4], got 'memref<3xi32>'}}
  pattn.rotary input(%x : memref<4x8x64xf16>) cos(%c : memref<16x32xf16>) sin(%c : memref<16x32xf16>) positions(%p : memref<3xi32>) outs(%o : memref<4x8x64xf16>)
  return
}

// -----

func.func @f(%x: memref<4x8x64xf16>, %c: memref<16x32xf16>, %p: memref<4xf32>, %o: memref<4x8x64xf16>) {
  // expected-error @below {{'pattn.rotary' op positions must hold i32 or i64 elements, got 'f32'}}
  pattn.rotary input(%x : memref<4x8x64xf16>) cos(%c : memref<16x32xf16>) sin(%c : memref<16x32xf16>) positions(%p : memref<4xf32>) outs(%o : memref<4x8x64xf16>)
  return
}

// -----

func.func @f(%x: memref<4x8x64xf16>, %c: memref<16x32xf16>, %p: memref<4xi32>, %qs: memref<5xi32>, %o: memref<4x8x64xf16>) {
  // expected-error @below {{'pattn.rotary' op query_start goes with seq_lens, not with positions}}
  pattn.rotary input(%x : memref<4x8x64xf16>) cos(%c : memref<16x32xf16>) sin(%c : memref<16x32xf16>) positions(%p : memref<4xi32>) query_start(%qs : memref<5xi32>) outs(%o : memref<4x8x64xf16>)
  return
}

// -----

func.func @f(%x: memref<4x8x64xf16>, %c: memref<16x32xf16>, %sl: memref<2xi32>, %o: memref<4x8x64xf16>) {
  // expected-error @below {{'pattn.rotary' op without query_start each sequence has one token, but the input has 4 tokens for a batch of 2}}
  pattn.rotary input(%x : memref<4x8x64xf16>) cos(%c : memref<16x32xf16>) sin(%c : memref<16x32xf16>) seq_lens(%sl : memref<2xi32>) outs(%o : memref<4x8x64xf16>)
  return
}

// -----

func.func @f(%x: memref<4x8x64xf16>, %c: memref<16x32xf16>, %sl: memref<2xi32>, %qs: memref<4xi32>, %o: memref<4x8x64xf16>) {
  // expected-error @below {{'pattn.rotary' op query_start must have shape [3], got 'memref<4xi32>'}}
  pattn.rotary input(%x : memref<4x8x64xf16>) cos(%c : memref<16x32xf16>) sin(%c : memref<16x32xf16>) seq_lens(%sl : memref<2xi32>) query_start(%qs : memref<4xi32>) outs(%o : memref<4x8x64xf16>)
  return
}

// -----

func.func @f(%x: memref<4x8x64xf16>, %c: memref<16x32xf16>, %sl: memref<4xi64>, %o: memref<4x8x64xf16>) {
  // expected-error @below {{'pattn.rotary' op seq_lens must hold i32 elements, got 'i64'}}
  pattn.rotary input(%x : memref<4x8x64xf16>) cos(%c : memref<16x32xf16>) sin(%c : memref<16x32xf16>) seq_lens(%sl : memref<4xi64>) outs(%o : memref<4x8x64xf16>)
  return
}

// -----

func.func @f(%x: memref<4x8x64xf16>, %c: memref<16x32xf16>, %p: memref<4xi32>, %w: memref<32xf16>, %o: memref<4x8x64xf16>) {
  // expected-error @below {{'pattn.rotary' op norm_weight must have shape [64], got 'memref<32xf16>'}}
  pattn.rotary input(%x : memref<4x8x64xf16>) cos(%c : memref<16x32xf16>) sin(%c : memref<16x32xf16>) positions(%p : memref<4xi32>) norm_weight(%w : memref<32xf16>) outs(%o : memref<4x8x64xf16>)
  return
}

// -----

func.func @f(%x: memref<4x8x64xf16>, %c: memref<16x32xf16>, %p: memref<4xi32>, %w: memref<64xf16>, %o: memref<4x8x64xf16>) {
  // expected-error @below {{'pattn.rotary' op norm_epsilon 0.000000e+00 must be finite and positive (an all-zero head would divide 0 by 0)}}
  pattn.rotary input(%x : memref<4x8x64xf16>) cos(%c : memref<16x32xf16>) sin(%c : memref<16x32xf16>) positions(%p : memref<4xi32>) norm_weight(%w : memref<64xf16>) outs(%o : memref<4x8x64xf16>) {norm_epsilon = 0.0 : f32}
  return
}

// -----
//===----------------------------------------------------------------------===//
// pattn.paged_attention
//===----------------------------------------------------------------------===//

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
!v = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 64, encoding = f16, scale = none>
func.func @f(%k: !k, %v: !v, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x32x128xf16>) {
  // expected-error @below {{'pattn.paged_attention' op K and V caches must share block_size, kv_heads and head_dim (one block table addresses both)}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !k) value(%v : !v) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
!v = !pattn.cache<block_size = 32, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %v: !v, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x32x128xf16>) {
  // expected-error @below {{K and V caches must share block_size}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !k) value(%v : !v) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<4x12x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x12x128xf16>) {
  // expected-error @below {{num_heads 12 must be a positive multiple of kv_heads 8}}
  pattn.paged_attention query(%q : memref<4x12x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x12x128xf16>) {num_heads = 12 : i64}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x32x128xf16>) {
  // expected-error @below {{query must have shape [?, 16, 128], got 'memref<4x32x128xf16>'}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x32x128xf16>) {num_heads = 16 : i64}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<4x32x128xf32>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x32x128xf32>) {
  // expected-error @below {{query must hold f16 or bf16 elements, got 'f32'}}
  pattn.paged_attention query(%q : memref<4x32x128xf32>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x32x128xf32>) {num_heads = 32 : i64}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x32x64xf16>) {
  // expected-error @below {{outs must have shape [4, 32, 128], got 'memref<4x32x64xf16>'}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x32x64xf16>) {num_heads = 32 : i64}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x32x128xbf16>) {
  // expected-error @below {{outs must hold 'f16' like the query, got 'bf16'}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x32x128xbf16>) {num_heads = 32 : i64}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<4x32x128xf16>, %bt: memref<4x8xi64>, %sl: memref<4xi32>, %o: memref<4x32x128xf16>) {
  // expected-error @below {{block_table must hold i32 elements, got 'i64'}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi64>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<4x32x128xf16>, %bt: memref<32xi32>, %sl: memref<4xi32>, %o: memref<4x32x128xf16>) {
  // expected-error @below {{block_table must have shape [?, ?], got 'memref<32xi32>'}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<32xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<3xi32>, %o: memref<4x32x128xf16>) {
  // expected-error @below {{seq_lens must have shape [4], got 'memref<3xi32>'}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<3xi32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xf32>, %o: memref<4x32x128xf16>) {
  // expected-error @below {{seq_lens must hold i32 elements, got 'f32'}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xf32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<?x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %qs: memref<5xi32>, %o: memref<?x32x128xf16>) {
  // expected-error @below {{max_query_len 32769 must be in [1, 32768] query tokens per sequence}}
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) query_start(%qs : memref<5xi32>) outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, max_query_len = 32769 : i64}
  return
}

// -----

// A prompt's (token, head group) blocks outgrow the grid's y dimension: only
// a prompt plan (blocks on x) lowers it.
!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<?x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %qs: memref<5xi32>, %o: memref<?x32x128xf16>) {
  // expected-error @below {{max_query_len 512 (a prompt) needs a portable plan with prompt = true, got #pattn.portable_plan<heads_per_block = 4, keys_per_split = 512, targets = [sm_90a]>}}
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) query_start(%qs : memref<5xi32>) outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, max_query_len = 512 : i64, backend = #pattn.backend<portable>, plan = #pattn.portable_plan<heads_per_block = 4, keys_per_split = 512, targets = [sm_90a]>}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<?x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %qs: memref<5xi32>, %o: memref<?x32x128xf16>) {
  // expected-error @below {{max_query_len 0 must be in [1, 32768] query tokens per sequence}}
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) query_start(%qs : memref<5xi32>) outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, max_query_len = 0 : i64}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<8x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<8x32x128xf16>) {
  // expected-error @below {{max_query_len 2 needs query_start to say where each sequence's query tokens begin}}
  pattn.paged_attention query(%q : memref<8x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<8x32x128xf16>) {num_heads = 32 : i64, max_query_len = 2 : i64}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<8x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<8x32x128xf16>) {
  // expected-error @below {{without query_start each sequence has one query token, but the query has 8 tokens for a batch of 4}}
  pattn.paged_attention query(%q : memref<8x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<8x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<8x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %qs: memref<4xi32>, %o: memref<8x32x128xf16>) {
  // expected-error @below {{query_start must have shape [5], got 'memref<4xi32>'}}
  pattn.paged_attention query(%q : memref<8x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) query_start(%qs : memref<4xi32>) outs(%o : memref<8x32x128xf16>) {num_heads = 32 : i64, max_query_len = 2 : i64}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = channel>
!v = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %v: !v, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x32x128xf16>) {
  // expected-error @below {{k_scale is required by the cache's 'channel' scale granularity}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !k) value(%v : !v) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %s: memref<1xf32>, %o: memref<4x32x128xf16>) {
  // expected-error @below {{k_scale given, but the cache's scale granularity is 'none'}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) k_scale(%s : memref<1xf32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
!v = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = channel>
func.func @f(%k: !k, %v: !v, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %s: memref<128x8xf32>, %o: memref<4x32x128xf16>) {
  // expected-error @below {{v_scale must have shape [8, 128], got 'memref<128x8xf32>'}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !k) value(%v : !v) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) v_scale(%s : memref<128x8xf32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f8e4m3, scale = token>
func.func @f(%k: !k, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %s: memref<1xf32>, %o: memref<4x32x128xf16>) {
  // expected-error @below {{v_scale given, but the cache's scale granularity is 'token' (token scales are bound with the cache)}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) v_scale(%s : memref<1xf32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %s: memref<8xf32>, %o: memref<4x32x128xf16>) {
  // expected-error @below {{sinks must have shape [32], got 'memref<8xf32>'}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) sinks(%s : memref<8xf32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %s: memref<32xf64>, %o: memref<4x32x128xf16>) {
  // expected-error @below {{sinks must hold f16, bf16 or f32 elements, got 'f64'}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) sinks(%s : memref<32xf64>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x32x128xf16>) {
  // expected-error @below {{softmax_scale -1.000000e+00 must be finite and positive}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64, softmax_scale = -1.0 : f32}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x32x128xf16>) {
  // expected-error @below {{softmax_scale INF must be finite and positive}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64, softmax_scale = 0x7F800000 : f32}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x32x128xf16>) {
  // expected-error @below {{softcap -5.000000e+00 must be finite and >= 0 (0 turns it off)}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64, softcap = -5.0 : f32}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x32x128xf16>) {
  // expected-error @below {{window 0 must be >= 1, or -1 for no window}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64, window = 0 : i64}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x32x128xf16>) {
  // expected-error @below {{window -2 must be >= 1, or -1 for no window}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64, window = -2 : i64}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<4x32x128xf16, strided<[8192, 256, 1]>>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x32x128xf16>) {
  // expected-error @below {{query must be a contiguous memref (identity layout)}}
  pattn.paged_attention query(%q : memref<4x32x128xf16, strided<[8192, 256, 1]>>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64}
  return
}

//===----------------------------------------------------------------------===//
// pattn.mla_decode
//===----------------------------------------------------------------------===//

// -----

!r = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
func.func @f(%c: !r, %q: memref<4x16x512xbf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x16x512xbf16>) {
  // expected-error @below {{'pattn.mla_decode' op query must have shape [?, 16, 576], got 'memref<4x16x512xbf16>'}}
  pattn.mla_decode query(%q : memref<4x16x512xbf16>) cache(%c : !r) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x16x512xbf16>) {num_heads = 16 : i64}
  return
}

// -----

!r = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
func.func @f(%c: !r, %q: memref<4x16x576xbf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x16x576xbf16>) {
  // expected-error @below {{outs must have shape [4, 16, 512], got 'memref<4x16x576xbf16>'}}
  pattn.mla_decode query(%q : memref<4x16x576xbf16>) cache(%c : !r) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x16x576xbf16>) {num_heads = 16 : i64}
  return
}

// -----

// A prompt's XQA plan cuts it into query tiles that fit the rows; a
// decode's has none.
!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<?x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %qs: memref<5xi32>, %o: memref<?x32x128xf16>) {
  // expected-error @below {{max_query_len 512 (a prompt) needs an XQA plan whose query_tile x g fits its rows (32), got query_tile 16 for g = 4}}
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) query_start(%qs : memref<5xi32>) outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, max_query_len = 512 : i64, backend = #pattn.backend<xqa>, plan = #pattn.xqa_plan<operand = f16, rows = 32, keys_per_tile = 64, stages = 3, key_warps = 2, value_warps = 2, keys_per_split = 4096, shared_bytes = 113920, resident_blocks = [2], query_tile = 16, targets = [sm_90a]>}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<?x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %qs: memref<5xi32>, %o: memref<?x32x128xf16>) {
  // expected-error @below {{query_tile 8 is a prompt's plan, but max_query_len is 4}}
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) query_start(%qs : memref<5xi32>) outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, max_query_len = 4 : i64, backend = #pattn.backend<xqa>, plan = #pattn.xqa_plan<operand = f16, rows = 32, keys_per_tile = 64, stages = 3, key_warps = 2, value_warps = 2, keys_per_split = 4096, shared_bytes = 113920, resident_blocks = [2], query_tile = 8, targets = [sm_90a]>}
  return
}

// -----

// A prefill plan is a prompt's only.
!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<?x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %qs: memref<5xi32>, %o: memref<?x32x128xf16>) {
  // expected-error @below {{has a prefill plan, but max_query_len 4 is a decode's (at most 8)}}
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) query_start(%qs : memref<5xi32>) outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, max_query_len = 4 : i64, backend = #pattn.backend<xqa>, plan = #pattn.prefill_plan<operand = f16, rows = 64, query_tile = 16, keys_per_tile = 64, stages = 2, keys_per_split = 4096, shared_bytes = 90000, resident_blocks = [2], targets = [sm_90a]>}
  return
}

// -----

// Its query tile x g must fit its 64 rows.
!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<?x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %qs: memref<5xi32>, %o: memref<?x32x128xf16>) {
  // expected-error @below {{has a prefill plan whose query_tile 32 x g = 4 exceeds its rows (64)}}
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) query_start(%qs : memref<5xi32>) outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, max_query_len = 512 : i64, backend = #pattn.backend<xqa>, plan = #pattn.prefill_plan<operand = f16, rows = 64, query_tile = 32, keys_per_tile = 64, stages = 2, keys_per_split = 4096, shared_bytes = 90000, resident_blocks = [2], targets = [sm_90a]>}
  return
}

// -----

// A decode_plan splits a prefill plan's batch only.
!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<?x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %qs: memref<5xi32>, %o: memref<?x32x128xf16>) {
  // expected-error @below {{has a decode_plan, which splits a batch with a #pattn.prefill_plan, but its plan is #pattn.xqa_plan}}
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) query_start(%qs : memref<5xi32>) outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, max_query_len = 512 : i64, backend = #pattn.backend<xqa>, decode_plan = #pattn.xqa_plan<operand = f16, rows = 16, keys_per_tile = 64, stages = 3, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 60000, resident_blocks = [2], targets = [sm_90a]>, plan = #pattn.xqa_plan<operand = f16, rows = 32, keys_per_tile = 64, stages = 3, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 60000, resident_blocks = [2], query_tile = 8, targets = [sm_90a]>}
  return
}

// -----

// The short sequences' plan is a decode's.
!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<?x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %qs: memref<5xi32>, %o: memref<?x32x128xf16>) {
  // expected-error @below {{has a decode_plan with query_tile 8; the short sequences' plan is a decode's (query_tile = 0)}}
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) query_start(%qs : memref<5xi32>) outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, max_query_len = 512 : i64, backend = #pattn.backend<xqa>, decode_plan = #pattn.xqa_plan<operand = f16, rows = 32, keys_per_tile = 64, stages = 3, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 60000, resident_blocks = [2], query_tile = 8, targets = [sm_90a]>, plan = #pattn.prefill_plan<operand = f16, rows = 64, query_tile = 16, keys_per_tile = 64, stages = 2, keys_per_split = 4096, shared_bytes = 90000, resident_blocks = [2], targets = [sm_90a]>}
  return
}

// -----

// Its rows hold at least one query token: g = 32 needs 32.
!k = !pattn.cache<block_size = 16, kv_heads = 1, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<?x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %qs: memref<5xi32>, %o: memref<?x32x128xf16>) {
  // expected-error @below {{has a decode_plan of 16 rows, fewer than g = 32: it would serve no query token}}
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) query_start(%qs : memref<5xi32>) outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, max_query_len = 512 : i64, backend = #pattn.backend<xqa>, decode_plan = #pattn.xqa_plan<operand = f16, rows = 16, keys_per_tile = 64, stages = 3, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 60000, resident_blocks = [2], targets = [sm_90a]>, plan = #pattn.prefill_plan<operand = f16, rows = 64, query_tile = 2, keys_per_tile = 64, stages = 2, keys_per_split = 4096, shared_bytes = 90000, resident_blocks = [2], targets = [sm_90a]>}
  return
}

// -----

// MLA is decode only: up to 8 speculative tokens per sequence.
!r = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
func.func @f(%c: !r, %q: memref<?x16x576xbf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %qs: memref<5xi32>, %o: memref<?x16x512xbf16>) {
  // expected-error @below {{max_query_len 9 must be in [1, 8] query tokens per sequence}}
  pattn.mla_decode query(%q : memref<?x16x576xbf16>) cache(%c : !r) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) query_start(%qs : memref<5xi32>) outs(%o : memref<?x16x512xbf16>) {num_heads = 16 : i64, max_query_len = 9 : i64}
  return
}

// -----

!r = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
func.func @f(%c: !r, %q: memref<4x16x576xbf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x16x512xf16>) {
  // expected-error @below {{outs must hold 'bf16' like the query, got 'f16'}}
  pattn.mla_decode query(%q : memref<4x16x576xbf16>) cache(%c : !r) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x16x512xf16>) {num_heads = 16 : i64}
  return
}

// -----

!r = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
func.func @f(%c: !r, %q: memref<4x0x576xbf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x0x512xbf16>) {
  // expected-error @below {{num_heads 0 must be in [1, 4096]}}
  pattn.mla_decode query(%q : memref<4x0x576xbf16>) cache(%c : !r) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x0x512xbf16>) {num_heads = 0 : i64}
  return
}

// -----

!r = !pattn.record_cache<block_size = 64, record = !pattn.record<nvfp4_ds_mla>>
func.func @f(%c: !r, %q: memref<4x16x576xbf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x16x512xbf16>) {
  // expected-error @below {{outer_scale is required by a record in 'tensor' mode}}
  pattn.mla_decode query(%q : memref<4x16x576xbf16>) cache(%c : !r) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x16x512xbf16>) {num_heads = 16 : i64}
  return
}

// -----

!r = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
func.func @f(%c: !r, %q: memref<4x16x576xbf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %s: memref<1xf32>, %o: memref<4x16x512xbf16>) {
  // expected-error @below {{outer_scale given for a record in 'none' mode}}
  pattn.mla_decode query(%q : memref<4x16x576xbf16>) cache(%c : !r) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outer_scale(%s : memref<1xf32>) outs(%o : memref<4x16x512xbf16>) {num_heads = 16 : i64}
  return
}

// -----

!r = !pattn.record_cache<block_size = 16, record = !pattn.record<32 bytes, none, {latent: 16 x f8E4M3FN at 0 scaled_by s, s: 1 x f32 at 16}>>
func.func @f(%c: !r, %q: memref<4x16x16xbf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x16x16xbf16>) {
  // expected-error @below {{needs a record with 'latent' and 'rope' lanes}}
  pattn.mla_decode query(%q : memref<4x16x16xbf16>) cache(%c : !r) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x16x16xbf16>) {num_heads = 16 : i64}
  return
}

// -----

!r = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
func.func @f(%c: !r, %q: memref<4x16x576xbf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x16x512xbf16>) {
  // expected-error @below {{softmax_scale 0.000000e+00 must be finite and positive}}
  pattn.mla_decode query(%q : memref<4x16x576xbf16>) cache(%c : !r) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x16x512xbf16>) {num_heads = 16 : i64, softmax_scale = 0.0 : f32}
  return
}

// -----

!r = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
func.func @f(%c: !r, %q: memref<4x128x576xbf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x128x512xbf16>) {
  // expected-error @below {{has chip_plans but no #pattn.xqa_mla_plan}}
  pattn.mla_decode query(%q : memref<4x128x576xbf16>) cache(%c : !r) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x128x512xbf16>) {num_heads = 128 : i64, backend = #pattn.backend<portable>, plan = #pattn.portable_plan<heads_per_block = 8, keys_per_split = 512, targets = [sm_90a]>, chip_plans = {sm_90a = #pattn.xqa_mla_plan<kernel = wgmma, heads_per_block = 64, keys_per_tile = 32, shared_bytes = 226944, resident_blocks = [1], threads = 256, targets = [sm_90a]>}}
  return
}

// -----

!r = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
func.func @f(%c: !r, %q: memref<4x128x576xbf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x128x512xbf16>) {
  // expected-error @below {{has chip_plans but no #pattn.xqa_mla_plan}}
  pattn.mla_decode query(%q : memref<4x128x576xbf16>) cache(%c : !r) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x128x512xbf16>) {num_heads = 128 : i64, backend = #pattn.backend<xqa>,  chip_plans = {sm_90a = #pattn.xqa_mla_plan<kernel = wgmma, heads_per_block = 64, keys_per_tile = 32, shared_bytes = 226944, resident_blocks = [1], threads = 256, targets = [sm_90a]>}}
  return
}

// -----

!r = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
func.func @f(%c: !r, %q: memref<4x128x576xbf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x128x512xbf16>) {
  // expected-error @below {{chip_plans names 'sm_95', which is not a chip (sm_80}}
  pattn.mla_decode query(%q : memref<4x128x576xbf16>) cache(%c : !r) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x128x512xbf16>) {num_heads = 128 : i64, backend = #pattn.backend<xqa>, plan = #pattn.xqa_mla_plan<heads_per_block = 16, keys_per_tile = 32, shared_bytes = 63680, resident_blocks = [3], targets = [sm_90a]>, chip_plans = {sm_95 = #pattn.xqa_mla_plan<kernel = wgmma, heads_per_block = 64, keys_per_tile = 32, shared_bytes = 226944, resident_blocks = [1], threads = 256, targets = [sm_90a]>}}
  return
}

// -----

!r = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
func.func @f(%c: !r, %q: memref<4x128x576xbf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x128x512xbf16>) {
  // expected-error @below {{chip_plans entry sm_90a must be a #pattn.xqa_mla_plan, got 64 : i64}}
  pattn.mla_decode query(%q : memref<4x128x576xbf16>) cache(%c : !r) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x128x512xbf16>) {num_heads = 128 : i64, backend = #pattn.backend<xqa>, plan = #pattn.xqa_mla_plan<heads_per_block = 16, keys_per_tile = 32, shared_bytes = 63680, resident_blocks = [3], targets = [sm_90a]>, chip_plans = {sm_90a = 64 : i64}}
  return
}

//===----------------------------------------------------------------------===//
// Internal forms: out_scale, guard, rescale_view, scale_normalizer, fold_query
//===----------------------------------------------------------------------===//

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %s: memref<1xf32>, %o: memref<4x32x128xf16>) {
  // expected-error @below {{out_scale must have shape [8, 128], got 'memref<1xf32>'}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) out_scale(%s : memref<1xf32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %g: memref<1xi32>, %o: memref<4x32x128xf16>) {
  // expected-error @below {{guard and guard_value come together}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) guard(%g : memref<1xi32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x32x128xf16>) {
  // expected-error @below {{guard and guard_value come together}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64, guard_value = 1 : i32}
  return
}

// -----

// Row exponents belong to a folded query: K is read at its scalar N.
!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = token>
!v = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%ks: memref<?x16x8x128xi8>, %kt: memref<?x16x8xf32>, %v: !v, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %e: memref<4x32xi32>, %o: memref<4x32x128xf16>) {
  %k = pattn.bind_cache storage(%ks : memref<?x16x8x128xi8>) token_scales(%kt : memref<?x16x8xf32>) : !k
  // expected-error @below {{query_exponents needs a tensor-scaled K (the form --pattn-fold-channel-scales produces), got scale = token}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !k) value(%v : !v) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) query_exponents(%e : memref<4x32xi32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
!v = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %v: !v, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %n: memref<1xf32>, %e: memref<4x16xi32>, %o: memref<4x32x128xf16>) {
  // expected-error @below {{query_exponents must have shape [4, 32], got 'memref<4x16xi32>'}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !k) value(%v : !v) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) k_scale(%n : memref<1xf32>) query_exponents(%e : memref<4x16xi32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
!v = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %v: !v, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %n: memref<1xf32>, %e: memref<4x32xi64>, %o: memref<4x32x128xf16>) {
  // expected-error @below {{query_exponents must hold i32 elements, got 'i64'}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !k) value(%v : !v) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) k_scale(%n : memref<1xf32>) query_exponents(%e : memref<4x32xi64>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %g: memref<1xf32>, %o: memref<4x32x128xf16>) {
  // expected-error @below {{guard must hold i32 elements, got 'f32'}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) guard(%g : memref<1xf32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64, guard_value = 0 : i32}
  return
}

// -----

func.func @f(%k: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>) {
  // expected-error @below {{'pattn.rescale_view' op views a 'channel'-scaled cache, got 'tensor'}}
  %v = pattn.rescale_view %k : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor> to !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = none>
  return
}

// -----

func.func @f(%k: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = channel>) {
  // expected-error @below {{views the cache at 'tensor' or 'none' scale, got 'token'}}
  %v = pattn.rescale_view %k : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = channel> to !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = token>
  return
}

// -----

func.func @f(%k: !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = channel>) {
  // expected-error @below {{may change only the scale granularity}}
  %v = pattn.rescale_view %k : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = channel> to !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = tensor>
  return
}

// -----

func.func @f(%s: memref<8x128xf32>, %n: memref<2xf32>, %g: memref<1xi32>) {
  // expected-error @below {{'pattn.scale_normalizer' op outs must have shape [1], got 'memref<2xf32>'}}
  pattn.scale_normalizer scales(%s : memref<8x128xf32>) outs(%n : memref<2xf32>) flag(%g : memref<1xi32>) {softmax_scale = 1.0 : f32}
  return
}

// -----

func.func @f(%s: memref<8x128xf32>, %n: memref<1xf32>, %g: memref<1xi64>) {
  // expected-error @below {{flag must hold i32 elements, got 'i64'}}
  pattn.scale_normalizer scales(%s : memref<8x128xf32>) outs(%n : memref<1xf32>) flag(%g : memref<1xi64>) {softmax_scale = 1.0 : f32}
  return
}

// -----

func.func @f(%s: memref<8x128xf16>, %n: memref<1xf32>, %g: memref<1xi32>) {
  // expected-error @below {{scales must hold f32 elements, got 'f16'}}
  pattn.scale_normalizer scales(%s : memref<8x128xf16>) outs(%n : memref<1xf32>) flag(%g : memref<1xi32>) {softmax_scale = 1.0 : f32}
  return
}

// -----

func.func @f(%s: memref<8x128xf32>, %n: memref<1xf32>, %g: memref<1xi32>) {
  // expected-error @below {{softmax_scale -2.000000e+00 must be finite and positive}}
  pattn.scale_normalizer scales(%s : memref<8x128xf32>) outs(%n : memref<1xf32>) flag(%g : memref<1xi32>) {softmax_scale = -2.0 : f32}
  return
}

// -----

func.func @f(%q: memref<4x12x128xf16>, %s: memref<8x128xf32>, %n: memref<1xf32>, %o: memref<4x12x128xf16>, %e: memref<4x12xi32>) {
  // expected-error @below {{'pattn.fold_query' op num_heads 12 must be a positive multiple of the scales' kv_heads 8}}
  pattn.fold_query query(%q : memref<4x12x128xf16>) scales(%s : memref<8x128xf32>) normalizer(%n : memref<1xf32>) outs(%o : memref<4x12x128xf16>) exponents(%e : memref<4x12xi32>) {num_heads = 12 : i64}
  return
}

// -----

func.func @f(%q: memref<4x32x64xf16>, %s: memref<8x128xf32>, %n: memref<1xf32>, %o: memref<4x32x64xf16>, %e: memref<4x32xi32>) {
  // expected-error @below {{query must have shape [?, 32, 128], got 'memref<4x32x64xf16>'}}
  pattn.fold_query query(%q : memref<4x32x64xf16>) scales(%s : memref<8x128xf32>) normalizer(%n : memref<1xf32>) outs(%o : memref<4x32x64xf16>) exponents(%e : memref<4x32xi32>) {num_heads = 32 : i64}
  return
}

// -----

func.func @f(%q: memref<4x32x128xf16>, %s: memref<8x128xf32>, %n: memref<1xf32>, %o: memref<4x32x128xbf16>, %e: memref<4x32xi32>) {
  // expected-error @below {{outs must hold the query's element type}}
  pattn.fold_query query(%q : memref<4x32x128xf16>) scales(%s : memref<8x128xf32>) normalizer(%n : memref<1xf32>) outs(%o : memref<4x32x128xbf16>) exponents(%e : memref<4x32xi32>) {num_heads = 32 : i64}
  return
}

// -----

func.func @f(%q: memref<4x32x128xf16>, %s: memref<8x128xf32>, %n: memref<1xf16>, %o: memref<4x32x128xf16>, %e: memref<4x32xi32>) {
  // expected-error @below {{normalizer must hold f32 elements, got 'f16'}}
  pattn.fold_query query(%q : memref<4x32x128xf16>) scales(%s : memref<8x128xf32>) normalizer(%n : memref<1xf16>) outs(%o : memref<4x32x128xf16>) exponents(%e : memref<4x32xi32>) {num_heads = 32 : i64}
  return
}

// -----

// One exponent per (token, head) row.
func.func @f(%q: memref<4x32x128xf16>, %s: memref<8x128xf32>, %n: memref<1xf32>, %o: memref<4x32x128xf16>, %e: memref<4x8xi32>) {
  // expected-error @below {{exponents must have shape [4, 32], got 'memref<4x8xi32>'}}
  pattn.fold_query query(%q : memref<4x32x128xf16>) scales(%s : memref<8x128xf32>) normalizer(%n : memref<1xf32>) outs(%o : memref<4x32x128xf16>) exponents(%e : memref<4x8xi32>) {num_heads = 32 : i64}
  return
}

// -----

func.func @f(%q: memref<4x32x128xf16>, %s: memref<8x128xf32>, %n: memref<1xf32>, %o: memref<4x32x128xf16>, %e: memref<4x32xf32>) {
  // expected-error @below {{exponents must hold i32 elements, got 'f32'}}
  pattn.fold_query query(%q : memref<4x32x128xf16>) scales(%s : memref<8x128xf32>) normalizer(%n : memref<1xf32>) outs(%o : memref<4x32x128xf16>) exponents(%e : memref<4x32xf32>) {num_heads = 32 : i64}
  return
}

// -----

// A plan without a recorded backend.
!c = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !c, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x32x128xf16>) {
  // expected-error @below {{'pattn.paged_attention' op has a decode plan but no backend (run --pattn-select-backend before --pattn-plan-decode)}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !c) value(%k : !c) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64, plan = #pattn.portable_plan<heads_per_block = 4, keys_per_split = 512, targets = [sm_90a]>}
  return
}

// -----

// The plan of the other backend.
!c = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !c, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x32x128xf16>) {
  // expected-error @below {{'pattn.paged_attention' op backend xqa needs a #pattn.xqa_plan or #pattn.prefill_plan, got #pattn.portable_plan<heads_per_block = 4, keys_per_split = 512, targets = [sm_90a]>}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !c) value(%k : !c) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64, backend = #pattn.backend<xqa>, plan = #pattn.portable_plan<heads_per_block = 4, keys_per_split = 512, targets = [sm_90a]>}
  return
}

// -----

!c = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !c, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x32x128xf16>) {
  // expected-error @below {{'pattn.paged_attention' op backend portable needs a #pattn.portable_plan, got #pattn.xqa_plan<operand = f16, rows = 16, keys_per_tile = 64, stages = 3, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], targets = [sm_90a]>}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !c) value(%k : !c) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64, backend = #pattn.backend<portable>, plan = #pattn.xqa_plan<operand = f16, rows = 16, keys_per_tile = 64, stages = 3, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], targets = [sm_90a]>}
  return
}

// -----

// MLA decode on tensor cores has its own plan: the paged one is refused.
!r = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
func.func @f(%c: !r, %q: memref<4x16x576xbf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x16x512xbf16>) {
  // expected-error @below {{'pattn.mla_decode' op backend xqa needs a #pattn.xqa_mla_plan, got #pattn.xqa_plan<operand = f16, rows = 16, keys_per_tile = 64, stages = 3, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], targets = [sm_90a]>}}
  pattn.mla_decode query(%q : memref<4x16x576xbf16>) cache(%c : !r) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x16x512xbf16>) {num_heads = 16 : i64, backend = #pattn.backend<xqa>, plan = #pattn.xqa_plan<operand = f16, rows = 16, keys_per_tile = 64, stages = 3, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], targets = [sm_90a]>}
  return
}

// -----

!r = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
func.func @f(%c: !r, %q: memref<4x16x576xbf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x16x512xbf16>) {
  // expected-error @below {{'pattn.mla_decode' op backend portable needs a #pattn.portable_plan, got #pattn.xqa_mla_plan<heads_per_block = 16, keys_per_tile = 32, shared_bytes = 80640, resident_blocks = [3], targets = [sm_90a]>}}
  pattn.mla_decode query(%q : memref<4x16x576xbf16>) cache(%c : !r) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x16x512xbf16>) {num_heads = 16 : i64, backend = #pattn.backend<portable>, plan = #pattn.xqa_mla_plan<heads_per_block = 16, keys_per_tile = 32, shared_bytes = 80640, resident_blocks = [3], targets = [sm_90a]>}
  return
}

// -----

// The paged attention op refuses the MLA plan.
!c = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !c, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<4x32x128xf16>) {
  // expected-error @below {{'pattn.paged_attention' op backend xqa needs a #pattn.xqa_plan or #pattn.prefill_plan, got #pattn.xqa_mla_plan<heads_per_block = 16, keys_per_tile = 32, shared_bytes = 80640, resident_blocks = [3], targets = [sm_90a]>}}
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !c) value(%k : !c) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64, backend = #pattn.backend<xqa>, plan = #pattn.xqa_mla_plan<heads_per_block = 16, keys_per_tile = 32, shared_bytes = 80640, resident_blocks = [3], targets = [sm_90a]>}
  return
}

// -----

// #pattn.xqa_mla_plan: one m16 tile of heads (mma.sync) or one m64 tile
// (wgmma), 8 keys per warp.
// expected-error @below {{heads_per_block 32 must be 16 for kernel mma_sync (one m16 tile)}}
func.func private @g() attributes {plan = #pattn.xqa_mla_plan<heads_per_block = 32, keys_per_tile = 32, shared_bytes = 80640, resident_blocks = [3], targets = [sm_90a]>}

// -----

// The plan names its kernel; the head count must match it.
// expected-error @below {{heads_per_block 16 must be 64 for kernel wgmma (one m64 tile)}}
func.func private @g() attributes {plan = #pattn.xqa_mla_plan<kernel = wgmma, heads_per_block = 16, keys_per_tile = 32, shared_bytes = 80640, resident_blocks = [1], threads = 256, targets = [sm_90a]>}

// -----

// expected-error @below {{heads_per_block 64 must be 16 for kernel mma_sync (one m16 tile)}}
func.func private @g() attributes {plan = #pattn.xqa_mla_plan<heads_per_block = 64, keys_per_tile = 32, shared_bytes = 226944, resident_blocks = [3], targets = [sm_90a]>}

// -----

// expected-error @below {{keys_per_tile 64 must be 32 (8 keys per warp)}}
func.func private @g() attributes {plan = #pattn.xqa_mla_plan<heads_per_block = 16, keys_per_tile = 64, shared_bytes = 80640, resident_blocks = [3], targets = [sm_90a]>}

// -----

// expected-error @below {{shared_bytes -1 is negative}}
func.func private @g() attributes {plan = #pattn.xqa_mla_plan<heads_per_block = 16, keys_per_tile = 32, shared_bytes = -1, resident_blocks = [3], targets = [sm_90a]>}

// -----

// A decode's rows (g x max_query_len) must fit the plan's: 4 x 4 > 8.
!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<?x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %qs: memref<5xi32>, %o: memref<?x32x128xf16>) {
  // expected-error @below {{has an XQA plan of 8 rows, fewer than g x max_query_len = 16}}
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) query_start(%qs : memref<5xi32>) outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, max_query_len = 4 : i64, backend = #pattn.backend<xqa>, plan = #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 64, stages = 3, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 107392, resident_blocks = [2], targets = [sm_90a]>}
  return
}

// -----

// Keys as M pairs a warp's value channels into m16 tiles: head_dim 32 over
// 4 value warps leaves 8.
!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 32, encoding = f16, scale = none>
func.func @f(%k: !k, %q: memref<?x32x32xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %o: memref<?x32x32xf16>) {
  // expected-error @below {{has an XQA plan of 8 rows (keys as the mma's M), whose warps need value channels in multiples of 16, got 8}}
  pattn.paged_attention query(%q : memref<?x32x32xf16>) key(%k : !k) value(%k : !k) block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>) outs(%o : memref<?x32x32xf16>) {num_heads = 32 : i64, backend = #pattn.backend<xqa>, plan = #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 64, stages = 3, key_warps = 1, value_warps = 4, keys_per_split = 4096, shared_bytes = 107392, resident_blocks = [2], targets = [sm_90a]>}
  return
}
