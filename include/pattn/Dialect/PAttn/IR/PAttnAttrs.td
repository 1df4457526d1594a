//===- PAttnAttrs.td - pattn attributes and enums ----------*- tablegen -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// Enums for cache encodings, scale granularities and page layouts, and the
// lane attribute that describes one field of a per-token record.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_DIALECT_PATTN_IR_PATTNATTRS_TD
#define PATTN_DIALECT_PATTN_IR_PATTNATTRS_TD

include "pattn/Dialect/PAttn/IR/PAttnDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def PAttn_Encoding : I32EnumAttr<"Encoding", "KV cache element encoding", [
    I32EnumAttrCase<"f16", 0>, I32EnumAttrCase<"bf16", 1>,
    I32EnumAttrCase<"i8", 2>, I32EnumAttrCase<"f8e4m3", 3>,
    I32EnumAttrCase<"f8e5m2", 4>, I32EnumAttrCase<"i4", 5>,
    I32EnumAttrCase<"nvfp4", 6>]> {
  let cppNamespace = "::pattn";
  let genSpecializedAttr = 0;
}

def PAttn_ScaleGranularity : I32EnumAttr<"ScaleGranularity",
    "granularity of a (outer) dequantization scale", [
    I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"tensor", 1>,
    I32EnumAttrCase<"channel", 2>, I32EnumAttrCase<"token", 3>]> {
  let cppNamespace = "::pattn";
  let genSpecializedAttr = 0;
}

def PAttn_Layout : I32EnumAttr<"Layout", "order of a page's dimensions", [
    I32EnumAttrCase<"nhd", 0>, I32EnumAttrCase<"hnd", 1>]> {
  let cppNamespace = "::pattn";
  let genSpecializedAttr = 0;
}

def PAttn_Backend : I32EnumAttr<"Backend", "attention lowering", [
    I32EnumAttrCase<"xqa", 0>, I32EnumAttrCase<"portable", 1>]> {
  let cppNamespace = "::pattn";
  let genSpecializedAttr = 0;
}

def PAttn_TensorCoreKernel : I32EnumAttr<"TensorCoreKernel",
    "the tensor-core instruction a plan's kernel is built on", [
    I32EnumAttrCase<"mma_sync", 0>, I32EnumAttrCase<"wgmma", 1>]> {
  let cppNamespace = "::pattn";
  let genSpecializedAttr = 0;
}

def PAttn_EncodingAttr : EnumAttr<PAttn_Dialect, PAttn_Encoding, "encoding"> {
  let assemblyFormat = "`<` $value `>`";
  let summary = "A KV cache element encoding";
  let description = [{
    How one element of a cached K or V head row is stored (SPEC §2):
    `f16`/`bf16` values, `i8` codes, `f8e4m3` (E4M3FN) and `f8e5m2` codes,
    `i4` signed codes packed two per byte with a +8 bias, or `nvfp4` (E2M1
    codes with E4M3 scales per 16 elements and an fp32 outer scale).

    Example: `#pattn.encoding<i4>`.
  }];
}

def PAttn_ScaleGranularityAttr
    : EnumAttr<PAttn_Dialect, PAttn_ScaleGranularity, "scale_granularity"> {
  let assemblyFormat = "`<` $value `>`";
  let summary = "Granularity of a dequantization scale";
  let description = [{
    `none` (no scale, codes are values), `tensor` (one fp32 scale, shape
    [1]), `channel` (one per kv head and channel, shape [kv_heads, head_dim]),
    or `token` (one per cached token and kv head, kept beside the pages).

    Example: `#pattn.scale_granularity<channel>`.
  }];
}

