// Forced modes, chips, and the printed table.
// RUN: pattn-opt %s --pattn-select-backend="chips=sm_90a force=portable" --verify-diagnostics=only-expected --split-input-file | FileCheck %s --check-prefix=PORTABLE
// RUN: not pattn-opt %s --pattn-select-backend="chips=sm_120a force=xqa" --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=XQA
// RUN: not pattn-opt %s --pattn-select-backend="chips=sm_75" 2>&1 | FileCheck %s --check-prefix=SM75
// RUN: not pattn-opt %s --pattn-select-backend="chips=h100" 2>&1 | FileCheck %s --check-prefix=BOGUS
// RUN: not pattn-opt %s --pattn-select-backend="chips=sm_90a,sm_90a" 2>&1 | FileCheck %s --check-prefix=TWICE
// Without chips, the chips pattn-compile builds for by default; an op gets
// xqa only where every one of them can run it.
// RUN: pattn-opt %s --split-input-file --pattn-select-backend -o /dev/null 2>&1 | FileCheck %s --check-prefix=DEFAULT
// RUN: not pattn-opt %s --pattn-select-backend="chips=sm_90a force=bogus" 2>&1 | FileCheck %s --check-prefix=FORCE
// RUN: not pattn-opt %s --pattn-fold-and-select="chips=sm_90a force=bogus" 2>&1 | FileCheck %s --check-prefix=FORCE
// RUN: pattn-opt %s --pattn-select-backend="chips=sm_80 print-table=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TABLE
// Every supported chip is accepted; NVFP4 and FP8 are XQA-eligible on each
// (hardware conversion where the chip has it, bit tricks elsewhere).
// RUN: for chip in sm_80 sm_86 sm_87 sm_89 sm_90 sm_90a sm_100 sm_100a sm_120 sm_120a; do pattn-opt %s --split-input-file --pattn-select-backend="chips=$chip" 2>&1 | FileCheck %s --check-prefix=CHIPS -DCHIP=$chip; done

// PORTABLE: pattn.paged_attention {{.*}}backend = #pattn.backend<portable>
// PORTABLE: pattn.paged_attention {{.*}}backend = #pattn.backend<portable>

// XQA: remark: xqa: eligible on sm_120a
// XQA: error: force=xqa, but the op is not eligible for XQA on sm_120a: head_dim 80 not in {64, 128, 256}

// Option errors name the pass, the option and the allowed values, and do
// not print the module.
// SM75: error: pattn-select-backend: chips: unsupported chip 'sm_75'; supported chips: sm_80, sm_86, sm_87, sm_89, sm_90, sm_90a, sm_100, sm_100a, sm_120, sm_120a
// SM75-NOT: see current operation
// BOGUS: error: pattn-select-backend: chips: unsupported chip 'h100'; supported chips: sm_80,
// TWICE: error: pattn-select-backend: chips: chip 'sm_90a' named twice
// DEFAULT: remark: xqa: eligible on sm_80, sm_86, sm_89, sm_90a, sm_100a, sm_120a
// FORCE: error: pattn-select-backend: unknown force='bogus'; expected auto, xqa or portable
// FORCE-NOT: see current operation

// TABLE: | condition | pattn XQA | ONNX Runtime XQA (anchor) |
// TABLE: | head_dim | 64, 128, 256 | 64/128/256; INT4: 256 only |
// TABLE: | softcap | supported | not supported on XQA |
// TABLE: | MLA: query | bf16 | no MLA |
// TABLE: | MLA: shared memory | the tile fits the chip (asked of the XQA MLA family, which knows its layout) | no MLA |

// CHIPS: remark: xqa: eligible on [[CHIP]]
// CHIPS: remark: portable: head_dim 80 not in

!kc = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = nvfp4, scale = tensor>
!vc = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128, encoding = f8e4m3, scale = tensor>
func.func @eligible(%k: !kc, %v: !vc, %q: memref<2x32x128xf16>, %bt: memref<2x8xi32>, %sl: memref<2xi32>, %ks: memref<1xf32>, %vs: memref<1xf32>, %o: memref<2x32x128xf16>) {
  // expected-remark @below {{portable: forced}}
  pattn.paged_attention query(%q : memref<2x32x128xf16>) key(%k : !kc) value(%v : !vc)
      block_table(%bt : memref<2x8xi32>) seq_lens(%sl : memref<2xi32>)
      k_scale(%ks : memref<1xf32>) v_scale(%vs : memref<1xf32>) outs(%o : memref<2x32x128xf16>) {num_heads = 32 : i64}
  return
}

// -----

!c = !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 80, encoding = f16, scale = none>
func.func @ineligible(%k: !c, %q: memref<2x32x80xf16>, %bt: memref<2x8xi32>, %sl: memref<2xi32>, %o: memref<2x32x80xf16>) {
  // expected-remark @below {{portable: forced}}
  pattn.paged_attention query(%q : memref<2x32x80xf16>) key(%k : !c) value(%k : !c)
      block_table(%bt : memref<2x8xi32>) seq_lens(%sl : memref<2xi32>) outs(%o : memref<2x32x80xf16>) {num_heads = 32 : i64}
  return
}
