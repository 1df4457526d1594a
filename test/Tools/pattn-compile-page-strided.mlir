// An entry point may take page-strided buffers: K and V as views of an
// engine's [blocks, 2, block_size, kv_heads, head_dim] allocation, each
// page-contiguous, pages 32768 bytes apart. The manifest gives their strides
// (in elements), which loaders check and pass; contiguous buffers give none.
// Both backends build for sm_80 and sm_90a through ptxas.
//
// REQUIRES: ptxas
// RUN: pattn-compile %s --chips=sm_80,sm_90a --emit=llvm -o - | FileCheck %s
// RUN: pattn-compile %s --chips=sm_80,sm_90a -o %t.so
// RUN: pattn-compile %s --chips=sm_90a --backend=portable -o %t-portable.so
// RUN: sed -e 's/strided<\[32768, 1024, 128, 1\]>/strided<[32768, 1024, 128, 1], offset: 16384>/g' %s | not pattn-compile - --chips=sm_80 --emit=mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=OFFSET

// CHECK: @__pattn_manifest = private constant
// CHECK-SAME: \22name\22:\22k_pages\22,\22shape\22:[-1,16,8,128],\22strides\22:[32768,1024,128,1],\22written\22:true
// CHECK-SAME: \22name\22:\22v_pages\22,\22shape\22:[-1,16,8,128],\22strides\22:[32768,1024,128,1],\22written\22:true
// CHECK-SAME: \22name\22:\22k_new\22,\22shape\22:[-1,8,128],\22written\22:false

// OFFSET: error: entry point argument #0 has type 'memref<?x16x8x128xi8, strided<[32768, 1024, 128, 1], offset: 16384>>'; loaders pass contiguous buffers, or pages a static stride apart (strided<[S, ...]> at offset 0

!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = token>
!v = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = token>
func.func @step(%k_pages: memref<?x16x8x128xi8, strided<[32768, 1024, 128, 1]>>,
                %k_tokens: memref<?x16x8xf32>,
                %v_pages: memref<?x16x8x128xi8, strided<[32768, 1024, 128, 1]>>,
                %v_tokens: memref<?x16x8xf32>,
                %k_new: memref<?x8x128xf16>, %v_new: memref<?x8x128xf16>,
                %slots: memref<?xi64>, %query: memref<?x32x128xf16>,
                %block_table: memref<?x?xi32>, %seq_lens: memref<?xi32>,
                %out: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%k_pages : memref<?x16x8x128xi8, strided<[32768, 1024, 128, 1]>>) token_scales(%k_tokens : memref<?x16x8xf32>) : !k
  %v = pattn.bind_cache storage(%v_pages : memref<?x16x8x128xi8, strided<[32768, 1024, 128, 1]>>) token_scales(%v_tokens : memref<?x16x8xf32>) : !v
  pattn.write_cache values(%k_new : memref<?x8x128xf16>) into(%k : !k) slots(%slots : memref<?xi64>)
  pattn.write_cache values(%v_new : memref<?x8x128xf16>) into(%v : !v) slots(%slots : memref<?xi64>)
  pattn.paged_attention query(%query : memref<?x32x128xf16>) key(%k : !k) value(%v : !v)
      block_table(%block_table : memref<?x?xi32>) seq_lens(%seq_lens : memref<?xi32>)
      outs(%out : memref<?x32x128xf16>) {num_heads = 32 : i64}
  return
}
