/*===- Dialects.h - C API of the pattn dialect and passes ---------*- C -*-===*\
|*                                                                            *|
|* Part of the pattn project.                                                 *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/
/*
 * The C API that MLIR's own dialects offer, for pattn: a dialect handle
 * (so that bindings and C hosts can register and load the dialect in their
 * context), the registration of every pattn pass and pipeline, and one call
 * that inserts every dialect pattn's pipeline uses. The pass constructors
 * (mlirCreatePAttn<Pass>) and per-pass registration come from TableGen.
 *
 *   MlirDialectRegistry registry = mlirDialectRegistryCreate();
 *   pattnRegisterAllDialects(registry);
 *   MlirContext context = mlirContextCreateWithRegistry(registry, false);
 *   pattnRegisterAllPasses();
 *   // mlirParsePassPipeline(...,
 * "builtin.module(pattn-fold-and-select{chip=sm_90a})")
 */

#ifndef PATTN_C_DIALECTS_H
#define PATTN_C_DIALECTS_H

#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"
#include "mlir-c/Support.h"

#ifdef __cplusplus
extern "C" {
#endif

/* mlirGetDialectHandle__pattn__() */
MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(PAttn, pattn);

/* Inserts the pattn dialect and every dialect, interface and translation
 * that pattn's compile pipeline parses or produces
 * (pattn::registerAllDialects).
 */
MLIR_CAPI_EXPORTED void pattnRegisterAllDialects(MlirDialectRegistry registry);

/* Registers pattn's passes and pipelines globally, for pipeline strings:
 * pattn-fold-channel-scales, pattn-select-backend, pattn-plan-decode,
 * convert-pattn-to-gpu, pattn-extern-dynamic-shared-memory,
 * pattn-fold-and-select and pattn-compile. Upstream's passes are the
 * host's to register (mlirRegisterAllPasses). */
MLIR_CAPI_EXPORTED void pattnRegisterAllPasses(void);

#ifdef __cplusplus
}
#endif

#include "pattn/Conversion/Passes.capi.h.inc"
#include "pattn/Dialect/PAttn/Transforms/Passes.capi.h.inc"

#endif /* PATTN_C_DIALECTS_H */
