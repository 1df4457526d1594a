// RUN: pattn-opt %s --split-input-file --pattn-fold-channel-scales --pattn-select-backend="chips=sm_80 force=portable" --pattn-plan-decode=chips=sm_80 --convert-pattn-to-gpu="chips=sm_80" | FileCheck %s

// A cache write: a single-block slot check, then one warp per (token, kv
// head) row, four rows a 128-thread block (ceil(tokens x kv_heads / 4)
// blocks), writing only when every slot is in range (a rejected call leaves
// the cache untouched), all on the caller's stream (a trailing !llvm.ptr
// seen as an async token); an empty batch launches nothing; the function
// returns the runtime's status.
// CHECK: func.func private @pattnRuntimeDeviceErrorWord() -> memref<1xi32> attributes {llvm.emit_c_interface}
// CHECK: memref.global "private" constant @__pattn_size_check : memref<{{[0-9]+}}xi8> = dense<"0x{{[0-9A-F]+}}">
// CHECK: func.func private @pattnRuntimeRejectSizes(memref<?xi8>, i64, i64) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @write_i4
// CHECK-SAME: (%[[PAGES:[^:]*]]: memref<?x16x2x32xi8>, %[[V:[^:]*]]: memref<?x2x64xf16>, %[[SLOTS:[^:]*]]: memref<?xi64>, %[[S:[^:]*]]: memref<1xf32>, %[[STREAM:[^:]*]]: !llvm.ptr) -> i32
// First the sizes the verifier could not compare (SPEC §7): a mismatch
// records the error with a message and both sizes, and nothing after it
// runs (the runtime's errors are sticky).
// CHECK:   %[[NSLOTS:.*]] = memref.dim %[[SLOTS]], %{{.*}} : memref<?xi64>
// CHECK:   %[[NVALUES:.*]] = memref.dim %[[V]], %{{.*}} : memref<?x2x64xf16>
// CHECK:   %[[BAD:.*]] = arith.cmpi ne, %[[NSLOTS]], %[[NVALUES]] : index
// CHECK:   scf.if %[[BAD]] {
// CHECK:     %[[MESSAGE:.*]] = memref.get_global @__pattn_size_check : memref<{{[0-9]+}}xi8>
// CHECK:     func.call @pattnRuntimeRejectSizes(%{{.*}}, %{{.*}}, %{{.*}}) : (memref<?xi8>, i64, i64) -> ()
// CHECK:   }
// CHECK-DAG:   %[[TOKEN:.*]] = builtin.unrealized_conversion_cast %[[STREAM]] : !llvm.ptr to !gpu.async.token
// CHECK-DAG:   %[[T:.*]] = memref.dim %[[V]], %{{.*}} : memref<?x2x64xf16>
// CHECK:   scf.if
// One check block per 2048 slots (128 threads x 16), at most 32, each with
// its own verdict.
// CHECK:     %[[COUNT:.*]] = memref.dim %[[SLOTS]], %{{.*}} : memref<?xi64>
// CHECK:     %[[UP:.*]] = arith.addi %[[COUNT]], %c2047 : index
// CHECK:     %[[PER:.*]] = arith.divsi %[[UP]], %c2048 : index
// CHECK:     %[[MOST:.*]] = arith.minsi %[[PER]], %c32 : index
// CHECK:     %[[CHECKS:.*]] = arith.maxsi %[[MOST]], %c1{{.*}} : index
// CHECK:     %[[FLAG:.*]], %{{.*}} = gpu.alloc async [%[[TOKEN]]] (%[[CHECKS]]) : memref<?xi32>
// CHECK:     %[[WORD:.*]] = func.call @pattnRuntimeDeviceErrorWord() : () -> memref<1xi32>
// CHECK:     gpu.launch_func async [%[[TOKEN]]] @pattn_kernels::@pattn_check_slots_{{[0-9a-f]+}} blocks in (%[[CHECKS]], %c1{{.*}}, %c1{{.*}}) threads in (%c128{{.*}}) args(%[[SLOTS]] : memref<?xi64>, %[[PAGES]] : memref<?x16x2x32xi8>, %[[FLAG]] : memref<?xi32>, %[[WORD]] : memref<1xi32>)
// CHECK:     %[[ROWS:.*]] = arith.muli %[[T]], %c2 : index
// Two rows a warp, four warps a block.
// CHECK:     %[[UP:.*]] = arith.addi %[[ROWS]], %c7 : index
// CHECK:     %[[BLOCKS:.*]] = arith.divsi %[[UP]], %c8 : index
// CHECK:     gpu.launch_func async [%[[TOKEN]]] @pattn_kernels::@pattn_write_cache_{{[0-9a-f]+}} blocks in (%[[BLOCKS]], %{{.*}}, %{{.*}}) threads in (%c128{{.*}}) args(%[[V]] : memref<?x2x64xf16>, %[[SLOTS]] : memref<?xi64>, %[[PAGES]] : memref<?x16x2x32xi8>, %[[S]] : memref<1xf32>, %[[FLAG]] : memref<?xi32>)
// CHECK:     gpu.dealloc async [%[[TOKEN]]] %[[FLAG]]
// CHECK:   %[[STATUS:.*]] = call @pattnRuntimeTakeStatus() : () -> i32
// CHECK:   return %[[STATUS]] : i32
// CHECK: gpu.module @pattn_kernels [#nvvm.target<O = 3, chip = "sm_80", features = "+ptx80">]
// CHECK:   gpu.func @pattn_write_cache_{{[0-9a-f]+}}(%{{.*}}: memref<?x2x64xf16>, %{{.*}}: memref<?xi64>, %{{.*}}: memref<?x16x2x32xi8>, %{{.*}}: memref<1xf32>, %[[WFLAG:.*]]: memref<?xi32>) kernel
// The warp's two rows ((block x 4 + warp) x 2 + i), their tokens and heads
// (clamped into the batch for the loads); it writes only after a clean
// slot check, and slot -1 skips the token. Both rows' elements are loaded
// first, then their slots, all in flight while the verdicts are read.
// CHECK:     %[[FIRST:.*]] = arith.muli %{{.*}}, %c4 : index
// CHECK:     %[[WARP:.*]] = arith.divsi %{{.*}}, %c32 : index
// CHECK:     %[[INDEX:.*]] = arith.addi %[[FIRST]], %[[WARP]] : index
// CHECK:     arith.muli %[[INDEX]], %c2 : index
// CHECK:     %[[ROW0:.*]] = arith.minsi %{{.*}}, %{{.*}} : index
// CHECK:     %[[TOKEN0:.*]] = arith.divsi %[[ROW0]], %c2{{.*}} : index
// CHECK:     %[[HEAD0:.*]] = arith.remsi %[[ROW0]], %c2{{.*}} : index
// CHECK-COUNT-2: memref.load %{{.*}}[%[[TOKEN0]], %[[HEAD0]], %{{.*}}] : memref<?x2x64xf16>
// CHECK:     %[[ROW1:.*]] = arith.minsi %{{.*}}, %{{.*}} : index
// CHECK:     %[[TOKEN1:.*]] = arith.divsi %[[ROW1]], %c2{{.*}} : index
// CHECK:     %[[HEAD1:.*]] = arith.remsi %[[ROW1]], %c2{{.*}} : index
// CHECK-COUNT-2: memref.load %{{.*}}[%[[TOKEN1]], %[[HEAD1]], %{{.*}}] : memref<?x2x64xf16>
// CHECK:     memref.load %{{.*}}[%[[TOKEN0]]] : memref<?xi64>
// CHECK:     memref.load %{{.*}}[%[[TOKEN1]]] : memref<?xi64>
// Lane l loads verdict l (l < the check blocks), and a warp vote says
// whether any failed.
// CHECK:     %[[CHECKED:.*]] = memref.load %[[WFLAG]][%{{.*}}] : memref<?xi32>
// CHECK:     arith.cmpi ne, %[[CHECKED]], %c0_i32
// CHECK:     nvvm.vote.sync any
// CHECK:     arith.cmpi sge, %{{.*}}, %c0_i64 : i64
// Two signed codes, biased by 8, packed low nibble first.
// CHECK:     llvm.inline_asm "cvt.rni.s32.f32 $0, $1;"
// CHECK:     arith.shli %{{.*}}, %c4_i32
// CHECK:     memref.store %{{.*}} : memref<?x16x2x32xi8>
// A slot below -1 or past the pages sets the block's verdict and raises
// bit 1 of the runtime's device error word (read by the caller after a
// sync). Each thread loads 16 slots a step, a grid of threads apart
// (clamped to the last, all loads first), then branches once.
// CHECK:   gpu.func @pattn_check_slots_{{[0-9a-f]+}}(%{{.*}}: memref<?xi64>, %{{.*}}: memref<?x16x2x32xi8>, %[[VERDICTS:.*]]: memref<?xi32>, %[[EW:.*]]: memref<1xi32>) kernel
// CHECK:     %[[BLOCK:.*]] = gpu.block_id  x
// CHECK:     memref.store %c0_i32, %[[VERDICTS]][%[[BLOCK]]] : memref<?xi32>
// CHECK:     gpu.barrier
// CHECK:     %[[GRID:.*]] = gpu.grid_dim  x
// CHECK:     %[[THREADS:.*]] = arith.muli %[[GRID]], %c128
// CHECK:     %[[STEP:.*]] = arith.muli %[[THREADS]], %c16
// CHECK:     scf.for %{{.*}} = %{{.*}} to %{{.*}} step %[[STEP]]
// CHECK-COUNT-16: memref.load %{{.*}} : memref<?xi64>
// CHECK:       arith.cmpi slt, %{{.*}}, %c-1_i64 : i64
// CHECK:       arith.cmpi sge
// CHECK:       scf.if
// CHECK:     memref.store %c1_i32{{.*}}, %[[VERDICTS]][%[[BLOCK]]] : memref<?xi32>
// CHECK:     memref.atomic_rmw ori %c1_i32{{.*}}, %[[EW]][%{{.*}}] : (i32, memref<1xi32>) -> i32
!c = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i4, scale = tensor>
func.func @write_i4(%pages: memref<?x16x2x32xi8>, %v: memref<?x2x64xf16>, %slots: memref<?xi64>, %s: memref<1xf32>) {
  %c = pattn.bind_cache storage(%pages : memref<?x16x2x32xi8>) : !c
  pattn.write_cache values(%v : memref<?x2x64xf16>) into(%c : !c) slots(%slots : memref<?xi64>) scale(%s : memref<1xf32>)
  return
}

