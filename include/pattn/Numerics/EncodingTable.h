//===- EncodingTable.h - One row of facts per cache encoding ----*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This header declares the encoding table: one row per SPEC §2 encoding with
// every fact the layers derive from it (code width, code kind, largest code,
// minifloat fields, int4 bias, group scales, row bytes). Row sizes, the
// verifier, the planners and the kernel builders all read these rows, so a
// new encoding is one row here rather than a case in each of them.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_NUMERICS_ENCODINGTABLE_H
#define PATTN_NUMERICS_ENCODINGTABLE_H

#include "pattn/Numerics/Numerics.h"

#include <cstdint>
#include <span>
#include <string_view>

namespace pattn::numerics {

/// How the codes of an encoding become values.
enum class CodeKind : uint8_t {
  PlainFloat, ///< f16, bf16: the code is the value; no scale applies
  Integer,    ///< i8, i4: a signed integer code times the scale
  Minifloat,  ///< f8e4m3, f8e5m2, nvfp4: a saturating minifloat times scales
};

/// A sign-magnitude minifloat as a cache stores it: saturating, so its
/// largest finite value is also what every larger input encodes to.
struct MinifloatFields {
  int exponentBits;
  int mantissaBits;
  int bias;
  float maxFinite;
  uint32_t maxMagnitudeCode; ///< the magnitude bits of maxFinite
};

// The scalar codecs (Minifloat.cpp) and the kernel builders both take their
// fields from these, so the CPU and GPU encoders cannot drift apart.
inline constexpr MinifloatFields kE4M3Fields{4, 3, 7, 448.0f, 0x7E};
inline constexpr MinifloatFields kE5M2Fields{5, 2, 15, 57344.0f, 0x7B};
inline constexpr MinifloatFields kE2M1Fields{2, 1, 1, 6.0f, 0x7};

/// Scales shared by runs of consecutive elements along head_dim, kept in a
/// companion buffer [..., head_dim / size] (SPEC §2, nvfp4).
struct GroupScaleLayout {
  uint32_t size = 0; ///< elements per scale; 0: no group scales
  /// The encoding of one scale (nvfp4: f8e4m3); unused without scales.
  Encoding scaleEncoding = Encoding::F8E4M3;
};

/// Everything the compiler and the runtimes know about one encoding.
struct EncodingInfo {
  Encoding encoding;
  std::string_view name; ///< the IR spelling ("f16", ..., "nvfp4")
  uint32_t bitsPerCode;
  uint32_t codesPerWord; ///< codes in a little-endian 32-bit word
  CodeKind kind;
  /// The divisor of a per-token scale, s = amax / maxCodeMagnitude: the
  /// largest code value (127, 7, 448, 57344); for nvfp4 the outer scale's
  /// 6 * 448, the largest e2m1 code times the largest e4m3 group scale.
  /// 0 for the plain floats, which take no scale.
  float maxCodeMagnitude = 0.0f;
  int32_t minIntegerCode = 0;                 ///< Integer: -128 or -8
  const MinifloatFields *minifloat = nullptr; ///< Minifloat: codes' format
  /// Added to a code before it is stored: int4 stores code + 8 in a nibble
  /// (i8 stores two's complement bytes, every other code as is).
  uint8_t storedCodeBias = 0;
  uint8_t emptyByte = 0; ///< a byte of a fresh page: codes that decode to 0
  GroupScaleLayout groupScales = {};
  uint32_t headDimMultiple = 8; ///< head_dim is a multiple of this (SPEC §3)

  bool isPlainFloat() const { return kind == CodeKind::PlainFloat; }
  bool isInteger() const { return kind == CodeKind::Integer; }
  bool isMinifloat() const { return kind == CodeKind::Minifloat; }
  bool hasGroupScales() const { return groupScales.size != 0; }
  /// Storage is bytes: codes packed low-first, a partial last byte padded
  /// (headDim * 2, headDim or (headDim + 1) / 2).
  int64_t rowBytes(int64_t headDim) const {
    return (headDim * int64_t(bitsPerCode) + 7) / 8;
  }
};

/// The row of `encoding`.
const EncodingInfo &encodingInfo(Encoding encoding);

/// Every row, in enumerator order (row i describes Encoding(i)).
std::span<const EncodingInfo> encodingTable();

} // namespace pattn::numerics

#endif // PATTN_NUMERICS_ENCODINGTABLE_H
