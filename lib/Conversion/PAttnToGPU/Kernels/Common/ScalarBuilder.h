//===- ScalarBuilder.h - arith/scf sugar for host and kernels ---*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// The builder sugar both sides of the lowering write with: constants,
// integer and float arithmetic, conversions, plain loads and stores, and
// structured loops and branches. The host side uses it for its launch
// arithmetic; kernels use KernelBuilder, which adds the device's pieces.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_COMMON_SCALARBUILDER_H
#define PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_COMMON_SCALARBUILDER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

namespace pattn {

/// Emits arith, math, memref and scf ops at an insertion point; every
/// helper returns the new value. The host side of the lowering builds its
/// launch arithmetic with it; kernels use KernelBuilder, which adds the
/// device's pieces.
class ScalarBuilder {
public:
  ScalarBuilder(mlir::OpBuilder &builder, mlir::Location loc)
      : b(builder), loc(loc) {}

  mlir::OpBuilder &b;
  mlir::Location loc;

  // Constants.
  mlir::Value index(int64_t value);
  mlir::Value i32(int32_t value);
  mlir::Value i64(int64_t value);
  mlir::Value f32(float value);
  mlir::Value boolean(bool value);

  // Integer arithmetic (index or iN) and comparisons.
  mlir::Value add(mlir::Value a, mlir::Value c);
  mlir::Value sub(mlir::Value a, mlir::Value c);
  mlir::Value mul(mlir::Value a, mlir::Value c);
  mlir::Value divs(mlir::Value a, mlir::Value c);
  mlir::Value rems(mlir::Value a, mlir::Value c);
  mlir::Value andi(mlir::Value a, mlir::Value c);
  mlir::Value xori(mlir::Value a, mlir::Value c);
  mlir::Value ori(mlir::Value a, mlir::Value c);
  mlir::Value shl(mlir::Value a, mlir::Value c);
  mlir::Value shru(mlir::Value a, mlir::Value c);
  mlir::Value mins(mlir::Value a, mlir::Value c);
  mlir::Value maxs(mlir::Value a, mlir::Value c);
  mlir::Value cmpi(mlir::arith::CmpIPredicate predicate, mlir::Value a,
                   mlir::Value c);
  mlir::Value select(mlir::Value condition, mlir::Value a, mlir::Value c);
  mlir::Value land(mlir::Value a, mlir::Value c);
  mlir::Value lor(mlir::Value a, mlir::Value c);

  // Float arithmetic (fp32 unless said otherwise).
  mlir::Value fadd(mlir::Value a, mlir::Value c);
  mlir::Value fsub(mlir::Value a, mlir::Value c);
  mlir::Value fmul(mlir::Value a, mlir::Value c);
  mlir::Value fdiv(mlir::Value a, mlir::Value c);
  mlir::Value fmax(mlir::Value a, mlir::Value c);
  /// x clamped to [-limit, limit]; NaN stays NaN (cache writes encode what
  /// they are given).
  mlir::Value saturate(mlir::Value x, float limit);
  /// x clamped to [-FLT_MAX, FLT_MAX], NaN to FLT_MAX: a logit that
  /// overflowed fp32 (or an inf - inf inside its dot product) stays finite,
  /// so the online softmax never computes inf - inf.
  mlir::Value finiteLogit(mlir::Value x);
  mlir::Value fabs(mlir::Value a);
  mlir::Value fma(mlir::Value a, mlir::Value c, mlir::Value d);
  mlir::Value exp(mlir::Value a);
  mlir::Value tanh(mlir::Value a);
  mlir::Value roundEven(mlir::Value a);
  mlir::Value cmpf(mlir::arith::CmpFPredicate predicate, mlir::Value a,
                   mlir::Value c);

  // Conversions.
  mlir::Value toIndex(mlir::Value integer);
  mlir::Value toI32(mlir::Value integerOrIndex);
  mlir::Value toI64(mlir::Value integerOrIndex);
  mlir::Value toF32(mlir::Value number); ///< from f16, bf16, f32 or signed int
  mlir::Value bitcast(mlir::Type type, mlir::Value value);
  mlir::Value truncI8(mlir::Value integer);
  mlir::Value extUI32(mlir::Value integer);

  // Memory.
  mlir::Value load(mlir::Value memref, mlir::ValueRange indices);
  void store(mlir::Value value, mlir::Value memref, mlir::ValueRange indices);

  /// A structured `for` over [lower, upper) with one fp32/iN carried value
  /// list; `body(iv, carried)` returns the next carried values.
  llvm::SmallVector<mlir::Value>
  forLoop(mlir::Value lower, mlir::Value upper, mlir::Value step,
          mlir::ValueRange init,
          llvm::function_ref<llvm::SmallVector<mlir::Value>(mlir::Value,
                                                            mlir::ValueRange)>
              body);
  /// `if (condition) then()` without results.
  void ifThen(mlir::Value condition, llvm::function_ref<void()> then);
  /// `condition ? then() : otherwise()` with results.
  llvm::SmallVector<mlir::Value>
  ifElse(mlir::Value condition, mlir::TypeRange types,
         llvm::function_ref<llvm::SmallVector<mlir::Value>()> then,
         llvm::function_ref<llvm::SmallVector<mlir::Value>()> otherwise);
};

} // namespace pattn

#endif // PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_COMMON_SCALARBUILDER_H
