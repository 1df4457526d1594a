//===- PAttnOps.td - pattn operations ----------------------*- tablegen -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// The user-facing ops: binding storage as a typed cache, writing new K/V rows
// or records into it, and decode attention over it. All have buffer
// semantics; verifiers enforce the structural rules of SPEC §2-4.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_DIALECT_PATTN_IR_PATTNOPS_TD
#define PATTN_DIALECT_PATTN_IR_PATTNOPS_TD

include "pattn/Dialect/PAttn/IR/PAttnTypes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def PAttn_BindCacheOp : PAttn_Op<"bind_cache",
    [Pure, AttrSizedOperandSegments]> {
  let summary = "View raw storage buffers as a typed paged cache";
  let description = [{
    Gives raw page storage a `!pattn.cache` (or `!pattn.record_cache`) type.
    The verifier derives every buffer's shape from the result type and checks
    the operands against it (dynamic dimensions match anything, but all
    buffers must agree on the number of pages):

    - `storage`: i8 bytes, see `!pattn.cache` / `!pattn.record_cache`;
    - `group_scales`: f8E4M3FN, required exactly for nvfp4 caches;
    - `token_scales`: f32 [blocks, block_size, kv_heads], required exactly
      for `token` granularity.

    Binding overlapping bytes as two different cache types (e.g. a
    per-token nvfp4 record read in tensor mode) is an error. Overlap is
    followed through views of one buffer: casts and reshapes, and subviews
    and reinterpret_casts at static offsets (views at dynamic offsets are
    the caller's contract).

    Example:
    ```mlir
    %v = pattn.bind_cache storage(%vs : memref<?x16x8x64xi8>)
           group_scales(%vg : memref<?x16x8x8xf8E4M3FN>)
        : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128,
                       encoding = nvfp4, scale = tensor>
    ```
  }];
  let arguments = (ins AnyMemRef:$storage,
                       Optional<AnyMemRef>:$group_scales,
                       Optional<AnyMemRef>:$token_scales);
  let results = (outs PAttn_AnyCache:$cache);
  let assemblyFormat = [{
    `storage` `(` $storage `:` type($storage) `)`
    (`group_scales` `(` $group_scales^ `:` type($group_scales) `)`)?
    (`token_scales` `(` $token_scales^ `:` type($token_scales) `)`)?
    attr-dict `:` qualified(type($cache))
  }];
  let hasVerifier = 1;
}

def PAttn_WriteCacheOp : PAttn_Op<"write_cache", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "Quantize new K or V rows into cache slots";
  let description = [{
    Quantizes `values` [tokens, kv_heads, head_dim] (f16, bf16 or f32) with
    the cache's encoding and stores token t at slot `slots[t]` (slot =
    block * block_size + offset; -1 skips the token). `scale` is required
    for `tensor` ([1]) and `channel` ([kv_heads, head_dim]) granularities and
    for nvfp4's tensor outer scale, and absent otherwise: `token` caches
    derive s = amax / max_code per token and store it in the token-scale
    buffer. Codes are bit-exact to the pattn numerics library.
    `first_head` > 0 writes heads [first_head, first_head + kv_heads) of a
    wider `values` [tokens, heads, head_dim]: the V heads of a packed QKV
    buffer.

    Example:
    ```mlir
    pattn.write_cache values(%k : memref<4x8x128xf16>)
        into(%kc : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128,
                                encoding = i8, scale = tensor>)
        slots(%slots : memref<4xi64>) scale(%ks : memref<1xf32>)
    ```
  }];
  let arguments = (ins AnyMemRef:$values, PAttn_CacheType:$cache,
                       AnyMemRef:$slots, Optional<AnyMemRef>:$scale,
                       DefaultValuedAttr<I64Attr, "0">:$first_head);
  let assemblyFormat = [{
    `values` `(` $values `:` type($values) `)`
    `into` `(` $cache `:` qualified(type($cache)) `)`
    `slots` `(` $slots `:` type($slots) `)`
    (`scale` `(` $scale^ `:` type($scale) `)`)?
    attr-dict
  }];
  let hasVerifier = 1;
}

