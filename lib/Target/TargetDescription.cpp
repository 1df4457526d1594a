//===- TargetDescription.cpp - What pattn knows about each chip -----------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file holds the chip capability table. The conversion columns record
// which chips may use the hardware fp8/fp4 conversions (the NVPTX backend
// aborts with "Cannot select" on chips without them); sm_89 needs PTX 8.1
// for cvt.rn.f16x2.e4m3x2 (sm_90 has it from 7.8), hence +ptx81. Shared
// memory figures are the CUDA programming guide's per compute capability
// (opt-in maximum per block, and per SM).
//
//===----------------------------------------------------------------------===//

#include "pattn/Target/TargetDescription.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ErrorHandling.h"

using namespace pattn;

namespace {
constexpr int64_t KiB = 1024;
constexpr uint8_t kMmaSync = uint8_t(MmaKind::MmaSyncM16N8K16);
constexpr uint8_t kWgmma = uint8_t(MmaKind::WgmmaM64NNK16);
constexpr uint8_t kFp8 = uint8_t(HardwareConversion::F8x2ToF16x2);
constexpr uint8_t kFp4 = uint8_t(HardwareConversion::F4x2ToF16x2);
} // namespace

// Every column is read: the eligibility rules and the planner (MMA kinds,
// shared memory, registers), the conversion (conversions, PTX features,
// the arch-specific rule of chipForDevice).
// clang-format off
static const TargetDescription kTargets[] = {
  // chip          name       cc   arch   ptx       mma                 conversions  smem/block smem/SM    regs/SM
  {Chip::SM80,   "sm_80",   80,  false, "+ptx80", kMmaSync,          0,           163 * KiB, 164 * KiB, 65536},
  {Chip::SM86,   "sm_86",   86,  false, "+ptx80", kMmaSync,          0,            99 * KiB, 100 * KiB, 65536},
  {Chip::SM87,   "sm_87",   87,  false, "+ptx80", kMmaSync,          0,           163 * KiB, 164 * KiB, 65536},
  {Chip::SM89,   "sm_89",   89,  false, "+ptx81", kMmaSync,          kFp8,         99 * KiB, 100 * KiB, 65536},
  {Chip::SM90,   "sm_90",   90,  false, "+ptx80", kMmaSync,          kFp8,        227 * KiB, 228 * KiB, 65536},
  {Chip::SM90a,  "sm_90a",  90,  true,  "+ptx80", kMmaSync | kWgmma, kFp8,        227 * KiB, 228 * KiB, 65536},
  {Chip::SM100,  "sm_100",  100, false, "+ptx86", kMmaSync,          kFp8,        227 * KiB, 228 * KiB, 65536},
  {Chip::SM100a, "sm_100a", 100, true,  "+ptx86", kMmaSync,          kFp8 | kFp4, 227 * KiB, 228 * KiB, 65536},
  {Chip::SM120,  "sm_120",  120, false, "+ptx87", kMmaSync,          kFp8,         99 * KiB, 100 * KiB, 65536},
  {Chip::SM120a, "sm_120a", 120, true,  "+ptx87", kMmaSync,          kFp8 | kFp4,  99 * KiB, 100 * KiB, 65536},
};
// clang-format on

const TargetDescription &pattn::getTargetDescription(Chip chip) {
  for (const TargetDescription &target : kTargets)
    if (target.chip == chip)
      return target;
  llvm_unreachable("chip missing from the target table");
}

std::optional<Chip> pattn::parseChip(llvm::StringRef name) {
  for (const TargetDescription &target : kTargets)
    if (target.name == name)
      return target.chip;
  return std::nullopt;
}

llvm::StringRef pattn::stringifyChip(Chip chip) {
  return getTargetDescription(chip).name;
}

unsigned pattn::computeCapability(Chip chip) {
  return getTargetDescription(chip).capability;
}

llvm::ArrayRef<Chip> pattn::supportedChips() {
  static const Chip chips[] = {
      Chip::SM80,  Chip::SM86,  Chip::SM87,   Chip::SM89,  Chip::SM90,
      Chip::SM90a, Chip::SM100, Chip::SM100a, Chip::SM120, Chip::SM120a};
  return chips;
}

std::string pattn::supportedChipList() {
  return llvm::join(llvm::map_range(kTargets,
                                    [](const TargetDescription &target) {
                                      return target.name.str();
                                    }),
                    ", ");
}

llvm::ArrayRef<Chip> pattn::defaultCompileChips() {
  static const Chip chips[] = {Chip::SM80,  Chip::SM86,   Chip::SM89,
                               Chip::SM90a, Chip::SM100a, Chip::SM120a};
  return chips;
}

std::optional<Chip> pattn::chipForDevice(llvm::ArrayRef<Chip> built,
                                         unsigned capability) {
  // Exactly this capability: the device runs that chip's cubin, an
  // arch-specific chip's (sm_90a) before a generic one's (sm_90).
  for (bool archSpecific : {true, false})
    for (Chip chip : built)
      if (computeCapability(chip) == capability &&
          getTargetDescription(chip).archSpecific == archSpecific)
        return chip;
  // Otherwise a generic chip below it, the highest: its PTX is JIT-compiled
  // forward. Arch-specific cubins never run on another capability.
  std::optional<Chip> best;
  for (Chip chip : built) {
    const TargetDescription &target = getTargetDescription(chip);
    if (target.archSpecific || target.capability > capability)
      continue;
    if (!best || computeCapability(*best) < target.capability)
      best = chip;
  }
  return best;
}

std::string pattn::joinChipNames(llvm::ArrayRef<Chip> chips) {
  llvm::SmallVector<llvm::StringRef> names;
  for (Chip chip : chips)
    names.push_back(stringifyChip(chip));
  return llvm::join(names, ", ");
}

std::string pattn::parseChipList(llvm::ArrayRef<std::string> names,
                                 llvm::SmallVectorImpl<Chip> &chips) {
  chips.clear();
  for (const std::string &name : names) {
    if (name.empty())
      return "the chip list has an empty name; supported chips: " +
             supportedChipList();
    std::optional<Chip> chip = parseChip(name);
    if (!chip)
      return "unsupported chip '" + name +
             "'; supported chips: " + supportedChipList();
    if (llvm::is_contained(chips, *chip))
      return "chip '" + name + "' named twice";
    chips.push_back(*chip);
  }
  if (chips.empty())
    chips.append(defaultCompileChips().begin(), defaultCompileChips().end());
  return "";
}
