//===- Eligibility.h - XQA versus portable: the one rule table --*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// The single source of truth for choosing between the XQA (tensor-core) and
// the portable (fp32) lowering of an attention op (SPEC §6). It is part of
// pattn's public C++ API: a compiler embedding pattn can ask it about a
// configuration without building IR, and --pattn-select-backend asks it
// about every op. Target-neutral: chips are names and compute capabilities.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_DIALECT_PATTN_TRANSFORMS_ELIGIBILITY_H
#define PATTN_DIALECT_PATTN_TRANSFORMS_ELIGIBILITY_H

#include "pattn/Dialect/PAttn/IR/PAttnDialect.h"
#include "pattn/Target/TargetDescription.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace pattn {

/// Where the per-channel K scales of an op stand, as far as the XQA path is
/// concerned: XQA reads K at a scalar scale, so channel scales must have
/// been folded into the query.
enum class KeyScaleFold : uint8_t {
  NotNeeded,       ///< K has no channel scales (or they were folded)
  StaticUnfolded,  ///< a foldable static table the fold pass has not folded
  StaticTooWide,   ///< a static table spanning more than 24 binades
  DynamicUnfolded, ///< a dynamic table without the fold's device guard
  GuardedFolded,   ///< the folded half of a device-guarded pair
  GuardedFallback, ///< the unfolded half of a device-guarded pair
};

/// How an MLA record's latent lane is stored, as the tensor-core MLA kernel
/// sees it.
enum class MlaLatentFormat : uint8_t {
  BF16,            ///< bf16 values, unscaled
  E4M3,            ///< e4m3 codes, unscaled
  E4M3BlockScaled, ///< e4m3 codes times one f32 scale per block of channels
  E2M1GroupScaled, ///< e2m1 codes times e4m3 group-16 scales (nvfp4)
  Unsupported,
};

/// How an MLA record's rope lane is stored.
enum class MlaRopeFormat : uint8_t {
  BF16,       ///< bf16 values, unscaled
  E4M3,       ///< e4m3 codes, unscaled
  E4M3Scaled, ///< e4m3 codes times one f32 scale
  Unsupported,
};

/// The lanes of an MLA record that the rule table looks at (plain numbers,
/// so that an embedder can ask without building a record type).
struct MlaRecordLayout {
  int64_t latent = 512, rope = 64, recordBytes = 656;
  MlaLatentFormat latentFormat = MlaLatentFormat::E4M3BlockScaled;
  /// Latent channels per f32 block scale (E4M3BlockScaled only).
  int64_t latentScaleGroup = 128;
  MlaRopeFormat ropeFormat = MlaRopeFormat::BF16;
  /// Byte offsets of the lanes in the record.
  int64_t latentOffset = 0, ropeOffset = 528;
  /// The lanes as written in the record type, for messages
  /// ("512 x f8E4M3FN scaled_by 4 x f32").
  std::string latentText, ropeText;

  /// Post-mma latent scales per key: the f32 blocks, else one (the nvfp4
  /// outer scale, or 1).
  int64_t latentBlocks() const {
    return latentFormat == MlaLatentFormat::E4M3BlockScaled
               ? latent / latentScaleGroup
               : 1;
  }
};

/// Everything the rule table looks at.
struct AttentionConfig {
  Chip chip = Chip::SM90a;
  mlir::Type activation; ///< the query's element type
  int64_t headDim = 0;   ///< of Q and K (for MLA: latent + rope)
  int64_t numHeads = 0;
  int64_t kvHeads = 1;
  int64_t queryTokens = 1; ///< max query tokens per sequence
  int64_t blockSize = 16;
  pattn::Encoding keyEncoding = pattn::Encoding::f16;
  pattn::Encoding valueEncoding = pattn::Encoding::f16;
  KeyScaleFold keyFold = KeyScaleFold::NotNeeded;
  int keyBinadeSpan = 0; ///< for StaticTooWide
  float softcap = 0.0f;
  /// V still has per-channel scales (the fold moves them to out_scale).
  bool valueChannelScales = false;
  /// A `pattn.mla_decode` (latent + rope records) rather than a paged op;
  /// then its record's lanes. headDim, the encodings and the fold fields do
  /// not apply to it.
  bool mla = false;
  MlaRecordLayout mlaRecord;
};

/// The verdict: XQA when no condition failed. Each failure is one sentence
/// naming the condition and the offending value, e.g.
/// "head_dim 96 not in {64, 128, 256}".
struct Eligibility {
  llvm::SmallVector<std::string> failures;
  bool isXqa() const { return failures.empty(); }
  /// "xqa" or "portable: <failure>; <failure>".
  std::string explain() const;
};

/// Evaluates every row of SPEC §6 against `config`.
Eligibility checkXqaEligibility(const AttentionConfig &config);

/// Prints the table (condition, pattn's rule, ONNX Runtime's) as Markdown.
void printEligibilityTable(llvm::raw_ostream &os);

} // namespace pattn

#endif // PATTN_DIALECT_PATTN_TRANSFORMS_ELIGIBILITY_H
