//===- PAttnDialect.cpp - pattn dialect, attributes and types -------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the pattn dialect's registration and its attributes
// and types: the lane and record syntax (with presets printed by name), and
// the type verifiers that enforce the structural rules of SPEC §2-3.
//
//===----------------------------------------------------------------------===//

#include "pattn/Dialect/PAttn/IR/PAttnDialect.h"
#include "pattn/Dialect/PAttn/IR/PAttnOps.h"
#include "pattn/Numerics/Numerics.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace pattn;
namespace numerics = ::pattn::numerics;

#include "pattn/Dialect/PAttn/IR/PAttnDialect.cpp.inc"
#include "pattn/Dialect/PAttn/IR/PAttnEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "pattn/Dialect/PAttn/IR/PAttnAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "pattn/Dialect/PAttn/IR/PAttnTypes.cpp.inc"

void PAttnDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "pattn/Dialect/PAttn/IR/PAttnAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "pattn/Dialect/PAttn/IR/PAttnTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "pattn/Dialect/PAttn/IR/PAttnOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// LaneAttr
//===----------------------------------------------------------------------===//

/// Bits of a lane element, or 0 for a type a record cannot hold.
static unsigned laneElementBits(Type type) {
  if (isa<Float32Type>(type))
    return 32;
  if (isa<Float16Type, BFloat16Type>(type))
    return 16;
  if (isa<Float8E4M3FNType, Float8E5M2Type>(type) || type.isSignlessInteger(8))
    return 8;
  if (isa<Float4E2M1FNType>(type))
    return 4;
  return 0;
}

unsigned LaneAttr::getElementBits() const {
  return laneElementBits(getElementType());
}

uint64_t LaneAttr::getByteSize() const {
  return (uint64_t(getCount()) * getElementBits() + 7) / 8;
}

FailureOr<SmallVector<Chip>> pattn::parseChipListParameter(AsmParser &parser) {
  SmallVector<Chip> chips;
  auto parseOne = [&]() -> ParseResult {
    SMLoc loc = parser.getCurrentLocation();
    std::string name;
    if (parser.parseKeywordOrString(&name))
      return failure();
    std::optional<Chip> chip = parseChip(name);
    if (!chip)
      return parser.emitError(loc) << "'" << name << "' is not a chip ("
                                   << supportedChipList() << ")";
    chips.push_back(*chip);
    return success();
  };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, parseOne))
    return failure();
  return chips;
}

void pattn::printChipListParameter(AsmPrinter &printer, ArrayRef<Chip> chips) {
  printer << '[';
  llvm::interleaveComma(chips, printer.getStream(),
                        [&](Chip chip) { printer << stringifyChip(chip); });
  printer << ']';
}

FailureOr<SmallVector<int64_t>>
pattn::parseIntListParameter(AsmParser &parser) {
  SmallVector<int64_t> values;
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
        return parser.parseInteger(values.emplace_back());
      }))
    return failure();
  return values;
}

void pattn::printIntListParameter(AsmPrinter &printer,
                                  ArrayRef<int64_t> values) {
  printer << '[';
  llvm::interleaveComma(values, printer.getStream());
  printer << ']';
}

/// The fewest of `perTarget` (one per chip of `targets`) among `chips`.
static int64_t fewestOn(ArrayRef<int64_t> perTarget, ArrayRef<Chip> targets,
                        ArrayRef<Chip> chips) {
  int64_t fewest = INT64_MAX;
  for (auto [count, chip] : llvm::zip_equal(perTarget, targets))
    if (llvm::is_contained(chips, chip))
      fewest = std::min(fewest, count);
  assert(fewest != INT64_MAX && "the chips are among the plan's targets");
  return fewest;
}

int64_t XqaPlanAttr::getResidentBlocksOn(ArrayRef<Chip> chips) const {
  return fewestOn(getResidentBlocks(), getTargets(), chips);
}

int64_t PrefillPlanAttr::getResidentBlocksOn(ArrayRef<Chip> chips) const {
  return fewestOn(getResidentBlocks(), getTargets(), chips);
}

int64_t XqaMlaPlanAttr::getResidentBlocksOn(ArrayRef<Chip> chips) const {
  return fewestOn(getResidentBlocks(), getTargets(), chips);
}

