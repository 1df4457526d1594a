// Every static shared buffer is 16-byte aligned in the PTX: the decode reads
// them with 16-byte vector loads, and at head_dim 96 with one query head per
// KV head (Phi-3) an element-aligned buffer faulted on the H200
// (CUDA_ERROR_MISALIGNED_ADDRESS; bench/results/2026-12-02-h200-onnx-vs-ort.md).
//
// RUN: pattn-compile %s --chips=sm_90a --backend=portable --emit=ptx -o - | FileCheck %s
// CHECK: .shared .align 16 .b8 __wg_pattn_decode_{{[0-9a-f]+}}_0[3880];
// CHECK-NOT: .shared .align 4
// CHECK: ld.shared.v4

func.func @step(
    %k_pages: memref<?x16x32x192xi8>,
    %v_pages: memref<?x16x32x192xi8>,
    %query: memref<?x32x96xf16>,
    %block_table: memref<?x16xi32>,
    %seq_lens: memref<?xi32>,
    %out: memref<?x32x96xf16>) {
  %k = pattn.bind_cache storage(%k_pages : memref<?x16x32x192xi8>) : !pattn.cache<block_size = 16, kv_heads = 32, head_dim = 96, encoding = f16, scale = none>
  %v = pattn.bind_cache storage(%v_pages : memref<?x16x32x192xi8>) : !pattn.cache<block_size = 16, kv_heads = 32, head_dim = 96, encoding = f16, scale = none>
  pattn.paged_attention query(%query : memref<?x32x96xf16>)
      key(%k : !pattn.cache<block_size = 16, kv_heads = 32, head_dim = 96, encoding = f16, scale = none>) value(%v : !pattn.cache<block_size = 16, kv_heads = 32, head_dim = 96, encoding = f16, scale = none>)
      block_table(%block_table : memref<?x16xi32>)
      seq_lens(%seq_lens : memref<?xi32>)
      outs(%out : memref<?x32x96xf16>)
      {num_heads = 32 : i64}
  return
}
