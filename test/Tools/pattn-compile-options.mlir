// pattn-compile's options reach the one pipeline builder
// (pattn::buildCompilePipeline): --emit=mlir runs its pattn part (the fold,
// pattn-select-backend, convert-pattn-to-gpu); --backend and --fold change
// what those passes do; a bad option is an error with exit status 1.

// RUN: pattn-compile %s --chips=sm_80 --emit=mlir | FileCheck %s
// RUN: pattn-compile %s --chips=sm_80 --emit=mlir --remarks --backend=auto -o /dev/null 2>&1 | FileCheck %s --check-prefix=AUTO
// RUN: pattn-compile %s --chips=sm_80 --emit=mlir --remarks --backend=xqa -o /dev/null 2>&1 | FileCheck %s --check-prefix=AUTO
// RUN: pattn-compile %s --chips=sm_80 --emit=mlir --remarks --backend=portable -o /dev/null 2>&1 | FileCheck %s --check-prefix=PORTABLE
// RUN: pattn-compile %s --chips=sm_80 --emit=mlir --backend=portable | FileCheck %s --check-prefix=PORTABLE-IR
// RUN: pattn-compile %s --chips=sm_80 --emit=mlir --fold=false | FileCheck %s --check-prefix=NOFOLD
// RUN: pattn-compile %s --chips=sm_80 --emit=mlir --fold=false --remarks --backend=auto -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOFOLD-REMARK
// RUN: not pattn-compile %s --chips=sm_80 --emit=mlir --fold=false --backend=xqa -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOFOLD-XQA
// RUN: not pattn-compile %s --chips=sm_80 --emit=mlir --backend=bogus -o /dev/null 2>&1 | FileCheck %s --check-prefix=BOGUS
// RUN: not pattn-compile %s --chips=sm_80 --emit=llvm --backend=bogus -o /dev/null 2>&1 | FileCheck %s --check-prefix=BOGUS
// RUN: not pattn-compile %s --chips=sm_75 --emit=mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=SM75

// pattn-opt's --pattn-compile is the same builder: bad options fail, and the
// pipeline lowers NVGPU ops before the rest of the GPU dialect to NVVM.
// RUN: not pattn-opt %s --pattn-compile="chips=sm_80 backend=bogus" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BOGUS
// RUN: not pattn-compile %s --chips=sm_80 --emit=mlir --prompt-kernel=tiles -o /dev/null 2>&1 | FileCheck %s --check-prefix=PROMPT-KERNEL
// RUN: echo "" | pattn-opt --pattn-compile="chips=sm_80 prompt-kernel=prefill" --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=PIPELINE-PREFILL
// RUN: not pattn-opt %s --pattn-compile="chips=sm_75" -o /dev/null 2>&1 | FileCheck %s --check-prefix=SM75
// RUN: echo "" | pattn-opt --pattn-compile="chips=sm_80 format=isa" --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=PIPELINE
// RUN: echo "" | pattn-opt --pattn-compile="chips=sm_80 backend=portable fold=false" --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=PIPELINE-NOFOLD

// A static K channel table: its normalizer computed at compile time, the
// query folded row by row on the device (by the XQA decode itself: no fold
// launch), then XQA-eligible on sm_80, which the default backend (auto)
// takes.
// CHECK-NOT: pattn.
// CHECK: memref.global "private" constant @__pattn_k_normalizer
// CHECK-LABEL: func.func @static_table
// CHECK-NOT: pattn.
// CHECK-NOT: @pattn_fold_query_
// CHECK: gpu.launch_func {{.*}}@pattn_kernels::@pattn_xqa_decode_
// CHECK: gpu.launch_func {{.*}}@pattn_kernels::@pattn_merge_
// CHECK-NOT: pattn.
// CHECK: gpu.module @pattn_kernels [#nvvm.target<{{.*}}chip = "sm_80"
// CHECK-NOT: pattn.

// AUTO: remark: xqa: eligible on sm_80
// PORTABLE: remark: portable: forced
// PORTABLE-IR-LABEL: func.func @static_table
// PORTABLE-IR: gpu.launch_func {{.*}}@pattn_kernels::@pattn_decode_
// PORTABLE-IR-NOT: pattn_xqa_decode

// Unfolded, the table makes the op portable and no fold kernel runs.
// NOFOLD-NOT: __pattn_k_scale_over_n
// NOFOLD-LABEL: func.func @static_table
// NOFOLD-NOT: pattn_fold_query
// NOFOLD: gpu.launch_func {{.*}}@pattn_kernels::@pattn_decode_
// NOFOLD-NOT: pattn_fold_query
// NOFOLD-REMARK: remark: portable: K channel scales not folded
// NOFOLD-XQA: error: force=xqa, but the op is not eligible for XQA on sm_80: K channel scales not folded

// BOGUS: pattn-compile: unknown backend 'bogus'; expected auto, xqa or portable
// PROMPT-KERNEL: pattn-compile: unknown prompt-kernel 'tiles'; expected prefill, prefill-mma-sync, prefill-wgmma or xqa
// PIPELINE-PREFILL: pattn-plan-decode{chips={sm_80} {{.*}}prompt-kernel=prefill
// SM75: pattn-compile: unsupported chip 'sm_75'; supported chips: sm_80,

// PIPELINE: builtin.module(
// PIPELINE-NEXT: pattn-fold-channel-scales,
// PIPELINE-NEXT: pattn-select-backend{chips={sm_80} force=auto
// PIPELINE: convert-pattn-to-gpu{chips={sm_80}
// PIPELINE: gpu.module(
// PIPELINE: convert-nvgpu-to-nvvm,
// PIPELINE-NEXT: convert-gpu-to-nvvm
// PIPELINE: gpu-module-to-binary{format=isa

// PIPELINE-NOFOLD: builtin.module(
// PIPELINE-NOFOLD-NEXT: pattn-select-backend{chips={sm_80} force=portable
// PIPELINE-NOFOLD-NOT: pattn-fold-channel-scales

memref.global "private" constant @k_scale : memref<8x128xf32> = dense<0.05>
!kc = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i4, scale = channel>
!vc = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = i8, scale = tensor>
func.func @static_table(%kp: memref<?x16x8x64xi8>, %vp: memref<?x16x8x128xi8>, %q: memref<4x32x128xf16>, %bt: memref<4x8xi32>, %sl: memref<4xi32>, %vs: memref<1xf32>, %o: memref<4x32x128xf16>) {
  %ks = memref.get_global @k_scale : memref<8x128xf32>
  %k = pattn.bind_cache storage(%kp : memref<?x16x8x64xi8>) : !kc
  %v = pattn.bind_cache storage(%vp : memref<?x16x8x128xi8>) : !vc
  pattn.paged_attention query(%q : memref<4x32x128xf16>) key(%k : !kc) value(%v : !vc)
      block_table(%bt : memref<4x8xi32>) seq_lens(%sl : memref<4xi32>)
      k_scale(%ks : memref<8x128xf32>) v_scale(%vs : memref<1xf32>) outs(%o : memref<4x32x128xf16>) {num_heads = 32 : i64}
  return
}