/// The rules every plan's schedule obeys: threads and splits are positive,
/// at least one block is resident, and `targets` names each chip once.
static LogicalResult
verifySchedule(function_ref<InFlightDiagnostic()> emitError,
               ArrayRef<int64_t> residentBlocks, int64_t leastTilesPerSplit,
               int64_t mostSplits, ArrayRef<Chip> targets) {
  if (residentBlocks.size() != targets.size())
    return emitError() << "resident_blocks has " << residentBlocks.size()
                       << " counts for " << targets.size()
                       << " targets (one per chip)";
  for (int64_t count : residentBlocks)
    if (count < 1 || count > 32)
      return emitError() << "resident_blocks " << count << " not in [1, 32]";
  if (leastTilesPerSplit < 1)
    return emitError() << "least_tiles_per_split " << leastTilesPerSplit
                       << " must be positive";
  if (mostSplits < 1 || mostSplits > 1024)
    return emitError() << "most_splits " << mostSplits << " not in [1, 1024]";
  if (targets.empty())
    return emitError() << "targets must name at least one chip";
  for (auto [i, chip] : llvm::enumerate(targets))
    if (llvm::is_contained(targets.take_front(i), chip))
      return emitError() << "targets name " << stringifyChip(chip) << " twice";
  return success();
}

LogicalResult
PortablePlanAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                         int64_t headsPerBlock, int64_t keysPerSplit,
                         int64_t threads, bool /*prompt*/,
                         ArrayRef<Chip> targets) {
  if (headsPerBlock < 1 || headsPerBlock > 8)
    return emitError() << "heads_per_block " << headsPerBlock
                       << " not in [1, 8]";
  if (keysPerSplit < 128 || keysPerSplit % 128 != 0)
    return emitError() << "keys_per_split " << keysPerSplit
                       << " must be a positive multiple of 128";
  if (threads != 128)
    return emitError() << "threads " << threads
                       << " must be 128 (the portable kernels' block)";
  SmallVector<int64_t> one(targets.size(), 1);
  return verifySchedule(emitError, one, 1, 1, targets);
}

/// The rules a tensor-core plan's ring obeys: 2 to 8 stages, whole tiles
/// per split, shared memory not negative.
static LogicalResult verifyRing(function_ref<InFlightDiagnostic()> emitError,
                                int64_t stages, int64_t keysPerTile,
                                int64_t keysPerSplit, int64_t sharedBytes) {
  if (stages < 2 || stages > 8)
    return emitError() << "stages " << stages << " not in [2, 8]";
  if (keysPerSplit < keysPerTile || keysPerSplit % keysPerTile != 0)
    return emitError() << "keys_per_split " << keysPerSplit
                       << " must be a positive multiple of keys_per_tile "
                       << keysPerTile;
  if (sharedBytes < 0)
    return emitError() << "shared_bytes " << sharedBytes << " is negative";
  return success();
}

/// A tensor-core plan's mma operands are f16 or bf16.
static LogicalResult
verifyOperandType(function_ref<InFlightDiagnostic()> emitError, Type operand) {
  if (!operand || !(operand.isF16() || operand.isBF16()))
    return emitError() << "operand " << operand << " must be f16 or bf16";
  return success();
}

/// An XQA plan's cluster of `size` blocks (`name`: cluster_heads or
/// cluster_splits; 1: none): 2, 4 or 8 blocks of a decode's four warps, on
/// targets that have thread-block clusters.
static LogicalResult verifyCluster(function_ref<InFlightDiagnostic()> emitError,
                                   StringRef name, int64_t size,
                                   int64_t threads, int64_t queryTile,
                                   ArrayRef<Chip> targets) {
  if (size == 1)
    return success();
  if (size != 2 && size != 4 && size != 8)
    return emitError() << name << " " << size << " must be 1, 2, 4 or 8";
  if (threads != 128 || queryTile != 0)
    return emitError() << name << " " << size
                       << " needs threads 128 and a decode (query_tile 0)";
  for (Chip chip : targets)
    if (computeCapability(chip) < 90)
      return emitError() << name << " " << size
                         << " needs thread-block clusters, which target "
                         << stringifyChip(chip) << " lacks (sm_90 and up)";
  return success();
}