def PAttn_LayoutAttr : EnumAttr<PAttn_Dialect, PAttn_Layout, "layout"> {
  let assemblyFormat = "`<` $value `>`";
  let summary = "Order of a page's dimensions";
  let description = [{
    `nhd` stores a page as [block_size, kv_heads, row] (vLLM's flash layout),
    `hnd` as [kv_heads, block_size, row] (FlashInfer/TensorRT-LLM), so one
    head's tokens are contiguous.

    Example: `#pattn.layout<hnd>`.
  }];
}

def PAttn_BackendAttr : EnumAttr<PAttn_Dialect, PAttn_Backend, "backend"> {
  let assemblyFormat = "`<` $value `>`";
  let summary = "The lowering chosen for an attention op";
  let description = [{
    Recorded by `--pattn-select-backend`: `xqa` (tensor cores: mma.sync
    m16n8k16 with fp32 accumulation, cp.async, ldmatrix, split-KV) or
    `portable` (fp32 math, any legal shape). See SPEC §6 and
    docs/Passes.md for the eligibility table.

    Example: `backend = #pattn.backend<xqa>`.
  }];
}

//===----------------------------------------------------------------------===//
// Lanes of a record
//===----------------------------------------------------------------------===//

def PAttn_LaneAttr : AttrDef<PAttn_Dialect, "Lane"> {
  let mnemonic = "lane";
  let summary = "One named field of a per-token cache record";
  let description = [{
    A lane holds `count` elements of `elementType` starting at byte `offset`
    of a record. A lane whose values are codes names the lane that holds
    their scales (`scaled_by`); the group size is count / scales.count.
    Element types: f32, f16, bf16, f8E4M3FN, f8E5M2, f4E2M1FN, i8.

    Example:
    ```mlir
    #pattn.lane<latent: 512 x f8E4M3FN at 0 scaled_by latent_scale>
    ```
  }];
  let parameters = (ins StringRefParameter<"lane name">:$name,
                        "::mlir::Type":$elementType,
                        "uint32_t":$count,
                        "uint32_t":$offset,
                        StringRefParameter<"scale lane name", "\"\"">:$scaleLane);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Bits of one element, bytes spanned by the lane, and its end offset.
    unsigned getElementBits() const;
    uint64_t getByteSize() const;
    uint64_t getEnd() const { return getOffset() + getByteSize(); }
    bool isScaled() const { return !getScaleLane().empty(); }
  }];
}

//===----------------------------------------------------------------------===//
// Decode plans
//===----------------------------------------------------------------------===//

// The chips a plan was made for, printed as `[sm_80, sm_90a]`.
def PAttn_ChipListParameter
    : ArrayRefParameter<"::pattn::Chip", "the chips a plan was made for"> {
  let parser = "::pattn::parseChipListParameter($_parser)";
  let printer = "::pattn::printChipListParameter($_printer, $_self)";
}

// Per chip of a plan's `targets`, the blocks resident on one SM, printed as
// `[4, 2]`.
def PAttn_ResidencyParameter
    : ArrayRefParameter<"int64_t", "resident blocks per SM, per target"> {
  let parser = "::pattn::parseIntListParameter($_parser)";
  let printer = "::pattn::printIntListParameter($_printer, $_self)";
}

