// The C API: a C program (pattn-capi-test.c) registers pattn through
// mlirGetDialectHandle__pattn__, runs the fold
// (mlirCreatePAttnPAttnFoldChannelScales) and the selector nested in
// func.func (from a pipeline string after pattnRegisterAllPasses, called
// twice), and prints the module.
//
// RUN: pattn-capi-test 2>&1 | FileCheck %s

// CHECK: dialect: pattn
// CHECK: pattn.scale_normalizer
// CHECK: pattn.fold_query
// CHECK: pattn.paged_attention
// CHECK-SAME: query_exponents
// CHECK-SAME: backend = #pattn.backend<xqa>, guard_value = 1
// CHECK: pattn.paged_attention
// CHECK-SAME: backend = #pattn.backend<portable>, guard_value = 0