LogicalResult XqaPlanAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, Type operand, int64_t rows,
    int64_t keysPerTile, int64_t stages, int64_t keyWarps, int64_t valueWarps,
    int64_t keysPerSplit, int64_t sharedBytes, ArrayRef<int64_t> residentBlocks,
    int64_t threads, int64_t leastTilesPerSplit, int64_t mostSplits,
    int64_t queryTile, bool scoresAhead, int64_t clusterHeads,
    int64_t clusterSplits, bool mergesUnsplit, ArrayRef<Chip> targets) {
  if (failed(verifyOperandType(emitError, operand)))
    return failure();
  if (rows != 8 && rows != 16 && rows != 32)
    return emitError() << "rows " << rows << " must be 8, 16 or 32";
  if (threads != 128 && threads != 160)
    return emitError() << "threads " << threads
                       << " must be 128 (the XQA block's four warps) or 160 "
                          "(and a copy warp)";
  if (keyWarps < 1 || valueWarps < 1 || keyWarps * valueWarps != 4)
    return emitError() << "key_warps x value_warps = " << keyWarps << " x "
                       << valueWarps << " must be the block's 4 warps";
  if (keysPerTile < 16 * keyWarps || keysPerTile % (16 * keyWarps) != 0 ||
      keysPerTile > 256)
    return emitError() << "keys_per_tile " << keysPerTile
                       << " must be a multiple of 16 x key_warps, at most 256";
  if (failed(verifyRing(emitError, stages, keysPerTile, keysPerSplit,
                        sharedBytes)))
    return failure();
  if (queryTile < 0 || queryTile > rows)
    return emitError() << "query_tile " << queryTile
                       << " not in [0, rows = " << rows << "]";
  if (rows == 8 && queryTile != 0)
    return emitError() << "rows 8 (keys as the mma's M) serves decodes only, "
                          "not query tiles";
  if (threads == 160 && queryTile != 0)
    return emitError() << "threads 160 (a copy warp) serves decodes only, "
                          "not query tiles";
  if (scoresAhead && (rows != 8 || threads != 128 || stages < 3))
    return emitError() << "scores_ahead needs rows 8, threads 128 and at "
                          "least 3 stages (two landed tiles and one in "
                          "flight), got rows "
                       << rows << ", threads " << threads << ", stages "
                       << stages;
  for (auto [name, size] :
       {std::pair<StringRef, int64_t>{"cluster_heads", clusterHeads},
        {"cluster_splits", clusterSplits}})
    if (failed(
            verifyCluster(emitError, name, size, threads, queryTile, targets)))
      return failure();
  if (clusterHeads != 1 && clusterSplits != 1)
    return emitError() << "cluster_heads " << clusterHeads
                       << " and cluster_splits " << clusterSplits
                       << ": a plan clusters KV heads or splits, not both";
  if (mergesUnsplit && (threads != 128 || queryTile != 0))
    return emitError() << "merges_unsplit needs threads 128 and a decode "
                          "(query_tile 0), got threads "
                       << threads << ", query_tile " << queryTile;
  return verifySchedule(emitError, residentBlocks, leastTilesPerSplit,
                        mostSplits, targets);
}

LogicalResult PrefillPlanAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, TensorCoreKernel kernel,
    Type operand, int64_t rows, int64_t queryTile, int64_t keysPerTile,
    int64_t stages, int64_t keysPerSplit, int64_t sharedBytes,
    ArrayRef<int64_t> residentBlocks, int64_t threads,
    int64_t leastTilesPerSplit, int64_t mostSplits, ArrayRef<Chip> targets) {
  if (failed(verifyOperandType(emitError, operand)))
    return failure();
  // An m16 tile per warp: four warps (one warpgroup) for mma.sync, two
  // warpgroups of m64 wgmma chains for wgmma.
  int64_t blockRows = kernel == TensorCoreKernel::wgmma ? 128 : 64;
  if (rows != blockRows)
    return emitError() << "rows " << rows << " must be " << blockRows
                       << " for kernel " << stringifyTensorCoreKernel(kernel)
                       << " (an m16 tile per warp, "
                       << (blockRows == 128 ? "two warpgroups)"
                                            : "four warps)");
  if (queryTile < 1 || queryTile > rows)
    return emitError() << "query_tile " << queryTile
                       << " not in [1, rows = " << rows << "]";
  if (threads != 2 * rows)
    return emitError() << "threads " << threads << " must be " << 2 * rows
                       << " (a warp per 16 rows)";
  if (keysPerTile < 16 || keysPerTile % 16 != 0 || keysPerTile > 128)
    return emitError() << "keys_per_tile " << keysPerTile
                       << " must be a multiple of 16, at most 128";
  if (failed(verifyRing(emitError, stages, keysPerTile, keysPerSplit,
                        sharedBytes)))
    return failure();
  return verifySchedule(emitError, residentBlocks, leastTilesPerSplit,
                        mostSplits, targets);
}

