// Every bundled example parses, verifies, prints and parses back.
// RUN: pattn-opt %S/../../examples/decode_int4.mlir | pattn-opt | FileCheck %s --check-prefix=INT4
// RUN: pattn-opt %S/../../examples/decode_nvfp4_hnd.mlir | pattn-opt | FileCheck %s --check-prefix=NVFP4
// RUN: pattn-opt %S/../../examples/mla_nvfp4.mlir | pattn-opt | FileCheck %s --check-prefix=MLA

// INT4-LABEL: func.func @decode_step
// INT4-COUNT-2: pattn.bind_cache
// INT4-COUNT-2: pattn.write_cache
// INT4: pattn.paged_attention {{.*}} k_scale({{.*}} : memref<8x128xf32>) v_scale({{.*}} : memref<1xf32>)

// NVFP4-LABEL: func.func @decode_sliding
// NVFP4: pattn.bind_cache {{.*}} group_scales({{.*}}) token_scales({{.*}}) : !pattn.cache<{{.*}}encoding = nvfp4, scale = token, layout = hnd>
// NVFP4: pattn.paged_attention {{.*}} sinks({{.*}} : memref<64xf32>)
// NVFP4-SAME: num_heads = 64 : i64, softcap = 3.000000e+01 : f32, window = 4096 : i64

// MLA-LABEL: func.func @mla_step
// MLA: pattn.write_record
// MLA: pattn.mla_decode {{.*}} !pattn.record<nvfp4_ds_mla_fp8_rope, token>