// -----

// nvfp4 with per-token outer scales: the kernel writes codes, group scales
// and the token scale.
// CHECK-LABEL: func.func @write_nvfp4
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels::@pattn_write_cache_{{[0-9a-f]+}} {{.*}} args(%{{.*}} : memref<3x4x32xbf16>, %{{.*}} : memref<3xi32>, %{{.*}} : memref<?x4x16x16xi8>, %{{.*}} : memref<?x4x16x2xf8E4M3FN>, %{{.*}} : memref<?x16x4xf32>, %{{.*}} : memref<?xi32>)
// CHECK: gpu.func @pattn_write_cache_{{[0-9a-f]+}}
// CHECK:   arith.divf %{{.*}}, %cst{{.*}} : f32
// CHECK:   memref.store %{{.*}} : memref<?x16x4xf32>
!c = !pattn.cache<block_size = 16, kv_heads = 4, head_dim = 32, encoding = nvfp4, scale = token, layout = hnd>
func.func @write_nvfp4(%pages: memref<?x4x16x16xi8>, %groups: memref<?x4x16x2xf8E4M3FN>, %tokens: memref<?x16x4xf32>, %v: memref<3x4x32xbf16>, %slots: memref<3xi32>) {
  %c = pattn.bind_cache storage(%pages : memref<?x4x16x16xi8>) group_scales(%groups : memref<?x4x16x2xf8E4M3FN>) token_scales(%tokens : memref<?x16x4xf32>) : !c
  pattn.write_cache values(%v : memref<3x4x32xbf16>) into(%c : !c) slots(%slots : memref<3xi32>)
  return
}