LogicalResult XqaMlaPlanAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, TensorCoreKernel kernel,
    int64_t headsPerBlock, int64_t keysPerTile, int64_t sharedBytes,
    ArrayRef<int64_t> residentBlocks, int64_t threads,
    int64_t leastTilesPerSplit, int64_t mostSplits, ArrayRef<Chip> targets) {
  // The rows of one mma tile: m16 for mma.sync, m64 for wgmma; one warp
  // group of four warps per 64 heads or the four warps of one m16 tile.
  bool wgmma = kernel == TensorCoreKernel::wgmma;
  int64_t rows = wgmma ? 64 : 16, blockThreads = wgmma ? 256 : 128;
  if (headsPerBlock != rows)
    return emitError() << "heads_per_block " << headsPerBlock << " must be "
                       << rows << " for kernel "
                       << stringifyTensorCoreKernel(kernel) << " (one m" << rows
                       << " tile)";
  if (threads != blockThreads)
    return emitError() << "threads " << threads << " must be " << blockThreads
                       << " for kernel " << stringifyTensorCoreKernel(kernel);
  if (keysPerTile != 32)
    return emitError() << "keys_per_tile " << keysPerTile
                       << " must be 32 (8 keys per warp)";
  if (sharedBytes < 0)
    return emitError() << "shared_bytes " << sharedBytes << " is negative";
  return verifySchedule(emitError, residentBlocks, leastTilesPerSplit,
                        mostSplits, targets);
}

LogicalResult LaneAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               StringRef name, Type elementType, uint32_t count,
                               uint32_t offset, StringRef scaleLane) {
  if (name.empty())
    return emitError() << "record lane needs a name";
  unsigned bits = laneElementBits(elementType);
  if (bits == 0)
    return emitError() << "lane '" << name << "' has element type "
                       << elementType
                       << "; expected f32, f16, bf16, f8E4M3FN, f8E5M2, "
                          "f4E2M1FN or i8";
  if (count == 0)
    return emitError() << "lane '" << name << "' is empty";
  // Bounded before any byte arithmetic, so that the 32-bit end of a lane
  // cannot wrap: no lane may reach past the largest record.
  if (offset > kMaxRecordBytes ||
      uint64_t(count) * bits > uint64_t(kMaxRecordBytes) * 8)
    return emitError() << "lane '" << name << "' (" << count << " x "
                       << elementType << " at byte " << offset
                       << ") reaches past the " << kMaxRecordBytes
                       << "-byte record limit";
  // A lane is addressed in bytes, so 4-bit lanes hold whole bytes.
  if (uint64_t(count) * bits % 8 != 0)
    return emitError() << "lane '" << name << "' of " << count << " x "
                       << elementType << " does not fill whole bytes";
  unsigned align = std::max(1u, bits / 8);
  if (offset % align != 0)
    return emitError() << "lane '" << name << "' at byte " << offset
                       << " is misaligned for " << elementType << " (needs "
                       << align << "-byte alignment)";
  if (scaleLane == name)
    return emitError() << "lane '" << name << "' cannot scale itself";
  return success();
}

/// lane-body ::= name `:` count `x` type `at` offset (`scaled_by` name)?
static LaneAttr parseLaneBody(AsmParser &parser) {
  MLIRContext *context = parser.getContext();
  SMLoc loc = parser.getCurrentLocation();
  std::string name, scaleLane;
  uint32_t count = 0, offset = 0;
  Type elementType;
  if (parser.parseKeywordOrString(&name) || parser.parseColon() ||
      parser.parseInteger(count) || parser.parseKeyword("x") ||
      parser.parseType(elementType) || parser.parseKeyword("at") ||
      parser.parseInteger(offset))
    return {};
  if (succeeded(parser.parseOptionalKeyword("scaled_by")) &&
      parser.parseKeywordOrString(&scaleLane))
    return {};
  return LaneAttr::getChecked([&] { return parser.emitError(loc); }, context,
                              name, elementType, count, offset, scaleLane);
}

