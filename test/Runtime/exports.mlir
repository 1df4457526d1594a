// libpattn_runtime.so exports pattn's API and nothing else: no libstdc++
// (which it links statically) and no mgpu* names, which MLIR's own CUDA
// runtime exports too; artifacts call the pattnMgpu* launcher instead.
//
// RUN: llvm-nm -D --defined-only --format=just-symbols %pattn_lib_dir/libpattn_runtime.so | FileCheck %s --check-prefix=API
// RUN: llvm-nm -D --defined-only --format=just-symbols %pattn_lib_dir/libpattn_runtime.so | not grep -v -E "^(_mlir_ciface_)?pattn"
//
// API-DAG: pattnMgpuLaunchKernel
// API-DAG: pattnMgpuModuleLoad
// API-DAG: pattnMgpuMemAlloc
// API-DAG: pattnRuntimeTakeStatus
// API-DAG: pattnRuntimeDeviceArch
//
// An artifact's undefined symbols name the renamed launcher:
// REQUIRES: ptxas
// RUN: pattn-compile %S/../../examples/decode_int4.mlir --chips=sm_80 -o %t.so
// RUN: llvm-nm -D --undefined-only --format=just-symbols %t.so | FileCheck %s --check-prefix=ARTIFACT
// ARTIFACT-NOT: {{^mgpu}}
// ARTIFACT: pattnMgpuLaunchKernel
// ARTIFACT-NOT: {{^mgpu}}
