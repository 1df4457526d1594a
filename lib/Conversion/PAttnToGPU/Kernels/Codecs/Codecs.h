//===- Codecs.h - Word decoders shared by the decode kernels ----*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// Decoding a 32-bit word of cache codes into packed f16x2 (bf16x2 for bf16
// codes) pairs, exactly and without a conversion instruction per element:
// integer codes by the magic-number trick, minifloat codes by moving their
// bits into f16 bit patterns (or by the chip's conversion instruction where
// the kernel module's chips have one). The portable kernel widens the pairs
// to fp32; the tensor-core kernels make mma operands of them.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_CODECS_CODECS_H
#define PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_CODECS_CODECS_H

#include "Kernels/Common/KernelBuilder.h"

namespace pattn {

/// Two decoded elements of a word: `pair` (vector<2xf16>, or vector<2xbf16>
/// for bf16 codes) holds the word's elements `low` (bits [15:0] of the
/// pair) and `high`, counted from the word's first element.
struct ChannelPair {
  mlir::Value pair;
  int64_t low, high;
};

/// What the e2m1 bit trick's pairs are short of under
/// KernelBuilder::fp4Subnormal.
inline constexpr float kFp4SubnormalScale = 16384.0f;

/// Elements of `encoding` in a 32-bit word: 2, 4 or 8 (its row's codes per
/// word).
int64_t elementsPerWord(pattn::Encoding encoding);

/// The unscaled values of a little-endian word of codes, as pairs (which
/// elements share a pair depends on the encoding and the chip).
llvm::SmallVector<ChannelPair>
decodeWordPairs(KernelBuilder &kb, pattn::Encoding encoding, mlir::Value word);

/// Which elements of a word decodeWordPairs pairs, in the order it returns
/// them (known before any code is emitted, so that a kernel can lay out
/// the other mma operand to match).
llvm::SmallVector<std::pair<int64_t, int64_t>>
wordPairOrder(pattn::Encoding encoding, bool hardwareFp8, bool hardwareFp4);

/// The pairs of a word across its two 16-bit halves, in order: pair j holds
/// element j (low half) and element j + n/2 (high half) of the word's n
/// elements. For a word of one cache row these are channels j and j + n/2;
/// for a word that ldmatrix.trans assembled from two rows (low half from
/// key k, high half from key k + 1) they are one channel of both keys,
/// which is the shape of an mma operand register. One pair for f16/bf16.
llvm::SmallVector<mlir::Value>
decodeWordHalves(KernelBuilder &kb, pattn::Encoding encoding, mlir::Value word);

/// How decodeWordHalves feeds the chips' pair conversions, which take
/// adjacent elements (two bytes, or the two nibbles of a byte): one prmt
/// puts bytes [0, 2, 1, 3] in order (selector kHalvesByteOrder), which for
/// e4m3 already pairs element j with j + 2; for e2m1 a delta swap of
/// nibbles 1 and 2 of each half (mask kMiddleNibbles, shift 4) then makes
/// byte q hold nibbles q and q + 4.
inline constexpr int32_t kHalvesByteOrder = 0x3120;
inline constexpr int32_t kMiddleNibbles = 0x00F000F0;

/// The same permutation on the host, for tests: bits of the word that
/// decodeWordHalves hands cvt.rn.f16x2.e2m1x2, byte by byte.
constexpr uint32_t nibblesForHalves(uint32_t word) {
  uint32_t bytes = (word & 0xFF0000FFu) | (word >> 8 & 0x0000FF00u) |
                   (word << 8 & 0x00FF0000u);
  uint32_t delta = (bytes ^ bytes >> 4) & uint32_t(kMiddleNibbles);
  return bytes ^ delta ^ delta << 4;
}

/// The same as fp32 values in element order.
llvm::SmallVector<mlir::Value>
decodeWord(KernelBuilder &kb, pattn::Encoding encoding, mlir::Value word);

/// Byte `byte` (i32, 0 to 3) of the e4m3 scale words `low` and `high` as
/// one f16 pair (low, high): one prmt and one e4m3 pair decode. The
/// products of an e2m1 code and an e4m3 scale are exact in f16.
mlir::Value e4m3BytePair(KernelBuilder &kb, mlir::Value low, mlir::Value high,
                         mlir::Value byte);

/// A 32-bit word seen as a vector<2xf16> (bits [15:0] are element 0).
mlir::Value f16PairOf(KernelBuilder &kb, mlir::Value bits);

/// `value` in both halves of a vector<2xf16> constant.
mlir::Value f16Splat(KernelBuilder &kb, float value);

} // namespace pattn

#endif // PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_CODECS_CODECS_H