static void printLaneBody(AsmPrinter &printer, LaneAttr lane) {
  printer.printKeywordOrString(lane.getName());
  printer << ": " << lane.getCount() << " x " << lane.getElementType() << " at "
          << lane.getOffset();
  if (lane.isScaled()) {
    printer << " scaled_by ";
    printer.printKeywordOrString(lane.getScaleLane());
  }
}

Attribute LaneAttr::parse(AsmParser &parser, Type) {
  if (parser.parseLess())
    return {};
  LaneAttr lane = parseLaneBody(parser);
  if (!lane || parser.parseGreater())
    return {};
  return lane;
}

void LaneAttr::print(AsmPrinter &printer) const {
  printer << "<";
  printLaneBody(printer, *this);
  printer << ">";
}

//===----------------------------------------------------------------------===//
// CacheType
//===----------------------------------------------------------------------===//

// Case by case rather than a cast: the two enums need not list the
// encodings in the same order, and -Wswitch names an IR encoding that has
// no numerics counterpart.
numerics::Encoding pattn::toNumerics(Encoding encoding) {
  switch (encoding) {
  case Encoding::f16:
    return numerics::Encoding::F16;
  case Encoding::bf16:
    return numerics::Encoding::BF16;
  case Encoding::i8:
    return numerics::Encoding::I8;
  case Encoding::f8e4m3:
    return numerics::Encoding::F8E4M3;
  case Encoding::f8e5m2:
    return numerics::Encoding::F8E5M2;
  case Encoding::i4:
    return numerics::Encoding::I4;
  case Encoding::nvfp4:
    return numerics::Encoding::NVFP4;
  }
  llvm_unreachable("unknown encoding");
}

const numerics::EncodingInfo &pattn::encodingInfo(Encoding encoding) {
  return numerics::encodingInfo(toNumerics(encoding));
}

/// block_size: a power of two in [16, kMaxBlockSize].
static LogicalResult
verifyBlockSize(function_ref<InFlightDiagnostic()> emitError,
                int64_t blockSize) {
  if (blockSize < 16 || !llvm::isPowerOf2_64(blockSize))
    return emitError() << "block_size " << blockSize
                       << " must be a power of two >= 16";
  if (blockSize > kMaxBlockSize)
    return emitError() << "block_size " << blockSize << " exceeds the limit of "
                       << kMaxBlockSize;
  return success();
}

LogicalResult CacheType::verify(function_ref<InFlightDiagnostic()> emitError,
                                int64_t blockSize, int64_t kvHeads,
                                int64_t headDim, Encoding encoding,
                                ScaleGranularity scale, Layout) {
  if (failed(verifyBlockSize(emitError, blockSize)))
    return failure();
  if (kvHeads < 1 || kvHeads > kMaxHeads)
    return emitError() << "kv_heads " << kvHeads << " must be in [1, "
                       << kMaxHeads << "]";
  const numerics::EncodingInfo &info = encodingInfo(encoding);
  int64_t multiple = info.headDimMultiple;
  if (headDim < multiple || headDim % multiple != 0)
    return emitError() << "head_dim " << headDim
                       << " must be a positive multiple of " << multiple
                       << " for " << stringifyEncoding(encoding);
  if (headDim > kMaxHeadDim)
    return emitError() << "head_dim " << headDim << " exceeds the limit of "
                       << kMaxHeadDim;
  if (info.isPlainFloat() && scale != ScaleGranularity::none)
    return emitError() << stringifyEncoding(encoding)
                       << " caches store values and take no scale (got "
                       << stringifyScaleGranularity(scale) << ")";
  // Group scales carry the per-channel part; what is left is one outer
  // scale per tensor or per token.
  if (info.hasGroupScales() && scale != ScaleGranularity::tensor &&
      scale != ScaleGranularity::token)
    return emitError() << stringifyEncoding(encoding)
                       << "'s outer scale must be 'tensor' or 'token' (got "
                       << stringifyScaleGranularity(scale) << ")";
  return success();
}

