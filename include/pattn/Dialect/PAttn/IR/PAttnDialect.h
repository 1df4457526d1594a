//===- PAttnDialect.h - pattn dialect, attributes and types -----*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// Declares the pattn dialect with its enums, attributes and types. Ops are in
// PAttnOps.h.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_DIALECT_PATTN_IR_PATTNDIALECT_H
#define PATTN_DIALECT_PATTN_IR_PATTNDIALECT_H

#include "pattn/Numerics/EncodingTable.h"
#include "pattn/Target/TargetDescription.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"

#include <cstdint>

namespace pattn {
/// SPEC §3's size limits, enforced by the verifiers. Within them every byte
/// size the compiler derives (rows, records, tiles, shared memory) fits
/// comfortably in 32 bits, and every accepted shape compiles for every chip.
inline constexpr int64_t kMaxHeadDim = 1024;
inline constexpr int64_t kMaxBlockSize = 4096;
inline constexpr int64_t kMaxHeads = 4096; ///< kv_heads and num_heads
inline constexpr int64_t kMaxRecordBytes = 4096;
} // namespace pattn

#include "pattn/Dialect/PAttn/IR/PAttnDialect.h.inc"
#include "pattn/Dialect/PAttn/IR/PAttnEnums.h.inc"

namespace pattn {
/// The numerics library's encoding for an IR encoding: the one place the two
/// enums meet (a switch over every enumerator, without a default).
numerics::Encoding toNumerics(Encoding encoding);
/// The encoding table's row of an IR encoding (SPEC §2).
const numerics::EncodingInfo &encodingInfo(Encoding encoding);

/// A plan's `targets`: `[sm_80, sm_90a]` (at least one chip, none twice).
mlir::FailureOr<llvm::SmallVector<Chip>>
parseChipListParameter(mlir::AsmParser &parser);
void printChipListParameter(mlir::AsmPrinter &printer,
                            llvm::ArrayRef<Chip> chips);
/// A plan's per-target counts: `[4, 2]`.
mlir::FailureOr<llvm::SmallVector<int64_t>>
parseIntListParameter(mlir::AsmParser &parser);
void printIntListParameter(mlir::AsmPrinter &printer,
                           llvm::ArrayRef<int64_t> values);
} // namespace pattn

#define GET_ATTRDEF_CLASSES
#include "pattn/Dialect/PAttn/IR/PAttnAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "pattn/Dialect/PAttn/IR/PAttnTypes.h.inc"

#endif // PATTN_DIALECT_PATTN_IR_PATTNDIALECT_H