// -----

// Decode: a stream-ordered workspace sized by the block table's width (the
// split count is host-known), the decode kernel over (splits, tokens *
// kv heads * head groups) with each block serving g = 4 heads of a KV head
// (each key loaded once for all of them), the merge kernel over tokens *
// heads, then the workspace is freed.
// CHECK-LABEL: func.func @decode
// CHECK-SAME: %[[STREAM:[^:]*]]: !llvm.ptr) -> i32
// CHECK: %[[TOKEN:.*]] = builtin.unrealized_conversion_cast %[[STREAM]]
// CHECK: %[[MB:.*]] = memref.dim %{{.*}}, %c1{{.*}} : memref<?x?xi32>
// CHECK: %[[KEYS:.*]] = arith.muli %[[MB]], %c16
// CHECK: %[[SPLITS0:.*]] = arith.ceildivsi %[[KEYS]], %c512
// CHECK: %[[SPLITS:.*]] = arith.maxsi %[[SPLITS0]], %c1
// CHECK: %[[ROWS:.*]] = arith.muli %{{.*}}, %c32
// CHECK: %[[PO:.*]], %{{.*}} = gpu.alloc async [%[[TOKEN]]] (%[[SPLITS]], %[[ROWS]]) : memref<?x?x128xf32>
// CHECK: %[[PS:.*]], %{{.*}} = gpu.alloc async [%[[TOKEN]]] (%[[SPLITS]], %[[ROWS]]) : memref<?x?x2xf32>
// CHECK: %[[DROWS:.*]] = arith.muli %{{.*}}, %c8
// CHECK: gpu.launch_func async [%[[TOKEN]]] @pattn_kernels::@pattn_decode_{{[0-9a-f]+}} blocks in (%[[SPLITS]], %[[DROWS]], %{{.*}})
// CHECK: gpu.launch_func async [%[[TOKEN]]] @pattn_kernels::@pattn_merge_{{[0-9a-f]+}} blocks in (%[[ROWS]], %{{.*}}, %{{.*}})
// CHECK: gpu.dealloc async [%[[TOKEN]]] %[[PO]]
// CHECK: gpu.dealloc async [%[[TOKEN]]] %[[PS]]
// The decode kernel stages its 4 query rows, then the lanes' partial
// outputs (V rows are read as 16-byte vectors of 16 i8 codes: 8 threads a
// row, 16 keys at once: 16 lanes x 4 heads x (128 + 1)), and the chunk's
// per-head logits in shared memory.
// A quantized decode declares 128 threads and 4 blocks per SM (ptxas then
// keeps it within 128 registers).
// Shared buffers are 16-byte aligned: the kernels read them with 16-byte
// vector loads (misaligned at head_dim 96 before).
// CHECK: gpu.func @pattn_decode_{{[0-9a-f]+}}({{.*}}) workgroup(%{{.*}} : memref<8256xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<512xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<128xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<128xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel attributes {nvvm.maxntid = array<i32: 128, 1, 1>, nvvm.minctasm = 4 : i32}
// CHECK:   gpu.barrier
// Without hardware fp8 (sm_80), e4m3 bytes q and q + 2 become one f16 pair:
// magnitudes shifted into place and masked (0x3F803F80) with the sign or'ed
// in by one lop3, times 2^8 in f16x2.
// CHECK:   llvm.inline_asm "lop3.b32 $0, $1, $2, $3, 0xEA;", "=r,r,n,r" %{{.*}}, %c1065369472_i32
// CHECK:   arith.mulf %{{.*}}, %cst{{.*}} : vector<2xf16>
// CHECK:   math.exp
// CHECK:   vector.load %{{.*}} : memref<?x16x8x128xi8>, vector<16xi8>
// The i8 codes become f16 pairs by the magic number, not one conversion each:
// one lop3 keeps bytes q and q + 2 (of the word shifted down a byte for
// q = 1), flips their top bit and sets 0x64 exponent bytes above them
// (0x64806480 = 1686135936), then 1152 is subtracted.
// CHECK:   llvm.inline_asm "lop3.b32 $0, $1, $2, $3, 0x6A;", "=r,r,n,r" %{{.*}}, %c16711935_i32{{.*}}, %c1686135936_i32
// CHECK:   arith.subf %{{.*}} : vector<2xf16>
// CHECK:   arith.shrui %{{.*}}, %c8_i32
// CHECK:   llvm.inline_asm "lop3.b32 $0, $1, $2, $3, 0x6A;", "=r,r,n,r" %{{.*}}, %c16711935_i32{{.*}}, %c1686135936_i32
// CHECK:   arith.subf %{{.*}} : vector<2xf16>
// CHECK: gpu.func @pattn_merge_{{[0-9a-f]+}}
// CHECK:   arith.truncf %{{.*}} : f32 to f16
!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f8e4m3, scale = tensor>
!v = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = token>
func.func @decode(%kp: memref<?x16x8x128xi8>, %vp: memref<?x16x8x128xi8>, %vt: memref<?x16x8xf32>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %ks: memref<1xf32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x128xi8>) : !k
  %v = pattn.bind_cache storage(%vp : memref<?x16x8x128xi8>) token_scales(%vt : memref<?x16x8xf32>) : !v
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%v : !v)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) k_scale(%ks : memref<1xf32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

// The fold's dynamic forms: the query fold, whose blocks reduce this small
// table to N themselves (no normalizer launch), and the pair's one merge.
// CHECK-LABEL: func.func @guarded
// CHECK: %[[N:.*]], %{{.*}} = gpu.alloc async {{.*}} : memref<1xf32>
// CHECK: %[[FLAG:.*]], %{{.*}} = gpu.alloc async {{.*}} : memref<1xi32>
// CHECK-NOT: @pattn_scale_normalizer_
// A warp per (token, head) row, four a block: ceil(tokens x 8 / 4) blocks.
// CHECK: %[[ROWS:.*]] = arith.muli %{{.*}}, %c8
// CHECK: %[[BLOCKS:.*]] = arith.ceildivsi %[[ROWS]], %c4
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels::@pattn_fold_query_{{[0-9a-f]+}} blocks in (%[[BLOCKS]], %c1{{.*}}, %c1{{.*}}) threads in (%c128{{.*}}, %c1{{.*}}, %c1{{.*}}) args({{.*}}, %[[N]] : memref<1xf32>, %{{.*}} : memref<?x8xi32>, %[[FLAG]] : memref<1xi32>)
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels::@pattn_decode_{{[0-9a-f]+}}
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels::@pattn_decode_{{[0-9a-f]+}}
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels::@pattn_merge_{{[0-9a-f]+}} {{.*}} args(%[[FLAG]] : memref<1xi32>, %{{.*}} : memref<?x8x64xf16>, %{{.*}} : memref<?x?x64xf32>, %{{.*}} : memref<?x?x2xf32>, %{{.*}} : memref<?x?x64xf32>, %{{.*}} : memref<?x?x2xf32>)
// CHECK-NOT: @pattn_merge_
// CHECK: gpu.dealloc async {{.*}} %[[N]]
// CHECK: gpu.dealloc async {{.*}} %[[FLAG]]
// CHECK: gpu.func @pattn_fold_query_{{[0-9a-f]+}}
// CHECK:   gpu.barrier
// CHECK:   arith.extui %{{.*}} : i1 to i32
// The row's exponent by shuffles across its warp, no barrier.
// CHECK:   gpu.shuffle  xor %{{.*}}, %c16_i32
// CHECK-NOT: gpu.barrier
// CHECK:   gpu.shuffle  xor %{{.*}}, %c1_i32
// One rounding: round-to-odd in fp32 (exact error by fma), then RNE.
// CHECK:   llvm.intr.fma
// CHECK:   arith.ori %{{.*}}, %c1_i32
// CHECK:   arith.truncf %{{.*}} : f32 to f16
// CHECK: gpu.func @pattn_decode_{{[0-9a-f]+}}
// CHECK:   %[[G:.*]] = memref.load %{{.*}}[%c0] : memref<1xi32>
// CHECK:   arith.cmpi eq, %[[G]], %c1_i32
// CHECK: gpu.func @pattn_decode_{{[0-9a-f]+}}
// CHECK:   %[[G0:.*]] = memref.load %{{.*}}[%c0] : memref<1xi32>
// CHECK:   arith.cmpi eq, %[[G0]], %c0_i32
!k = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i4, scale = channel>
!v = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f16, scale = none>
func.func @guarded(%kp: memref<?x16x2x32xi8>, %vp: memref<?x16x2x128xi8>, %q: memref<?x8x64xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %ks: memref<2x64xf32>, %o: memref<?x8x64xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x2x32xi8>) : !k
  %v = pattn.bind_cache storage(%vp : memref<?x16x2x128xi8>) : !v
  pattn.paged_attention query(%q : memref<?x8x64xf16>) key(%k : !k) value(%v : !v)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) k_scale(%ks : memref<2x64xf32>)
      outs(%o : memref<?x8x64xf16>) {num_heads = 8 : i64}
  return
}

