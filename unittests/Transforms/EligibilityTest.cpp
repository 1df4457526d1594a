//===- EligibilityTest.cpp - The XQA eligibility table --------------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// Tests pattn::checkXqaEligibility over a grid of configurations against an
// oracle written from SPEC §6 directly, and pins the wording of each
// failure, since users read these remarks.
//
//===----------------------------------------------------------------------===//

#include "pattn/Dialect/PAttn/Transforms/Eligibility.h"
#include "pattn/Target/TargetDescription.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"

using namespace pattn;
using pattn::Encoding;

namespace {
class EligibilityTest : public ::testing::Test {
protected:
  mlir::MLIRContext context;
  mlir::Type f16 = mlir::Float16Type::get(&context);
  mlir::Type bf16 = mlir::BFloat16Type::get(&context);
  mlir::Type f32 = mlir::Float32Type::get(&context);

  AttentionConfig base() {
    AttentionConfig config;
    config.chip = Chip::SM90a;
    config.activation = f16;
    config.headDim = 128;
    config.numHeads = 32;
    config.kvHeads = 8;
    config.queryTokens = 1;
    config.blockSize = 16;
    return config;
  }
};
} // namespace

TEST_F(EligibilityTest, ChipNamesRoundTrip) {
  for (Chip chip : supportedChips()) {
    EXPECT_EQ(parseChip(stringifyChip(chip)), chip);
    EXPECT_GE(computeCapability(chip), 80u);
  }
  EXPECT_EQ(supportedChips().size(), 10u);
  EXPECT_FALSE(parseChip("sm_75"));
  EXPECT_FALSE(parseChip("sm_90A"));
  EXPECT_FALSE(parseChip(""));
  EXPECT_EQ(supportedChipList(), "sm_80, sm_86, sm_87, sm_89, sm_90, sm_90a, "
                                 "sm_100, sm_100a, sm_120, sm_120a");
  EXPECT_EQ(computeCapability(Chip::SM90a), 90u);
  EXPECT_EQ(computeCapability(Chip::SM120a), 120u);
}

// The chip table's capabilities, as the rules and kernels read them: every
// chip runs the mma.sync decodes, only sm_90a has wgmma, fp8 pairs convert
// in hardware from sm_89 and e2m1 pairs on the arch-specific Blackwells, and
// a block never opts into more shared memory than its SM has.
TEST_F(EligibilityTest, TargetTableCapabilities) {
  for (Chip chip : supportedChips()) {
    const TargetDescription &target = getTargetDescription(chip);
    EXPECT_TRUE(target.has(MmaKind::MmaSyncM16N8K16)) << target.name.str();
    EXPECT_EQ(target.has(MmaKind::WgmmaM64NNK16), chip == Chip::SM90a)
        << target.name.str();
    EXPECT_EQ(target.has(HardwareConversion::F8x2ToF16x2),
              target.capability >= 89)
        << target.name.str();
    EXPECT_EQ(target.has(HardwareConversion::F4x2ToF16x2),
              chip == Chip::SM100a || chip == Chip::SM120a)
        << target.name.str();
    EXPECT_LT(target.sharedMemoryPerBlock, target.sharedMemoryPerSM);
    EXPECT_EQ(target.registersPerSM, 65536);
  }
}

TEST_F(EligibilityTest, BaseConfigurationIsXqa) {
  Eligibility result = checkXqaEligibility(base());
  EXPECT_TRUE(result.isXqa());
  EXPECT_EQ(result.explain(), "xqa");
}

