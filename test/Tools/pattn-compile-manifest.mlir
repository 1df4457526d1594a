// The manifest names each argument as the MLIR function does (pattn.name,
// else a name location, else the SSA name, else arg<N>) and says which
// buffers the function may write, so loaders accept keywords and declare the
// mutated buffers (torch.library).
//
// REQUIRES: ptxas
// RUN: pattn-compile %s --chips=sm_80 --emit=llvm -o - | FileCheck %s
// RUN: sed -e 's/"seq_lens_renamed"/"query"/' %s | not pattn-compile - --chips=sm_80 --emit=mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=DUPLICATE
// RUN: sed -e 's/"seq_lens_renamed"/"9lives"/' %s | not pattn-compile - --chips=sm_80 --emit=mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOT-IDENTIFIER

// CHECK: @__pattn_manifest = private constant
// CHECK-SAME: \22name\22:\22k_pages\22,\22shape\22:[-1,16,2,64],\22written\22:true
// CHECK-SAME: \22name\22:\22new_k\22,\22shape\22:[1,2,64],\22written\22:false
// CHECK-SAME: \22name\22:\22arg2\22,\22shape\22:[1],\22written\22:false
// CHECK-SAME: \22name\22:\22query\22,\22shape\22:[1,8,64],\22written\22:false
// CHECK-SAME: \22name\22:\22block_table\22,\22shape\22:[1,4],\22written\22:false
// CHECK-SAME: \22name\22:\22seq_lens_renamed\22,\22shape\22:[1],\22written\22:false
// CHECK-SAME: \22name\22:\22scale\22,\22shape\22:[1],\22written\22:false
// CHECK-SAME: \22name\22:\22out\22,\22shape\22:[1,8,64],\22written\22:true

// DUPLICATE: error: arguments #3 and #5 are both named 'query'
// NOT-IDENTIFIER: error: argument #5 has pattn.name "9lives"; expected a string that is an identifier

!cache = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64,
                      encoding = i8, scale = tensor>
func.func @step(%k_pages: memref<?x16x2x64xi8>,
                %0: memref<1x2x64xf16> loc("new_k"),
                %1: memref<1xi64>,
                %query: memref<1x8x64xf16>,
                %block_table: memref<1x4xi32>,
                %lens: memref<1xi32> {pattn.name = "seq_lens_renamed"},
                %scale: memref<1xf32>,
                %out: memref<1x8x64xf16>) {
  %k = pattn.bind_cache storage(%k_pages : memref<?x16x2x64xi8>) : !cache
  pattn.write_cache values(%0 : memref<1x2x64xf16>) into(%k : !cache)
      slots(%1 : memref<1xi64>) scale(%scale : memref<1xf32>)
  pattn.paged_attention query(%query : memref<1x8x64xf16>) key(%k : !cache)
      value(%k : !cache) block_table(%block_table : memref<1x4xi32>)
      seq_lens(%lens : memref<1xi32>) k_scale(%scale : memref<1xf32>)
      v_scale(%scale : memref<1xf32>) outs(%out : memref<1x8x64xf16>)
      {num_heads = 8 : i64}
  return
}
