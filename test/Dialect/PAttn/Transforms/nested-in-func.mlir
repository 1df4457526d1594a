// pattn-select-backend and pattn-plan-decode decide per op, so they run
// nested in func.func pipelines (on each function, in parallel) as well as
// on builtin.module, with the same result. pattn-fold-channel-scales adds
// constant globals to the module, so it is module-anchored and refuses to be
// nested.
//
// RUN: pattn-opt %s --mlir-print-op-on-diagnostic=false --pass-pipeline="builtin.module(func.func(pattn-select-backend{chips=sm_90a},pattn-plan-decode{chips=sm_90a}))" 2>/dev/null | FileCheck %s
// RUN: pattn-opt %s --mlir-print-op-on-diagnostic=false --pass-pipeline="builtin.module(pattn-select-backend{chips=sm_90a},pattn-plan-decode{chips=sm_90a})" 2>/dev/null | FileCheck %s
// RUN: not pattn-opt %s --pass-pipeline="builtin.module(func.func(pattn-fold-channel-scales))" 2>&1 | FileCheck %s --check-prefix=FOLD

// FOLD: Can't add pass 'PAttnFoldChannelScales' restricted to 'builtin.module' on a PassManager intended to run on 'func.func'

!cache = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 128,
                      encoding = i8, scale = tensor>

// CHECK-LABEL: func.func @tensor_cores
// CHECK: pattn.paged_attention
// CHECK-SAME: backend = #pattn.backend<xqa>
// CHECK-SAME: plan = #pattn.xqa_plan<
func.func @tensor_cores(%pages: memref<?x16x2x128xi8>, %q: memref<1x8x128xf16>,
                        %bt: memref<1x4xi32>, %lens: memref<1xi32>,
                        %s: memref<1xf32>, %out: memref<1x8x128xf16>) {
  %k = pattn.bind_cache storage(%pages : memref<?x16x2x128xi8>) : !cache
  pattn.paged_attention query(%q : memref<1x8x128xf16>) key(%k : !cache)
      value(%k : !cache) block_table(%bt : memref<1x4xi32>)
      seq_lens(%lens : memref<1xi32>) k_scale(%s : memref<1xf32>)
      v_scale(%s : memref<1xf32>) outs(%out : memref<1x8x128xf16>)
      {num_heads = 8 : i64}
  return
}

// head_dim 96 is not an XQA shape.
!cache96 = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 96,
                        encoding = i8, scale = tensor>
// CHECK-LABEL: func.func @portable
// CHECK: pattn.paged_attention
// CHECK-SAME: backend = #pattn.backend<portable>
// CHECK-SAME: plan = #pattn.portable_plan<
func.func @portable(%pages: memref<?x16x2x96xi8>, %q: memref<1x8x96xf16>,
                    %bt: memref<1x4xi32>, %lens: memref<1xi32>,
                    %s: memref<1xf32>, %out: memref<1x8x96xf16>) {
  %k = pattn.bind_cache storage(%pages : memref<?x16x2x96xi8>) : !cache96
  pattn.paged_attention query(%q : memref<1x8x96xf16>) key(%k : !cache96)
      value(%k : !cache96) block_table(%bt : memref<1x4xi32>)
      seq_lens(%lens : memref<1xi32>) k_scale(%s : memref<1xf32>)
      v_scale(%s : memref<1xf32>) outs(%out : memref<1x8x96xf16>)
      {num_heads = 8 : i64}
  return
}