// -----

// MLA over 656-byte records: one write kernel per token, one decode pair.
// CHECK-LABEL: func.func @mla
// CHECK: @pattn_kernels::@pattn_check_slots_{{[0-9a-f]+}}
// CHECK: @pattn_kernels::@pattn_write_record_{{[0-9a-f]+}} blocks in (%{{.*}}, %c1{{.*}}, %c1{{.*}})
// CHECK: @pattn_kernels::@pattn_decode_{{[0-9a-f]+}}
// CHECK: @pattn_kernels::@pattn_merge_{{[0-9a-f]+}}
// CHECK: gpu.func @pattn_write_record_{{[0-9a-f]+}}
// 16 heads share the latent head, 8 per block. Keys are read as aligned
// 16-byte vectors (the e4m3 latent, then the bf16 rope at byte 528), each
// thread's four value channels as one 4-byte load.
// CHECK: gpu.func @pattn_decode_{{[0-9a-f]+}}({{.*}}) workgroup(%{{.*}} : memref<4608xf32, #gpu.address_space<workgroup>>
// CHECK: vector.load {{.*}} {alignment = 16 : i64} : memref<?x64x656xi8>, vector<16xi8>
// CHECK: vector.load {{.*}} {alignment = 16 : i64} : memref<?x64x656xi8>, vector<16xi8>
// CHECK: vector.load {{.*}} {alignment = 4 : i64} : memref<?x64x656xi8>, vector<4xi8>
!r = !pattn.record_cache<block_size = 64, record = !pattn.record<fp8_ds_mla>>
func.func @mla(%pages: memref<?x64x656xi8>, %lat: memref<?x512xbf16>, %rope: memref<?x64xbf16>, %slots: memref<?xi64>, %q: memref<?x16x576xbf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %o: memref<?x16x512xbf16>) {
  %c = pattn.bind_cache storage(%pages : memref<?x64x656xi8>) : !r
  pattn.write_record latent(%lat : memref<?x512xbf16>) rope(%rope : memref<?x64xbf16>) into(%c : !r) slots(%slots : memref<?xi64>)
  pattn.mla_decode query(%q : memref<?x16x576xbf16>) cache(%c : !r) block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) outs(%o : memref<?x16x512xbf16>) {num_heads = 16 : i64}
  return
}

