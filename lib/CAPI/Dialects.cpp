//===- Dialects.cpp - C API of the pattn dialect and passes ---------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// Implements include/pattn-c/Dialects.h over the C++ API. The pass
// constructors and registration functions are TableGen's; they wrap the
// same create* functions the C++ pipeline builders call.
//
//===----------------------------------------------------------------------===//

#include "pattn-c/Dialects.h"
#include "pattn/Conversion/Passes.h"
#include "pattn/Dialect/PAttn/IR/PAttnDialect.h"
#include "pattn/Dialect/PAttn/Transforms/Passes.h"
#include "pattn/InitAll.h"
#include "pattn/Pipelines/Pipelines.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Pass.h"
#include "mlir/CAPI/Registration.h"

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(PAttn, pattn, pattn::PAttnDialect)

void pattnRegisterAllDialects(MlirDialectRegistry registry) {
  pattn::registerAllDialects(*unwrap(registry));
}

void pattnRegisterAllPasses(void) {
  // MLIR refuses to register a pipeline name twice; a second call is a
  // no-op.
  static const bool registered = [] {
    pattn::registerPasses();
    pattn::registerConversionPasses();
    pattn::registerCompilePipeline();
    return true;
  }();
  (void)registered;
}

// The per-pass registration functions that the generated C API calls.
namespace pattn {
#define GEN_PASS_REGISTRATION
#include "pattn/Dialect/PAttn/Transforms/Passes.h.inc"
} // namespace pattn

using namespace pattn;

#include "pattn/Conversion/Passes.capi.cpp.inc"
#include "pattn/Dialect/PAttn/Transforms/Passes.capi.cpp.inc"
