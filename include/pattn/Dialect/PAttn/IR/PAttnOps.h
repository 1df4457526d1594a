//===- PAttnOps.h - pattn operations ----------------------------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_DIALECT_PATTN_IR_PATTNOPS_H
#define PATTN_DIALECT_PATTN_IR_PATTNOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "pattn/Dialect/PAttn/IR/BufferRules.h"
#include "pattn/Dialect/PAttn/IR/PAttnDialect.h"

namespace pattn {
/// The most query tokens per sequence (`max_query_len`) of a
/// pattn.paged_attention: a prompt or a chunk of one, up to 32K tokens
/// (the prefill lowering's bound; longer prompts are chunked by the caller).
inline constexpr int64_t kMaxPromptTokens = 32768;
/// The most query tokens per sequence of a pattn.mla_decode (speculative
/// decode); the speculative-decode bound of the XQA kernels as well.
inline constexpr int64_t kMaxSpeculativeTokens = 8;
} // namespace pattn

#define GET_OP_CLASSES
#include "pattn/Dialect/PAttn/IR/PAttnOps.h.inc"

#endif // PATTN_DIALECT_PATTN_IR_PATTNOPS_H
