//===- Eligibility.cpp - XQA versus portable: the one rule table ----------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the eligibility table of SPEC §6. Each row is one
// check in checkXqaEligibility and one line in printEligibilityTable; keep
// the two in the same order so the printed table is the code's truth.
//
//===----------------------------------------------------------------------===//

#include "pattn/Dialect/PAttn/Transforms/Eligibility.h"
#include "pattn/Numerics/Numerics.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace pattn;

std::string Eligibility::explain() const {
  if (isXqa())
    return "xqa";
  return "portable: " + llvm::join(failures, "; ");
}

static bool isXqaHeadDim(int64_t headDim) {
  return headDim == 64 || headDim == 128 || headDim == 256;
}

/// XQA tiles a KV head's query rows (g heads times the query tokens) into
/// two m16 mma tiles.
static constexpr int64_t kMaxRowsPerKvHead = 32;

Eligibility pattn::checkXqaEligibility(const AttentionConfig &config) {
  Eligibility result;
  auto fail = [&](std::string reason) {
    result.failures.push_back(std::move(reason));
  };

  // Row 0: MLA decode has no tensor-core kernel yet; the paged rows below
  // (head_dim, rows per KV head) describe the paged kernel and do not apply.
  if (config.mla) {
    fail("MLA decode has no tensor-core kernel yet (the portable kernel "
         "runs it)");
    return result;
  }

  // Row 1: mma.sync m16n8k16, cp.async and ldmatrix need sm_80.
  if (computeCapability(config.chip) < 80)
    fail(llvm::formatv("chip {0} below sm_80", stringifyChip(config.chip)));

  // Row 2: the tensor-core path multiplies f16 or bf16 operands.
  if (!config.activation ||
      !(config.activation.isF16() || config.activation.isBF16())) {
    std::string name;
    llvm::raw_string_ostream os(name);
    if (config.activation)
      os << config.activation;
    else
      os << "<none>";
    fail(llvm::formatv("activation {0} not in {{f16, bf16}", name));
  }

  // Row 2b: the operands are the activation's 16-bit type, so a 16-bit
  // cache of the other type would be rounded (bf16 keeps 3 bits fewer than
  // f16, f16 a narrower range than bf16); quantized codes are exact in both.
  if (config.activation &&
      (config.activation.isF16() || config.activation.isBF16())) {
    pattn::Encoding other = config.activation.isF16() ? pattn::Encoding::bf16
                                                      : pattn::Encoding::f16;
    for (auto [side, encoding] :
         {std::pair<const char *, pattn::Encoding>{"K", config.keyEncoding},
          {"V", config.valueEncoding}})
      if (encoding == other)
        fail(llvm::formatv("{0} cache {1} with {2} activations", side,
                           pattn::stringifyEncoding(encoding),
                           config.activation.isF16() ? "f16" : "bf16"));
  }

  // Row 3: the tile shapes of the kernel.
  if (!isXqaHeadDim(config.headDim))
    fail(llvm::formatv("head_dim {0} not in {{64, 128, 256}", config.headDim));

  // Row 4: query rows per KV head.
  int64_t group = config.kvHeads > 0 ? config.numHeads / config.kvHeads : 0;
  if (group * config.queryTokens > kMaxRowsPerKvHead)
    fail(llvm::formatv("g x query tokens = {0} x {1} = {2} > {3}", group,
                       config.queryTokens, group * config.queryTokens,
                       kMaxRowsPerKvHead));

  // Row 5: any legal page size (the pages are gathered per block).
  if (config.blockSize < 16 || !llvm::isPowerOf2_64(config.blockSize))
    fail(llvm::formatv("block_size {0} is not a power of two >= 16",
                       config.blockSize));

  // Row 6: every encoding dequantizes on every chip (hardware cvt where the
  // chip has it, bit tricks elsewhere), so no encoding is excluded.

  // Row 7: XQA reads K at a scalar scale.
  switch (config.keyFold) {
  case KeyScaleFold::NotNeeded:
  case KeyScaleFold::GuardedFolded:
    break;
  case KeyScaleFold::StaticUnfolded:
    fail("K channel scales not folded (run --pattn-fold-channel-scales)");
    break;
  case KeyScaleFold::StaticTooWide:
    fail(llvm::formatv("K channel scales span {0} binades > {1}",
                       config.keyBinadeSpan,
                       ::pattn::numerics::kFoldBinadeBudget));
    break;
  case KeyScaleFold::DynamicUnfolded:
    fail("dynamic K channel scales not folded (run "
         "--pattn-fold-channel-scales)");
    break;
  case KeyScaleFold::GuardedFallback:
    fail("device-guarded fallback for K channel scales that do not fold");
    break;
  }

  // Row 7b: XQA reads V at a scalar (or per-token) scale too; the fold
  // moves channel scales to the output.
  if (config.valueChannelScales)
    fail("V channel scales not moved to the output (run "
         "--pattn-fold-channel-scales)");

  // Row 8: speculative decode up to 8 query tokens per sequence.
  if (config.queryTokens < 1 || config.queryTokens > 8)
    fail(llvm::formatv("query tokens {0} not in [1, 8]", config.queryTokens));

  // Row 9: softcap is applied to the fp32 logits on both paths.
  return result;
}

void pattn::printEligibilityTable(llvm::raw_ostream &os) {
  os << "| condition | pattn XQA | ONNX Runtime XQA (anchor) |\n"
     << "|---|---|---|\n"
     << "| chip | >= sm_80 | >= sm_80 |\n"
     << "| activations | f16, bf16 | f16 (INT4), f16/bf16 (INT8/FP8) |\n"
     << "| 16-bit caches | the activation's type (f16 with f16, bf16 with "
        "bf16) | the activation's type |\n"
     << "| head_dim | 64, 128, 256 | 64/128/256; INT4: 256 only |\n"
     << "| g x query tokens | <= 32 rows per KV head | g in {4,6,8,16,32}; "
        "INT4: g = 6 only |\n"
     << "| block_size | any legal (power of two >= 16) | multiple of 128 |\n"
     << "| K/V encodings | f16, bf16, i8, f8e4m3, f8e5m2, i4, nvfp4 on every "
        "chip | INT4 per-channel only; NVFP4 nowhere |\n"
     << "| channel K scale | folded (rows renormalized, so for any query "
        "magnitude): static table <= 24 binades, or dynamic with a device "
        "guard | fold always on (env opt-out) |\n"
     << "| channel V scale | moved to the output by the fold | applied in "
        "the kernel |\n"
     << "| query tokens per sequence | 1-8 | 1-8 with metadata bound |\n"
     << "| softcap | supported | not supported on XQA |\n"
     << "| MLA decode (latent + rope records) | portable only: no "
        "tensor-core MLA kernel yet | no MLA |\n";
}
