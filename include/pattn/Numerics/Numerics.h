//===- Numerics.h - Exact cache encodings and fold arithmetic ---*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This header declares the numerics library: the bit-exact quantizers and
// dequantizers of every KV-cache encoding in SPEC §2, the per-token record
// presets of SPEC §3, and the fold arithmetic of SPEC §5. It depends on the
// C++ standard library only, so compilers, runtimes, tests and the Python
// reference can all share one definition of "the right bits".
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_NUMERICS_NUMERICS_H
#define PATTN_NUMERICS_NUMERICS_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace pattn::numerics {

//===----------------------------------------------------------------------===//
// Status
//===----------------------------------------------------------------------===//

/// Outcome of an encoding call. On anything but `Ok` nothing was written:
/// callers never observe a half-encoded row or record.
enum class Status {
  Ok,
  NonFiniteInput, ///< an input value is NaN or infinite
  NonFiniteScale, ///< a scale (or outer scale) is NaN, infinite or negative
  BadSize,        ///< a span has the wrong length for the encoding/preset
};

/// A human-readable name for `status` ("ok", "non-finite input", ...).
std::string_view stringifyStatus(Status status);

//===----------------------------------------------------------------------===//
// Scalar codecs. All rounding is round-half-to-even (RNE) with a single
// rounding from the exact input value.
//===----------------------------------------------------------------------===//

/// IEEE binary16 as a cache stores it: RNE, saturating (values beyond
/// ±65504, and ±inf, give ±65504: SPEC §2, a cache never turns a finite
/// input into an infinity); NaN maps to the canonical quiet NaN 0x7E00.
/// Subnormals are exact.
uint16_t encodeF16(double x);
float decodeF16(uint16_t bits);

/// bfloat16 (8 exponent bits, 7 mantissa bits), RNE, saturating at
/// ±0x7F7F like encodeF16, NaN to 0x7FC0.
uint16_t encodeBF16(double x);
float decodeBF16(uint16_t bits);

/// E4M3FN (bias 7, no infinities, 0x7F/0xFF are NaN). Saturating: finite
/// values beyond ±448 give ±448; ±inf gives ±448; NaN gives 0x7F.
uint8_t encodeE4M3(double x);
float decodeE4M3(uint8_t code);

/// E5M2 (bias 15, IEEE-like). Saturating ("satfinite"): finite values beyond
/// ±57344 and ±inf give ±57344; NaN gives 0x7F.
uint8_t encodeE5M2(double x);
float decodeE5M2(uint8_t code);

/// E2M1 (bias 1; magnitudes {0, .5, 1, 1.5, 2, 3, 4, 6}, bit 3 is the sign),
/// saturating to ±6. Only the low 4 bits of the result are used. NaN gives
/// +0 (callers reject non-finite input before encoding).
uint8_t encodeE2M1(double x);
float decodeE2M1(uint8_t code); ///< reads the low 4 bits only

//===----------------------------------------------------------------------===//
// Encodings of a paged cache (SPEC §2)
//===----------------------------------------------------------------------===//

enum class Encoding : uint8_t { F16, BF16, I8, F8E4M3, F8E5M2, I4, NVFP4 };

/// The spelling used in IR and docs: "f16", "bf16", "i8", "f8e4m3", "f8e5m2",
/// "i4", "nvfp4".
std::string_view stringifyEncoding(Encoding encoding);
std::optional<Encoding> parseEncoding(std::string_view name);

/// Bytes of one head row of `headDim` elements: headDim*2 for f16/bf16,
/// headDim for 8-bit codes, (headDim+1)/2 for the packed 4-bit codes.
int64_t rowBytes(Encoding encoding, int64_t headDim);

/// The largest code magnitude of an integer or fp8 encoding (127, 7, 448,
/// 57344); used to derive per-token scales `s = amax / maxCode`. For nvfp4 it
/// is 6 * 448 = 2688 (the per-token outer scale); 0 for f16/bf16.
float maxCodeMagnitude(Encoding encoding);

/// Element quantizers: t = x / s computed in fp32, then the code. A zero
/// scale gives code 0. Inputs must be finite (see encodeRow for checking).
int8_t quantizeI8(float x, float scale);    ///< clamp(t, -128, 127), RNE
int8_t quantizeI4(float x, float scale);    ///< clamp(t, -8, 7), RNE; signed
uint8_t quantizeE4M3(float x, float scale); ///< clamp(t, ±448), RNE
uint8_t quantizeE5M2(float x, float scale); ///< clamp(t, ±57344), RNE