int64_t CacheType::getRowBytes() const {
  return numerics::rowBytes(toNumerics(getEncoding()), getHeadDim());
}

/// [blocks, block_size, kv_heads, inner] or [blocks, kv_heads, block_size,
/// inner] depending on the layout.
static SmallVector<int64_t> pagedShape(CacheType type, int64_t numBlocks,
                                       int64_t inner) {
  if (type.getLayout() == Layout::hnd)
    return {numBlocks, type.getKvHeads(), type.getBlockSize(), inner};
  return {numBlocks, type.getBlockSize(), type.getKvHeads(), inner};
}

SmallVector<int64_t> CacheType::getStorageShape(int64_t numBlocks) const {
  return pagedShape(*this, numBlocks, getRowBytes());
}

SmallVector<int64_t> CacheType::getGroupScaleShape(int64_t numBlocks) const {
  const numerics::EncodingInfo &info = encodingInfo(getEncoding());
  assert(info.hasGroupScales() && "a cache without group scales");
  return pagedShape(*this, numBlocks, getHeadDim() / info.groupScales.size);
}

SmallVector<int64_t> CacheType::getTokenScaleShape(int64_t numBlocks) const {
  return {numBlocks, getBlockSize(), getKvHeads()};
}

bool CacheType::needsGroupScales() const {
  return encodingInfo(getEncoding()).hasGroupScales();
}

bool CacheType::needsTokenScales() const {
  return getScale() == ScaleGranularity::token;
}

//===----------------------------------------------------------------------===//
// RecordType
//===----------------------------------------------------------------------===//

static Type toMLIRType(MLIRContext *context, numerics::LaneElement element) {
  switch (element) {
  case numerics::LaneElement::F32:
    return Float32Type::get(context);
  case numerics::LaneElement::F16:
    return Float16Type::get(context);
  case numerics::LaneElement::BF16:
    return BFloat16Type::get(context);
  case numerics::LaneElement::E4M3:
    return Float8E4M3FNType::get(context);
  case numerics::LaneElement::E5M2:
    return Float8E5M2Type::get(context);
  case numerics::LaneElement::E2M1:
    return Float4E2M1FNType::get(context);
  case numerics::LaneElement::I8:
    return IntegerType::get(context, 8);
  }
  llvm_unreachable("unknown lane element");
}

/// The lanes of a preset as attributes, in the numerics library's order.
static SmallVector<LaneAttr> presetLanes(MLIRContext *context,
                                         numerics::RecordPreset preset) {
  SmallVector<LaneAttr> lanes;
  for (const numerics::LaneDesc &lane : numerics::recordLayout(preset).lanes)
    lanes.push_back(LaneAttr::get(context, lane.name,
                                  toMLIRType(context, lane.element), lane.count,
                                  lane.offset, lane.scaleLane));
  return lanes;
}

/// A preset's mode when the IR does not spell one.
static ScaleGranularity defaultPresetMode(numerics::RecordPreset preset) {
  return preset == numerics::RecordPreset::FP8DsMla ? ScaleGranularity::none
                                                    : ScaleGranularity::tensor;
}

static constexpr numerics::RecordPreset kPresets[] = {
    numerics::RecordPreset::FP8DsMla, numerics::RecordPreset::NVFP4DsMla,
    numerics::RecordPreset::NVFP4DsMlaFp8Rope};

RecordType
RecordType::getPresetChecked(function_ref<InFlightDiagnostic()> emitError,
                             MLIRContext *context, StringRef presetName,
                             std::optional<ScaleGranularity> mode) {
  std::optional<numerics::RecordPreset> preset =
      numerics::parseRecordPreset(presetName);
  if (!preset) {
    emitError() << "unknown record preset '" << presetName
                << "'; expected fp8_ds_mla, nvfp4_ds_mla or "
                   "nvfp4_ds_mla_fp8_rope";
    return {};
  }
  ScaleGranularity resolved = mode.value_or(defaultPresetMode(*preset));
  auto numericsMode = static_cast<numerics::RecordScaleMode>(
      resolved == ScaleGranularity::token    ? 2
      : resolved == ScaleGranularity::tensor ? 1
                                             : 0);
  if (resolved == ScaleGranularity::channel ||
      !numerics::isValidRecordScaleMode(*preset, numericsMode)) {
    emitError() << "record preset '" << presetName << "' cannot be used in '"
                << stringifyScaleGranularity(resolved) << "' mode";
    return {};
  }
  return getChecked(emitError, context, numerics::recordLayout(*preset).bytes,
                    presetLanes(context, *preset), resolved);
}

