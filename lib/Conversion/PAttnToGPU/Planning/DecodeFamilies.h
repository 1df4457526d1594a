//===- DecodeFamilies.h - The decode kernel families' registry --*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// One row per decode kernel family (Kernels/Decode/*): which ops it
// decodes, why it cannot serve an op on a set of chips, the plan it makes
// for them and the kernels it builds from that plan. --pattn-select-backend
// asks the tensor-core family of an op whether it serves every chip built
// for, --pattn-plan-decode asks the chosen family for its plan, and
// --convert-pattn-to-gpu hands each plan to the family that owns it. A new
// decode kernel is a new row here and a file under Kernels/Decode.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_LIB_CONVERSION_PATTNTOGPU_PLANNING_DECODEFAMILIES_H
#define PATTN_LIB_CONVERSION_PATTNTOGPU_PLANNING_DECODEFAMILIES_H

#include "Kernels/Kernels.h"
#include "Planning/DecodePlan.h"
#include "pattn/Dialect/PAttn/IR/PAttnOps.h"
#include "pattn/Target/TargetDescription.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace pattn {

/// The decode kernel families, one per kind of plan.
enum class DecodeFamilyKind : uint8_t {
  PortablePaged, ///< Decode/Portable.cpp over a paged cache
  PortableMla,   ///< Decode/Portable.cpp over MLA records
  XqaPaged,      ///< Decode/XqaPaged.cpp (mma.sync m16n8k16)
  PrefillPaged,  ///< Prefill/PrefillPaged.cpp (prompts, 64 rows a block)
  XqaMlaMmaSync, ///< Decode/XqaMlaMmaSync.cpp (16 heads per block)
  XqaMlaWgmma,   ///< Decode/XqaMlaWgmma.cpp (64 heads per block, sm_90a)
};

/// The planner's options (--pattn-plan-decode's).
struct DecodePlanOptions {
  int64_t portableKeysPerSplit = 512;
  int64_t xqaMaxKeysPerSplit = 4096;
  /// The XQA decode's keys per tile and ring stages (0: the planner's
  /// choice).
  int64_t xqaKeysPerTile = 0, xqaStages = 0;
  /// XQA decode plans with a copy warp (XqaPlanAttr's threads = 160).
  bool xqaCopyWarp = false;
  /// XQA decode plans that score a tile ahead (XqaPlanAttr's scores_ahead).
  bool xqaScoresAhead = false;
  /// XQA decode plans whose blocks of this many KV heads form a cluster
  /// (XqaPlanAttr's cluster_heads; 0 or 1: none).
  int64_t xqaClusterHeads = 0;
  /// XQA decode plans whose splits form a cluster that merges them
  /// (XqaPlanAttr's cluster_splits; 0 or 1: none).
  int64_t xqaClusterSplits = 0;
  /// XQA decode plans whose lone split merges its own rows (XqaPlanAttr's
  /// merges_unsplit).
  bool xqaMergeUnsplit = false;
  /// The tensor-core kernel of a prompt: XQA's query tiles (false) or the
  /// prefill family (true), where it serves the op.
  bool prefill = false;
  /// Where the prefill family runs on wgmma (prefillWgmmaRejection).
  PrefillWgmma prefillWgmma = PrefillWgmma::whereFaster;
};

/// The caches a decode reads, as the host resolved them: a paged op's key
/// and value, or an MLA op's records.
struct DecodeSources {
  const CacheBuffers *key = nullptr, *value = nullptr;
  const RecordBuffers *records = nullptr;
  /// The fold the XQA decode computes itself (HostRewriter::findFusedFolds).
  const FusedFold *fold = nullptr;
};

struct DecodeFamily {
  DecodeFamilyKind kind;
  /// For remarks and debug output: "xqa-mla-wgmma".
  llvm::StringLiteral name;
  /// The backend --pattn-select-backend records for it.
  Backend backend;
  /// Whether the family decodes ops like `op` (paged or MLA) at all.
  bool (*decodes)(mlir::Operation *op);
  /// One sentence per condition under which the family cannot serve `op`
  /// on some chip of `targets` (naming the value, and the chip where it
  /// depends on one); empty when it serves all of them.
  llvm::SmallVector<std::string> (*rejections)(mlir::Operation *op,
                                               llvm::ArrayRef<Chip> targets);
  /// The plan for `op` on `targets`, where `rejections` finds nothing.
  mlir::Attribute (*plan)(mlir::Operation *op, llvm::ArrayRef<Chip> targets,
                          const DecodePlanOptions &options);
  /// Whether `plan` is one of this family's plans.
  bool (*owns)(mlir::Attribute plan);
  /// The family's decode and merge kernels for `op` under `plan`.
  DecodeKernels (*build)(KernelModule &module, mlir::Operation *op,
                         mlir::Attribute plan, const DecodeSources &sources);
};

/// Every family, tensor-core families of an op before its portable one and,
/// among the tensor-core MLA families, the warpgroup kernel first.
llvm::ArrayRef<DecodeFamily> decodeFamilies();

/// The family of `kind`.
const DecodeFamily &decodeFamily(DecodeFamilyKind kind);

/// The family that builds `op` under `plan` (a plan attribute of the
/// dialect, verified against the op's kind).
const DecodeFamily &familyOfPlan(mlir::Operation *op, mlir::Attribute plan);

/// The tensor-core family every chip of an op must be served by for the op
/// to get backend xqa: XQA paged for paged ops, MLA mma.sync for MLA (the
/// warpgroup kernel replaces it per chip where it serves, in chip_plans).
const DecodeFamily &tensorCoreFamilyOf(mlir::Operation *op);

/// The portable family of an op.
const DecodeFamily &portableFamilyOf(mlir::Operation *op);

} // namespace pattn

#endif // PATTN_LIB_CONVERSION_PATTNTOGPU_PLANNING_DECODEFAMILIES_H
