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

/// The slices of the latent that the rows M4 and M5 speak of (SPEC §6).
static constexpr int64_t kMlaLatentSlices = 4;

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

/// A type as written in IR, or "<none>".
static std::string typeName(mlir::Type type) {
  if (!type)
    return "<none>";
  std::string name;
  llvm::raw_string_ostream os(name);
  os << type;
  return name;
}

/// The rows of the tensor-core MLA kernel (Kernels/Decode/XqaMla*.cpp), in
/// the order printEligibilityTable prints them.
static void checkMlaRows(const AttentionConfig &config,
                         llvm::function_ref<void(std::string)> fail) {
  const MlaRecordLayout &record = config.mlaRecord;
  // M1: mma.sync m16n8k16, cp.async and ldmatrix (sm_80 and up).
  if (!getTargetDescription(config.chip).has(MmaKind::MmaSyncM16N8K16))
    fail(llvm::formatv("chip {0} has no mma.sync m16n8k16",
                       stringifyChip(config.chip)));

  // M2: a bf16 query. bf16 lanes multiply it as it is; quantized lanes
  // multiply it in f16 after a power of two per row (bf16's 8 significant
  // bits are exact in f16's 11).
  if (!config.activation || !config.activation.isBF16())
    fail(llvm::formatv("MLA query {0} is not bf16",
                       typeName(config.activation)));

  // M3: 16 heads of one token are the M rows of one mma tile.
  if (config.numHeads % 16 != 0)
    fail(llvm::formatv("MLA num_heads {0} not a multiple of 16",
                       config.numHeads));

  // M4 (SPEC §6): the latent is served in kMlaLatentSlices slices, one
  // per warp of the kernel: each of the 4 warps owns latent / 4 value channels
  // (at most 64 accumulators per thread), in chunks of 8 n-tile columns of one
  // 32-bit word of codes each; the key is latent + rope channels in 16-channel
  // k-steps.
  if (record.latent % 64 != 0 || record.latent > 512)
    fail(llvm::formatv("MLA latent {0} not a multiple of 64 up to 512",
                       record.latent));
  int64_t latentWordChannels =
      record.latentFormat == MlaLatentFormat::BF16
          ? 2
          : (record.latentFormat == MlaLatentFormat::E2M1GroupScaled ? 8 : 4);
  int64_t chunk = 8 * latentWordChannels;
  if (record.latent % 64 == 0 && record.latent <= 512 &&
      record.latent % (kMlaLatentSlices * chunk) != 0)
    fail(llvm::formatv("MLA latent {0} not a multiple of {1} for its {2}-"
                       "channel words (4 warps x 8 words)",
                       record.latent, kMlaLatentSlices * chunk,
                       latentWordChannels));
  if (record.rope % 16 != 0 || record.rope > 128)
    fail(llvm::formatv("MLA rope {0} not a multiple of 16 up to 128",
                       record.rope));

  // M5: the latent formats the kernel dequantizes exactly into f16 or bf16
  // (a block scale must cover whole 32-channel chunks of P V, and one
  // warp's channels one block or a whole number of them).
  int64_t warpChannels = record.latent / kMlaLatentSlices;
  bool blockOk = record.latentScaleGroup > 0 &&
                 record.latentScaleGroup % 32 == 0 &&
                 (warpChannels % record.latentScaleGroup == 0 ||
                  record.latentScaleGroup % warpChannels == 0);
  if (record.latentFormat == MlaLatentFormat::Unsupported ||
      (record.latentFormat == MlaLatentFormat::E4M3BlockScaled && !blockOk))
    fail(llvm::formatv("MLA latent lane {0} not bf16, e4m3 (optionally with "
                       "f32 scales per multiple of 32 channels) or e2m1 with "
                       "e4m3 group-16 scales",
                       record.latentText));
  if (record.ropeFormat == MlaRopeFormat::Unsupported)
    fail(llvm::formatv("MLA rope lane {0} not bf16 or e4m3 (optionally with "
                       "one f32 scale)",
                       record.ropeText));

  // M6: each lane is read in 8-element pieces with one aligned load (16,
  // 8 or 4 bytes).
  auto alignment = [](int64_t bitsPerElement) {
    return 8 * bitsPerElement / 8;
  };
  int64_t latentBits =
      record.latentFormat == MlaLatentFormat::BF16
          ? 16
          : (record.latentFormat == MlaLatentFormat::E2M1GroupScaled ? 4 : 8);
  int64_t ropeBits = record.ropeFormat == MlaRopeFormat::BF16 ? 16 : 8;
  if (record.latentOffset % alignment(latentBits) != 0 ||
      record.ropeOffset % alignment(ropeBits) != 0)
    fail(llvm::formatv("MLA lanes at bytes {0} and {1} not aligned to their "
                       "8-element pieces",
                       record.latentOffset, record.ropeOffset));

  // M7: speculative decode up to 8 query tokens per sequence.
  if (config.queryTokens < 1 || config.queryTokens > 8)
    fail(llvm::formatv("query tokens {0} not in [1, 8]", config.queryTokens));
  // M8 (the tile fits the chip's shared memory) depends on the kernel's
  // layout: the XQA MLA family checks it (Conversion/PAttnToGPU/Planning).
}

