// The XQA decode of an nvfp4 cache on the chips with cvt.rn.f16x2.e2m1x2
// (sm_100a, sm_120a) uses it: decodeWordHalves first permutes each word so
// that byte q holds nibbles q and q + 4, the pair the mma fragments take
// (one prmt with bytes [0, 2, 1, 3], then a delta swap of nibbles 1 and 2
// of each half; unittests/Conversion/CodecsTest.cpp pins the permutation).
// ptxas assembles it for both chips; no chip here runs it.
// REQUIRES: ptxas
// RUN: pattn-compile %s --chips=sm_100a --emit=ptx -o %t.sm_100a.ptx
// RUN: FileCheck %s < %t.sm_100a.ptx
// RUN: %ptxas -arch=sm_100a %t.sm_100a.ptx -o %t.sm_100a.cubin
// RUN: pattn-compile %s --chips=sm_120a --emit=ptx -o %t.sm_120a.ptx
// RUN: FileCheck %s < %t.sm_120a.ptx
// RUN: %ptxas -arch=sm_120a %t.sm_120a.ptx -o %t.sm_120a.cubin
// CHECK: .entry pattn_xqa_decode
// CHECK: prmt.b32 {{.*}}, 0x3120U;
// CHECK: and.b32 {{.*}}, 15728880;
// CHECK: cvt.rn.f16x2.e2m1x2
// CHECK: cvt.rn.f16x2.e2m1x2
// CHECK: cvt.rn.f16x2.e2m1x2
// CHECK: cvt.rn.f16x2.e2m1x2
// CHECK: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
!c = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = nvfp4, scale = tensor>
func.func @decode(%kp: memref<?x16x8x64xi8>, %kg: memref<?x16x8x8xf8E4M3FN>, %vp: memref<?x16x8x64xi8>, %vg: memref<?x16x8x8xf8E4M3FN>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %ks: memref<1xf32>, %vs: memref<1xf32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x64xi8>) group_scales(%kg : memref<?x16x8x8xf8E4M3FN>) : !c
  %v = pattn.bind_cache storage(%vp : memref<?x16x8x64xi8>) group_scales(%vg : memref<?x16x8x8xf8E4M3FN>) : !c
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !c) value(%v : !c)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64}
  return
}
