// pattn-opt registers the NVVM target model, the convert-to-LLVM interfaces
// and the LLVM IR translations, so the upstream GPU serialization runs from
// it for every chip pattn supports (SPEC §1: sm_100a needs PTX >= 8.6 and
// sm_120a PTX >= 8.7).
// RUN: pattn-opt %s --nvvm-attach-target='chip=sm_80 features=+ptx80' --convert-gpu-to-nvvm --reconcile-unrealized-casts --gpu-module-to-binary=format=isa | FileCheck %s --check-prefixes=CHECK,SM80
// RUN: pattn-opt %s --nvvm-attach-target='chip=sm_86 features=+ptx80' --convert-gpu-to-nvvm --reconcile-unrealized-casts --gpu-module-to-binary=format=isa | FileCheck %s --check-prefixes=CHECK,SM86
// RUN: pattn-opt %s --nvvm-attach-target='chip=sm_89 features=+ptx80' --convert-gpu-to-nvvm --reconcile-unrealized-casts --gpu-module-to-binary=format=isa | FileCheck %s --check-prefixes=CHECK,SM89
// RUN: pattn-opt %s --nvvm-attach-target='chip=sm_90a features=+ptx80' --convert-gpu-to-nvvm --reconcile-unrealized-casts --gpu-module-to-binary=format=isa | FileCheck %s --check-prefixes=CHECK,SM90A
// RUN: pattn-opt %s --nvvm-attach-target='chip=sm_100a features=+ptx86' --convert-gpu-to-nvvm --reconcile-unrealized-casts --gpu-module-to-binary=format=isa | FileCheck %s --check-prefixes=CHECK,SM100A
// RUN: pattn-opt %s --nvvm-attach-target='chip=sm_120a features=+ptx87' --convert-gpu-to-nvvm --reconcile-unrealized-casts --gpu-module-to-binary=format=isa | FileCheck %s --check-prefixes=CHECK,SM120A

// CHECK: gpu.binary @kernels
// SM80: .target sm_80
// SM86: .target sm_86
// SM89: .target sm_89
// SM90A: .target sm_90a
// SM100A: .version 8.6
// SM100A: .target sm_100a
// SM120A: .version 8.7
// SM120A: .target sm_120a
// CHECK: .entry scale
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @scale(%data: memref<256xf32>, %factor: f32) kernel {
      %i = gpu.thread_id x
      %x = memref.load %data[%i] : memref<256xf32>
      %y = arith.mulf %x, %factor : f32
      memref.store %y, %data[%i] : memref<256xf32>
      gpu.return
    }
  }
}
