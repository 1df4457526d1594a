//===- KernelBuilder.h - Building blocks of pattn's GPU kernels -*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// The kernels pattn generates are written in upstream dialects through this
// small builder: integer and float helpers, and the bit-exact encoders and
// decoders of every cache element format. The encoders mirror
// lib/Numerics/Minifloat.cpp step for step, which is what makes GPU cache
// writes bit-exact to the numerics library.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_COMMON_KERNELBUILDER_H
#define PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_COMMON_KERNELBUILDER_H

#include "Kernels/Common/ScalarBuilder.h"
#include "pattn/Dialect/PAttn/IR/PAttnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

namespace pattn {

/// Threads of a warp.
inline constexpr int64_t kWarpThreads = 32;

/// A sign-magnitude minifloat: E4M3FN, E5M2 or E2M1 (all saturating here).
/// Built from the encoding table's rows, whose fields the numerics library's
/// scalar codecs use too.
struct MinifloatFormat {
  int exponentBits;
  int mantissaBits;
  int bias;
  float maxFinite;
  int maxCode; ///< magnitude bits of maxFinite

  static MinifloatFormat of(const numerics::MinifloatFields &fields) {
    return {fields.exponentBits, fields.mantissaBits, fields.bias,
            fields.maxFinite, int(fields.maxMagnitudeCode)};
  }
  /// The format of the codes of a minifloat encoding (nvfp4's: e2m1).
  static MinifloatFormat of(pattn::Encoding encoding);

  static MinifloatFormat e4m3() { return of(pattn::Encoding::f8e4m3); }
  static MinifloatFormat e5m2() { return of(pattn::Encoding::f8e5m2); }
  static MinifloatFormat e2m1() { return of(pattn::Encoding::nvfp4); }
};

/// A rounding threshold between two consecutive magnitudes of a minifloat:
/// a magnitude above it (or at it, when `inclusive`) rounds to the larger.
struct RoundingThreshold {
  float value;
  bool inclusive;
};

/// The thresholds between consecutive magnitudes of `format`, from 0 to its
/// largest finite, each the midpoint with its tie going to the even code:
/// the code of a magnitude is the number of thresholds it passes, which is
/// encodeMinifloat's round to nearest even, saturated (and 0 for NaN).
llvm::SmallVector<RoundingThreshold>
roundingThresholds(const MinifloatFormat &format);

/// ScalarBuilder plus what only kernels emit: thread and block ids,
/// barriers, byte-level memory and the bit-exact encoders and decoders of
/// every cache element format.
class KernelBuilder : public ScalarBuilder {
public:
  using ScalarBuilder::ScalarBuilder;

  /// The kernel runs only on chips with cvt.rn.f16x2.e4m3x2 (sm_89 and up).
  bool hardwareFp8 = false;
  /// The kernel runs only on chips with cvt.rn.f16x2.e2m1x2 (sm_100a,
  /// sm_120a).
  bool hardwareFp4 = false;
  /// The e2m1 bit trick stops short of its restoring multiply: its pairs
  /// are the codes x 2^-14, exact f16 subnormals, and the caller applies
  /// kFp4SubnormalScale itself (once per sum instead of once per pair).
  bool fp4Subnormal = false;

  // Memory: bytes and little-endian values in i8 buffers.
  /// Loads a byte of an i8 memref as an unsigned i32.
  mlir::Value loadByte(mlir::Value memref, mlir::ValueRange indices);
  /// Stores the low byte of an i32.
  void storeByte(mlir::Value value, mlir::Value memref,
                 mlir::ValueRange indices);
  /// Little-endian f32 from / into 4 consecutive bytes of the last dimension.
  mlir::Value loadF32Bytes(mlir::Value memref, mlir::ValueRange indices);
  void storeF32Bytes(mlir::Value value, mlir::Value memref,
                     mlir::ValueRange indices);
  /// Little-endian 16-bit value from / into 2 consecutive bytes (as i32).
  mlir::Value loadU16Bytes(mlir::Value memref, mlir::ValueRange indices);
  void storeU16Bytes(mlir::Value value, mlir::Value memref,
                     mlir::ValueRange indices);