// Every plan records its schedule, not only its tiling: what the kernel and
// the host's split policy used to take from C++ constants, so that the
// conversion builds exactly what the plan says and checks it against the
// chips it lowers for (`targets`).
def PAttn_PortablePlanAttr : AttrDef<PAttn_Dialect, "PortablePlan"> {
  let mnemonic = "portable_plan";
  let summary = "How the portable (fp32) decode of an attention op is tiled";
  let description = [{
    Written by `--pattn-plan-decode` on ops whose backend is `portable`, and
    obeyed by `--convert-pattn-to-gpu`. A decode block of `threads` (128)
    threads serves `heads_per_block` query heads of one KV head (each key
    row is read and dequantized once for all of them) and `keys_per_split`
    keys; a merge kernel combines the splits. `targets` are the chips the
    plan was made for; the conversion lowers it for no other.

    `prompt = true` is the plan of an op with more than 8 query tokens per
    sequence (a prompt or a chunk of one): the grid's x dimension holds the
    (token, head group) blocks, since a prompt has more of them than the
    65535 that y allows, and y the splits; the planner gives it 32768 keys
    per split, so that the split workspace of a prompt is one split.

    Examples:
    `#pattn.portable_plan<heads_per_block = 4, keys_per_split = 512, targets = [sm_80, sm_90a]>`,
    `#pattn.portable_plan<heads_per_block = 4, keys_per_split = 32768, prompt = true, targets = [sm_90a]>`.
  }];
  let parameters = (ins "int64_t":$heads_per_block, "int64_t":$keys_per_split,
                        DefaultValuedParameter<"int64_t", "128">:$threads,
                        DefaultValuedParameter<"bool", "false">:$prompt,
                        PAttn_ChipListParameter:$targets);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def PAttn_XqaPlanAttr : AttrDef<PAttn_Dialect, "XqaPlan"> {
  let mnemonic = "xqa_plan";
  let summary = "How the tensor-core (XQA) decode of an attention op is tiled";
  let description = [{
    Written by `--pattn-plan-decode` on ops whose backend is `xqa`, and
    obeyed by `--convert-pattn-to-gpu`. One block of four warps (`threads`
    = 128) serves one (sequence, KV head, split): the sequence's query
    tokens times the g heads of the KV head are the M rows of
    `mma.sync.m16n8k16` (`rows` = 16 or 32, one or two m-tiles) over
    `operand` (f16, or bf16 where the query or a cache is bf16) operands.
    `rows` = 8 swaps the operands for a decode of at most 8 rows (T × g ≤
    8): a warp's 16 keys are the M rows and the query rows the N = 8
    columns (Sᵀ = K Qᵀ, Oᵀ += Vᵀ Pᵀ), so no mma computes padding rows, the
    query's fragments stay in registers and the output accumulators are
    half as many.
    Keys stream through a `stages`-deep ring of shared memory filled by
    `cp.async`, `keys_per_tile` keys per stage: by the four warps, which
    wait at a block barrier per tile, or with `threads` = 160 (a decode
    planned with `xqa-copy-warp`) by a fifth, copy warp that signals each stage with a
    full and an empty mbarrier, so that no compute warp waits on a lookup
    or a block barrier. The four (compute) warps are
    `key_warps` groups over a tile's keys times `value_warps` groups over
    the value channels (each group of a key group recomputes the same
    logits, so each warp's output accumulators stay within budget).
    `keys_per_split` keys per block at most (a multiple of
    `keys_per_tile`); `shared_bytes` of dynamic shared memory per block, of
    which `resident_blocks` fit on an SM of each chip of `targets` (one
    count per chip; the fewest among a kernel module's chips is its
    `nvvm.minctasm`, the fewest among the chips built for the host's
    occupancy). The host picks the
    split count: at least `least_tiles_per_split` (4) tiles per split, at
    most `most_splits` (64) splits.

    `query_tile` T > 0 is the plan of a prompt (more than 8 query tokens per
    sequence): a block serves T consecutive query tokens of a sequence
    (T × g ≤ `rows`) and only the keys up to its last token, and the grid
    is (query tiles, splits, KV heads), a sequence of n tokens having
    ceil(n / T) tiles. 0 (the default): a block serves all of a sequence's
    query tokens (decode), the grid is (splits, sequences × KV heads).

    `scores_ahead = true` (rows = 8, four warps, at least 3 stages; a
    decode planned with `xqa-scores-ahead`) software-pipelines each warp's
    tile loop: while tile t's softmax and Oᵀ += Vᵀ Pᵀ run, the warp already
    computes tile t + 1's Sᵀ = K Qᵀ (the loop waits for two landed tiles,
    so stages - 2 tiles are in flight during a tile's compute instead of
    stages - 1), and the scores travel to the next iteration in registers.
    The long dependent chain of a tile (ldmatrix, decode, the S mma chain)
    then overlaps the softmax's shuffles and the P V mma of the previous
    one.

    `cluster_heads` C > 1 (a decode planned with `xqa-cluster-heads=C`;
    four warps, no query tiles, every target sm_90 or later; C divides the
    KV heads) launches the blocks of C consecutive KV heads of a sequence
    and split as one thread-block cluster (`nvvm.cluster_dim` = (1, C, 1)),
    and the cluster meets at a barrier each tile. On NHD pages the KV heads
    of a key are adjacent, so the cluster reads each page's rows together:
    C x the row bytes of one head, where a block alone reads 64 bytes (D128
    int4) of every 512.

    `cluster_splits` C > 1 (a decode planned with `xqa-cluster-splits=C`;
    four warps, no query tiles, no cluster of KV heads, every target sm_90
    or later; an op without a guard that is not a split prompt's decode
    side) fixes the split count at C and launches the C splits of a
    (sequence, KV head) as one thread-block cluster (`nvvm.cluster_dim` =
    (C, 1, 1)). After writing its partial results each block meets the
    others at a cluster barrier (release / acquire) and merges a share of
    the (row, 128 channels) pieces of their rows with the merge kernel's
    code, into the output: no merge launch, and the same bits as the merge
    kernel over the same C splits.

    `merges_unsplit = true` (a decode planned with `xqa-merge-unsplit`;
    four warps, no query tiles, an op without a guard that is not a split
    prompt's decode side) keeps the host's split count, but where the host
    picks one split (B64 L4K, say) the block merges its own rows from the
    workspace into the output after a block barrier, with the merge
    kernel's code, and the host launches no merge.

    Example:
    ```mlir
    #pattn.xqa_plan<operand = f16, rows = 16, keys_per_tile = 64, stages = 3,
                    key_warps = 4, value_warps = 1, keys_per_split = 2048,
                    shared_bytes = 41984, resident_blocks = [4],
                    targets = [sm_90a]>
    ```
  }];
  let parameters = (ins "::mlir::Type":$operand, "int64_t":$rows,
                        "int64_t":$keys_per_tile,
                        "int64_t":$stages, "int64_t":$key_warps,
                        "int64_t":$value_warps, "int64_t":$keys_per_split,
                        "int64_t":$shared_bytes, PAttn_ResidencyParameter:$resident_blocks,
                        DefaultValuedParameter<"int64_t", "128">:$threads,
                        DefaultValuedParameter<"int64_t", "4">:$least_tiles_per_split,
                        DefaultValuedParameter<"int64_t", "64">:$most_splits,
                        DefaultValuedParameter<"int64_t", "0">:$query_tile,
                        DefaultValuedParameter<"bool", "false">:$scores_ahead,
                        DefaultValuedParameter<"int64_t", "1">:$cluster_heads,
                        DefaultValuedParameter<"int64_t", "1">:$cluster_splits,
                        DefaultValuedParameter<"bool", "false">:$merges_unsplit,
                        PAttn_ChipListParameter:$targets);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The fewest blocks resident per SM on `chips` (each one of the
    /// plan's targets): what a kernel module for them, or the host's split
    /// count over them, may assume.
    int64_t getResidentBlocksOn(::llvm::ArrayRef<::pattn::Chip> chips) const;
  }];
}

def PAttn_PrefillPlanAttr : AttrDef<PAttn_Dialect, "PrefillPlan"> {
  let mnemonic = "prefill_plan";
  let summary = "How the tensor-core prefill of a prompt is tiled";
  let description = [{
    Written by `--pattn-plan-decode` (with `prompt-kernel=prefill`) on
    `pattn.paged_attention` ops of backend `xqa` whose `max_query_len` makes
    them prompts (more than 8 query tokens per sequence), and obeyed by
    `--convert-pattn-to-gpu` (Kernels/Prefill). One block of four warps
    serves `query_tile` consecutive query tokens of a sequence times the g
    heads of one KV head: `rows` = 64 rows (query_tile × g ≤ rows), 16 per
    warp, each warp an m16 tile of `mma.sync.m16n8k16` over `operand` (f16,
    or bf16 where the query or a cache is bf16) with fp32 accumulators. Keys
    stream through a `stages`-deep ring of shared memory filled by
    `cp.async`, `keys_per_tile` keys per stage; a quantized side is decoded
    once per tile into a 16-bit tile that all four warps read with
    `ldmatrix` (an f16 or bf16 side is read from the ring as it is). A
    block reads keys only up to its last token; the grid is (query tiles,
    splits, KV heads), a sequence of n tokens having ceil(n / query_tile)
    tiles, and the host picks the split count from `keys_per_split`,
    `least_tiles_per_split` and `most_splits` as for XQA. `shared_bytes`
    of dynamic shared memory per block, of which `resident_blocks` fit on
    an SM of each chip of `targets`.

    `kernel = mma_sync` (the default, left out when printed) is the above.
    With `kernel = wgmma` (every target sm_90a) the block is two warpgroups
    (`rows` = 128, `threads` = 256), each warpgroup's 64 rows the M of
    `wgmma.mma_async.m64nNk16`: the query tile, the ring's 16-bit rows and
    the decoded tiles are stored as wgmma's core matrices, S = Q Kᵀ (N = the
    tile's keys) reads its operands from shared memory, O += P V (N = the
    value channels) takes P from registers, and the online softmax is the
    mma.sync kernel's on the same accumulator layout. Both warpgroups read
    every K/V tile the block copies and decodes once.

    Example:
    ```mlir
    #pattn.prefill_plan<operand = f16, rows = 64, query_tile = 16,
                        keys_per_tile = 64, stages = 2,
                        keys_per_split = 32768, shared_bytes = 70144,
                        resident_blocks = [2], targets = [sm_90a]>
    #pattn.prefill_plan<kernel = wgmma, operand = f16, rows = 128,
                        query_tile = 32, keys_per_tile = 64, stages = 4,
                        keys_per_split = 32768, shared_bytes = 125952,
                        resident_blocks = [1], threads = 256,
                        targets = [sm_90a]>
    ```
  }];
  let parameters = (ins DefaultValuedParameter<"::pattn::TensorCoreKernel",
                          "::pattn::TensorCoreKernel::mma_sync">:$kernel,
                        "::mlir::Type":$operand, "int64_t":$rows,
                        "int64_t":$query_tile, "int64_t":$keys_per_tile,
                        "int64_t":$stages, "int64_t":$keys_per_split,
                        "int64_t":$shared_bytes,
                        PAttn_ResidencyParameter:$resident_blocks,
                        DefaultValuedParameter<"int64_t", "128">:$threads,
                        DefaultValuedParameter<"int64_t", "4">:$least_tiles_per_split,
                        DefaultValuedParameter<"int64_t", "64">:$most_splits,
                        PAttn_ChipListParameter:$targets);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The fewest blocks resident per SM on `chips` (each one of the
    /// plan's targets).
    int64_t getResidentBlocksOn(::llvm::ArrayRef<::pattn::Chip> chips) const;
  }];
}

