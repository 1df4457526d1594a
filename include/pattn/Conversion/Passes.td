//===- Passes.td - pattn conversion passes -----------------*- tablegen -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_CONVERSION_PASSES_TD
#define PATTN_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Selection and planning: beside the kernel families they choose between
//===----------------------------------------------------------------------===//

def PAttnSelectBackend : Pass<"pattn-select-backend"> {
  let summary = "Choose the XQA or the portable lowering of each attention op";
  let description = [{
    Asks the tensor-core decode family of every `pattn.paged_attention` and
    `pattn.mla_decode` (the registry of Planning/DecodeFamilies.h) whether it
    serves the op on every chip of `chips`: the eligibility table of SPEC §6
    (`pattn::checkXqaEligibility`, see docs/Passes.md) evaluated chip by
    chip, plus what only the family's layout knows (an MLA tile's shared
    memory). Records the choice as `backend = #pattn.backend<xqa|portable>`,
    and emits a remark naming every failed condition:

      remark: portable: head_dim 96 not in {64, 128, 256}

    Steps:
    1. Check the options: an unknown chip (or one below sm_80), a chip named
       twice, or a bad `force` value is an error naming the option and
       listing the allowed values, reported before any op is visited.
    2. For each op, describe it as an `AttentionConfig` per chip: activation
       type, head_dim, g, query tokens, block size, encodings, softcap, and
       the state of its K channel scales (folded, guarded, or not yet
       folded); for `pattn.mla_decode`, its record's latent and rope lanes,
       checked by the MLA rows (bf16 query, 16 x k heads, lane formats):

         remark: portable: MLA query f16 is not bf16
    3. `force=auto` records the verdict; `force=portable` records portable
       for every op; `force=xqa` records xqa, and is an error naming the
       failed conditions on an ineligible op.

    `print-table` prints the rule table, pattn's next to ONNX Runtime's.

    Runs on any op: the choice is per attention op and only sets that op's
    attributes, so the pass can be nested in a `func.func` pipeline (and then
    runs on the functions in parallel) as well as on `builtin.module`.

    Example: `pattn-opt --pattn-select-backend="chips=sm_80,sm_90a force=auto"`, or
    `pattn-opt --pass-pipeline="builtin.module(func.func(pattn-select-backend{chips=sm_90a}))"`.
  }];
  let options = [
    ListOption<"chips", "chips", "std::string",
               "Chips the kernels are built for: sm_80, sm_86, sm_87, sm_89, "
               "sm_90, sm_90a, sm_100, sm_100a, sm_120 or sm_120a (default: "
               "sm_80, sm_86, sm_89, sm_90a, sm_100a, sm_120a); an op gets "
               "xqa only where every one of them can run it">,
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
    `portable` ones; for `xqa` prompts (more than 8 query tokens per
    sequence), a `#pattn.prefill_plan` (64 rows a block, keys per tile,
    stages) and a `decode_plan` (the XQA decode kernel's, for the batch's
    sequences of at most min(16 / g, 8) query tokens), with a remark naming
    both (the prefill plan's `kernel = wgmma` where every chip in `chips`
    has wgmma and its copies cover the rows, else mma.sync;
    `prompt-kernel=prefill-mma-sync` keeps mma.sync, `prompt-kernel=
    prefill-wgmma` takes wgmma for 16-bit caches too); `prompt-kernel=xqa`
    plans such a prompt on the decode kernel in query tiles instead. Where
    `chips` mixes chips with and without wgmma and the warpgroup MLA kernel
    (64 heads per block) serves the former, an MLA
    op's `plan` is the mma.sync kernel and its `chip_plans` give the wgmma
    chips the warpgroup kernel; a remark on each MLA op names the kernels
    and why not the warpgroup one. `--convert-pattn-to-gpu`
    builds exactly what the plan says, so a schedule change shows here, in
    this pass's lit test, as a one-line diff.

    The XQA plan must fit every chip in `chips`: the smallest opt-in shared
    memory per block among them (99 KiB for sm_86/89/120, 227 KiB for
    sm_90a/sm_100a, from the chip capability table) bounds the ring. See
    lib/Conversion/PAttnToGPU/Planning/DecodePlan.h for the rules.

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
           "until the launch has about four blocks per SM">,
    Option<"xqaKeysPerTile", "xqa-keys-per-tile", "int64_t",
           /*default=*/"0",
           "Keys per tile of the XQA decode plans: 16, 32, 64 or 128, a "
           "multiple of 16 x key_warps that fits shared memory (0: the "
           "planner's choice; for tuning and comparing plans)">,
    Option<"xqaStages", "xqa-stages", "int64_t",
           /*default=*/"0",
           "Ring stages of the XQA decode plans: 2 to 8, where the ring fits "
           "shared memory (0: the planner's choice, 2 to 4; for tuning and "
           "comparing plans)">,
    Option<"xqaCopyWarp", "xqa-copy-warp", "bool",
           /*default=*/"false",
           "XQA decode plans with a copy warp: 160 threads a block, the fifth "
           "warp looks up and copies the tiles and signals each ring stage "
           "with mbarriers (faster on the H100; off by default until "
           "compute-sanitizer's synccheck passes it)">,
    Option<"xqaScoresAhead", "xqa-scores-ahead", "bool",
           /*default=*/"false",
           "XQA decode plans of at most 8 rows that compute each tile's "
           "scores one iteration ahead (#pattn.xqa_plan<scores_ahead = "
           "true>; for measuring against the default)">,
    Option<"xqaClusterHeads", "xqa-cluster-heads", "int64_t",
           /*default=*/"0",
           "XQA decode plans whose blocks of this many consecutive KV heads "
           "(2, 4 or 8, dividing the KV heads) form one thread-block cluster "
           "that meets at a barrier each tile, so that a page's rows are "
           "read together (#pattn.xqa_plan<cluster_heads = C>; where every "
           "chip is sm_90 or later; 0: none; for measuring)">,
    Option<"xqaClusterSplits", "xqa-cluster-splits", "int64_t",
           /*default=*/"0",
           "XQA decode plans of this many splits (2, 4 or 8) that form one "
           "thread-block cluster per (sequence, KV head) and merge their "
           "partial results themselves, with no merge launch "
           "(#pattn.xqa_plan<cluster_splits = C>; where every chip is sm_90 "
           "or later and the op has no guard; 0: none; for measuring)">,
    Option<"xqaMergeUnsplit", "xqa-merge-unsplit", "bool",
           /*default=*/"false",
           "XQA decode plans whose block merges its own rows where the host "
           "picks one split, with no merge launch "
           "(#pattn.xqa_plan<merges_unsplit = true>; ops without a guard; "
           "for measuring)">,
    Option<"promptKernel", "prompt-kernel", "std::string",
           /*default=*/"\"prefill\"",
           "The tensor-core kernel of a prompt (max_query_len > 8): prefill "
           "(the default: the prefill family, 64 rows a block, K/V decoded "
           "once per tile, the batch's short sequences on the decode "
           "kernel; on wgmma where every chip has it and both caches are "
           "quantized; a remark names both plans), prefill-mma-sync (the "
           "prefill family on mma.sync everywhere), prefill-wgmma (on wgmma "
           "wherever the kernel serves the op, 16-bit caches included) or "
           "xqa (the decode kernel in query tiles of floor(32 / g) tokens)">
  ];
}