/// Packs signed int4 codes (each in [-8, 7]) two per byte, element 2i in the
/// low nibble, stored biased by +8. An odd count pads the last high nibble
/// with 8 (the biased zero). `packed` must hold (codes.size()+1)/2 bytes.
void packI4(std::span<const int8_t> codes, std::span<uint8_t> packed);
/// The inverse of packI4 for `codes.size()` elements.
void unpackI4(std::span<const uint8_t> packed, std::span<int8_t> codes);
/// The byte a freshly allocated, empty int4 page holds: two biased zeros.
inline constexpr uint8_t kEmptyI4Byte = 0x88;

/// Quantizes one head row of f16/bf16/i8/f8/i4 into `row` (rowBytes bytes).
/// `scales` holds one entry (tensor or token granularity) or one per element
/// (channel granularity); it is ignored for f16/bf16 (pass an empty span).
/// nvfp4 rows must use encodeRowNVFP4. Fails with NonFiniteInput on any
/// non-finite x, NonFiniteScale on a non-finite or negative scale, writing
/// nothing in either case.
Status encodeRow(Encoding encoding, std::span<const float> x,
                 std::span<const float> scales, std::span<uint8_t> row);
/// Dequantizes one head row: x = code * s (fp32), for the same encodings.
Status decodeRow(Encoding encoding, std::span<const uint8_t> row,
                 std::span<const float> scales, std::span<float> x);

/// NVFP4 row: per 16-element group, sf = e4m3_rne(amax_g / 6 / outer) in
/// fp32, then code = e2m1_rne_satfinite(x / (decode(sf) * outer)). A group
/// whose amax is zero, a zero outer scale, or a group scale that rounds to
/// zero writes zero bytes (codes and scale). `x.size()` must be a multiple
/// of 16; `row` holds x.size()/2 bytes and `groupScales` x.size()/16.
Status encodeRowNVFP4(std::span<const float> x, float outerScale,
                      std::span<uint8_t> row, std::span<uint8_t> groupScales);
/// x = e2m1 * e4m3(sf) * outer, computed in fp32 as (e2m1 * sf) * outer.
Status decodeRowNVFP4(std::span<const uint8_t> row,
                      std::span<const uint8_t> groupScales, float outerScale,
                      std::span<float> x);

/// The per-token scale a writer derives for a row: amax(|x|) / maxCode in
/// fp32 (nvfp4: amax / (6*448)). Zero for an all-zero row.
float tokenScale(Encoding encoding, std::span<const float> x);

//===----------------------------------------------------------------------===//
// Per-token records (SPEC §3)
//===----------------------------------------------------------------------===//

/// Element kinds that may appear in a record lane.
enum class LaneElement : uint8_t { F32, F16, BF16, E4M3, E5M2, E2M1, I8 };

/// Bits of one lane element (32, 16, 16, 8, 8, 4, 8).
unsigned laneElementBits(LaneElement element);

/// One lane of a record: `count` elements of `element` at byte `offset`,
/// optionally scaled by the lane named `scaleLane` (empty: unscaled).
struct LaneDesc {
  std::string_view name;
  LaneElement element;
  uint32_t count;
  uint32_t offset;
  std::string_view scaleLane;
};

enum class RecordPreset : uint8_t { FP8DsMla, NVFP4DsMla, NVFP4DsMlaFp8Rope };

/// The outer-scale mode of an nvfp4 record: `Tensor` (a launch scalar given
/// to writer and reader; the in-record token scale is zero) or `Token` (the
/// writer stores s_t = token_amax / (6*448) at bytes [292, 296)).
enum class RecordScaleMode : uint8_t { None, Tensor, Token };

struct RecordLayout {
  std::string_view name;
  uint32_t bytes;
  std::span<const LaneDesc> lanes;
  uint32_t latentCount; ///< 512 for every preset
  uint32_t ropeCount;   ///< 64 for every preset
};

/// Byte layout of a preset; lanes are sorted by offset. The names used for
/// lanes are the ones IR prints: latent, latent_scale, rope, rope_scale,
/// token_scale.
const RecordLayout &recordLayout(RecordPreset preset);
std::optional<RecordPreset> parseRecordPreset(std::string_view name);
std::string_view stringifyRecordPreset(RecordPreset preset);
/// The scale modes a preset can be written in: fp8_ds_mla only `None`,
/// nvfp4_ds_mla only `Tensor`, nvfp4_ds_mla_fp8_rope `Tensor` or `Token`.
bool isValidRecordScaleMode(RecordPreset preset, RecordScaleMode mode);

