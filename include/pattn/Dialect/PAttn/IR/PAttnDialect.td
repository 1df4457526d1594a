//===- PAttnDialect.td - pattn dialect definition ----------*- tablegen -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_DIALECT_PATTN_IR_PATTNDIALECT_TD
#define PATTN_DIALECT_PATTN_IR_PATTNDIALECT_TD

include "mlir/IR/OpBase.td"

def PAttn_Dialect : Dialect {
  let name = "pattn";
  let cppNamespace = "::pattn";
  let summary = "Paged attention over quantized KV caches";
  let description = [{
    The `pattn` dialect describes LLM decode attention over paged KV caches
    whose storage is quantized. The quantization lives in the types: a
    `!pattn.cache` says how a page row is encoded (f16, bf16, i8, f8e4m3,
    f8e5m2, i4, nvfp4) and at which granularity its scale applies, and a
    `!pattn.record` describes a fixed-size per-token record (the DeepSeek MLA
    formats) lane by lane. Ops have buffer semantics: they read and write
    memrefs in destination-passing style.

    ```mlir
    %k = pattn.bind_cache storage(%ks : memref<?x16x8x64xi8>)
        : !pattn.cache<block_size = 16, kv_heads = 8, head_dim = 128,
                       encoding = i4, scale = channel>
    ```
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

// Every memref operand's static size fits 64-bit byte offsets
// (pattn/Dialect/PAttn/IR/BufferRules.h).
def PAttn_BuffersFitInt64 : NativeOpTrait<"BuffersFitInt64"> {
  let cppNamespace = "::pattn";
}

class PAttn_Op<string mnemonic, list<Trait> traits = []>
    : Op<PAttn_Dialect, mnemonic, !listconcat(traits, [PAttn_BuffersFitInt64])>;

#endif // PATTN_DIALECT_PATTN_IR_PATTNDIALECT_TD
