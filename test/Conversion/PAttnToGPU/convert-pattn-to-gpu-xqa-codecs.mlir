// RUN: pattn-opt %s --split-input-file --pattn-select-backend=chips=sm_90a --pattn-plan-decode=chips=sm_90a --convert-pattn-to-gpu=chips=sm_90a 2>/dev/null | FileCheck %s

// The instruction budget of the XQA decode's codecs (docs/Lowering.md,
// "Instructions per key step"). An int4 word decodes as four f16 pairs:
// each pair is one lop3 ((word & mask) | 0x64006400, the magic exponent)
// and one f16x2 operation. Odd nibbles, masked one nibble up, take one
// fma.rn.f16x2 (llvm.intr.fma on vector<2xf16>); math.fma would have become
// two libdevice fp32 calls with four conversions.
// CHECK-LABEL: gpu.func @pattn_xqa_decode_{{[0-9a-f]+}}
// CHECK:   llvm.inline_asm "lop3.b32 $0, $1, $2, $3, 0xEA;", "=r,r,n,r" %{{.*}}, %c983055_i32, %c1677747200_i32
// CHECK:   arith.subf %{{.*}} : vector<2xf16>
// CHECK:   llvm.inline_asm "lop3.b32 $0, $1, $2, $3, 0xEA;", "=r,r,n,r" %{{.*}}, %c15728880_i32, %c1677747200_i32
// CHECK:   llvm.intr.fma(%{{.*}}) : (vector<2xf16>, vector<2xf16>, vector<2xf16>) -> vector<2xf16>
// CHECK-NOT: math.fma
// CHECK-LABEL: gpu.func @pattn_merge_{{[0-9a-f]+}}
!c = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = tensor>
func.func @decode(%kp: memref<?x16x8x64xi8>, %vp: memref<?x16x8x64xi8>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %ks: memref<1xf32>, %vs: memref<1xf32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x64xi8>) : !c
  %v = pattn.bind_cache storage(%vp : memref<?x16x8x64xi8>) : !c
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !c) value(%v : !c)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

// With g x max_query_len <= 8 rows (g = 4, one token) the plan takes keys
// as the mma's M (rows = 8): a warp's 16-key step is 8 mma for Sᵀ = K Qᵀ
// (D128: 8 k-steps) and 8 for Oᵀ += Vᵀ Pᵀ (128 channels in m16 tiles),
// where 16 rows as M take 16 and 16. A thread's 4 logits are keys g and
// g + 8 of rows 2t and 2t + 1: 6 exponentials (4 weights, 2 decays).
// CHECK-LABEL: gpu.func @pattn_xqa_decode_{{[0-9a-f]+}}
// CHECK:   scf.for
// CHECK-COUNT-8: nvvm.mma.sync
// CHECK-NOT: nvvm.mma.sync
// CHECK:     nvvm.vote.sync  all
// CHECK-COUNT-6: llvm.nvvm.ex2.approx.ftz.f32
// CHECK-NOT: llvm.nvvm.ex2.approx.ftz.f32
// CHECK:     nvvm.vote.sync  any
// CHECK-COUNT-8: nvvm.mma.sync
// CHECK-NOT: nvvm.mma.sync
// CHECK-LABEL: gpu.func @pattn_merge_{{[0-9a-f]+}}
!c = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @decode(%kp: memref<?x16x8x256xi8>, %vp: memref<?x16x8x256xi8>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x256xi8>) : !c
  %v = pattn.bind_cache storage(%vp : memref<?x16x8x256xi8>) : !c
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !c) value(%v : !c)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

// Four query tokens (16 rows): both halves are real, 10 exponentials.
// CHECK-LABEL: gpu.func @pattn_xqa_decode_{{[0-9a-f]+}}
// CHECK:   scf.for
// CHECK:     nvvm.vote.sync  all
// CHECK-COUNT-10: llvm.nvvm.ex2.approx.ftz.f32
// CHECK-NOT: llvm.nvvm.ex2.approx.ftz.f32
// CHECK:     nvvm.vote.sync  any
// CHECK-LABEL: gpu.func @pattn_merge_{{[0-9a-f]+}}
!c = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @decode(%kp: memref<?x16x8x256xi8>, %vp: memref<?x16x8x256xi8>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x256xi8>) : !c
  %v = pattn.bind_cache storage(%vp : memref<?x16x8x256xi8>) : !c
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !c) value(%v : !c)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, max_query_len = 4 : i64}
  return
}
