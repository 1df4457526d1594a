//===- EncodingTable.cpp - One row of facts per cache encoding ------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file holds the encoding table, indexed by the enumerator, and checks
// at compile time that it has one row per enumerator in order and that the
// rows agree with themselves (word packing, code widths, the nvfp4 divisor).
//
//===----------------------------------------------------------------------===//

#include "pattn/Numerics/EncodingTable.h"

#include <cassert>
#include <iterator>

namespace pattn::numerics {

/// int4 codes are stored biased, so the zero code is the nibble 8.
static constexpr uint8_t kI4Bias = 8;

// Fields left out keep EncodingInfo's defaults: no minimum integer code, no
// minifloat fields, codes stored as is, zero empty bytes, no group scales,
// head_dim a multiple of 8.
static constexpr EncodingInfo kTable[] = {
    {.encoding = Encoding::F16,
     .name = "f16",
     .bitsPerCode = 16,
     .codesPerWord = 2,
     .kind = CodeKind::PlainFloat},
    {.encoding = Encoding::BF16,
     .name = "bf16",
     .bitsPerCode = 16,
     .codesPerWord = 2,
     .kind = CodeKind::PlainFloat},
    {.encoding = Encoding::I8,
     .name = "i8",
     .bitsPerCode = 8,
     .codesPerWord = 4,
     .kind = CodeKind::Integer,
     .maxCodeMagnitude = 127.0f,
     .minIntegerCode = -128},
    {.encoding = Encoding::F8E4M3,
     .name = "f8e4m3",
     .bitsPerCode = 8,
     .codesPerWord = 4,
     .kind = CodeKind::Minifloat,
     .maxCodeMagnitude = kE4M3Fields.maxFinite,
     .minifloat = &kE4M3Fields},
    {.encoding = Encoding::F8E5M2,
     .name = "f8e5m2",
     .bitsPerCode = 8,
     .codesPerWord = 4,
     .kind = CodeKind::Minifloat,
     .maxCodeMagnitude = kE5M2Fields.maxFinite,
     .minifloat = &kE5M2Fields},
    {.encoding = Encoding::I4,
     .name = "i4",
     .bitsPerCode = 4,
     .codesPerWord = 8,
     .kind = CodeKind::Integer,
     .maxCodeMagnitude = 7.0f,
     .minIntegerCode = -8,
     .storedCodeBias = kI4Bias,
     .emptyByte = kEmptyI4Byte},
    // The outer scale maps amax onto the largest group scale (e4m3 448)
    // times the largest e2m1 code (6). A zero group scale zeroes its group,
    // so zero bytes are an empty page here too.
    {.encoding = Encoding::NVFP4,
     .name = "nvfp4",
     .bitsPerCode = 4,
     .codesPerWord = 8,
     .kind = CodeKind::Minifloat,
     .maxCodeMagnitude = kE2M1Fields.maxFinite * kE4M3Fields.maxFinite,
     .minifloat = &kE2M1Fields,
     .groupScales = {.size = 16, .scaleEncoding = Encoding::F8E4M3},
     .headDimMultiple = 16},
};

/// Lists every enumerator in a switch without a default, so that -Wswitch
/// names an enumerator added without a case here.
static constexpr bool isEnumerator(Encoding encoding) {
  switch (encoding) {
  case Encoding::F16:
  case Encoding::BF16:
  case Encoding::I8:
  case Encoding::F8E4M3:
  case Encoding::F8E5M2:
  case Encoding::I4:
  case Encoding::NVFP4:
    return true;
  }
  return false;
}

/// Row i describes enumerator i, and every enumerator has a row: each value
/// of the underlying type is an enumerator exactly when the table reaches it.
static constexpr bool coversEveryEnumerator() {
  for (unsigned value = 0; value < 256; ++value) {
    const bool hasRow = value < std::size(kTable);
    if (isEnumerator(Encoding(value)) != hasRow)
      return false;
    if (hasRow && kTable[value].encoding != Encoding(value))
      return false;
  }
  return true;
}
static_assert(coversEveryEnumerator(),
              "the encoding table needs one row per Encoding, in order");

/// What each row promises about itself.
static constexpr bool isConsistent(const EncodingInfo &row) {
  if (row.name.empty() || row.codesPerWord * row.bitsPerCode != 32)
    return false;
  // Minifloat rows name their fields and the fields fill the code.
  if ((row.kind == CodeKind::Minifloat) != (row.minifloat != nullptr))
    return false;
  if (row.minifloat &&
      1 + row.minifloat->exponentBits + row.minifloat->mantissaBits !=
          int(row.bitsPerCode))
    return false;
  // Integer codes are the two's complement range of their width.
  if (row.kind == CodeKind::Integer &&
      (row.minIntegerCode != -(1 << (row.bitsPerCode - 1)) ||
       row.maxCodeMagnitude != float((1 << (row.bitsPerCode - 1)) - 1)))
    return false;
  // Only scaled codes have a largest code; plain floats take no scale.
  if ((row.kind == CodeKind::PlainFloat) != (row.maxCodeMagnitude == 0.0f))
    return false;
  // head_dim is whole 32-bit words and whole groups.
  if (row.headDimMultiple * row.bitsPerCode % 32 != 0 ||
      (row.groupScales.size && row.headDimMultiple % row.groupScales.size))
    return false;
  return true;
}

static constexpr bool everyRowConsistent() {
  for (const EncodingInfo &row : kTable)
    if (!isConsistent(row))
      return false;
  return true;
}
static_assert(everyRowConsistent(), "an encoding row contradicts itself");
static_assert(kEmptyI4Byte == (kI4Bias | kI4Bias << 4),
              "an empty int4 byte is two biased zero codes");

const EncodingInfo &encodingInfo(Encoding encoding) {
  assert(size_t(encoding) < std::size(kTable) && "not an encoding");
  return kTable[size_t(encoding)];
}

std::span<const EncodingInfo> encodingTable() { return kTable; }

} // namespace pattn::numerics