LogicalResult RecordType::verify(function_ref<InFlightDiagnostic()> emitError,
                                 uint32_t bytes, ArrayRef<LaneAttr> lanes,
                                 ScaleGranularity mode) {
  // 16-byte multiples keep every record row loadable as 16-byte vectors.
  if (bytes == 0 || bytes % 16 != 0)
    return emitError() << "record size " << bytes
                       << " must be a positive multiple of 16 bytes";
  if (bytes > kMaxRecordBytes)
    return emitError() << "record size " << bytes << " exceeds the limit of "
                       << kMaxRecordBytes << " bytes";
  if (lanes.empty())
    return emitError() << "record needs at least one lane";
  if (mode == ScaleGranularity::channel)
    return emitError() << "a record's outer scale is 'none', 'tensor' or "
                          "'token', not 'channel'";

  llvm::StringMap<LaneAttr> byName;
  for (LaneAttr lane : lanes) {
    if (!byName.try_emplace(lane.getName(), lane).second)
      return emitError() << "record has two lanes named '" << lane.getName()
                         << "'";
    if (lane.getEnd() > bytes)
      return emitError() << "lane '" << lane.getName() << "' spans bytes ["
                         << lane.getOffset() << ", " << lane.getEnd()
                         << ") and overruns the " << bytes << "-byte record";
  }

  SmallVector<LaneAttr> sorted(lanes);
  llvm::sort(sorted, [](LaneAttr a, LaneAttr b) {
    return a.getOffset() < b.getOffset();
  });
  for (auto [prev, next] : llvm::zip(sorted, llvm::drop_begin(sorted)))
    if (next.getOffset() < prev.getEnd())
      return emitError() << "lanes '" << prev.getName() << "' ["
                         << prev.getOffset() << ", " << prev.getEnd()
                         << ") and '" << next.getName() << "' ["
                         << next.getOffset() << ", " << next.getEnd()
                         << ") overlap";

  bool hasE2M1 = false;
  for (LaneAttr lane : lanes) {
    bool isE2M1 = isa<Float4E2M1FNType>(lane.getElementType());
    hasE2M1 |= isE2M1;
    if (!lane.isScaled()) {
      if (isE2M1)
        return emitError() << "e2m1 lane '" << lane.getName()
                           << "' needs a lane of e4m3 group scales";
      continue;
    }
    LaneAttr scale = byName.lookup(lane.getScaleLane());
    if (!scale)
      return emitError() << "lane '" << lane.getName()
                         << "' is scaled by unknown lane '"
                         << lane.getScaleLane() << "'";
    Type scaleType = scale.getElementType();
    if (!isa<Float32Type, Float8E4M3FNType>(scaleType) || scale.isScaled())
      return emitError() << "scale lane '" << scale.getName()
                         << "' must hold unscaled f32 or f8E4M3FN values";
    if (lane.getCount() % scale.getCount() != 0)
      return emitError() << "lane '" << lane.getName() << "' has "
                         << lane.getCount() << " elements, not a multiple "
                         << "of the " << scale.getCount() << " scales in lane '"
                         << scale.getName() << "'";
    // NVFP4 is defined by e4m3 scales over groups of 16 e2m1 codes.
    if (isE2M1 && (!isa<Float8E4M3FNType>(scaleType) ||
                   lane.getCount() / scale.getCount() != 16))
      return emitError() << "e2m1 lane '" << lane.getName()
                         << "' needs one f8E4M3FN scale per 16 elements, "
                            "but lane '"
                         << scale.getName() << "' holds " << scale.getCount()
                         << " x " << scaleType;
  }

  if (hasE2M1 && mode == ScaleGranularity::none)
    return emitError() << "a record with e2m1 lanes needs a 'tensor' or "
                          "'token' outer scale";
  if (!hasE2M1 && mode != ScaleGranularity::none)
    return emitError() << "an outer scale ('" << stringifyScaleGranularity(mode)
                       << "') applies to e2m1 lanes, and this record has none";
  if (mode == ScaleGranularity::token) {
    LaneAttr tokenScale = byName.lookup("token_scale");
    if (!tokenScale || !isa<Float32Type>(tokenScale.getElementType()) ||
        tokenScale.getCount() != 1)
      return emitError() << "a record in 'token' mode needs a 'token_scale' "
                            "lane of 1 x f32";
  }
  return success();
}

