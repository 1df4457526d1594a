//===- PAttnTypes.td - pattn types -------------------------*- tablegen -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// The types of the pattn dialect: a paged cache whose type carries its
// quantization, a per-token record made of lanes, and a paged cache of
// records. Each type derives the storage its memrefs must have.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_DIALECT_PATTN_IR_PATTNTYPES_TD
#define PATTN_DIALECT_PATTN_IR_PATTNTYPES_TD

include "pattn/Dialect/PAttn/IR/PAttnAttrs.td"
include "mlir/IR/AttrTypeBase.td"

class PAttn_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<PAttn_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def PAttn_CacheType : PAttn_Type<"Cache", "cache"> {
  let summary = "A paged K or V cache with a quantized encoding";
  let description = [{
    A paged cache of `kv_heads` heads of `head_dim` elements per token, in
    pages of `block_size` tokens. `encoding` says how each element is stored
    and `scale` at which granularity its dequantization scale applies; the
    nvfp4 group scales and `token` scales live in companion buffers given to
    `pattn.bind_cache`. The type fixes the storage the verifier expects:

    | buffer | nhd shape | hnd shape |
    |---|---|---|
    | storage (i8 bytes) | [blocks, block_size, kv_heads, row] | [blocks, kv_heads, block_size, row] |
    | nvfp4 group scales (f8E4M3FN) | [blocks, block_size, kv_heads, head_dim/16] | [blocks, kv_heads, block_size, head_dim/16] |
    | token scales (f32) | [blocks, block_size, kv_heads] | same |

    with row = head_dim*2 bytes (f16, bf16), head_dim (i8, fp8) or
    (head_dim+1)/2 (i4, nvfp4). Rules: block_size is a power of two in
    [16, 4096]; kv_heads in [1, 4096]; head_dim a positive multiple of 8 (of
    16 for nvfp4) up to 1024; f16/bf16 take no scale; nvfp4's outer scale is
    `tensor` or `token`.

    Example:
    ```mlir
    !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128,
                 encoding = i4, scale = channel, layout = nhd>
    ```
  }];
  let parameters = (ins "int64_t":$block_size, "int64_t":$kv_heads,
                        "int64_t":$head_dim,
                        EnumParameter<PAttn_Encoding>:$encoding,
                        EnumParameter<PAttn_ScaleGranularity>:$scale,
                        DefaultValuedParameter<"::pattn::Layout",
                          "::pattn::Layout::nhd">:$layout);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Bytes of one head row in storage.
    int64_t getRowBytes() const;
    /// Shapes of the storage, group-scale and token-scale buffers for
    /// `numBlocks` pages (ShapedType::kDynamic allowed).
    ::llvm::SmallVector<int64_t> getStorageShape(int64_t numBlocks) const;
    ::llvm::SmallVector<int64_t> getGroupScaleShape(int64_t numBlocks) const;
    ::llvm::SmallVector<int64_t> getTokenScaleShape(int64_t numBlocks) const;
    /// Whether bind_cache needs the group-scale / token-scale buffer.
    bool needsGroupScales() const;
    bool needsTokenScales() const;
  }];
}

def PAttn_RecordType : PAttn_Type<"Record", "record"> {
  let summary = "A fixed-size per-token cache record made of lanes";
  let description = [{
    A record of `bytes` bytes per token, made of named lanes (see
    `#pattn.lane`), with an outer scale mode for nvfp4 lanes: `none` (no
    e2m1 lane), `tensor` (a launch scalar) or `token` (the writer stores
    s_t = token_amax / (6*448) in the `token_scale` lane; group scales are
    relative to it). The mode is part of the type, so a record written in
    one mode is never read in the other.

    The verifier rejects lanes that overlap, overrun the record, are
    misaligned for their element type, or reference a scale lane that is
    missing, of an unsupported type, or whose count does not divide theirs
    (and e2m1 lanes need one e4m3 scale per 16 elements). Records are a
    multiple of 16 bytes so that a row loads as 16-byte vectors.

    The presets of SPEC §3 print by name:
    ```mlir
    !pattn.record<fp8_ds_mla>                      // 656 B
    !pattn.record<nvfp4_ds_mla>                    // 432 B, tensor outer scale
    !pattn.record<nvfp4_ds_mla_fp8_rope, token>    // 368 B, per-token s_t
    !pattn.record<32 bytes, none, {vals: 16 x f8E4M3FN at 0 scaled_by s,
                                   s: 1 x f32 at 16}>
    ```
  }];
  let parameters = (ins "uint32_t":$bytes,
                        ArrayRefParameter<"::pattn::LaneAttr">:$lanes,
                        EnumParameter<PAttn_ScaleGranularity>:$mode);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The lane named `name`, or null.
    LaneAttr getLane(::llvm::StringRef name) const;
    /// The preset this record is byte-for-byte, if any ("fp8_ds_mla", ...).
    ::std::optional<::llvm::StringRef> getPresetName() const;
    /// Builds a preset by name; null (with a diagnostic) if unknown or the
    /// mode is illegal for it.
    static RecordType getPresetChecked(
        ::llvm::function_ref<::mlir::InFlightDiagnostic()> emitError,
        ::mlir::MLIRContext *context, ::llvm::StringRef preset,
        ::std::optional<::pattn::ScaleGranularity> mode);
  }];
}

// Prints the nested record with its dialect prefix, as users write it.
def PAttn_RecordParameter
    : AttrOrTypeParameter<"::pattn::RecordType", "a !pattn.record"> {
  let printer = "$_printer << ::mlir::Type($_self)";
}

def PAttn_RecordCacheType : PAttn_Type<"RecordCache", "record_cache"> {
  let summary = "A paged cache of per-token records";
  let description = [{
    Pages of `block_size` tokens, each token one `record` (the MLA caches
    have a single latent head). Its storage is an i8 memref of shape
    [blocks, block_size, record bytes].

    Example:
    ```mlir
    !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
    ```
  }];
  let parameters = (ins "int64_t":$block_size,
                        PAttn_RecordParameter:$record);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    ::llvm::SmallVector<int64_t> getStorageShape(int64_t numBlocks) const;
  }];
}

def PAttn_AnyCache : AnyTypeOf<[PAttn_CacheType, PAttn_RecordCacheType]>;

#endif // PATTN_DIALECT_PATTN_IR_PATTNTYPES_TD