//===----------------------------------------------------------------------===//
// Lowering
//===----------------------------------------------------------------------===//

def ConvertPAttnToGPU : Pass<"convert-pattn-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Lower pattn ops to GPU kernels and stream-ordered launches";
  let description = [{
    Replaces every pattn op in a host function by launches of kernels
    generated into `gpu.module @pattn_kernels`, built from upstream dialects
    (scf, arith, math, vector, memref, gpu). Each op gets kernels specialized
    on its types and static shapes:

    - `pattn.write_cache`: one block per (token, kv head), one thread per
      element pair; quantizes and packs every encoding bit-exactly to pattn's
      numerics library (slot -1 skips the token). Per-token and nvfp4 scales
      are derived in the kernel.
    - `pattn.write_record`: one block per token, the three record presets.
    - `pattn.paged_attention` with `backend = xqa`: the tensor-core kernel
      its `#pattn.xqa_plan` describes (mma.sync for Q K^T and P V, K and V
      tiles streamed with cp.async into a ring, decoded once per tile);
      with `backend = portable`: a split-KV fp32 decode kernel (grid:
      splits x (tokens * heads)).
    - `pattn.mla_decode`: with `backend = xqa`, the tensor-core MLA kernel
      its `#pattn.xqa_mla_plan` describes (mma.sync, 16 heads per block, or
      wgmma on sm_90a, 64), per chip the plan its `chip_plans` give it;
      with `backend = portable`, the fp32 decode kernel. All decodes write partial
      results to a stream-ordered workspace, then a merge kernel applies
      sinks, `out_scale`, and the single output rounding. The split count is
      a function of the block table's width only, so the launch is
      CUDA-graph capturable. docs/Lowering.md describes both kernels.
    - `pattn.scale_normalizer` (a single-block reduction) and
      `pattn.fold_query` (one rounding via round-to-odd in fp32).
    - guarded ops read the guard on the device and exit when it does not
      match.

    Chip-specific choices come from the target table
    (pattn/Conversion/TargetDescription.h): chips that convert fp8 in
    hardware (sm_89 and up) get kernels that decode e4m3 pairs with
    `nvvm.convert.f8x2.to.f16x2`, those that also convert e2m1 (sm_100a,
    sm_120a) decode e2m1 pairs with `nvvm.convert.f4x2.to.f16x2`; each class
    has its own `gpu.module` with its chips' `#nvvm.target`s, and the rest
    decode with bit tricks (as every chip does with
    `hardware-conversions=false`). A chip named in an MLA op's `chip_plans`
    gets a module of its own (`@pattn_kernels_sm_90a`). The host code reads
    the device's compute capability once (`pattnRuntimeDeviceArch`) and
    launches from the module of its chip. Cache writes report a rejected slot through the
    runtime's device error word (`pattnRuntimeDeviceErrorWord`).

    The conversion never plans: every decode op must carry the plan
    `--pattn-plan-decode` recorded (pattn-compile and `--pattn-compile` run
    it), and each plan is checked against every chip it is lowered for
    before anything is rewritten: a plan that needs more shared memory per
    block than a chip has, or wgmma on a chip without it, is an error at the
    op (a plan made for sm_90a lowered for sm_86, say).

    Host functions get a trailing `!llvm.ptr` stream argument; every launch
    and temporary allocation is ordered on it (no host sync, no stream of
    its own), and the function returns the runtime's i32 status
    (`pattnRuntimeTakeStatus`). Caches must come from `pattn.bind_cache` in
    the same function.

    Anchored on `builtin.module`: it adds the kernel `gpu.module`s and the
    `gpu.container_module` attribute to the module that holds the functions.

    Example: `pattn-opt --convert-pattn-to-gpu="chips=sm_80,sm_90a" model.mlir`.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::func::FuncDialect",
    "::mlir::gpu::GPUDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::math::MathDialect", "::mlir::memref::MemRefDialect",
    "::mlir::NVVM::NVVMDialect", "::mlir::nvgpu::NVGPUDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect"
  ];
  let options = [
    ListOption<"chips", "chips", "std::string",
               "Chips to build kernels for (default: sm_80, sm_86, sm_89, "
               "sm_90a, sm_100a, sm_120a). Chips with the same conversion "
               "instructions share a kernel module; the host code picks the "
               "module by the device's compute capability">,
    Option<"hardwareConversions", "hardware-conversions", "bool",
           /*default=*/"true",
           "Use the chips' conversion instructions where the target table "
           "allows (false: bit tricks on every chip, one kernel module)">
  ];
}