LaneAttr RecordType::getLane(StringRef name) const {
  for (LaneAttr lane : getLanes())
    if (lane.getName() == name)
      return lane;
  return {};
}

std::optional<StringRef> RecordType::getPresetName() const {
  for (numerics::RecordPreset preset : kPresets) {
    const numerics::RecordLayout &layout = numerics::recordLayout(preset);
    if (layout.bytes != getBytes())
      continue;
    // Lanes are uniqued attributes: equal lanes compare equal as handles.
    if (ArrayRef<LaneAttr>(presetLanes(getContext(), preset)) == getLanes())
      return StringRef(layout.name.data(), layout.name.size());
  }
  return std::nullopt;
}

/// record ::= `<` preset (`,` mode)? `>`
///          | `<` bytes `bytes` `,` mode `,` `{` lane (`,` lane)* `}` `>`
Type RecordType::parse(AsmParser &parser) {
  MLIRContext *context = parser.getContext();
  SMLoc loc = parser.getCurrentLocation();
  auto emitError = [&] { return parser.emitError(loc); };
  if (parser.parseLess())
    return {};

  auto parseMode = [&]() -> FailureOr<ScaleGranularity> {
    StringRef keyword;
    SMLoc modeLoc = parser.getCurrentLocation();
    if (parser.parseKeyword(&keyword))
      return failure();
    std::optional<ScaleGranularity> mode = symbolizeScaleGranularity(keyword);
    if (!mode)
      return parser.emitError(modeLoc)
             << "expected record mode 'none', 'tensor' or 'token'";
    return *mode;
  };

  std::string preset;
  if (succeeded(parser.parseOptionalKeywordOrString(&preset))) {
    std::optional<ScaleGranularity> mode;
    if (succeeded(parser.parseOptionalComma())) {
      FailureOr<ScaleGranularity> parsed = parseMode();
      if (failed(parsed))
        return {};
      mode = *parsed;
    }
    if (parser.parseGreater())
      return {};
    return getPresetChecked(emitError, context, preset, mode);
  }

  uint32_t bytes = 0;
  if (parser.parseInteger(bytes) || parser.parseKeyword("bytes") ||
      parser.parseComma())
    return {};
  FailureOr<ScaleGranularity> mode = parseMode();
  if (failed(mode) || parser.parseComma())
    return {};
  SmallVector<LaneAttr> lanes;
  auto parseLane = [&]() -> ParseResult {
    LaneAttr lane = parseLaneBody(parser);
    if (!lane)
      return failure();
    lanes.push_back(lane);
    return success();
  };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Braces, parseLane) ||
      parser.parseGreater())
    return {};
  return getChecked(emitError, context, bytes, lanes, *mode);
}

void RecordType::print(AsmPrinter &printer) const {
  printer << "<";
  if (std::optional<StringRef> preset = getPresetName()) {
    printer << *preset;
    if (getMode() != defaultPresetMode(*numerics::parseRecordPreset(*preset)))
      printer << ", " << stringifyScaleGranularity(getMode());
    printer << ">";
    return;
  }
  printer << getBytes() << " bytes, " << stringifyScaleGranularity(getMode())
          << ", {";
  llvm::interleaveComma(getLanes(), printer,
                        [&](LaneAttr lane) { printLaneBody(printer, lane); });
  printer << "}>";
}

//===----------------------------------------------------------------------===//
// RecordCacheType
//===----------------------------------------------------------------------===//

LogicalResult
RecordCacheType::verify(function_ref<InFlightDiagnostic()> emitError,
                        int64_t blockSize, RecordType record) {
  if (failed(verifyBlockSize(emitError, blockSize)))
    return failure();
  if (!record)
    return emitError() << "record cache needs a !pattn.record type";
  return success();
}

SmallVector<int64_t> RecordCacheType::getStorageShape(int64_t numBlocks) const {
  return {numBlocks, getBlockSize(), int64_t(getRecord().getBytes())};
}
