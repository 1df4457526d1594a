//===- TensorCore.h - mma.sync building blocks ------------------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// The warp-level pieces the tensor-core kernels (Decode/XqaPaged*.cpp,
// Decode/XqaMla*.cpp) are built from: mma.sync.m16n8k16 with fp32
// accumulation over f16 or bf16 operands, ldmatrix from shared memory,
// operand packing, warp shuffles and the base-2 exponential of the online
// softmax.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_TENSORCORE_TENSORCORE_H
#define PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_TENSORCORE_TENSORCORE_H

#include "Kernels/Common/KernelBuilder.h"

namespace pattn {

/// Threads of a warp.
inline constexpr int64_t kWarpThreads = 32;

class MmaBuilder {
public:
  MmaBuilder(KernelBuilder &kb, bool bf16) : kb(kb), bf16(bf16) {}

  /// f16 or bf16: the operand element type.
  mlir::Type operandType() const;
  /// A pair of the operand type (or its bits) as an mma operand register:
  /// itself for f16, an i32 for bf16.
  mlir::Value bitsOperand(mlir::Value halves);
  /// A decoded pair as an operand register, rounded to the operand type
  /// first when it is of the other 16-bit type.
  mlir::Value operand(mlir::Value pair);
  /// Two fp32 values rounded to the operand type and packed (low first).
  mlir::Value packPair(mlir::Value lowF32, mlir::Value highF32);
  /// D = A B + C for mma.sync.m16n8k16.row.col (4 A, 2 B, 4 C registers).
  llvm::SmallVector<mlir::Value> mma(llvm::ArrayRef<mlir::Value> a,
                                     llvm::ArrayRef<mlir::Value> b,
                                     llvm::ArrayRef<mlir::Value> c);
  /// ldmatrix of `tiles` (1, 2 or 4) 8x8 matrices of 16-bit elements from
  /// `view` (a 2-D f16 workgroup memref), this lane addressing the row at
  /// (row, column); one 32-bit word per matrix.
  llvm::SmallVector<mlir::Value> ldmatrix(mlir::Value view, mlir::Value row,
                                          mlir::Value column, int64_t tiles,
                                          bool transpose);
  mlir::Value shuffleXor(mlir::Value v, int32_t mask);
  /// 2^x (ex2.approx: the logits are kept in base 2).
  mlir::Value exp2(mlir::Value x);

  KernelBuilder &kb;
  /// bf16 operands (else f16).
  bool bf16;
};

} // namespace pattn

#endif // PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_TENSORCORE_TENSORCORE_H