// -----

// A plain f16 decode with few accumulators (4 heads x 8 channels) needs
// about 72 registers: it gets no launch bound, so ptxas keeps it small and
// 7 blocks fit an SM (with the bound it spent 116 registers, 4 blocks).
// CHECK-LABEL: func.func @decode_f16
// CHECK: gpu.func @pattn_decode_{{[0-9a-f]+}}({{.*}}) workgroup({{.*}}) kernel {
!h = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f16, scale = none>
func.func @decode_f16(%kp: memref<?x16x8x256xi8>, %vp: memref<?x16x8x256xi8>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x256xi8>) : !h
  %v = pattn.bind_cache storage(%vp : memref<?x16x8x256xi8>) : !h
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !h) value(%v : !h)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

// A prompt (max_query_len 2048): one split of up to 32768 keys, and the
// decode kernel's (token, head group) blocks on the grid's x (a 4K-token
// batch has more of them than y's 65535), the splits on y; the kernel reads
// its row from blockIdx.x and its split from blockIdx.y.
// CHECK-LABEL: func.func @prompt
// CHECK: %[[KEYS:.*]] = arith.muli %{{.*}}, %c16
// CHECK: %[[SPLITS0:.*]] = arith.ceildivsi %[[KEYS]], %c32768
// CHECK: %[[SPLITS:.*]] = arith.maxsi %[[SPLITS0]], %c1
// CHECK: %[[DROWS:.*]] = arith.muli %{{.*}}, %c8
// CHECK: gpu.launch_func async [%{{.*}}] @pattn_kernels::@pattn_decode_{{[0-9a-f]+}} blocks in (%[[DROWS]], %[[SPLITS]], %{{.*}})
// CHECK: gpu.func @pattn_decode_{{[0-9a-f]+}}
// CHECK: %[[ROW:.*]] = gpu.block_id  x
// CHECK: arith.divsi %[[ROW]], %c8
// CHECK: %[[SPLIT:.*]] = gpu.block_id  y
// CHECK: %[[SPLIT32:.*]] = arith.index_cast %[[SPLIT]] : index to i32
// CHECK: arith.muli %[[SPLIT32]], %c32768_i32
// CHECK: gpu.func @pattn_merge_{{[0-9a-f]+}}
!k = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = tensor>
func.func @prompt(%kp: memref<?x16x8x64xi8>, %q: memref<?x32x128xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %ks: memref<1xf32>, %o: memref<?x32x128xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x64xi8>) : !k
  pattn.paged_attention query(%q : memref<?x32x128xf16>) key(%k : !k) value(%k : !k)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>)
      k_scale(%ks : memref<1xf32>) v_scale(%ks : memref<1xf32>)
      outs(%o : memref<?x32x128xf16>) {num_heads = 32 : i64, max_query_len = 2048 : i64}
  return
}

// -----

// A table of more than 2048 entries keeps its single-block normalizer: each
// fold block would read all of it.
// CHECK-LABEL: func.func @guarded_large_table
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels::@pattn_scale_normalizer_{{[0-9a-f]+}} blocks in (%c1{{.*}}, %c1{{.*}}, %c1{{.*}})
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels::@pattn_fold_query_{{[0-9a-f]+}}
// CHECK: gpu.func @pattn_scale_normalizer_{{[0-9a-f]+}}
// CHECK:   gpu.barrier
// CHECK:   arith.extui %{{.*}} : i1 to i32
!kl = !pattn.cache<block_size = 16, kv_heads = 16, head_dim = 256, encoding = i4, scale = channel>
func.func @guarded_large_table(%kp: memref<?x16x16x128xi8>, %q: memref<?x16x256xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %ks: memref<16x256xf32>, %o: memref<?x16x256xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x16x128xi8>) : !kl
  pattn.paged_attention query(%q : memref<?x16x256xf16>) key(%k : !kl) value(%k : !kl)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) k_scale(%ks : memref<16x256xf32>)
      v_scale(%ks : memref<16x256xf32>) outs(%o : memref<?x16x256xf16>) {num_heads = 16 : i64}
  return
}

