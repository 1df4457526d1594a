// Entry points whose sizes are dynamic, for the host-check tests in
// RuntimeTest.cpp: the compiled code must compare them before it launches.
!c = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = tensor>
!n = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = nvfp4, scale = tensor>

func.func @append(%pages: memref<?x16x2x64xi8>, %vals: memref<?x2x64xf16>,
                  %slots: memref<?xi64>, %scale: memref<1xf32>) {
  %c = pattn.bind_cache storage(%pages : memref<?x16x2x64xi8>) : !c
  pattn.write_cache values(%vals : memref<?x2x64xf16>) into(%c : !c)
      slots(%slots : memref<?xi64>) scale(%scale : memref<1xf32>)
  return
}

func.func @append_nvfp4(%pages: memref<?x16x2x32xi8>,
                        %groups: memref<?x16x2x4xf8E4M3FN>,
                        %vals: memref<?x2x64xf16>, %slots: memref<?xi64>,
                        %scale: memref<1xf32>) {
  %c = pattn.bind_cache storage(%pages : memref<?x16x2x32xi8>)
      group_scales(%groups : memref<?x16x2x4xf8E4M3FN>) : !n
  pattn.write_cache values(%vals : memref<?x2x64xf16>) into(%c : !n)
      slots(%slots : memref<?xi64>) scale(%scale : memref<1xf32>)
  return
}

func.func @decode(%kp: memref<?x16x2x64xi8>, %vp: memref<?x16x2x64xi8>,
                  %q: memref<?x4x64xf16>, %bt: memref<?x?xi32>,
                  %sl: memref<?xi32>, %ks: memref<1xf32>, %vs: memref<1xf32>,
                  %o: memref<?x4x64xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x2x64xi8>) : !c
  %v = pattn.bind_cache storage(%vp : memref<?x16x2x64xi8>) : !c
  pattn.paged_attention query(%q : memref<?x4x64xf16>) key(%k : !c) value(%v : !c)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>)
      k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>)
      outs(%o : memref<?x4x64xf16>) {num_heads = 4 : i64}
  return
}

!t = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i8, scale = tensor>
// The folded form: one row exponent per (token, head).
func.func @decode_folded(%kp: memref<?x16x2x64xi8>, %vp: memref<?x16x2x64xi8>,
                         %q: memref<?x4x64xf16>, %bt: memref<?x?xi32>,
                         %sl: memref<?xi32>, %ks: memref<1xf32>,
                         %vs: memref<1xf32>, %e: memref<?x4xi32>,
                         %o: memref<?x4x64xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x2x64xi8>) : !t
  %v = pattn.bind_cache storage(%vp : memref<?x16x2x64xi8>) : !t
  pattn.paged_attention query(%q : memref<?x4x64xf16>) key(%k : !t) value(%v : !t)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>)
      k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>)
      query_exponents(%e : memref<?x4xi32>)
      outs(%o : memref<?x4x64xf16>) {num_heads = 4 : i64, backend = #pattn.backend<portable>}
  return
}
