// The prefill family (prompt-kernel=prefill) compiles for every chip and
// ptxas assembles it: an int4 K and nvfp4 V with token scales and a window
// (both sides decoded once per tile into shared memory), and a bf16 cache
// of head_dim 256 read from the ring. On sm_90a the int4/nvfp4 op runs the
// wgmma kernel (241 registers), the bf16 one mma.sync; neither spills at
// its 2 blocks per SM.
// REQUIRES: ptxas
// RUN: pattn-compile %s --chips=sm_80 --prompt-kernel=prefill --emit=ptx -o %t.80.ptx
// RUN: %ptxas -arch=sm_80 %t.80.ptx -o %t.80.cubin
// RUN: pattn-compile %s --chips=sm_86 --prompt-kernel=prefill --emit=ptx -o %t.86.ptx
// RUN: %ptxas -arch=sm_86 %t.86.ptx -o %t.86.cubin
// RUN: pattn-compile %s --chips=sm_89 --prompt-kernel=prefill --emit=ptx -o %t.89.ptx
// RUN: %ptxas -arch=sm_89 %t.89.ptx -o %t.89.cubin
// RUN: pattn-compile %s --chips=sm_90a --prompt-kernel=prefill --emit=ptx -o %t.90.ptx
// RUN: %ptxas -arch=sm_90a -v %t.90.ptx -o %t.90.cubin 2>&1 | grep -A1 "Function properties for pattn_prefill" > %t.props
// RUN: FileCheck %s --check-prefix=PROPS < %t.props
// RUN: pattn-compile %s --chips=sm_100a --prompt-kernel=prefill --emit=ptx -o %t.100.ptx
// RUN: %ptxas -arch=sm_100a %t.100.ptx -o %t.100.cubin
// RUN: pattn-compile %s --chips=sm_120a --prompt-kernel=prefill --emit=ptx -o %t.120.ptx
// RUN: %ptxas -arch=sm_120a %t.120.ptx -o %t.120.cubin
// PROPS: Function properties for pattn_prefill
// PROPS-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PROPS: Function properties for pattn_prefill
// PROPS-NEXT: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = token>
!v = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = nvfp4, scale = token>
func.func @prompt_i4_nvfp4(%kp: memref<?x16x8x64xi8>, %kt: memref<?x16x8xf32>, %vp: memref<?x16x8x64xi8>, %vg: memref<?x16x8x8xf8E4M3FN>, %vt: memref<?x16x8xf32>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x64xi8>) token_scales(%kt : memref<?x16x8xf32>) : !k
  %v = pattn.bind_cache storage(%vp : memref<?x16x8x64xi8>) group_scales(%vg : memref<?x16x8x8xf8E4M3FN>) token_scales(%vt : memref<?x16x8xf32>) : !v
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%v : !v)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, max_query_len = 4096 : i64, window = 1024 : i64}
  return
}

!b = !pattn.cache<block_size = 64, kv_heads = 2, head_dim = 256, encoding = bf16, scale = none, layout = hnd>
func.func @prompt_bf16(%bp: memref<?x2x64x512xi8>, %q: memref<?x8x256xbf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %o: memref<?x8x256xbf16>) {
  %b = pattn.bind_cache storage(%bp : memref<?x2x64x512xi8>) : !b
  pattn.paged_attention query(%q : memref<?x8x256xbf16>) key(%b : !b) value(%b : !b)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>)
      outs(%o : memref<?x8x256xbf16>) {num_heads = 8 : i64, max_query_len = 512 : i64, softcap = 30.0 : f32}
  return
}
