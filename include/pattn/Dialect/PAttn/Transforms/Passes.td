//===- Passes.td - pattn dialect passes --------------------*- tablegen -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_DIALECT_PATTN_TRANSFORMS_PASSES_TD
#define PATTN_DIALECT_PATTN_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def PAttnFoldChannelScales
    : Pass<"pattn-fold-channel-scales", "::mlir::ModuleOp"> {
  let summary = "Fold per-channel K scales into the query with power-of-two "
                "normalization; move per-channel V scales to the output";
  let description = [{
    Per-channel K scales cannot stay per element in a tensor-core kernel, so
    they are folded into the query: for every `pattn.paged_attention` whose K
    cache has `channel` scales,

      p[c] = q[t,h,c] * s_k[h/g, c] / N,   e[t,h] = the binade of max |p|,
      q'[t,h,c] = T(p[c] * 2^-e[t,h]),    one rounding,

    and attention reads K at the scalar scale N and each row's logits at
    2^e[t,h] (`query_exponents`), both exact. N is the power of two strictly
    above m = max |s_k| (N = 1 when m = 0), its exponent clamped to
    [-126, 126 - ilogb(max(softmax_scale, 1))] so softmax_scale * N is
    finite. The row exponent puts every row's largest |q'| in [1, 2], so
    the fp16 overflow of the unnormalized fold (q = 100, s = 1000 gives
    inf, and a zero code then NaN) cannot happen, and what the fold keeps no
    longer depends on |q| (docs/Passes.md has the proof).

    1. Static tables (a constant `memref.global`, or `bufferization.to_buffer`
       of an `arith.constant`) get N at compile time from pattn's numerics
       library, as a one-element constant global. Non-finite entries are an
       error. A table spanning more than 24 binades is left alone (the fold
       cannot see the K codes, and such a table's small channels can carry
       the logit); `--pattn-select-backend` explains why it runs portable. A
       clamped N folds.
    2. Dynamic tables get `pattn.scale_normalizer` (a device reduction that
       also sets a flag telling whether the table folds: every entry finite,
       at most 24 binades) and the op becomes a guarded pair: the folded form
       runs when the flag is 1, the original when it is 0. No host sync.
    3. Both fold with `pattn.fold_query`, on the device, row by row.
    4. V `channel` scales move to the op's `out_scale` (o *= s_v in fp32
       before the output's single rounding) and V is read at unit scale.

    `tensor`, `token` and nvfp4 group scales are untouched, mixed
    granularities work, and running the pass twice changes nothing.

    Anchored on `builtin.module`: a static fold adds the normalizer as a
    constant `memref.global` to the symbol table that holds the function, and
    a pass nested in `func.func` may not add symbols to its parent.

    Example:
    ```mlir
    // before
    pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !i4_channel) ...
        k_scale(%ks : memref<8x128xf32>) ...
    // after (static %ks)
    pattn.fold_query query(%q : ...) scales(%ks : memref<8x128xf32>)
        normalizer(%n : memref<1xf32>) outs(%qf : ...) exponents(%e : memref<4x32xi32>)
    %kt = pattn.rescale_view %k : !i4_channel to !i4_tensor
    pattn.paged_attention query(%qf : ...) key(%kt : !i4_tensor) ... k_scale(%n : memref<1xf32>)
        query_exponents(%e : memref<4x32xi32>) ...
    ```
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
  let statistics = [
    Statistic<"numStaticFolds", "static-folds",
              "K tables folded at compile time">,
    Statistic<"numGuardedFolds", "guarded-folds",
              "dynamic K tables folded behind a device guard">,
    Statistic<"numUnfoldable", "unfoldable",
              "static K tables left unfolded (wider than the binade budget)">,
    Statistic<"numValueMoves", "value-moves",
              "V channel scales moved to the output">
  ];
}

def PAttnSelectBackend : Pass<"pattn-select-backend"> {
  let summary = "Choose the XQA or the portable lowering of each attention op";
  let description = [{
    Evaluates the eligibility table of SPEC §6 (`pattn::checkXqaEligibility`,
    see docs/Passes.md) for every `pattn.paged_attention` and
    `pattn.mla_decode` on the chip given by `chip`, records the choice as
    `backend = #pattn.backend<xqa|portable>`, and emits a remark naming every
    failed condition:

      remark: portable: head_dim 96 not in {64, 128, 256}

    Steps:
    1. Check the options: an unknown chip (or one below sm_80) or `force`
       value is an error naming the option and listing the allowed values,
       reported before any op is visited.
    2. For each op, describe it as an `AttentionConfig`: activation type,
       head_dim, g, query tokens, block size, encodings, softcap, and the
       state of its K channel scales (folded, guarded, or not yet folded);
       for `pattn.mla_decode`, its record's latent and rope lanes, checked
       by the MLA rows (bf16 query, 16 x k heads, lane formats):

         remark: portable: MLA query f16 is not bf16
    3. `force=auto` records the verdict; `force=portable` records portable
       for every op; `force=xqa` records xqa, and is an error naming the
       failed conditions on an ineligible op.

    `print-table` prints the rule table, pattn's next to ONNX Runtime's.

    Runs on any op: the choice is per attention op and only sets that op's
    attributes, so the pass can be nested in a `func.func` pipeline (and then
    runs on the functions in parallel) as well as on `builtin.module`.

    Example: `pattn-opt --pattn-select-backend="chip=sm_90a force=auto"`, or
    `pattn-opt --pass-pipeline="builtin.module(func.func(pattn-select-backend{chip=sm_90a}))"`.
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"\"",
           "Target chip: sm_80, sm_86, sm_87, sm_89, sm_90, sm_90a, sm_100, "
           "sm_100a, sm_120 or sm_120a">,
    Option<"force", "force", "std::string", /*default=*/"\"auto\"",
           "Backend choice: auto (by eligibility), xqa (an ineligible op is "
           "an error) or portable">,
    Option<"printTable", "print-table", "bool", /*default=*/"false",
           "Print the eligibility table to stderr">
  ];
  let statistics = [
    Statistic<"numXqa", "xqa-ops", "attention ops lowered with XQA">,
    Statistic<"numPortable", "portable-ops",
              "attention ops lowered with the portable path">
  ];
}

def PAttnPlanDecode : Pass<"pattn-plan-decode"> {
  let summary = "Write each attention op's tiling for its chosen backend";
  let description = [{
    For every `pattn.paged_attention` and `pattn.mla_decode` whose backend
    `--pattn-select-backend` recorded, writes `plan`: a `#pattn.xqa_plan`
    (rows, keys per tile, ring stages, key and value warps, keys per split,
    shared memory bytes) for `xqa` paged ops, a `#pattn.xqa_mla_plan` (16
    or 64 heads per block, 32-key tiles, shared memory bytes) for `xqa` MLA
    ops, a `#pattn.portable_plan` (heads per block, keys per split) for
    `portable` ones. Where `chips` mixes chips with and without wgmma and
    the warpgroup MLA kernel (64 heads per block) serves the former, an MLA
    op's `plan` is the mma.sync kernel and its `chip_plans` give the wgmma
    chips the warpgroup kernel; a remark on each MLA op names the kernels
    and why not the warpgroup one. `--convert-pattn-to-gpu`
    builds exactly what the plan says, so a schedule change shows here, in
    this pass's lit test, as a one-line diff.

    The XQA plan must fit every chip in `chips`: the smallest opt-in shared
    memory per block among them (99 KiB for sm_86/89/120, 227 KiB for
    sm_90a/sm_100a, from the chip capability table) bounds the ring. See
    pattn/Dialect/PAttn/Transforms/DecodePlan.h for the rules.

    An op without a recorded backend is an error. Like the selector, the
    pass runs on any op and can be nested in `func.func`.

    Example:
    `pattn-opt --pattn-select-backend=chip=sm_90a --pattn-plan-decode=chips=sm_90a`
    turns `{backend = #pattn.backend<xqa>}` into
    `{backend = #pattn.backend<xqa>, plan = #pattn.xqa_plan<rows = 16,
    keys_per_tile = 64, stages = 3, key_warps = 4, value_warps = 1,
    keys_per_split = 4096, shared_bytes = 113152>}`.
  }];
  let options = [
    ListOption<"chips", "chips", "std::string",
               "Chips the kernels are built for (default: sm_80, sm_86, "
               "sm_89, sm_90a, sm_100a, sm_120a)">,
    Option<"keysPerSplit", "keys-per-split", "int64_t", /*default=*/"512",
           "Keys one portable decode block processes (a multiple of 128)">,
    Option<"xqaKeysPerSplit", "xqa-keys-per-split", "int64_t",
           /*default=*/"4096",
           "Most keys one XQA block processes; small batches split further "
           "until the launch has about four blocks per SM">
  ];
}

#endif // PATTN_DIALECT_PATTN_TRANSFORMS_PASSES_TD
