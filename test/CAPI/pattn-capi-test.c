/*===- pattn-capi-test.c - pattn from MLIR's C API
---------------------------===*\
|*                                                                            *|
|* Part of the pattn project.                                                 *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/
/*
 * A C host: registers pattn through its dialect handle, parses a decode step,
 * runs the fold (a TableGen'd pass constructor) and the selector (from a
 * pipeline string, after pattnRegisterAllPasses) and prints the result for
 * FileCheck (test/CAPI/capi.mlir).
 */

#include "pattn-c/Dialects.h"

#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"

#include <stdio.h>
#include <stdlib.h>

static void printToStdout(MlirStringRef text, void *userData) {
  (void)userData;
  fwrite(text.data, 1, text.length, stdout);
}

static void printToStderr(MlirStringRef text, void *userData) {
  (void)userData;
  fwrite(text.data, 1, text.length, stderr);
}

static const char *kDecodeStep =
    "!k = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64,\n"
    "                  encoding = i4, scale = channel>\n"
    "!v = !pattn.cache<block_size = 16, kv_heads = 2, head_dim = 64,\n"
    "                  encoding = i8, scale = tensor>\n"
    "func.func @decode(%kp: memref<?x16x2x32xi8>, %vp: memref<?x16x2x64xi8>,\n"
    "    %q: memref<1x8x64xf16>, %bt: memref<1x4xi32>, %lens: memref<1xi32>,\n"
    "    %ks: memref<2x64xf32>, %vs: memref<1xf32>, %out: memref<1x8x64xf16>) "
    "{\n"
    "  %k = pattn.bind_cache storage(%kp : memref<?x16x2x32xi8>) : !k\n"
    "  %v = pattn.bind_cache storage(%vp : memref<?x16x2x64xi8>) : !v\n"
    "  pattn.paged_attention query(%q : memref<1x8x64xf16>) key(%k : !k)\n"
    "      value(%v : !v) block_table(%bt : memref<1x4xi32>)\n"
    "      seq_lens(%lens : memref<1xi32>) k_scale(%ks : memref<2x64xf32>)\n"
    "      v_scale(%vs : memref<1xf32>) outs(%out : memref<1x8x64xf16>)\n"
    "      {num_heads = 8 : i64}\n"
    "  return\n"
    "}\n";

int main(void) {
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  pattnRegisterAllDialects(registry);
  MlirContext context = mlirContextCreateWithRegistry(registry, false);
  mlirDialectRegistryDestroy(registry);

  MlirDialect dialect =
      mlirDialectHandleLoadDialect(mlirGetDialectHandle__pattn__(), context);
  MlirStringRef name = mlirDialectGetNamespace(dialect);
  printf("dialect: %.*s\n", (int)name.length, name.data);

  MlirModule module = mlirModuleCreateParse(
      context, mlirStringRefCreateFromCString(kDecodeStep));
  if (mlirModuleIsNull(module)) {
    fprintf(stderr, "cannot parse the decode step\n");
    return 1;
  }

  pattnRegisterAllPasses();
  pattnRegisterAllPasses(); /* a second call changes nothing */
  MlirPassManager pm = mlirPassManagerCreate(context);
  MlirOpPassManager top = mlirPassManagerGetAsOpPassManager(pm);
  mlirOpPassManagerAddOwnedPass(top, mlirCreatePAttnPAttnFoldChannelScales());
  MlirLogicalResult parsed = mlirOpPassManagerAddPipeline(
      top,
      mlirStringRefCreateFromCString(
          "func.func(pattn-select-backend{chips=sm_90a})"),
      printToStderr, NULL);
  if (mlirLogicalResultIsFailure(parsed)) {
    fprintf(stderr, "\ncannot parse the pipeline\n");
    return 1;
  }
  if (mlirLogicalResultIsFailure(
          mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(module)))) {
    fprintf(stderr, "the passes failed\n");
    return 1;
  }
  mlirOperationPrint(mlirModuleGetOperation(module), printToStdout, NULL);
  printf("\n");

  mlirPassManagerDestroy(pm);
  mlirModuleDestroy(module);
  mlirContextDestroy(context);
  return 0;
}