/// Encodes one token: `latent` (512 values) and `rope` (64 values) into
/// `record` (layout.bytes). `outerScale` is the tensor outer scale for nvfp4
/// presets in Tensor mode and ignored otherwise. Every byte of the record is
/// written (pads are zero). Rules:
///  - fp8_ds_mla: latent tile i (128 values) has scale amax_i / 448 (fp32) and
///    e4m3 codes of x / scale; the rope is bf16 (RNE).
///  - nvfp4 presets: the latent is an nvfp4 row with outer scale `outerScale`
///    (Tensor) or s_t = token_amax / (6*448) (Token, stored at [292, 296)).
///  - nvfp4_ds_mla: rope is bf16 at [304, 432).
///  - nvfp4_ds_mla_fp8_rope: rope_scale = rope_amax / 448 at [288, 292) and
///    64 e4m3 codes of v / rope_scale at [304, 368).
Status encodeRecord(RecordPreset preset, RecordScaleMode mode,
                    std::span<const float> latent, std::span<const float> rope,
                    float outerScale, std::span<uint8_t> record);
/// Decodes a record written with the same preset and mode.
Status decodeRecord(RecordPreset preset, RecordScaleMode mode,
                    std::span<const uint8_t> record, float outerScale,
                    std::span<float> latent, std::span<float> rope);

//===----------------------------------------------------------------------===//
// Fold arithmetic (SPEC §5)
//===----------------------------------------------------------------------===//

/// The power-of-two normalizer N of a per-channel K scale table.
struct FoldNormalizer {
  Status status;      ///< NonFiniteScale if any entry is NaN or infinite
  size_t badIndex;    ///< index of the first non-finite entry, if any
  int exponent;       ///< N = 2^exponent
  float value;        ///< N itself
  float maxMagnitude; ///< m = max |s| over the table
};

/// N = 2^(ilogb(m) + 1), the power of two strictly above m = max |s| (N = 1
/// when m == 0), with the exponent clamped to
/// [-126, 126 - ilogb(max(softmaxScale, 1))] so softmaxScale * N is finite.
FoldNormalizer computeFoldNormalizer(std::span<const float> scales,
                                     float softmaxScale);

/// Clamp bounds of the normalizer exponent for a given softmax scale.
int minFoldExponent();
int maxFoldExponent(float softmaxScale);

/// ilogb(max |s|) - ilogb(min nonzero |s|) over the finite entries; nullopt
/// when the table has no nonzero entry.
std::optional<int> binadeSpan(std::span<const float> scales);

/// The widest K channel table the fold takes. The fold cannot see the K
/// codes: a channel whose scale lies more than this far below the largest
/// can hold the whole logit (when the large channels' codes are small) and
/// still flush in the folded row, so such a table runs unfolded.
inline constexpr int kFoldBinadeBudget = 24;

/// Whether a static per-channel K table is folded, and if not, why. The
/// device-side guard of a dynamic table (pattn.scale_normalizer's flag)
/// computes the same predicate.
struct FoldLegality {
  enum class Verdict {
    Legal,     ///< fold with N = 2^exponent
    NonFinite, ///< an entry is NaN or infinite (at badIndex)
    TooWide,   ///< the table spans more than kFoldBinadeBudget binades
  };
  Verdict verdict;
  int binadeSpan;  ///< ilogb(max) - ilogb(min nonzero); 0 if all zero
  int exponent;    ///< the (clamped) normalizer exponent
  size_t badIndex; ///< first non-finite entry, or scales.size()
};
FoldLegality checkFoldLegality(std::span<const float> scales,
                               float softmaxScale);

/// One folded query row (SPEC §5): every (token, head) row of the query is
/// folded with its own power of two, so that the fold keeps every channel
/// that matters whatever the query's magnitude.
///
/// With p[c] = q[c] * s[c] / N (exact in any wide format) and t[c] the
/// binade of p[c] rounded to 24 significant bits, the row exponent is
/// e = max t[c] over the nonzero products (0 when there are none), and
///   out[c] = T(p[c] * 2^-e), rounded once, so max |out| lies in [1, 2];
/// a product more than 126 binades below the row's largest (or zero) is
/// written as a zero of its sign. The attention multiplies the row's
/// logits by 2^e exactly. Inputs and outputs are raw f16 (bf16) bits;
/// `scales` are the row's kv head's channel scales and N the normalizer.
int foldQueryRow(std::span<const uint16_t> query, std::span<const float> scales,
                 float normalizer, bool bf16, std::span<uint16_t> out);

/// The binade gap below the row's largest folded product past which
/// foldQueryRow writes zero (a normal fp32 scaled product stays exact).
inline constexpr int kFoldRowFlushBinades = 126;

/// The output channel scale of a folded V: o * s in fp32, one rounding.
float applyOutputChannelScale(float o, float scale);

} // namespace pattn::numerics

#endif // PATTN_NUMERICS_NUMERICS_H