// Every row, one value inside and one outside its bound, with the exact text.
TEST_F(EligibilityTest, EachRowNamesItsCondition) {
  struct Case {
    const char *what;
    std::function<void(AttentionConfig &)> edit;
    const char *failure; // nullptr: still eligible
  };
  const Case cases[] = {
      {"bf16 activations, 8-bit caches",
       [&](auto &c) {
         c.activation = bf16;
         c.keyEncoding = c.valueEncoding = Encoding::i8;
       },
       nullptr},
      {"f32 activations", [&](auto &c) { c.activation = f32; },
       "activation f32 not in {f16, bf16}"},
      {"head_dim 64", [](auto &c) { c.headDim = 64; }, nullptr},
      {"head_dim 256", [](auto &c) { c.headDim = 256; }, nullptr},
      {"head_dim 96", [](auto &c) { c.headDim = 96; },
       "head_dim 96 not in {64, 128, 256}"},
      {"head_dim 512", [](auto &c) { c.headDim = 512; },
       "head_dim 512 not in {64, 128, 256}"},
      {"g 32",
       [](auto &c) {
         c.numHeads = 32;
         c.kvHeads = 1;
       },
       nullptr},
      {"g 33",
       [](auto &c) {
         c.numHeads = 33;
         c.kvHeads = 1;
       },
       "g x query tokens = 33 x 1 = 33 > 32"},
      {"g 4 x 8 tokens", [](auto &c) { c.queryTokens = 8; }, nullptr},
      {"g 8 x 5 tokens",
       [](auto &c) {
         c.numHeads = 64;
         c.queryTokens = 5;
       },
       "g x query tokens = 8 x 5 = 40 > 32"},
      {"block_size 16", [](auto &c) { c.blockSize = 16; }, nullptr},
      {"block_size 8", [](auto &c) { c.blockSize = 8; },
       "block_size 8 is not a power of two >= 16"},
      {"block_size 48", [](auto &c) { c.blockSize = 48; },
       "block_size 48 is not a power of two >= 16"},
      {"prompt of 9 tokens, g 1 (query tiles of 32)",
       [](auto &c) {
         c.numHeads = 8;
         c.queryTokens = 9;
       },
       nullptr},
      {"prompt of 32768 tokens, g 32 (query tiles of 1)",
       [](auto &c) {
         c.numHeads = 64;
         c.kvHeads = 2;
         c.queryTokens = 32768;
       },
       nullptr},
      {"prompt, g 33",
       [](auto &c) {
         c.numHeads = 66;
         c.kvHeads = 2;
         c.queryTokens = 100;
       },
       "g = 33 > 32: a prompt's query tile of one token has more rows than "
       "the kernel's 32"},
      {"query tokens 0", [](auto &c) { c.queryTokens = 0; },
       "query tokens 0 < 1"},
      {"softcap", [](auto &c) { c.softcap = 30.0f; }, nullptr},
      {"guarded folded K",
       [](auto &c) { c.keyFold = KeyScaleFold::GuardedFolded; }, nullptr},
      {"25 binades",
       [](auto &c) {
         c.keyFold = KeyScaleFold::StaticTooWide;
         c.keyBinadeSpan = 25;
       },
       "K channel scales span 25 binades > 24"},
      {"unfolded static",
       [](auto &c) { c.keyFold = KeyScaleFold::StaticUnfolded; },
       "K channel scales not folded (run --pattn-fold-channel-scales)"},
      {"unfolded dynamic",
       [](auto &c) { c.keyFold = KeyScaleFold::DynamicUnfolded; },
       "dynamic K channel scales not folded (run "
       "--pattn-fold-channel-scales)"},
      {"guarded fallback",
       [](auto &c) { c.keyFold = KeyScaleFold::GuardedFallback; },
       "device-guarded fallback for K channel scales that do not fold"},
      {"bf16 K cache, f16 activations",
       [](auto &c) { c.keyEncoding = Encoding::bf16; },
       "K cache bf16 with f16 activations"},
      {"f16 V cache, bf16 activations",
       [&](auto &c) {
         c.activation = bf16;
         c.keyEncoding = Encoding::bf16;
       },
       "V cache f16 with bf16 activations"},
      {"bf16 caches, bf16 activations",
       [&](auto &c) {
         c.activation = bf16;
         c.keyEncoding = Encoding::bf16;
         c.valueEncoding = Encoding::i8;
       },
       nullptr},
      {"V channel scales in the kernel",
       [](auto &c) { c.valueChannelScales = true; },
       "V channel scales not moved to the output (run "
       "--pattn-fold-channel-scales)"},
  };
  for (const Case &c : cases) {
    AttentionConfig config = base();
    c.edit(config);
    Eligibility result = checkXqaEligibility(config);
    if (!c.failure) {
      EXPECT_TRUE(result.isXqa()) << c.what << ": " << result.explain();
      continue;
    }
    ASSERT_EQ(result.failures.size(), 1u) << c.what << ": " << result.explain();
    EXPECT_EQ(result.failures.front(), c.failure) << c.what;
    EXPECT_EQ(result.explain(), std::string("portable: ") + c.failure);
  }
}