Eligibility pattn::checkXqaEligibility(const AttentionConfig &config) {
  Eligibility result;
  auto fail = [&](std::string reason) {
    result.failures.push_back(std::move(reason));
  };

  // MLA decode has its own kernel and rows (checkMlaRows); the paged rows
  // below (head_dim, rows per KV head, encodings) do not apply to it.
  if (config.mla) {
    checkMlaRows(config, fail);
    return result;
  }

  // Row 1: mma.sync m16n8k16, cp.async and ldmatrix (sm_80 and up).
  if (!getTargetDescription(config.chip).has(MmaKind::MmaSyncM16N8K16))
    fail(llvm::formatv("chip {0} has no mma.sync m16n8k16",
                       stringifyChip(config.chip)));

  // Row 2: the tensor-core path multiplies f16 or bf16 operands.
  if (!config.activation ||
      !(config.activation.isF16() || config.activation.isBF16()))
    fail(llvm::formatv("activation {0} not in {{f16, bf16}",
                       typeName(config.activation)));

  // Row 2b: the operands are the activation's 16-bit type, so a 16-bit
  // cache of the other type would be rounded (bf16 keeps 3 bits fewer than
  // f16, f16 a narrower range than bf16); quantized codes are exact in both.
  if (config.activation &&
      (config.activation.isF16() || config.activation.isBF16())) {
    pattn::Encoding same = config.activation.isF16() ? pattn::Encoding::f16
                                                     : pattn::Encoding::bf16;
    for (auto [side, encoding] :
         {std::pair<const char *, pattn::Encoding>{"K", config.keyEncoding},
          {"V", config.valueEncoding}})
      if (pattn::encodingInfo(encoding).isPlainFloat() && encoding != same)
        fail(llvm::formatv("{0} cache {1} with {2} activations", side,
                           pattn::stringifyEncoding(encoding),
                           config.activation.isF16() ? "f16" : "bf16"));
  }

  // Row 3: the tile shapes of the kernel.
  if (!isXqaHeadDim(config.headDim))
    fail(llvm::formatv("head_dim {0} not in {{64, 128, 256}", config.headDim));

  // Row 4: query rows per KV head; a prompt is cut into query tiles of
  // floor(32 / g) tokens, so only g itself is bounded.
  int64_t group = config.kvHeads > 0 ? config.numHeads / config.kvHeads : 0;
  if (config.queryTokens > 8 && group > kMaxRowsPerKvHead)
    fail(llvm::formatv("g = {0} > {1}: a prompt's query tile of one token "
                       "has more rows than the kernel's {1}",
                       group, kMaxRowsPerKvHead));
  else if (config.queryTokens <= 8 &&
           group * config.queryTokens > kMaxRowsPerKvHead)
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

  // Row 8: speculative decode up to 8 query tokens per sequence as one
  // block's rows; a prompt (up to 32768) in query tiles (row 4).
  if (config.queryTokens < 1)
    fail(llvm::formatv("query tokens {0} < 1", config.queryTokens));

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
     << "| query tokens per sequence | 1-8 (g x tokens <= 32 rows), prompts "
        "up to 32768 in query tiles of floor(32 / g) tokens (g <= 32) | 1-8 "
        "with metadata bound; prompts on its own prefill kernels |\n"
     << "| softcap | supported | not supported on XQA |\n"
     << "| MLA: chip | >= sm_80 | no MLA |\n"
     << "| MLA: query | bf16 | no MLA |\n"
     << "| MLA: num_heads | a multiple of 16 | no MLA |\n"
     << "| MLA: latent, rope | latent a multiple of 64 up to 512 (128 for "
        "e4m3, 256 for e2m1), rope a multiple of 16 up to 128 | no MLA |\n"
     << "| MLA: lanes | latent bf16, e4m3 (f32 scales per multiple of 32 "
        "channels) or e2m1 + e4m3 group-16 scales; rope bf16 or e4m3 (one f32 "
        "scale) | no MLA |\n"
     << "| MLA: lane offsets | aligned to 8-element pieces (16 bytes for "
        "bf16, 8 for e4m3, 4 for e2m1) | no MLA |\n"
     << "| MLA: query tokens per sequence | 1-8 | no MLA |\n"
     << "| MLA: shared memory | the tile fits the chip (asked of the XQA MLA "
        "family, which knows its layout) | no MLA |\n";
}