def PAttn_XqaMlaPlanAttr : AttrDef<PAttn_Dialect, "XqaMlaPlan"> {
  let mnemonic = "xqa_mla_plan";
  let summary = "How the tensor-core (XQA) MLA decode is tiled";
  let description = [{
    Written by `--pattn-plan-decode` on `pattn.mla_decode` ops whose backend
    is `xqa`, and obeyed by `--convert-pattn-to-gpu`. With
    `heads_per_block = 16`, one block of four warps serves 16 query heads
    of one query token and one split of its keys: those heads are the 16 M
    rows of `mma.sync.m16n8k16` (f16 operands for quantized lanes, bf16 for
    bf16 lanes, fp32 accumulation). Per tile of `keys_per_tile` keys the records
    are copied raw into a two-slot ring in shared memory with `cp.async`
    (the next tile lands while this one is computed), and every warp
    decodes its mma operands from the raw words in registers:

    - S = Q Kᵀ is split over the warps by keys (each warp computes its
      keys' logits once for all 16 heads),
    - the logits meet in shared memory, every warp runs the same online
      softmax over the whole tile,
    - O += P V is split over the warps by latent channels.

    The plan names its kernel: `kernel = mma_sync` (the default, left out
    when printed) with `heads_per_block = 16` and `threads = 128` (the
    default), or `kernel = wgmma` with `heads_per_block = 64` and
    `threads = 256`; the verifier holds them together and the lowering
    dispatches on the kernel, never on the head count.

    With `kernel = wgmma` (sm_90a only), two warpgroups serve 64
    heads, the M rows of `wgmma.mma_async`: every tile is decoded once
    into a shared operand tile that both S = Q Kᵀ (the warpgroups split its
    k-steps) and O += P V (each warpgroup owns half the latent) read, and
    P V runs while the next tile is decoded.

    `shared_bytes` of dynamic shared memory per block, `resident_blocks`
    of them per SM on each chip of `targets` (at most 3 for mma.sync,
    whose threads keep 168 registers; 1 for wgmma). The host picks the split
    count: at least `least_tiles_per_split` (2) tiles per split, at most
    `most_splits` (128) splits.

    Example:
    ```mlir
    #pattn.xqa_mla_plan<heads_per_block = 16, keys_per_tile = 32,
                        shared_bytes = 63680, resident_blocks = [3, 3],
                        targets = [sm_80, sm_90a]>
    #pattn.xqa_mla_plan<kernel = wgmma, heads_per_block = 64,
                        keys_per_tile = 32, shared_bytes = 226944,
                        resident_blocks = [1], threads = 256,
                        targets = [sm_90a]>
    ```
  }];
  let parameters = (ins DefaultValuedParameter<"::pattn::TensorCoreKernel",
                          "::pattn::TensorCoreKernel::mma_sync">:$kernel,
                        "int64_t":$heads_per_block, "int64_t":$keys_per_tile,
                        "int64_t":$shared_bytes, PAttn_ResidencyParameter:$resident_blocks,
                        DefaultValuedParameter<"int64_t", "128">:$threads,
                        DefaultValuedParameter<"int64_t", "2">:$least_tiles_per_split,
                        DefaultValuedParameter<"int64_t", "128">:$most_splits,
                        PAttn_ChipListParameter:$targets);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The fewest blocks resident per SM on `chips` (each one of the
    /// plan's targets): what a kernel module for them, or the host's split
    /// count over them, may assume.
    int64_t getResidentBlocksOn(::llvm::ArrayRef<::pattn::Chip> chips) const;
  }];
}

def PAttn_DecodePlanAttr : AnyAttrOf<[PAttn_PortablePlanAttr, PAttn_XqaPlanAttr,
                                      PAttn_PrefillPlanAttr,
                                      PAttn_XqaMlaPlanAttr]>;

#endif // PATTN_DIALECT_PATTN_IR_PATTNATTRS_TD