// The oracle below restates SPEC §6; the grid covers every chip, encoding
// pair and the shape axes around their bounds.
TEST_F(EligibilityTest, GridAgreesWithSpecTable) {
  const Encoding encodings[] = {
      Encoding::f16,    Encoding::bf16, Encoding::i8,   Encoding::f8e4m3,
      Encoding::f8e5m2, Encoding::i4,   Encoding::nvfp4};
  int checked = 0, eligible = 0;
  for (Chip chip : supportedChips())
    for (mlir::Type activation : {f16, bf16, f32})
      for (int64_t headDim : {32, 64, 96, 128, 192, 256, 512})
        for (int64_t group : {1, 4, 6, 8, 16, 32, 33, 64})
          for (int64_t tokens : {1, 2, 4, 5, 8, 9})
            for (int64_t blockSize : {8, 16, 64, 128})
              for (Encoding key : encodings) {
                AttentionConfig config;
                config.chip = chip;
                config.activation = activation;
                config.headDim = headDim;
                config.kvHeads = 2;
                config.numHeads = 2 * group;
                config.queryTokens = tokens;
                config.blockSize = blockSize;
                config.keyEncoding = key;
                config.valueEncoding = encodings[(checked + 3) % 7];
                Encoding value = config.valueEncoding;
                bool mixed16 =
                    (activation.isF16() &&
                     (key == Encoding::bf16 || value == Encoding::bf16)) ||
                    (activation.isBF16() &&
                     (key == Encoding::f16 || value == Encoding::f16));
                bool expected =
                    (activation.isF16() || activation.isBF16()) && !mixed16 &&
                    (headDim == 64 || headDim == 128 || headDim == 256) &&
                    blockSize >= 16 &&
                    // A decode's rows, or a prompt's query tiles.
                    (tokens <= 8 ? group * tokens <= 32 : group <= 32);
                Eligibility result = checkXqaEligibility(config);
                ASSERT_EQ(result.isXqa(), expected) << result.explain();
                ++checked;
                eligible += expected;
              }
  EXPECT_EQ(checked, 10 * 3 * 7 * 8 * 6 * 4 * 7);
  EXPECT_GT(eligible, 0);
}

TEST_F(EligibilityTest, SeveralFailuresAreAllNamed) {
  AttentionConfig config = base();
  config.headDim = 96;
  config.numHeads = 64;
  config.kvHeads = 1;
  config.activation = f32;
  Eligibility result = checkXqaEligibility(config);
  EXPECT_EQ(result.explain(),
            "portable: activation f32 not in {f16, bf16}; head_dim 96 not in "
            "{64, 128, 256}; g x query tokens = 64 x 1 = 64 > 32");
}

TEST_F(EligibilityTest, PrintedTableHasEveryRow) {
  std::string text;
  llvm::raw_string_ostream os(text);
  printEligibilityTable(os);
  for (const char *row :
       {"| chip |", "| activations |", "| 16-bit caches |",
        "| channel V scale |", "| head_dim |", "| g x query tokens |",
        "| block_size |", "| K/V encodings |", "| channel K scale |",
        "| query tokens per sequence |", "| softcap |"})
    EXPECT_NE(text.find(row), std::string::npos) << row;
}

// Host dispatch: a device runs the cubin of its exact capability, else the
// PTX of the highest generic chip below it; never another capability's
// arch-specific cubin (the sm_100a-on-12.0 bug).
TEST_F(EligibilityTest, ChipForDevicePicksTheExactCapabilityFirst) {
  const Chip blackwell[] = {Chip::SM100a, Chip::SM120};
  EXPECT_EQ(chipForDevice(blackwell, 120), Chip::SM120);
  EXPECT_EQ(chipForDevice(blackwell, 100), Chip::SM100a);
  const Chip archOnly[] = {Chip::SM100a};
  EXPECT_EQ(chipForDevice(archOnly, 120), std::nullopt);
  const Chip mixed[] = {Chip::SM80, Chip::SM86, Chip::SM90a};
  EXPECT_EQ(chipForDevice(mixed, 90), Chip::SM90a);
  EXPECT_EQ(chipForDevice(mixed, 89), Chip::SM86);
  EXPECT_EQ(chipForDevice(mixed, 120), Chip::SM86);
  EXPECT_EQ(chipForDevice(mixed, 75), std::nullopt);
  // sm_90a's kernels may use wgmma, which sm_90's lack: a 9.0 device
  // runs them whichever comes first in the build.
  const Chip hopper[] = {Chip::SM90, Chip::SM90a};
  EXPECT_EQ(chipForDevice(hopper, 90), Chip::SM90a);
  const Chip generic[] = {Chip::SM90, Chip::SM80};
  EXPECT_EQ(chipForDevice(generic, 100), Chip::SM90);
}