def PAttn_WriteRecordOp : PAttn_Op<"write_record", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "Encode new tokens into per-token cache records";
  let description = [{
    Encodes `latent` [tokens, L] and `rope` [tokens, R] (f16, bf16 or f32;
    L and R the counts of the record's `latent` and `rope` lanes) into one
    record per token at `slots[t]` (-1 skips). Records in `tensor` mode take
    their outer scale from `outer_scale` ([1], f32); `token` mode derives
    s_t = token_amax / (6*448) and stores it in the record; `none` takes
    no scale. Every byte of a written record is defined (pads are zero).

    Example:
    ```mlir
    pattn.write_record latent(%l : memref<2x512xbf16>) rope(%r : memref<2x64xbf16>)
        into(%c : !pattn.record_cache<block_size = 64,
                                      record = !pattn.record<fp8_ds_mla>>)
        slots(%s : memref<2xi64>)
    ```
  }];
  let arguments = (ins AnyMemRef:$latent, AnyMemRef:$rope,
                       PAttn_RecordCacheType:$cache, AnyMemRef:$slots,
                       Optional<AnyMemRef>:$outer_scale);
  let assemblyFormat = [{
    `latent` `(` $latent `:` type($latent) `)`
    `rope` `(` $rope `:` type($rope) `)`
    `into` `(` $cache `:` qualified(type($cache)) `)`
    `slots` `(` $slots `:` type($slots) `)`
    (`outer_scale` `(` $outer_scale^ `:` type($outer_scale) `)`)?
    attr-dict
  }];
  let hasVerifier = 1;
}

def PAttn_RotaryOp : PAttn_Op<"rotary", [
    AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "RMS-normalize and rotate heads of Q or K (RoPE)";
  let description = [{
    Prepares query or key heads the way model graphs do before attention:
    for token t, head h < H_out (`outs` is [tokens, H_out, D]) it reads head
    `first_head` + h of `input` [tokens, H_in, D] and, in fp32 with one
    rounding to `outs`' type at the end:

    1. with `norm_weight` [D]: RMS normalization,
       x = x / sqrt(mean(x²) + norm_epsilon) · norm_weight;
    2. rotary embedding of the first R = 2·cos.dim[1] channels at position
       p (R ≤ D; channels R.. pass through): pair i < R/2 is channels
       (i, i + R/2) (neox, the default) or (2i, 2i + 1) (`interleaved`),
       rotated by cos[p, i] and sin[p, i]:
       (a, b) -> (a·cos − b·sin, b·cos + a·sin).

    `cos` and `sin` are [max_position, R/2] tables (f16, bf16 or f32). The
    position is `positions[t]` + `position_offset`, or, with `seq_lens`
    [batch] (and `query_start` [batch+1], as in `pattn.paged_attention`),
    the token's kv position seq_lens[b] − n_b + i + `position_offset`: the
    slot a decode appends at. A position outside [0, max_position) fails
    the call with PATTN_DEVICE_ERROR_POSITION_OUT_OF_RANGE and writes
    nothing. `first_head` selects heads of a packed QKV buffer (its K heads
    start at num_heads). `input` and `outs` may be the same buffer when
    `first_head` is 0.

    Example (Llama-3 query heads, neox, 128 rotary channels):
    ```mlir
    pattn.rotary input(%q : memref<4x32x128xf16>)
        cos(%cos : memref<8192x64xf16>) sin(%sin : memref<8192x64xf16>)
        seq_lens(%sl : memref<4xi32>)
        outs(%qr : memref<4x32x128xf16>)
    ```
  }];
  let arguments = (ins AnyMemRef:$input, AnyMemRef:$cos, AnyMemRef:$sin,
                       Optional<AnyMemRef>:$positions,
                       Optional<AnyMemRef>:$seq_lens,
                       Optional<AnyMemRef>:$query_start,
                       Optional<AnyMemRef>:$norm_weight, AnyMemRef:$out,
                       DefaultValuedAttr<BoolAttr, "false">:$interleaved,
                       DefaultValuedAttr<I64Attr, "0">:$first_head,
                       DefaultValuedAttr<I64Attr, "0">:$position_offset,
                       DefaultValuedAttr<F32Attr, "1.0e-6f">:$norm_epsilon);
  let assemblyFormat = [{
    `input` `(` $input `:` type($input) `)`
    `cos` `(` $cos `:` type($cos) `)`
    `sin` `(` $sin `:` type($sin) `)`
    (`positions` `(` $positions^ `:` type($positions) `)`)?
    (`seq_lens` `(` $seq_lens^ `:` type($seq_lens) `)`)?
    (`query_start` `(` $query_start^ `:` type($query_start) `)`)?
    (`norm_weight` `(` $norm_weight^ `:` type($norm_weight) `)`)?
    `outs` `(` $out `:` type($out) `)`
    attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// R, the rotated channels of each head (2 x cos dim 1).
    int64_t getRotaryDim();
    /// norm_epsilon and the norm weight's shape and type.
    ::mlir::LogicalResult verifyNorm();
  }];
}