  /// True (i1, uniform) when a `bytes`-wide vector access of `memref` at
  /// any index whose last entry is a multiple of bytes / element size is
  /// aligned: the buffer's address (aligned pointer + offset) and every
  /// stride but the innermost's are multiples of `bytes`.
  mlir::Value vectorAligned(mlir::Value memref, int64_t bytes);
  /// The byte address (index) of element `indices` of `memref` (its first
  /// element with none): aligned pointer + (offset + sum of index x stride)
  /// x element size; `strides` receives the memref's strides.
  mlir::Value elementAddress(mlir::Value memref, mlir::ValueRange indices,
                             mlir::ValueRange *strides = nullptr);
  /// `words` (1, 2 or 4) consecutive 32-bit words of global memory from
  /// element `indices` of `memref` on, as one ld.global (the address must
  /// be aligned to 4 x words bytes: see vectorAligned). Inline PTX with side
  /// effects, so that it stays under the alignment check that guards it and
  /// LLVM cannot fold it into an element-wise fallback at the same address.
  llvm::SmallVector<mlir::Value>
  loadGlobalWords(mlir::Value memref, mlir::ValueRange indices, int64_t words);
  /// Stores the low `bytes` (1, 2, 4, 8 or 16) bytes of the little-endian
  /// i32 `words` at consecutive bytes of the last dimension: one vector
  /// store of that alignment when `aligned` (vectorAligned), byte stores
  /// otherwise (and when `aligned` is null).
  void storeWordBytes(llvm::ArrayRef<mlir::Value> words, int64_t bytes,
                      mlir::Value aligned, mlir::Value memref,
                      mlir::ValueRange indices);

  // GPU.
  mlir::Value threadId();
  mlir::Value blockId(mlir::gpu::Dimension dimension);
  void barrier();
  /// `v` of the lane whose id is this lane's xor `mask` (all 32 lanes
  /// take part).
  mlir::Value shuffleXor(mlir::Value v, int32_t mask);
  /// `combine` of `v` over the lanes l ^ m, m < `lanes` (a power of two, at
  /// most 32), by xor shuffles: every lane of a group of `lanes` gets the
  /// result. For order-free combines (integer max/min/add, maxnum) it is
  /// the serial loop's value.
  mlir::Value
  laneReduce(mlir::Value v, int64_t lanes,
             llvm::function_ref<mlir::Value(mlir::Value, mlir::Value)> combine);
  /// Inline PTX `text` over `operands` with LLVM's `constraints`; returns
  /// its result of type `result` (none for a null type). `sideEffects`
  /// keeps it in place and unmerged (synchronization, loads that must stay
  /// under their guard); without, LLVM may move it like arithmetic.
  mlir::Value inlinePtx(mlir::Type result, llvm::StringRef text,
                        llvm::StringRef constraints, mlir::ValueRange operands,
                        bool sideEffects);
  /// Waits for the whole warp (bar.warp.sync with every lane): what one
  /// lane stored to shared memory before it is visible to the others.
  void syncWarp();
  /// (a & mask) | bits in one lop3.b32: ptxas does not fuse an and and an
  /// or whose second operands are both immediates, and the decoders' magic
  /// numbers are that (`bits` lives in a register, hoisted out of loops).
  mlir::Value maskThenOr(mlir::Value a, int32_t mask, mlir::Value bits);
  /// Where `mask` is set, a ^ bits, elsewhere bits: one lop3.b32 with the
  /// mask as its immediate (`bits` in a register, as for maskThenOr).
  mlir::Value maskedXorElse(mlir::Value a, int32_t mask, mlir::Value bits);

