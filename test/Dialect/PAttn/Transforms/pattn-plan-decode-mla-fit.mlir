// The tensor-core MLA tile must fit every chip the plan is for: a selector
// asked about sm_90a alone lets a 2048-byte custom record (two 65 KiB raw
// tile slots) through, which fits sm_90a (227 KiB per block) but not sm_86
// (99 KiB); the planner asks the family again about the chips it plans for.
// (A selector asked about both picks portable: pattn-select-backend-mla-lanes.)
//
// RUN: pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode=chips=sm_90a 2>/dev/null | FileCheck %s
// RUN: not pattn-opt %s --pattn-select-backend=chips=sm_90a --pattn-plan-decode=chips=sm_90a,sm_86 -o /dev/null 2>&1 | FileCheck %s --check-prefix=SM86

// CHECK: plan = #pattn.xqa_mla_plan<heads_per_block = 16, keys_per_tile = 32, shared_bytes = {{[0-9]+}}, resident_blocks = [1], targets = [sm_90a]>
// SM86: error: 'pattn.mla_decode' op has backend xqa, but xqa-mla-mma-sync cannot serve it on sm_90a, sm_86: MLA tile needs {{[0-9]+}} bytes of shared memory > 101376 on sm_86; select the backend for these chips or use force=portable

!r = !pattn.record_cache<block_size = 16, record = !pattn.record<2048 bytes, none, {latent: 512 x bf16 at 0, rope: 64 x bf16 at 1024}>>
func.func @big_record(%c: !r, %q: memref<2x16x576xbf16>, %bt: memref<2x4xi32>, %sl: memref<2xi32>, %o: memref<2x16x512xbf16>) {
  pattn.mla_decode query(%q : memref<2x16x576xbf16>) cache(%c : !r) block_table(%bt : memref<2x4xi32>) seq_lens(%sl : memref<2xi32>) outs(%o : memref<2x16x512xbf16>) {num_heads = 16 : i64}
  return
}
