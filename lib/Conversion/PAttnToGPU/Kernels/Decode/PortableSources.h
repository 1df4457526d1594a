//===- PortableSources.h - The portable decode's cache readers --*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// The portable decode kernels read keys and values through a KVSource: a
// paged cache of any encoding and granularity, or MLA records. The kernel
// skeleton (Portable.cpp) is written once against this interface.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_DECODE_PORTABLESOURCES_H
#define PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_DECODE_PORTABLESOURCES_H

#include "Kernels/Common/KernelBuilder.h"
#include "Kernels/Kernels.h"

#include "llvm/ADT/SmallVector.h"

#include <memory>

namespace pattn::portable {

/// A cached token as the kernel addresses it.
struct Row {
  mlir::Value page;   ///< physical page (index)
  mlir::Value offset; ///< slot within the page (index)
  mlir::Value kvHead; ///< index
};

/// Reads dequantized K and V elements. Host operands are collected first;
/// once the kernel exists, `bind` maps them to the kernel's arguments.
class KVSource {
public:
  virtual ~KVSource() = default;
  /// Channels of K (the query's head_dim) and of V (the output's).
  virtual int64_t keyDim() const = 0;
  virtual int64_t valueDim() const = 0;
  virtual int64_t kvHeads() const = 0;
  /// fp32 dots of K[row] with the `heads` query rows in the workgroup
  /// buffer `query` (row j at j * keyDim()), all K scales applied. The key
  /// is loaded and dequantized once for all heads.
  virtual llvm::SmallVector<mlir::Value> keyDots(KernelBuilder &kb,
                                                 const Row &row,
                                                 mlir::Value query,
                                                 int64_t heads) = 0;
  /// How many consecutive value channels one thread reads at a time when a
  /// block serves `heads` heads: a divisor of valueDim() small enough that
  /// heads x elements accumulators stay in registers.
  virtual int64_t valueVectorElements(int64_t heads) const = 0;
  /// True when keys and values are plain f16/bf16: their decode needs few
  /// registers.
  virtual bool decodesCheaply() const { return false; }
  /// V[row][first, first + elements) as fp32, all V scales applied.
  virtual llvm::SmallVector<mlir::Value> valueVector(KernelBuilder &kb,
                                                     const Row &row,
                                                     mlir::Value first,
                                                     int64_t elements) = 0;

  llvm::SmallVector<mlir::Value> hostOperands;
  /// Kernel-side values, parallel to hostOperands.
  llvm::SmallVector<mlir::Value> kernelOperands;
  void bind(mlir::ValueRange arguments) {
    kernelOperands.assign(arguments.begin(), arguments.end());
  }

protected:
  /// Registers a host operand (may be null) and returns its position.
  int add(mlir::Value value) {
    if (!value)
      return -1;
    hostOperands.push_back(value);
    return hostOperands.size() - 1;
  }
  mlir::Value get(int position) const {
    return position < 0 ? mlir::Value() : kernelOperands[position];
  }
};

/// A paged K and V cache with their optional tensor or channel scales.
std::unique_ptr<KVSource> makePagedSource(const CacheBuffers &key,
                                          mlir::Value keyScale,
                                          const CacheBuffers &value,
                                          mlir::Value valueScale);
/// An MLA record cache (K = latent and rope, V = latent) with its optional
/// tensor outer scale.
std::unique_ptr<KVSource> makeRecordSource(const RecordBuffers &cache,
                                           mlir::Value outerScale);

} // namespace pattn::portable

#endif // PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_DECODE_PORTABLESOURCES_H