// -----

// A prompt's fold keeps the single-block normalizer, however small the
// table: each of the fold's (thousands of) blocks would reduce it again.
// CHECK-LABEL: func.func @prompt_fold
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels::@pattn_scale_normalizer_{{[0-9a-f]+}} blocks in (%c1{{.*}}, %c1{{.*}}, %c1{{.*}})
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels::@pattn_fold_query_{{[0-9a-f]+}} {{.*}} args(%{{.*}} : memref<?x8x64xf16>, %{{.*}} : memref<2x64xf32>, %{{.*}} : memref<?x8x64xf16>, %{{.*}} : memref<1xf32>, %{{.*}} : memref<?x8xi32>)
// CHECK: gpu.func @pattn_fold_query_{{[0-9a-f]+}}
// CHECK-NOT: gpu.barrier
// CHECK: gpu.return
!kp = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i4, scale = channel>
!vp = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f16, scale = none>
func.func @prompt_fold(%kp: memref<?x16x2x32xi8>, %vp: memref<?x16x2x128xi8>, %q: memref<?x8x64xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %qs: memref<?xi32>, %ks: memref<2x64xf32>, %o: memref<?x8x64xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x2x32xi8>) : !kp
  %v = pattn.bind_cache storage(%vp : memref<?x16x2x128xi8>) : !vp
  pattn.paged_attention query(%q : memref<?x8x64xf16>) key(%k : !kp) value(%v : !vp)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) query_start(%qs : memref<?xi32>) k_scale(%ks : memref<2x64xf32>)
      outs(%o : memref<?x8x64xf16>) {num_heads = 8 : i64, max_query_len = 2048 : i64}
  return
}

// -----

// N and the flag are fused into the fold only when every attention op that
// reads them has the fold's query (folded or not): here one reads the flag
// for another query, whose tokens the fold's launch does not cover, so the
// normalizer keeps its own launch.
// CHECK-LABEL: func.func @flag_for_another_query
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels::@pattn_scale_normalizer_{{[0-9a-f]+}}
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels::@pattn_fold_query_{{[0-9a-f]+}}
!kq = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i4, scale = channel>
!vq = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f16, scale = none>
func.func @flag_for_another_query(%kp: memref<?x16x2x32xi8>, %vp: memref<?x16x2x128xi8>, %q: memref<?x8x64xf16>, %q2: memref<?x8x64xf16>, %qf: memref<?x8x64xf16>, %e: memref<?x8xi32>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %ks: memref<2x64xf32>, %n: memref<1xf32>, %ok: memref<1xi32>, %o: memref<?x8x64xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x2x32xi8>) : !kq
  %v = pattn.bind_cache storage(%vp : memref<?x16x2x128xi8>) : !vq
  pattn.scale_normalizer scales(%ks : memref<2x64xf32>) outs(%n : memref<1xf32>) flag(%ok : memref<1xi32>) {softmax_scale = 1.250000e-01 : f32}
  pattn.fold_query query(%q : memref<?x8x64xf16>) scales(%ks : memref<2x64xf32>) normalizer(%n : memref<1xf32>) outs(%qf : memref<?x8x64xf16>) exponents(%e : memref<?x8xi32>) {num_heads = 8 : i64}
  pattn.paged_attention query(%q2 : memref<?x8x64xf16>) key(%k : !kq) value(%v : !vq)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) k_scale(%ks : memref<2x64xf32>)
      guard(%ok : memref<1xi32>) outs(%o : memref<?x8x64xf16>) {guard_value = 0 : i32, num_heads = 8 : i64}
  return
}

// -----

// A guarded pair (the fold's folded op, then its fallback) ends with one
// merge: it reads the flag and merges the workspace of the op that ran
// (1: the first's, 0: the second's; any other value: nothing), each in a
// branch of its own.
// CHECK-LABEL: func.func @pair_merge
// CHECK: gpu.func @pattn_merge_{{[0-9a-f]+}}(%[[G:.*]]: memref<1xi32>, %{{.*}}: memref<?x8x64xf16>, %[[O1:.*]]: memref<?x?x64xf32>, %[[S1:.*]]: memref<?x?x2xf32>, %[[O2:.*]]: memref<?x?x64xf32>, %[[S2:.*]]: memref<?x?x2xf32>)
// CHECK:   %[[F:.*]] = memref.load %[[G]][%c0] : memref<1xi32>
// CHECK:   %[[FIRST:.*]] = arith.cmpi eq, %[[F]], %c1_i32
// CHECK:   scf.if %[[FIRST]] {
// CHECK:     memref.dim %[[S1]]
// CHECK:     memref.load %[[O1]]
// CHECK:   %[[SECOND:.*]] = arith.cmpi eq, %[[F]], %c0_i32
// CHECK:   scf.if %[[SECOND]] {
// CHECK:     memref.dim %[[S2]]
// CHECK:     memref.load %[[O2]]
// CHECK:   gpu.return
!kp2 = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = i4, scale = channel>
!vp2 = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f16, scale = none>
func.func @pair_merge(%kp: memref<?x16x2x32xi8>, %vp: memref<?x16x2x128xi8>, %q: memref<?x8x64xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %ks: memref<2x64xf32>, %o: memref<?x8x64xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x2x32xi8>) : !kp2
  %v = pattn.bind_cache storage(%vp : memref<?x16x2x128xi8>) : !vp2
  pattn.paged_attention query(%q : memref<?x8x64xf16>) key(%k : !kp2) value(%v : !vp2)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>) k_scale(%ks : memref<2x64xf32>)
      outs(%o : memref<?x8x64xf16>) {num_heads = 8 : i64}
  return
}