def PAttn_PagedAttentionOp : PAttn_Op<"paged_attention", [
    AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "Attention of decode tokens and prompts over paged, quantized K and V caches";
  let description = [{
    For each query token t of sequence b and head h (kv head h / g, g =
    num_heads / kv_heads):

    o[t,h] = softmax(softmax_scale * q[t,h] · dequant(K)ᵀ [+ masks]) · dequant(V)

    with fp32 accumulation, over the `seq_lens[b]` keys found through
    `block_table[b]` (-1 entries are unmapped and masked). Without
    `query_start` each sequence has one query token (tokens == batch); with
    it, sequence b owns tokens [query_start[b], query_start[b+1]) (0 to
    `max_query_len` ≤ 32768 of them: speculative decode up to 8, a prompt or
    a chunk of one beyond; one batch may mix them), causal among
    themselves: query token i of n sits at position seq_lens[b] − n + i and
    sees the keys up to it, so a chunk over a cached prefix sees the whole
    prefix. `softcap` > 0 turns logits into softcap·tanh(logits/softcap);
    `window` W ≥ 1 keeps keys at positions > query position − W; `sinks`
    [num_heads] (f16, bf16 or f32, as ONNX Runtime's T-typed head_sink) add
    exp(sink − max) to the denominator. Zero-length sequences
    and fully masked rows give zeros.

    `k_scale`/`v_scale` are required exactly when the cache's granularity is
    `tensor` ([1]) or `channel` ([kv_heads, head_dim]); `token` scales come
    from the bound cache.

    Forms produced by the passes (users may write them too):
    - `out_scale` [kv_heads, head_dim] (f32) multiplies the fp32 output
      before its single rounding: o[t,h,c] *= out_scale[h / g, c]. The fold
      pass moves V channel scales here.
    - `guard` (memref<1xi32>) with `guard_value`: the op runs only when
      guard[0] == guard_value, read on the device (no host sync). The fold
      pass guards the folded and the unfolded form of a dynamic K table.
    - `query_exponents` [tokens, num_heads] (i32) multiplies the logits of
      row (t, h) by 2^query_exponents[t, h], exactly in fp32 (saturating
      at the largest finite value): the row exponents of a query folded by
      `pattn.fold_query`. Needs a `tensor`-scaled K (the folded form).
    - `backend`: the lowering chosen by `--pattn-select-backend`.
    - `plan`: its tiling, written by `--pattn-plan-decode`
      (`#pattn.xqa_plan` for `xqa`, `#pattn.portable_plan` for `portable`).
    - `decode_plan`: next to a `#pattn.prefill_plan`, the `#pattn.xqa_plan`
      (`query_tile = 0`) of the decode kernel that serves the batch's short
      sequences: those of at most min(rows / g, 8) query tokens run on it, the
      others on the prefill family, so a mixed batch's decode tokens do not
      each take a prefill block. Written by `--pattn-plan-decode`.

    Example:
    ```mlir
    pattn.paged_attention query(%q : memref<4x32x128xf16>)
        key(%k : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128,
                              encoding = i4, scale = channel>)
        value(%v : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128,
                                encoding = i8, scale = tensor>)
        block_table(%bt : memref<4x64xi32>) seq_lens(%sl : memref<4xi32>)
        k_scale(%ks : memref<8x128xf32>) v_scale(%vs : memref<1xf32>)
        outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64}
    ```
    A prompt of up to 2048 tokens per sequence (or a chunk of one over the
    cached prefix), the tokens of every sequence packed one after another:
    ```mlir
    pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k)
        value(%k : !k) block_table(%bt : memref<?x?xi32>)
        seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>)
        outs(%o : memref<?x32x128xf16>)
        {num_heads = 32 : i64, max_query_len = 2048 : i64}
    ```
  }];
  let arguments = (ins AnyMemRef:$query, PAttn_CacheType:$key,
                       PAttn_CacheType:$value, AnyMemRef:$block_table,
                       AnyMemRef:$seq_lens, Optional<AnyMemRef>:$query_start,
                       Optional<AnyMemRef>:$k_scale,
                       Optional<AnyMemRef>:$v_scale,
                       Optional<AnyMemRef>:$sinks,
                       Optional<AnyMemRef>:$out_scale,
                       Optional<AnyMemRef>:$guard,
                       Optional<AnyMemRef>:$query_exponents, AnyMemRef:$out,
                       I64Attr:$num_heads,
                       OptionalAttr<F32Attr>:$softmax_scale,
                       DefaultValuedAttr<F32Attr, "0.0f">:$softcap,
                       DefaultValuedAttr<I64Attr, "-1">:$window,
                       DefaultValuedAttr<I64Attr, "1">:$max_query_len,
                       OptionalAttr<I32Attr>:$guard_value,
                       OptionalAttr<PAttn_BackendAttr>:$backend,
                       OptionalAttr<PAttn_DecodePlanAttr>:$plan,
                       OptionalAttr<PAttn_XqaPlanAttr>:$decode_plan);
  let assemblyFormat = [{
    `query` `(` $query `:` type($query) `)`
    `key` `(` $key `:` qualified(type($key)) `)`
    `value` `(` $value `:` qualified(type($value)) `)`
    `block_table` `(` $block_table `:` type($block_table) `)`
    `seq_lens` `(` $seq_lens `:` type($seq_lens) `)`
    (`query_start` `(` $query_start^ `:` type($query_start) `)`)?
    (`k_scale` `(` $k_scale^ `:` type($k_scale) `)`)?
    (`v_scale` `(` $v_scale^ `:` type($v_scale) `)`)?
    (`sinks` `(` $sinks^ `:` type($sinks) `)`)?
    (`out_scale` `(` $out_scale^ `:` type($out_scale) `)`)?
    (`guard` `(` $guard^ `:` type($guard) `)`)?
    (`query_exponents` `(` $query_exponents^ `:` type($query_exponents) `)`)?
    `outs` `(` $out `:` type($out) `)`
    attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// softmax_scale, defaulting to 1/sqrt(head_dim).
    float getEffectiveSoftmaxScale();
    /// With a decode_plan: the most query tokens of a sequence that its
    /// decode kernel serves (its rows / g, at most 8); 0 without one.
    int64_t getSplitDecodeTokens();
  }];
}

def PAttn_MlaDecodeOp : PAttn_Op<"mla_decode", [AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "Multi-head latent attention decode over a record cache";
  let description = [{
    DeepSeek-style MLA decode: every head attends to one shared latent head
    whose key is `latent ‖ rope` and whose value is `latent`, both decoded
    from the cache's records. `query` is [tokens, num_heads, L + R] and
    `outs` [tokens, num_heads, L] (L, R: the counts of the record's `latent`
    and `rope` lanes). `outer_scale` ([1], f32) is required exactly for
    records in `tensor` mode. The block table, sequence lengths and
    `query_start` follow `pattn.paged_attention`.

    `backend` and `plan` are written by the backend selection and
    `--pattn-plan-decode` as for `pattn.paged_attention` (`plan` is a
    `#pattn.xqa_mla_plan` for `xqa`). `chip_plans`, also written by
    `--pattn-plan-decode`, maps chip names to the `#pattn.xqa_mla_plan` that
    the kernels built for that chip obey instead of `plan`: a build for
    sm_80 and sm_90a runs the warpgroup (wgmma) kernel on sm_90a and the
    mma.sync kernel elsewhere, each chip named here getting a kernel module
    of its own.

    Example:
    ```mlir
    pattn.mla_decode query(%q : memref<4x16x576xbf16>)
        cache(%c : !pattn.record_cache<block_size = 64,
                   record = !pattn.record<nvfp4_ds_mla_fp8_rope, token>>)
        block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>)
        outs(%o : memref<4x16x512xbf16>) {num_heads = 16 : i64}
    ```
  }];
  let arguments = (ins AnyMemRef:$query, PAttn_RecordCacheType:$cache,
                       AnyMemRef:$block_table, AnyMemRef:$seq_lens,
                       Optional<AnyMemRef>:$query_start,
                       Optional<AnyMemRef>:$outer_scale, AnyMemRef:$out,
                       I64Attr:$num_heads,
                       OptionalAttr<F32Attr>:$softmax_scale,
                       DefaultValuedAttr<I64Attr, "1">:$max_query_len,
                       OptionalAttr<PAttn_BackendAttr>:$backend,
                       OptionalAttr<PAttn_DecodePlanAttr>:$plan,
                       OptionalAttr<DictionaryAttr>:$chip_plans);
  let assemblyFormat = [{
    `query` `(` $query `:` type($query) `)`
    `cache` `(` $cache `:` qualified(type($cache)) `)`
    `block_table` `(` $block_table `:` type($block_table) `)`
    `seq_lens` `(` $seq_lens `:` type($seq_lens) `)`
    (`query_start` `(` $query_start^ `:` type($query_start) `)`)?
    (`outer_scale` `(` $outer_scale^ `:` type($outer_scale) `)`)?
    `outs` `(` $out `:` type($out) `)`
    attr-dict
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Internal forms of the fold (SPEC §5)
//===----------------------------------------------------------------------===//

def PAttn_RescaleViewOp : PAttn_Op<"rescale_view", [Pure]> {
  let summary = "View a channel-scaled cache at tensor or unit scale";
  let description = [{
    The same storage, read with another scale granularity. The fold pass
    uses it once the per-channel scales have moved elsewhere: a K cache
    whose channel scales were folded into the query is read at the scalar
    normalizer (`tensor`), a V cache whose channel scales moved to the
    output at unit scale (`none`). Everything but the granularity must
    match, and only `channel` caches can be viewed this way.

    Example:
    ```mlir
    %kt = pattn.rescale_view %k
        : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128,
                       encoding = i4, scale = channel>
       to !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128,
                       encoding = i4, scale = tensor>
    ```
  }];
  let arguments = (ins PAttn_CacheType:$source);
  let results = (outs PAttn_CacheType:$result);
  let assemblyFormat = [{
    $source attr-dict `:` qualified(type($source)) `to` qualified(type($result))
  }];
  let hasVerifier = 1;
}

def PAttn_ScaleNormalizerOp : PAttn_Op<"scale_normalizer", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "The power-of-two normalizer of a per-channel scale table";
  let description = [{
    Computes, on the device, N = 2^(ilogb(m)+1) with m = max |scales| over
    the finite entries (N = 1 when m = 0), the exponent clamped to
    [-126, 126 - ilogb(max(softmax_scale, 1))], and writes it to `outs`
    ([1], f32). `flag` ([1], i32) receives 1 when the table is folded
    (every entry finite, at most 24 binades between the largest and the
    smallest nonzero magnitude; a clamped N folds) and 0 otherwise.
    Lowered to a single-block reduction: no host readback, so it can be
    captured in a CUDA graph.

    Example:
    ```mlir
    pattn.scale_normalizer scales(%ks : memref<8x128xf32>)
        outs(%n : memref<1xf32>) flag(%ok : memref<1xi32>)
        {softmax_scale = 0.0883883 : f32}
    ```
  }];
  let arguments = (ins AnyMemRef:$scales, AnyMemRef:$out, AnyMemRef:$flag,
                       F32Attr:$softmax_scale);
  let assemblyFormat = [{
    `scales` `(` $scales `:` type($scales) `)`
    `outs` `(` $out `:` type($out) `)`
    `flag` `(` $flag `:` type($flag) `)`
    attr-dict
  }];
  let hasVerifier = 1;
}

def PAttn_FoldQueryOp : PAttn_Op<"fold_query", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "Fold per-channel K scales into the query, row by row";
  let description = [{
    For each (token t, head h) row, with g = num_heads / kv_heads, N =
    `normalizer[0]` (a power of two) and p[c] = query[t, h, c] *
    scales[h / g, c] / N (exact in fp64):

      e = max over nonzero p[c] of the binade of p[c] rounded to 24 bits
      outs[t, h, c] = T(p[c] * 2^-e)   (one rounding, T the query's type)
      exponents[t, h] = e               (0 when the row has no nonzero p)

    so the largest |outs| of every row lies in [1, 2] whatever the query's
    and the table's magnitudes; products more than 126 binades below the
    row's largest are written as zeros of their sign. The attention reads
    the row back at 2^e (`query_exponents` of `pattn.paged_attention`),
    exactly. A channel that flushes to zero in fp16 is at least 24 binades
    below the row's largest term, whatever |q| (docs/Passes.md).

    Example:
    ```mlir
    pattn.fold_query query(%q : memref<4x32x128xf16>)
        scales(%ks : memref<8x128xf32>) normalizer(%n : memref<1xf32>)
        outs(%qf : memref<4x32x128xf16>) exponents(%e : memref<4x32xi32>)
        {num_heads = 32 : i64}
    ```
  }];
  let arguments = (ins AnyMemRef:$query, AnyMemRef:$scales,
                       AnyMemRef:$normalizer, AnyMemRef:$out,
                       AnyMemRef:$exponents, I64Attr:$num_heads);
  let assemblyFormat = [{
    `query` `(` $query `:` type($query) `)`
    `scales` `(` $scales `:` type($scales) `)`
    `normalizer` `(` $normalizer `:` type($normalizer) `)`
    `outs` `(` $out `:` type($out) `)`
    `exponents` `(` $exponents `:` type($exponents) `)`
    attr-dict
  }];
  let hasVerifier = 1;
}

#endif // PATTN_DIALECT_PATTN_IR_PATTNOPS_TD