  // Element formats.
  /// The saturating RNE code (sign bit included) of the fp32 value `x`,
  /// exactly as pattn::numerics encodes it.
  mlir::Value encodeMinifloat(mlir::Value x, const MinifloatFormat &format);
  /// encodeMinifloat(x, e2m1) by counting the 7 rounding thresholds that
  /// |x| passes (roundingThresholds): compares and adds at the full fp32
  /// rate instead of the binade arithmetic's two conversions (roundeven,
  /// fptosi), which run at a quarter of it.
  mlir::Value encodeE2M1(mlir::Value x);
  /// fp32 value of an e4m3 / e5m2 / e2m1 code held in an i32 (exact; goes
  /// through f16 so fp32 flush-to-zero cannot touch subnormal codes).
  mlir::Value decodeE4M3(mlir::Value code);
  mlir::Value decodeE5M2(mlir::Value code);
  mlir::Value decodeE2M1(mlir::Value code);
  /// fp32 from f16 / bf16 bits held in an i32.
  mlir::Value decodeF16Bits(mlir::Value bits);
  mlir::Value decodeBF16Bits(mlir::Value bits);
  /// f16 / bf16 bits (RNE) of an fp32 value, as i32.
  mlir::Value encodeF16Bits(mlir::Value x);
  mlir::Value encodeBF16Bits(mlir::Value x);

  /// Quantized code of x / scale for an integer or fp8 encoding (zero scale
  /// gives 0), returned as the byte / nibble to store, in an i32: i8 codes
  /// two's complement, i4 codes biased by 8, fp8 codes as is (the row's
  /// range, minifloat fields and stored-code bias).
  mlir::Value quantize(pattn::Encoding encoding, mlir::Value x,
                       mlir::Value scale);

  /// quantize after its division: the code of the quotient t = x / scale.
  mlir::Value quantizeQuotient(pattn::Encoding encoding, mlir::Value t,
                               mlir::Value scale);
  /// quantizeQuotient of two quotients t0 = x0 / s0 and t1 = x1 / s1 for an
  /// fp8 encoding: one cvt.rn.satfinite.{e4m3,e5m2}x2.f32 for the pair
  /// where hardwareFp8 (its NaN, which encodeMinifloat sends to a signed
  /// zero, selected back to that), else quantizeQuotient twice.
  std::pair<mlir::Value, mlir::Value>
  quantizeFp8Pair(pattn::Encoding encoding, mlir::Value t0, mlir::Value s0,
                  mlir::Value t1, mlir::Value s1);

  /// T(a * c * scale) rounded once to `type` (f16 or bf16), for a power of
  /// two `scale` that keeps RN(a * c) * scale a normal fp32 (a * c itself
  /// must not underflow): round-to-odd in fp32 from the exact product and
  /// its fma error (fp32 keeps 13 / 16 bits more than f16 / bf16, so the
  /// final RNE sees the right side of every tie). A null scale is 1.
  mlir::Value roundScaledProductOnce(mlir::Value a, mlir::Value c,
                                     mlir::Value scale, mlir::Type type);
  /// 2^exponent as fp32 for an i32 exponent in [-126, 127].
  mlir::Value powerOfTwo(mlir::Value exponent);
  /// x * 2^exponent (i32, any value) in fp32, exact while the result is
  /// normal, saturating at ±FLT_MAX (never inf) and flushing toward zero.
  mlir::Value ldexpSaturating(mlir::Value x, mlir::Value exponent);
};

/// A memref type of `shape` x `element` in workgroup (shared) memory.
mlir::MemRefType workgroupMemRefType(llvm::ArrayRef<int64_t> shape,
                                     mlir::Type element);

/// A typed view of shape x element of the dynamic shared memory `smem`
/// (memref<?xi8>) at byte `offset` (index).
mlir::Value sharedView(KernelBuilder &kb, mlir::Value smem, mlir::Value offset,
                       llvm::ArrayRef<int64_t> shape, mlir::Type element);

} // namespace pattn

#endif // PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_COMMON_KERNELBUILDER_H