// -----

// Two ops under one guard that write different outputs are not a pair:
// each keeps its own merge.
// CHECK-LABEL: func.func @guarded_other_outputs
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels::@pattn_decode_{{[0-9a-f]+}}
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels::@pattn_merge_{{[0-9a-f]+}}
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels::@pattn_decode_{{[0-9a-f]+}}
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels::@pattn_merge_{{[0-9a-f]+}}
!ko = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f16, scale = none>
func.func @guarded_other_outputs(%kp: memref<?x16x2x128xi8>, %q: memref<?x8x64xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %ok: memref<1xi32>, %o1: memref<?x8x64xf16>, %o2: memref<?x8x64xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x2x128xi8>) : !ko
  pattn.paged_attention query(%q : memref<?x8x64xf16>) key(%k : !ko) value(%k : !ko)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>)
      guard(%ok : memref<1xi32>) outs(%o1 : memref<?x8x64xf16>) {guard_value = 1 : i32, num_heads = 8 : i64}
  pattn.paged_attention query(%q : memref<?x8x64xf16>) key(%k : !ko) value(%k : !ko)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>)
      guard(%ok : memref<1xi32>) outs(%o2 : memref<?x8x64xf16>) {guard_value = 0 : i32, num_heads = 8 : i64}
  return
}

// -----

// Two guarded ops over queries of different tokens are not a pair.
// CHECK-LABEL: func.func @guarded_other_queries
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels::@pattn_decode_{{[0-9a-f]+}}
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels::@pattn_merge_{{[0-9a-f]+}}
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels::@pattn_decode_{{[0-9a-f]+}}
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels::@pattn_merge_{{[0-9a-f]+}}
!kq2 = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f16, scale = none>
func.func @guarded_other_queries(%kp: memref<?x16x2x128xi8>, %q: memref<?x8x64xf16>, %q2: memref<?x8x64xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %ok: memref<1xi32>, %o: memref<?x8x64xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x2x128xi8>) : !kq2
  pattn.paged_attention query(%q : memref<?x8x64xf16>) key(%k : !kq2) value(%k : !kq2)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>)
      guard(%ok : memref<1xi32>) outs(%o : memref<?x8x64xf16>) {guard_value = 1 : i32, num_heads = 8 : i64}
  pattn.paged_attention query(%q2 : memref<?x8x64xf16>) key(%k : !kq2) value(%k : !kq2)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>)
      guard(%ok : memref<1xi32>) outs(%o : memref<?x8x64xf16>) {guard_value = 0 : i32, num_heads = 8 : i64}
  return
}

// -----

// Three guarded ops in a row: the first two are a pair (one merge), the
// third, which would pair with the second, keeps its own decode and merge.
// CHECK-LABEL: func.func @guarded_three
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels::@pattn_decode_{{[0-9a-f]+}}
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels::@pattn_decode_{{[0-9a-f]+}}
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels::@pattn_merge_{{[0-9a-f]+}} {{.*}} args(%{{.*}} : memref<1xi32>, %{{.*}} : memref<?x8x64xf16>, %{{.*}} : memref<?x?x64xf32>, %{{.*}} : memref<?x?x2xf32>, %{{.*}} : memref<?x?x64xf32>, %{{.*}} : memref<?x?x2xf32>)
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels::@pattn_decode_{{[0-9a-f]+}}
// CHECK: gpu.launch_func async {{.*}} @pattn_kernels::@pattn_merge_{{[0-9a-f]+}} {{.*}} args(%{{.*}} : memref<1xi32>, %{{.*}} : memref<?x8x64xf16>, %{{.*}} : memref<?x?x64xf32>, %{{.*}} : memref<?x?x2xf32>)
!k3 = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64, encoding = f16, scale = none>
func.func @guarded_three(%kp: memref<?x16x2x128xi8>, %q: memref<?x8x64xf16>, %bt: memref<?x?xi32>, %sl: memref<?xi32>, %ok: memref<1xi32>, %o: memref<?x8x64xf16>) {
  %k = pattn.bind_cache storage(%kp : memref<?x16x2x128xi8>) : !k3
  pattn.paged_attention query(%q : memref<?x8x64xf16>) key(%k : !k3) value(%k : !k3)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>)
      guard(%ok : memref<1xi32>) outs(%o : memref<?x8x64xf16>) {guard_value = 1 : i32, num_heads = 8 : i64}
  pattn.paged_attention query(%q : memref<?x8x64xf16>) key(%k : !k3) value(%k : !k3)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>)
      guard(%ok : memref<1xi32>) outs(%o : memref<?x8x64xf16>) {guard_value = 0 : i32, num_heads = 8 : i64}
  pattn.paged_attention query(%q : memref<?x8x64xf16>) key(%k : !k3) value(%k : !k3)
      block_table(%bt : memref<?x?xi32>) seq_lens(%sl : memref<?xi32>)
      guard(%ok : memref<1xi32>) outs(%o : memref<?x8x64xf16>) {guard_value = 1 : i32, num_heads = 8 : i64}
  return
}

// -----

