// RUN: pattn-opt %s --split-input-file --verify-diagnostics

// The rules of a plan's targets and schedule (PAttnDialect.cpp,
// verifySchedule and the plans' verifiers): one case each.

// expected-error @below {{targets must name at least one chip}}
func.func private @f() attributes {a = #pattn.portable_plan<heads_per_block = 4, keys_per_split = 512, targets = []>}

// -----

// expected-error @below {{targets name sm_90a twice}}
func.func private @f() attributes {a = #pattn.portable_plan<heads_per_block = 4, keys_per_split = 512, targets = [sm_90a, sm_90a]>}

// -----

// expected-error @below {{'h100' is not a chip}}
// expected-error @below {{failed to parse PAttn_PortablePlanAttr parameter 'targets'}}
func.func private @f() attributes {a = #pattn.portable_plan<heads_per_block = 4, keys_per_split = 512, targets = [h100]>}

// -----

// expected-error @below {{threads 256 must be 128 (the portable kernels' block)}}
func.func private @f() attributes {a = #pattn.portable_plan<heads_per_block = 4, keys_per_split = 512, threads = 256, targets = [sm_90a]>}

// -----

// expected-error @below {{operand 'f32' must be f16 or bf16}}
func.func private @f() attributes {a = #pattn.xqa_plan<operand = f32, rows = 16, keys_per_tile = 64, stages = 3, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], targets = [sm_90a]>}

// -----

// expected-error @below {{threads 256 must be 128 (the XQA block's four warps) or 160 (and a copy warp)}}
func.func private @f() attributes {a = #pattn.xqa_plan<operand = f16, rows = 16, keys_per_tile = 64, stages = 3, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], threads = 256, targets = [sm_90a]>}

// -----

// expected-error @below {{resident_blocks has 1 counts for 2 targets (one per chip)}}
func.func private @f() attributes {a = #pattn.xqa_plan<operand = f16, rows = 16, keys_per_tile = 64, stages = 3, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], targets = [sm_80, sm_90a]>}

// -----

// expected-error @below {{resident_blocks 0 not in [1, 32]}}
func.func private @f() attributes {a = #pattn.xqa_plan<operand = f16, rows = 16, keys_per_tile = 64, stages = 3, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [0], targets = [sm_90a]>}

// -----

// expected-error @below {{least_tiles_per_split 0 must be positive}}
func.func private @f() attributes {a = #pattn.xqa_plan<operand = f16, rows = 16, keys_per_tile = 64, stages = 3, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], least_tiles_per_split = 0, targets = [sm_90a]>}

// -----

// expected-error @below {{most_splits 0 not in [1, 1024]}}
func.func private @f() attributes {a = #pattn.xqa_plan<operand = f16, rows = 16, keys_per_tile = 64, stages = 3, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], most_splits = 0, targets = [sm_90a]>}

// -----

// expected-error @below {{threads 128 must be 256 for kernel wgmma}}
func.func private @f() attributes {a = #pattn.xqa_mla_plan<kernel = wgmma, heads_per_block = 64, keys_per_tile = 32, shared_bytes = 1024, resident_blocks = [1], threads = 128, targets = [sm_90a]>}

// -----

// expected-error @below {{struct is missing required parameter: targets}}
func.func private @f() attributes {a = #pattn.xqa_mla_plan<heads_per_block = 16, keys_per_tile = 32, shared_bytes = 1024, resident_blocks = [1]>}

// -----

// A prompt's query tile is at most the plan's rows of tokens.
// expected-error @below {{query_tile 33 not in [0, rows = 32]}}
func.func private @f() attributes {a = #pattn.xqa_plan<operand = f16, rows = 32, keys_per_tile = 64, stages = 3, key_warps = 2, value_warps = 2, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], query_tile = 33, targets = [sm_90a]>}

// -----

// expected-error @below {{rows 32 must be 64 for kernel mma_sync (an m16 tile per warp, four warps)}}
func.func private @f() attributes {a = #pattn.prefill_plan<operand = f16, rows = 32, query_tile = 8, keys_per_tile = 64, stages = 2, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], targets = [sm_90a]>}

// -----

// expected-error @below {{query_tile 0 not in [1, rows = 64]}}
func.func private @f() attributes {a = #pattn.prefill_plan<operand = f16, rows = 64, query_tile = 0, keys_per_tile = 64, stages = 2, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], targets = [sm_90a]>}

// -----

// expected-error @below {{keys_per_tile 24 must be a multiple of 16, at most 128}}
func.func private @f() attributes {a = #pattn.prefill_plan<operand = f16, rows = 64, query_tile = 16, keys_per_tile = 24, stages = 2, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], targets = [sm_90a]>}

// -----

// expected-error @below {{keys_per_split 100 must be a positive multiple of keys_per_tile 64}}
func.func private @f() attributes {a = #pattn.prefill_plan<operand = f16, rows = 64, query_tile = 16, keys_per_tile = 64, stages = 2, keys_per_split = 100, shared_bytes = 1024, resident_blocks = [2], targets = [sm_90a]>}

// -----

// expected-error @below {{threads 256 must be 128 (a warp per 16 rows)}}
func.func private @f() attributes {a = #pattn.prefill_plan<operand = f16, rows = 64, query_tile = 16, keys_per_tile = 64, stages = 2, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], threads = 256, targets = [sm_90a]>}

// -----

// The wgmma prefill is two warpgroups: 128 rows, 256 threads.
// expected-error @below {{rows 64 must be 128 for kernel wgmma (an m16 tile per warp, two warpgroups)}}
func.func private @f() attributes {a = #pattn.prefill_plan<kernel = wgmma, operand = f16, rows = 64, query_tile = 16, keys_per_tile = 64, stages = 2, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [1], targets = [sm_90a]>}

// -----

// expected-error @below {{threads 128 must be 256 (a warp per 16 rows)}}
func.func private @f() attributes {a = #pattn.prefill_plan<kernel = wgmma, operand = f16, rows = 128, query_tile = 32, keys_per_tile = 64, stages = 2, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [1], targets = [sm_90a]>}

// -----

// expected-error @below {{operand 'f32' must be f16 or bf16}}
func.func private @f() attributes {a = #pattn.prefill_plan<operand = f32, rows = 64, query_tile = 16, keys_per_tile = 64, stages = 2, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], targets = [sm_90a]>}

// -----

// expected-error @below {{stages 9 not in [2, 8]}}
func.func private @f() attributes {a = #pattn.prefill_plan<operand = f16, rows = 64, query_tile = 16, keys_per_tile = 64, stages = 9, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], targets = [sm_90a]>}


// -----

// expected-error @below {{threads 160 (a copy warp) serves decodes only, not query tiles}}
func.func private @f() attributes {a = #pattn.xqa_plan<operand = f16, rows = 32, keys_per_tile = 64, stages = 3, key_warps = 2, value_warps = 2, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], threads = 160, query_tile = 8, targets = [sm_90a]>}

// -----

// expected-error @below {{scores_ahead needs rows 8, threads 128 and at least 3 stages (two landed tiles and one in flight), got rows 16, threads 128, stages 3}}
func.func private @f() attributes {a = #pattn.xqa_plan<operand = f16, rows = 16, keys_per_tile = 64, stages = 3, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], scores_ahead = true, targets = [sm_90a]>}

// -----

// expected-error @below {{scores_ahead needs rows 8, threads 128 and at least 3 stages (two landed tiles and one in flight), got rows 8, threads 128, stages 2}}
func.func private @f() attributes {a = #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 64, stages = 2, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], scores_ahead = true, targets = [sm_90a]>}

// -----

// expected-error @below {{scores_ahead needs rows 8, threads 128 and at least 3 stages (two landed tiles and one in flight), got rows 8, threads 160, stages 4}}
func.func private @f() attributes {a = #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 64, stages = 4, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], threads = 160, scores_ahead = true, targets = [sm_90a]>}

// -----

// expected-error @below {{cluster_heads 3 must be 1, 2, 4 or 8}}
func.func private @f() attributes {a = #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 64, stages = 4, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], cluster_heads = 3, targets = [sm_90a]>}

// -----

// expected-error @below {{cluster_heads 8 needs threads 128 and a decode (query_tile 0)}}
func.func private @f() attributes {a = #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 64, stages = 4, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], threads = 160, cluster_heads = 8, targets = [sm_90a]>}

// -----

// expected-error @below {{cluster_heads 8 needs threads 128 and a decode (query_tile 0)}}
func.func private @f() attributes {a = #pattn.xqa_plan<operand = f16, rows = 32, keys_per_tile = 64, stages = 4, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], query_tile = 8, cluster_heads = 8, targets = [sm_90a]>}

// -----

// expected-error @below {{cluster_heads 2 needs thread-block clusters, which target sm_89 lacks (sm_90 and up)}}
func.func private @f() attributes {a = #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 64, stages = 4, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2, 2], cluster_heads = 2, targets = [sm_89, sm_90a]>}

// -----

// expected-error @below {{cluster_splits 16 must be 1, 2, 4 or 8}}
func.func private @f() attributes {a = #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 64, stages = 4, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], cluster_splits = 16, targets = [sm_90a]>}

// -----

// expected-error @below {{cluster_splits 8 needs threads 128 and a decode (query_tile 0)}}
func.func private @f() attributes {a = #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 64, stages = 4, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], threads = 160, cluster_splits = 8, targets = [sm_90a]>}

// -----

// expected-error @below {{cluster_splits 4 needs thread-block clusters, which target sm_80 lacks (sm_90 and up)}}
func.func private @f() attributes {a = #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 64, stages = 4, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2, 2], cluster_splits = 4, targets = [sm_80, sm_90a]>}

// -----

// expected-error @below {{cluster_heads 2 and cluster_splits 4: a plan clusters KV heads or splits, not both}}
func.func private @f() attributes {a = #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 64, stages = 4, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], cluster_heads = 2, cluster_splits = 4, targets = [sm_90a]>}

// -----

// expected-error @below {{merges_unsplit needs threads 128 and a decode (query_tile 0), got threads 160, query_tile 0}}
func.func private @f() attributes {a = #pattn.xqa_plan<operand = f16, rows = 8, keys_per_tile = 64, stages = 4, key_warps = 4, value_warps = 1, keys_per_split = 4096, shared_bytes = 1024, resident_blocks = [2], threads = 160, merges_unsplit = true, targets = [sm_90a]>}
