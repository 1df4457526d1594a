//===- SelectBackend.cpp - Choose XQA or portable per op --------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements --pattn-select-backend. It asks each attention op's
// tensor-core family (DecodeFamilies.h: the eligibility table of SPEC §6 on
// every chip built for, and what the family's own layout needs) whether it
// serves the op, records the answer as a typed attribute and explains it in
// a remark, so a user always sees why an op did not get the tensor-core
// path.
//
//===----------------------------------------------------------------------===//

#include "Planning/DecodeFamilies.h"
#include "pattn/Conversion/PAttnToGPU.h"
#include "pattn/Dialect/PAttn/IR/PAttnOps.h"
#include "pattn/Dialect/PAttn/Transforms/Eligibility.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/DebugLog.h"
#include "llvm/Support/raw_ostream.h"

#define DEBUG_TYPE "pattn-select-backend"

namespace pattn {
#define GEN_PASS_DEF_PATTNSELECTBACKEND
#include "pattn/Conversion/Passes.h.inc"
} // namespace pattn

using namespace mlir;
using namespace pattn;

namespace {
struct SelectBackendPass
    : public ::pattn::impl::PAttnSelectBackendBase<SelectBackendPass> {
  using Base::Base;
  LogicalResult initialize(MLIRContext *context) override;
  void runOnOperation() override;

  /// The options, checked by initialize.
  SmallVector<::pattn::Chip> targets;
  ::pattn::ForceBackend forced = ::pattn::ForceBackend::Auto;

  /// Decides one op; false when force=xqa meets an ineligible op.
  template <typename OpTy> bool decide(OpTy op);
};
} // namespace

template <typename OpTy> bool SelectBackendPass::decide(OpTy op) {
  SmallVector<std::string> failures =
      ::pattn::tensorCoreFamilyOf(op).rejections(op, targets);
  ::pattn::Eligibility eligibility;
  eligibility.failures = failures;
  LDBG() << op->getName() << " at " << op.getLoc() << ": "
         << eligibility.explain();

  Backend backend = eligibility.isXqa() ? Backend::xqa : Backend::portable;
  std::string reason = eligibility.explain();
  if (forced == ::pattn::ForceBackend::Portable) {
    backend = Backend::portable;
    reason = "portable: forced";
  } else if (forced == ::pattn::ForceBackend::Xqa && !eligibility.isXqa()) {
    op.emitError() << "force=xqa, but the op is not eligible for XQA on "
                   << ::pattn::joinChipNames(targets) << ": "
                   << llvm::join(eligibility.failures, "; ");
    return false;
  }
  if (backend == Backend::xqa) {
    reason = "xqa: eligible on " + ::pattn::joinChipNames(targets);
    ++numXqa;
  } else {
    ++numPortable;
  }
  op.setBackendAttr(BackendAttr::get(op.getContext(), backend));
  op.emitRemark() << reason;
  return true;
}

std::optional<::pattn::ForceBackend>
pattn::parseForceBackend(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<ForceBackend>>(name)
      .Case("auto", ForceBackend::Auto)
      .Case("xqa", ForceBackend::Xqa)
      .Case("portable", ForceBackend::Portable)
      .Default(std::nullopt);
}

LogicalResult SelectBackendPass::initialize(MLIRContext *context) {
  // Options are not ops: their errors carry no location and dump no IR.
  auto fail = [&]() {
    return emitError(UnknownLoc::get(context)) << "pattn-select-backend: ";
  };
  targets.clear();
  std::string error = ::pattn::parseChipList(chips, targets);
  if (!error.empty())
    return fail() << "chips: " << error;
  std::optional<::pattn::ForceBackend> forceValue =
      ::pattn::parseForceBackend(force);
  if (!forceValue)
    return fail() << "unknown force='" << force
                  << "'; expected auto, xqa or portable";
  forced = *forceValue;
  return success();
}

void SelectBackendPass::runOnOperation() {
  Operation *root = getOperation();
  if (printTable)
    ::pattn::printEligibilityTable(llvm::errs());

  bool ok = true;
  root->walk([&](Operation *op) {
    if (auto attention = dyn_cast<PagedAttentionOp>(op))
      ok &= decide(attention);
    else if (auto mla = dyn_cast<MlaDecodeOp>(op))
      ok &= decide(mla);
  });
  if (!ok)
    signalPassFailure();
}