// head_dim 128, fp8: a lane writes a run of four channels, its values read
// as one 8-byte ld.global.v2 and its four codes stored as one 4-byte word,
// each where a uniform check of the buffer's address and strides allows it
// (element loads and byte stores otherwise). A channel-scaled row reads
// its four scales.
// CHECK-LABEL: gpu.func @pattn_write_cache_{{[0-9a-f]+}}(%{{.*}}: memref<?x1x128xbf16>
// CHECK:     memref.extract_aligned_pointer_as_index %{{.*}} : memref<?x1x128xbf16>
// CHECK:     %[[VALUES_OK:.*]] = arith.cmpi eq
// CHECK:     scf.if %[[VALUES_OK]] -> (f32, f32, f32, f32) {
// CHECK:       llvm.inline_asm has_side_effects "ld.global.v2.b32 {$0, $1}, [$2];", "=r,=r,l"
// CHECK:     } else {
// CHECK-COUNT-4: memref.load %{{.*}} : memref<?x1x128xbf16>
// CHECK:     nvvm.vote.sync any
// CHECK:     memref.extract_aligned_pointer_as_index %{{.*}} : memref<?x32x1x128xi8>
// CHECK:     %[[PAGES_OK:.*]] = arith.cmpi eq
// CHECK-COUNT-4: memref.load %{{.*}} : memref<1x128xf32>
// CHECK:       arith.shli %{{.*}}, %c24_i32 : i32
// CHECK:       scf.if %[[PAGES_OK]] {
// CHECK:         %[[WORD:.*]] = vector.from_elements %{{.*}} : vector<1xi32>
// CHECK:         %[[BYTES:.*]] = vector.bitcast %[[WORD]] : vector<1xi32> to vector<4xi8>
// CHECK:         vector.store %[[BYTES]], %{{.*}} {alignment = 4 : i64} : memref<?x32x1x128xi8>, vector<4xi8>
// CHECK:       } else {
// CHECK-COUNT-4: memref.store %{{.*}} : memref<?x32x1x128xi8>
!c8 = !pattn.cache<block_size = 32, kv_heads = 1, head_dim = 128, encoding = f8e4m3, scale = channel>
func.func @write_fp8_runs_of_four(%pages: memref<?x32x1x128xi8>, %v: memref<?x1x128xbf16>, %slots: memref<?xi64>, %s: memref<1x128xf32>) {
  %c = pattn.bind_cache storage(%pages : memref<?x32x1x128xi8>) : !c8
  pattn.write_cache values(%v : memref<?x1x128xbf16>) into(%c : !c8) slots(%slots : memref<?xi64>) scale(%s : memref<1x128xf32>)
  return
}

// -----

// i8 and i4 rows keep element pairs, element loads and byte stores at any
// head_dim (their kernels are bound by instruction issue, and packing
// codes into words measured slower): no alignment checks, no vectors. The
// tensor scale is read once, before the rows.
// CHECK-LABEL: gpu.func @pattn_write_cache_{{[0-9a-f]+}}(%{{.*}}: memref<?x4x128xf16>
// CHECK-NEXT:  %{{.*}} = arith.constant 0 : index
// CHECK-NEXT:  %{{.*}} = memref.load %{{.*}} : memref<1xf32>
// CHECK-NOT:   memref.extract_aligned_pointer_as_index
// CHECK-NOT:   vector.store
// CHECK:       gpu.return
!i8c = !pattn.cache<block_size = 16, kv_heads = 4, head_dim = 128, encoding = i8, scale = tensor>
func.func @write_i8_pairs(%pages: memref<?x16x4x128xi8>, %v: memref<?x4x128xf16>, %slots: memref<?xi64>, %s: memref<1xf32>) {
  %c = pattn.bind_cache storage(%pages : memref<?x16x4x128xi8>) : !i8c
  pattn.write_cache values(%v : memref<?x4x128xf16>) into(%c : !i8c) slots(%slots : memref<?xi64>) scale(%s : memref<1xf32>)
  return
}

// -----

// nvfp4 at head_dim 128: a lane takes a whole group (16 channels), a row
// 8 lanes, so a warp step covers 4 rows and a warp 8 (32 a block). Each
// lane computes its group's scale alone (no shuffles), reads its 32 bytes
// of values as two ld.global.v4 and stores its 8 bytes of codes as one.
// CHECK-LABEL: func.func @write_nvfp4_groups
// CHECK:       %[[ROWS:.*]] = arith.muli %{{.*}}, %c8{{.*}} : index
// CHECK:       arith.addi %[[ROWS]], %c31 : index
// CHECK:       arith.divsi %{{.*}}, %c32{{.*}} : index
// CHECK-LABEL: gpu.func @pattn_write_cache_{{[0-9a-f]+}}(%{{.*}}: memref<?x8x128xf16>
// CHECK-NOT:   gpu.shuffle
// CHECK-COUNT-2: llvm.inline_asm has_side_effects "ld.global.v4.b32 {$0, $1, $2, $3}, [$4];"
// CHECK-NOT:   gpu.shuffle
// CHECK:       vector.store %{{.*}} {alignment = 8 : i64} : memref<?x16x8x64xi8>, vector<8xi8>
// CHECK-NOT:   gpu.shuffle
// CHECK:       gpu.return
!n4 = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = nvfp4, scale = tensor>
func.func @write_nvfp4_groups(%pages: memref<?x16x8x64xi8>, %g: memref<?x16x8x8xf8E4M3FN>, %v: memref<?x8x128xf16>, %slots: memref<?xi64>, %s: memref<1xf32>) {
  %c = pattn.bind_cache storage(%pages : memref<?x16x8x64xi8>) group_scales(%g : memref<?x16x8x8xf8E4M3FN>) : !n4
  pattn.write_cache values(%v : memref<?x8x128xf16>) into(%c : !n4) slots(%slots : memref<?xi64>) scale(%s : memref<1xf32>)
  return
}
