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

#endif // PATTN_DIALECT_PATTN_TRANSFORMS_PASSES_TD
