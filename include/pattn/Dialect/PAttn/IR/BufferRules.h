//===- BufferRules.h - Rules every pattn buffer operand keeps ---*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// Rules about the memrefs pattn ops take that do not depend on the op: a
// buffer's static size must fit the 64-bit byte offsets the lowering and the
// runtime compute with (the BuffersFitInt64 trait every pattn op carries,
// and pattn-compile's check of entry arguments), and two bindings of
// overlapping bytes must give them the same cache type.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_DIALECT_PATTN_IR_BUFFERRULES_H
#define PATTN_DIALECT_PATTN_IR_BUFFERRULES_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"

namespace pattn {

/// Whether the static dimensions of `type` alone span more bytes than an
/// int64 holds (2^63 - 1): such a buffer cannot exist, and its sizes and
/// byte offsets would wrap in the generated code. Dynamic dimensions are
/// checked by the runtime at launch.
bool exceedsInt64Bytes(mlir::MemRefType type);

/// Whether `type` holds pages the lowering can address: contiguous (the
/// identity layout), or page-strided: `strided<[S, ...], offset: O>` with
/// every stride but the outermost the row-major one, a static outermost
/// stride S of at least one page (product of the inner sizes, all static)
/// and a static offset O, S and O elements multiples of 16 bytes.
/// A page-strided buffer is one page of a larger record per block, as K or
/// V of an engine's `[blocks, 2, block_size, heads, head_dim]` allocation.
bool hasPagedLayout(mlir::MemRefType type);

/// Whether `type` is page-strided (hasPagedLayout, not the identity).
bool isPageStrided(mlir::MemRefType type);

/// The distance between pages (outermost index) in elements: the outermost
/// stride of a page-strided `type`, the product of the inner sizes of a
/// contiguous one (which must be static).
int64_t pageStrideElements(mlir::MemRefType type);

/// Fails, naming the operand, when a memref operand of `op` exceeds the
/// int64 byte range (exceedsInt64Bytes).
mlir::LogicalResult verifyBuffersFitInt64(mlir::Operation *op);

/// The first other `pattn.bind_cache` that gives bytes overlapping those
/// `bindCache` binds another cache type, or null. Overlap is followed
/// through full views (memref.cast, expand_shape, collapse_shape) and
/// through subviews and reinterpret_casts whose offsets are static: two
/// bindings overlap when they start at the same byte of one buffer, or when
/// one's static extent reaches the other's start. Views at dynamic offsets
/// are the caller's contract.
mlir::Operation *findBindingOfOverlappingBytes(mlir::Operation *bindCache);

/// Every pattn op's memref operands fit the int64 byte range
/// (verifyBuffersFitInt64).
template <typename ConcreteType>
class BuffersFitInt64
    : public mlir::OpTrait::TraitBase<ConcreteType, BuffersFitInt64> {
public:
  static mlir::LogicalResult verifyTrait(mlir::Operation *op) {
    return verifyBuffersFitInt64(op);
  }
};

} // namespace pattn

#endif // PATTN_DIALECT_PATTN_IR_BUFFERRULES_H
