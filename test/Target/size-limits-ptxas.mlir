// SPEC §3: every shape the verifier accepts compiles on every chip. The
// largest head (1024 channels, f16 K and nvfp4 V with 16-query-head groups)
// in the largest pages (4096 tokens) assembles for the chip with the least
// shared memory per block (sm_86, 99 KiB) and for sm_90a.
// REQUIRES: ptxas
// RUN: pattn-compile %s --chips=sm_86 --emit=ptx -o %t.86.ptx
// RUN: %ptxas -arch=sm_86 %t.86.ptx -o %t.86.cubin
// RUN: pattn-compile %s --chips=sm_90a --emit=ptx -o %t.90a.ptx
// RUN: %ptxas -arch=sm_90a %t.90a.ptx -o %t.90a.cubin
// RUN: pattn-compile %s -o %t.so
// RUN: FileCheck %s < %t.86.ptx
// CHECK: .entry pattn_decode
!k = !pattn.cache<block_size = 4096, kv_heads = 2, head_dim = 1024, encoding = f16, scale = none>
!v = !pattn.cache<block_size = 4096, kv_heads = 2, head_dim = 1024, encoding = nvfp4, scale = token>
func.func @largest(%kp: memref<?x4096x2x2048xi8>, %vp: memref<?x4096x2x512xi8>,
                   %vg: memref<?x4096x2x64xf8E4M3FN>, %vt: memref<?x4096x2xf32>,
                   %q: memref<?x32x1024xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>,
                   %o: memref<?x32x1024xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x4096x2x2048xi8>) : !k
  %v = pattn.bind_cache storage(%vp : memref<?x4096x2x512xi8>) group_scales(%vg : memref<?x4096x2x64xf8E4M3FN>) token_scales(%vt : memref<?x4096x2xf32>) : !v
  pattn.paged_attention query(%q : memref<?x32x1024xf16>) key(%k : !k) value(%v : !v)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>)
      outs(%o : memref<?x32x1024xf16>) {num_heads = 32 : i64}
  return
}
