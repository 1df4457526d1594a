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
  /// A `pattn.mla_decode` (latent + rope records) rather than a paged op.
  bool mla = false;
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