def ExternDynamicSharedMemory
    : Pass<"pattn-extern-dynamic-shared-memory", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Declare a kernel's dynamic shared memory as extern for NVPTX";
  let description = [{
    `convert-gpu-to-nvvm` lowers `gpu.dynamic_shared_memory` to an
    *internal* zero-length global in address space 3. NVPTX prints that as a
    one-byte static variable (`.shared .align 16 .b8 __dynamic_shmem__0;`),
    not as the dynamic window (`.extern .shared .align 16 .b8
    __dynamic_shmem__0[];`). ptxas then lays the kernel's static shared
    arrays out *after* it, so dynamic offsets alias them: the XQA decode's
    key-liveness ring was overwritten by its query tile (found by
    `compute-sanitizer --tool racecheck` on the H200), and a stage offset
    could come out misaligned.

    This pass, run on each kernel module right after `convert-gpu-to-nvvm`,
    turns every such zero-length address-space-3 global without an
    initializer into an external declaration, which NVPTX prints as the
    `.extern` dynamic window that starts after all static shared memory.

    Example:

    ```mlir
    // before
    llvm.mlir.global internal @__dynamic_shmem__0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
    // after
    llvm.mlir.global external @__dynamic_shmem__0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
    ```

    `pattn-opt --pass-pipeline='builtin.module(gpu.module(pattn-extern-dynamic-shared-memory))'`.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // PATTN_CONVERSION_PASSES_TD
