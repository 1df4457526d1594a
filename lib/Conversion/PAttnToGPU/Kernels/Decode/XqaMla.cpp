//===- XqaMla.cpp - The tensor-core MLA decode ----------------------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the tensor-core decode of pattn.mla_decode, following
// its #pattn.xqa_mla_plan. One block of four warps serves 16 query heads of
// one query token (the M rows of mma.sync.m16n8k16, fp32 accumulation) and
// one split of the token's keys, a tile of 32 keys at a time. The records
// are never decoded into a shared operand tile: every warp builds its mma
// operands in registers straight from the raw records.
//
//   cp.async: tile i + 1's raw records -> the other slot of a two-slot
//             ring (zero-filled for keys that are masked or unmapped), so
//             the copy lands while tile i is computed
//   S = Q Kᵀ: warp w scores keys [8w, 8w + 8) for all 16 heads. A thread
//             loads one 32-bit word of codes per k-step and decodes it
//             into its B registers. Which channels a register holds is the
//             decoder's choice; the query tile is stored in the same order
//             (a permutation of the k axis leaves the dot product as it
//             is). Each block's scale is applied to its partial sum in fp32
//   softmax:  the logits meet in shared memory; every warp runs the same
//             online softmax over the whole tile
//   O += P V: warp w owns latent channels [w L/4, (w+1) L/4). A thread
//             loads the word of the same channels of two keys, and one
//             prmt pairs them as an mma B register (key 2t with 2t + 1);
//             the n axis is permuted too, and undone when the partial
//             results are written
//
// Operands: quantized codes (e4m3, e2m1 x e4m3 group scale) are exact in
// f16, so their lanes use f16 mma with no conversion to bf16. The bf16
// query is brought into f16 by a power of two per row (its largest
// quantized-lane element lands in [2^14, 2^15), exact but for elements
// below 2^-29 of it), undone on the fp32 logits; P times each key's value
// scale times a power of two per value block (kept across tiles, moved
// exactly when the scales drift) is P V's A operand, so the products add
// straight into the fp32 accumulators, whose block exponent the partial
// results undo. bf16 lanes (a bf16 latent or rope) are bf16 mma on the raw
// words and the raw query.
//
// A split ends with the same partial results as the portable kernel, which
// the shared merge kernel combines.
//
// The warpgroup kernel (plan heads_per_block = 64, sm_90a only) keeps the
// softmax, the value-block exponents and the partial results, and moves
// the products to wgmma: two warpgroups serve 64 heads (wgmma's M); each
// tile is decoded once by all 256 threads into a shared operand tile in
// wgmma's core-matrix layout (two slots), which S reads K-major (the
// warpgroups split its k-steps, N = 32 keys) and P V reads MN-major (each
// warpgroup owns half the latent, N = 128 or 256 channels); P V runs while
// the next tile is decoded. docs/Lowering.md, "The warpgroup MLA kernel".
//
//===----------------------------------------------------------------------===//

#include "Kernels/Codecs/Codecs.h"
#include "Kernels/Common/KernelBuilder.h"
#include "Kernels/Kernels.h"
#include "Kernels/TensorCore/TensorCore.h"
#include "pattn/Dialect/PAttn/Transforms/DecodePlan.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace pattn;

namespace {

/// Elements of one 16-byte load of the query.
constexpr int64_t kQueryPiece = 8;
/// Threads of a block.
constexpr int64_t kXqaMlaThreads = kXqaMlaWarps * kWarpThreads;
/// Query rows of a block, and per warp while the query is loaded.
constexpr int64_t kRows = kXqaMlaHeadsPerBlock;
constexpr int64_t kRowsPerWarp = kRows / kXqaMlaWarps;
/// The softmax keeps a row's maximum until a tile's logits pass it by more
/// than this (base 2), so P = 2^(x - max) <= 2^4 and the accumulators are
/// rescaled only when a maximum jumps.
constexpr int32_t kMaxSlack = 4;
/// P V's A operand is P times each key's value scale times 2^e, with one
/// exponent e per value block of a warp: set where the tile's largest scale
/// times 2^e lands in [2^5, 2^6), and kept while it stays within 2^5 of
/// that, in [2^0, 2^11) (so A < 2^15 with P <= 2^4, and the dominant keys'
/// A, P >= 1, keep every bit down to scales 2^-14 of the tile's largest).
constexpr int32_t kValueScaleTarget = 5;
constexpr int32_t kValueExponentWindow = 5;
/// Where the keys share one value scale (a tensor scale, or none), A is
/// P 2^10: below 2^15, and exact in f16 down to P = 2^-24.
constexpr int kSharedScaleExponent = 10;

/// How one lane of the record (latent or rope) feeds the mma.
struct OperandLane {
  LaneAttr lane;
  Encoding encoding = Encoding::bf16;
  /// bf16 operands (the raw words, the raw query); else f16 (decoded codes,
  /// the normalized query).
  bool bf16 = true;
  /// Channels per 32-bit word: 2 (bf16), 4 (e4m3) or 8 (e2m1).
  int64_t wordChannels = 2;
  /// The decoder's pairs within a word (wordPairOrder).
  SmallVector<std::pair<int64_t, int64_t>> pairs;
  /// The lane's first column of the key (and of the query tile).
  int64_t firstColumn = 0;
  int64_t count = 0;

  /// k-steps of 16 channels one thread's word serves in S (f16 lanes).
  int64_t stepsPerWord() const { return wordChannels / 4; }
  /// Channels of a query group whose permutation stays inside it: the k-
  /// steps that one word of each of the 4 threads of a quad covers.
  int64_t groupChannels() const { return bf16 ? 16 : 4 * wordChannels; }
  /// The physical channel (within its group) of logical column `column`
  /// (within its group) of the query tile: where B register r of thread t
  /// at k-step s of the group takes element h from.
  int64_t physicalInGroup(int64_t column) const {
    int64_t step = column / 16, within = column % 16;
    int64_t t = (within % 8) / 2, r = within / 8, h = within % 2;
    if (bf16)
      return 16 * step + 8 * r + 2 * t + h;
    auto [low, high] = pairs[2 * step + r];
    return wordChannels * t + (h ? high : low);
  }
};

class XqaMlaBuilder {
public:
  XqaMlaBuilder(KernelModule &kernels, MlaDecodeOp op, XqaMlaPlanAttr plan,
                const RecordBuffers &cache)
      : kernels(kernels), op(op), plan(plan), cache(cache),
        builder(op.getContext()), kb(builder, op.getLoc()),
        f16Mma(kb, /*bf16=*/false), bf16Mma(kb, /*bf16=*/true) {}

  gpu::GPUFuncOp build(SmallVectorImpl<Value> &hostOperands);

private:
  KernelModule &kernels;
  MlaDecodeOp op;
  XqaMlaPlanAttr plan;
  const RecordBuffers &cache;
  OpBuilder builder;
  KernelBuilder kb;
  MmaBuilder f16Mma, bf16Mma;

  // Static facts.
  RecordType recordType;
  MlaRecordLayout record;
  XqaMlaSharedLayout layout;
  OperandLane latentLane, ropeLane;
  LaneAttr latentScaleLane, ropeScaleLane, tokenLane;
  int64_t latent = 0, keyDim = 0, recordBytes = 0, numHeads = 0, headGroups = 0,
          tileKeys = 0, blockSize = 0;
  /// Latent channels per post-mma scale (the whole latent when one).
  int64_t latentGroup = 0;
  int64_t warpChannels = 0, warpTiles = 0; ///< of P V, per warp
  /// A warp's value blocks (channels of one scale) in P V.
  int64_t blockChannels = 0, valueBlocks = 0;

  // Kernel values.
  Value smem, query, storage, outerScale, blockTable, sequence, first, last,
      tileCount, tid, warp, lane, groupId, threadInGroup;
  Value queryTile, queryBf16, queryInverse, logits, pages, words, bytes;
  Value softmaxScale, negInf, zero;
  /// The query rows' inverse normalizations (rows g and g + 8).
  Value rowInverse[2];

  Value index(int64_t v) { return kb.index(v); }
  /// A typed view of dynamic shared memory at byte `offset`.
  Value view(int64_t offset, ArrayRef<int64_t> shape, Type element) {
    auto type = MemRefType::get(
        shape, element, AffineMap(),
        gpu::AddressSpaceAttr::get(builder.getContext(),
                                   gpu::AddressSpace::Workgroup));
    Value at = index(offset);
    return memref::ViewOp::create(builder, kb.loc, type, smem, at,
                                  ValueRange{});
  }
  Value ceilDiv(Value a, int64_t b) {
    Value rounded = kb.add(a, kb.i32(int32_t(b - 1)));
    return kb.divs(rounded, kb.i32(int32_t(b)));
  }
  MmaBuilder &mmaOf(const OperandLane &l) { return l.bf16 ? bf16Mma : f16Mma; }
  /// The largest of `init` and row h's (g or g + 8) elements of `values`
  /// (per key tile, the 4 elements of the mma C layout) across the quad.
  Value quadRowMax(ArrayRef<Value> values, int64_t h, Value init) {
    Value largest = init;
    for (int64_t nt = 0; nt < int64_t(values.size()) / 4; ++nt)
      for (int64_t e = 2 * h; e < 2 * h + 2; ++e)
        largest = kb.fmax(largest, values[nt * 4 + e]);
    largest = kb.fmax(largest, f16Mma.shuffleXor(largest, 1));
    return kb.fmax(largest, f16Mma.shuffleXor(largest, 2));
  }
  /// body(item) for this lane's items lane, lane + 32, ... below `count`
  /// (only the last pass guarded).
  void forLaneItems(int64_t count, function_ref<void(Value)> body) {
    for (int64_t k = 0; k * kWarpThreads < count; ++k) {
      Value item = kb.add(lane, index(k * kWarpThreads));
      if ((k + 1) * kWarpThreads <= count)
        body(item);
      else
        kb.ifThen(kb.cmpi(arith::CmpIPredicate::slt, item, index(count)),
                  [&] { body(item); });
    }
  }
  bool anyF16Query() const { return !latentLane.bf16 || !ropeLane.bf16; }
  /// Row h's (g or g + 8) index among the block's query rows: the warp's
  /// 16 rows are the block's in the mma.sync kernel, and rows
  /// [16 (warp % 4), + 16) of the 64 in the warpgroup kernel.
  Value rowOf(int64_t h) {
    if (!warpgroup)
      return kb.add(groupId, index(8 * h));
    Value row = kb.add(warpRowBase, groupId);
    return kb.add(row, index(8 * h));
  }
  /// Whether each key has its own value scale (e4m3 blocks, the nvfp4
  /// per-token outer scale); else one scale serves every key.
  bool perKeyValueScale() const {
    return record.latentFormat == MlaLatentFormat::E4M3BlockScaled ||
           bool(tokenLane);
  }

  OperandLane describeLane(LaneAttr lane, int64_t firstColumn);

  // The warpgroup kernel (sm_90a, heads_per_block = 64): two warpgroups of
  // four warps; wgmma reads the query and a decoded copy of the tile from
  // shared memory.
  bool warpgroup = false;
  int64_t blockThreads = kXqaMlaThreads;
  /// The warp's warpgroup, and the first of its 16 rows (warp % 4).
  Value wgIndex, warpRowBase;
  /// The shared-window address of dynamic shared memory (i64), and the
  /// byte offset of the current tile's decoded slot (index).
  Value smemAddress, decodedBase;
  /// Which channel of an 8-channel piece each position of the decoded
  /// tile (and of the query tile) holds: the decoders' pair order.
  SmallVector<int64_t> decodedOrder(const OperandLane &l) const;
  /// A wgmma descriptor of the core matrices at byte `offset` (index) of
  /// dynamic shared memory: no swizzle, `leading` bytes between core
  /// matrices along K, `stride` bytes along M or N.
  Value descriptor(Value offset, int64_t leading, int64_t stride);
  /// `descriptor` moved by `bytes` (a multiple of 16).
  Value advance(Value descriptor, int64_t bytes);
  /// D (m64 x n fp32, n / 2 per thread) = A B (+ D when `acc` is given):
  /// one wgmma.mma_async, f16 or bf16 operands, B K-major unless
  /// `transposeB` (B stored MN-major).
  SmallVector<Value> wgmma(Value descA, Value descB, ArrayRef<Value> acc,
                           int64_t n, bool bf16, bool transposeB);
  /// The 64 query rows into the query tile as wgmma's A (core matrices),
  /// normalized into f16 for quantized lanes, in decoded order.
  void loadQueryWarpgroup(Value token, Value firstHead);
  /// Every thread decodes part of the current raw slot into the decoded
  /// tile: 8-channel pieces of one key, 16 bytes each.
  void decodeTile();
  /// S = Q Kᵀ of the 64 rows and the tile's 32 keys with wgmma, the
  /// k-steps split between the warpgroups (one chain per latent scale
  /// block and one for the rope); each writes its partial logits into its
  /// slot, which the softmax adds, scales and masks.
  void scoreTileWarpgroup();
  /// The page slot of the current tile (the warpgroup kernel's softmax
  /// masks dead keys).
  Value currentPageSlot;
  /// P V of the warpgroup kernel: P times the value scales into the
  /// warpgroup's P tiles, then wgmma over its half of the latent.
  void accumulateWarpgroup(ArrayRef<Value> p,
                           ArrayRef<SmallVector<Value>> keyScales,
                           SmallVectorImpl<Value> &s);
  void writePartialsWarpgroup(ArrayRef<Value> s, Value split, Value firstRow,
                              Value partialOut, Value partialStats);
  /// Raw reads and the decode at slot `slot` (index) of both rings.
  void useSlot(Value slot);
  /// decodeTile, then the fence that hands its stores to wgmma.
  void decodeAndPublish();
  /// The tile loop of the warpgroup kernel; returns the final state.
  SmallVector<Value> tileLoopWarpgroup(ArrayRef<Value> init);
  /// The 16 query rows into the query tile: raw bf16 for bf16 lanes, times
  /// the row's power of two into f16, in the decoders' channel order, for
  /// the others.
  void loadQuery(Value token, Value firstHead);
  /// Threads 0 .. T-1 write the pages of tile `tileIndex` (i32) into page
  /// slot `slot` (index): -1 for keys outside [first, last) or unmapped.
  void lookupPages(Value tileIndex, Value slot);
  /// cp.async of tile `tileIndex`'s records (pages in page slot
  /// `pageSlot`) into raw slot `rawSlot`; dead keys are zero-filled.
  void issueTile(Value tileIndex, Value rawSlot, Value pageSlot);
  /// issueTile's copies: every key from `wholePage` (a tile of live keys
  /// inside one page), or, when it is null, each key's from its entry.
  void issueTileCopies(Value tileIndex, Value rawSlot, Value pageSlot,
                       Value wholePage);
  // Raw-record reads of the current tile. Every address is the slot's base
  // + a per-thread part (loop-invariant, computed once) + a compile-time
  // part, which the load's immediate offset absorbs.
  int64_t strideWords() const { return layout.rawStride / 4; }
  /// The 32-bit word at the slot's word `threadWords` + `constant`.
  Value rawWord(Value threadWords, int64_t constant) {
    Value at = kb.add(rawBaseWords, threadWords);
    return kb.load(words, {kb.add(at, index(constant))});
  }
  Value rawF32(Value threadWords, int64_t constant) {
    return kb.bitcast(builder.getF32Type(), rawWord(threadWords, constant));
  }
  /// The byte at the slot's byte `threadBytes` + `constant`, as an i32.
  Value rawByte(Value threadBytes, int64_t constant) {
    Value at = kb.add(rawBaseBytes, threadBytes);
    return kb.loadByte(bytes, {kb.add(at, index(constant))});
  }
  /// The post-mma latent scale of the record whose words start at
  /// `threadWords` + `constant` (a block's index added to either), null for
  /// 1.
  Value latentScale(Value threadWords, int64_t constant);
  /// Two e4m3 group-scale bytes (of two keys) as one f16 pair.
  Value scalePair(Value low, Value high);
  /// S = Q Kᵀ for this warp's 8 keys, scaled and masked, into the logits.
  void scoreTile(Value pageSlot);
  /// The online softmax over the tile and O += P V; `s` is the loop state.
  void accumulateTile(SmallVectorImpl<Value> &s);
  void writePartials(ArrayRef<Value> s, Value split, Value firstRow,
                     Value partialOut, Value partialStats);
  /// Row h's (natural) max and its sum over the quad into the split's
  /// statistics, by the threads where `writes` holds.
  void writeRowStats(ArrayRef<Value> s, int64_t h, Value split, Value outRow,
                     Value partialStats, Value writes);
  /// 2^k and 2^-k for the k that brings `magnitude` (>= 0) into
  /// [2^14, 2^15) (clamped so both stay normal fp32).
  std::pair<Value, Value> normalization(Value magnitude);
  /// P V's A operand of value block `bw`, per the C layout of `p`: P
  /// times each key's value scale (`keyScales`, keys 8 nt + 2t + e at
  /// 2 nt + e) times 2^(the block's exponent in the loop state `s`), or
  /// P 2^10 where the keys share a scale (the state has no exponents).
  SmallVector<Value> valueOperand(ArrayRef<Value> p, ArrayRef<Value> keyScales,
                                  ArrayRef<Value> s, int64_t bw);
  /// The block exponent (i32) that brings `largest` (>= 0), the largest
  /// value scale of a tile, into [2^5, 2^6) (kValueScaleTarget).
  Value valueExponent(Value largest);
  /// The accumulators and block exponents after moving the blocks whose
  /// `leaves` is set toward `targets`.
  SmallVector<Value> moveExponents(ArrayRef<Value> state,
                                   ArrayRef<Value> targets,
                                   ArrayRef<Value> leaves);
  /// The factor that turns a value block's accumulators into partial
  /// results.
  SmallVector<Value> undoFactors(ArrayRef<Value> s, int64_t bw);

  /// The current raw slot's first word and byte (index), set per tile;
  /// the tensor outer scale (nvfp4 tensor mode), loaded once.
  Value rawBaseWords, rawBaseBytes, tensorScale;

  /// Loop state: max and sum of rows g and g + 8, the accumulators (n-tile
  /// nt, element e), then the value blocks' exponents (perKeyValueScale).
  static int64_t maxAt(int64_t h) { return h; }
  static int64_t sumAt(int64_t h) { return 2 + h; }
  static int64_t accAt(int64_t nt, int64_t e) { return 4 + nt * 4 + e; }
  int64_t expAt(int64_t bw) const { return accAt(warpTiles, 0) + bw; }
  int64_t expCount() const { return perKeyValueScale() ? valueBlocks : 0; }
};

OperandLane XqaMlaBuilder::describeLane(LaneAttr lane, int64_t firstColumn) {
  OperandLane result;
  result.lane = lane;
  result.firstColumn = firstColumn;
  result.count = lane.getCount();
  Type type = lane.getElementType();
  if (type.isBF16())
    result.encoding = Encoding::bf16;
  else if (isa<Float4E2M1FNType>(type))
    result.encoding = Encoding::nvfp4;
  else
    result.encoding = Encoding::f8e4m3;
  result.bf16 = result.encoding == Encoding::bf16;
  result.wordChannels = elementsPerWord(result.encoding);
  result.pairs = wordPairOrder(result.encoding, kb.hardwareFp8, kb.hardwareFp4);
  return result;
}

std::pair<Value, Value> XqaMlaBuilder::normalization(Value magnitude) {
  // magnitude = 1.f x 2^(E - 127): the factor's exponent field is 268 - E
  // (at most 253, so that the inverse 2^(254 - F - 127) stays normal); an
  // inf or NaN maximum gives 13, and stays inf or NaN.
  Value bits = kb.bitcast(builder.getI32Type(), magnitude);
  Value exponent = kb.shru(bits, kb.i32(23));
  Value field = kb.sub(kb.i32(268), exponent);
  field = kb.mins(field, kb.i32(253));
  Value factor = kb.bitcast(builder.getF32Type(), kb.shl(field, kb.i32(23)));
  Value inverseField = kb.sub(kb.i32(254), field);
  Value inverse =
      kb.bitcast(builder.getF32Type(), kb.shl(inverseField, kb.i32(23)));
  return {factor, inverse};
}

void XqaMlaBuilder::loadQuery(Value token, Value firstHead) {
  Location loc = kb.loc;
  Type f16 = builder.getF16Type(), bf16 = builder.getBF16Type();
  Type queryElement =
      cast<MemRefType>(op.getQuery().getType()).getElementType();
  int64_t pieces = keyDim / kQueryPiece;
  int64_t latentPieces = latent / kQueryPiece;
  for (int64_t rr = 0; rr < kRowsPerWarp; ++rr) {
    Value row = kb.mul(warp, index(kRowsPerWarp));
    row = kb.add(row, index(rr));
    Value head = kb.add(firstHead, row);
    // The row's raw bits, and the largest magnitude of its f16 lanes.
    Value largest = zero;
    forLaneItems(pieces, [&](Value piece) {
      Value column = kb.mul(piece, index(kQueryPiece));
      Value loaded = vector::LoadOp::create(
          builder, loc, VectorType::get({kQueryPiece}, queryElement), query,
          ValueRange{token, head, column});
      Value halves = vector::BitCastOp::create(
          builder, loc, VectorType::get({kQueryPiece}, f16), loaded);
      vector::StoreOp::create(builder, loc, halves, queryTile,
                              ValueRange{row, column},
                              /*nontemporal=*/false, llvm::MaybeAlign(16));
    });
    if (!anyF16Query())
      continue;
    // The f16 lanes' maximum: reread what this lane stored (its own
    // stores), so that the loads above stay unconditional vectors; a lane
    // past the row rereads its first piece, which the mask then drops.
    for (int64_t k = 0; k * kWarpThreads < pieces; ++k) {
      Value piece = kb.add(lane, index(k * kWarpThreads));
      Value inRange = kb.cmpi(arith::CmpIPredicate::slt, piece, index(pieces));
      Value safePiece = kb.select(inRange, piece, lane);
      Value column = kb.mul(safePiece, index(kQueryPiece));
      Value loaded = vector::LoadOp::create(
          builder, loc, VectorType::get({kQueryPiece}, bf16), queryBf16,
          ValueRange{row, column}, /*nontemporal=*/false, llvm::MaybeAlign(16));
      Value pieceMax = zero;
      for (int64_t e = 0; e < kQueryPiece; ++e) {
        Value x = vector::ExtractOp::create(builder, loc, loaded, e);
        pieceMax = kb.fmax(pieceMax, kb.fabs(kb.toF32(x)));
      }
      Value isLatent =
          kb.cmpi(arith::CmpIPredicate::slt, safePiece, index(latentPieces));
      Value latentCounts = kb.boolean(!latentLane.bf16);
      Value ropeCounts = kb.boolean(!ropeLane.bf16);
      Value counts = kb.select(isLatent, latentCounts, ropeCounts);
      counts = kb.land(counts, inRange);
      largest = kb.fmax(largest, kb.select(counts, pieceMax, zero));
    }
    for (int32_t mask = 16; mask >= 1; mask /= 2)
      largest = kb.fmax(largest, f16Mma.shuffleXor(largest, mask));
    auto [factor, inverse] = normalization(largest);
    kb.ifThen(kb.cmpi(arith::CmpIPredicate::eq, lane, index(0)),
              [&] { kb.store(inverse, queryInverse, {row}); });
    // The row's raw bits, stored by every lane of the warp, are reread by
    // others below (every warp takes the same rows loop, so a block
    // barrier is uniform; it runs once per block).
    kb.barrier();
    // Each f16 lane's groups: normalized, rounded once, permuted into the
    // decoder's order (a group is read and written by one thread).
    for (const OperandLane *l : {&latentLane, &ropeLane}) {
      if (l->bf16)
        continue;
      int64_t width = l->groupChannels();
      int64_t groups = l->count / width;
      SmallVector<int64_t> mask;
      for (int64_t c = 0; c < width; ++c)
        mask.push_back(l->physicalInGroup(c));
      Value splat = vector::BroadcastOp::create(
          builder, loc, VectorType::get({width}, builder.getF32Type()), factor);
      forLaneItems(groups, [&](Value group) {
        Value column = kb.mul(group, index(width));
        column = kb.add(column, index(l->firstColumn));
        Value raw =
            vector::LoadOp::create(builder, loc, VectorType::get({width}, bf16),
                                   queryBf16, ValueRange{row, column},
                                   /*nontemporal=*/false, llvm::MaybeAlign(16));
        Value wide = arith::ExtFOp::create(
            builder, loc, VectorType::get({width}, builder.getF32Type()), raw);
        Value scaled = arith::MulFOp::create(builder, loc, wide, splat);
        Value halves = arith::TruncFOp::create(
            builder, loc, VectorType::get({width}, f16), scaled);
        Value ordered =
            vector::ShuffleOp::create(builder, loc, halves, halves, mask);
        vector::StoreOp::create(builder, loc, ordered, queryTile,
                                ValueRange{row, column},
                                /*nontemporal=*/false, llvm::MaybeAlign(16));
      });
    }
  }
}

void XqaMlaBuilder::lookupPages(Value tileIndex, Value slot) {
  Value isKeyThread = kb.cmpi(arith::CmpIPredicate::slt, tid, index(tileKeys));
  kb.ifThen(isKeyThread, [&] {
    Value tileStart =
        kb.add(first, kb.mul(tileIndex, kb.i32(int32_t(tileKeys))));
    Value keyPos = kb.add(tileStart, kb.toI32(tid));
    Value inRange = kb.cmpi(arith::CmpIPredicate::slt, keyPos, last);
    // Clamped into the table, so the load is in bounds for every key.
    Value width =
        kb.toI32(memref::DimOp::create(builder, kb.loc, blockTable, 1));
    Value blockIndex = kb.divs(keyPos, kb.i32(int32_t(blockSize)));
    blockIndex = kb.mins(blockIndex, kb.sub(width, kb.i32(1)));
    Value page = kb.load(blockTable, {sequence, kb.toIndex(blockIndex)});
    Value mapped = kb.cmpi(arith::CmpIPredicate::sge, page, kb.i32(0));
    Value isLive = kb.land(inRange, mapped);
    Value entry = kb.select(isLive, page, kb.i32(-1));
    Value at = kb.add(kb.mul(slot, index(tileKeys)), tid);
    kb.store(entry, pages, {at});
  });
}

void XqaMlaBuilder::issueTile(Value tileIndex, Value rawSlot, Value pageSlot) {
  // Splits start on whole tiles, so where a page holds whole tiles
  // (block_size >= the tile's keys, both powers of two) a tile's keys are
  // consecutive records of one page. When all of them are live (the tile
  // ends inside the split, the page is mapped) the tile is one contiguous
  // run of bytes: every chunk's source is the tile's start plus a per-
  // thread and a compile-time offset, with no page entry to read per
  // chunk. Other tiles (a split's last, an unmapped page) look each key's
  // page up and zero-fill dead keys.
  if (blockSize < tileKeys)
    return issueTileCopies(tileIndex, rawSlot, pageSlot, /*wholePage=*/{});
  Value tileStart = kb.add(first, kb.mul(tileIndex, kb.i32(int32_t(tileKeys))));
  Value tileEnd = kb.add(tileStart, kb.i32(int32_t(tileKeys)));
  Value isWhole = kb.cmpi(arith::CmpIPredicate::sle, tileEnd, last);
  Value page = kb.load(pages, {kb.mul(pageSlot, index(tileKeys))});
  Value isMapped = kb.cmpi(arith::CmpIPredicate::sge, page, kb.i32(0));
  kb.ifElse(
      kb.land(isWhole, isMapped), TypeRange{},
      [&]() -> SmallVector<Value> {
        issueTileCopies(tileIndex, rawSlot, pageSlot, page);
        return {};
      },
      [&]() -> SmallVector<Value> {
        issueTileCopies(tileIndex, rawSlot, pageSlot, /*wholePage=*/{});
        return {};
      });
}

void XqaMlaBuilder::issueTileCopies(Value tileIndex, Value rawSlot,
                                    Value pageSlot, Value wholePage) {
  // 16 bytes per cp.async; consecutive threads copy consecutive chunks of
  // a record (coalesced). With `wholePage` (the page of every key of the
  // tile, all live) the sources are one run of bytes in a flat view of the
  // cache: the tile's first byte + a per-thread part + a compile-time part
  // per pass, which the copy's immediate offset absorbs. Without it, each
  // key's page comes from the page slot and dead keys are zero-filled.
  int64_t chunksPerRecord = recordBytes / 16;
  Value tileStart = kb.add(first, kb.mul(tileIndex, kb.i32(int32_t(tileKeys))));
  Value rawBytes = view(0, {layout.total}, builder.getIntegerType(8));
  Value slotBase = kb.mul(rawSlot, index(tileKeys * layout.rawStride));
  slotBase = kb.add(slotBase, index(layout.raw));
  // The key's position in its page: block_size is a power of two.
  Value pageMask = kb.i32(int32_t(blockSize - 1));
  Value flatCache, tileBytes;
  if (wholePage) {
    // The cache's pages are contiguous (identity layout): one i8 row.
    Value pageCount = memref::DimOp::create(builder, kb.loc, storage, 0);
    Value flatBytes = kb.mul(pageCount, index(blockSize * recordBytes));
    auto flatType =
        MemRefType::get({ShapedType::kDynamic}, builder.getIntegerType(8));
    flatCache = memref::ReinterpretCastOp::create(
        builder, kb.loc, flatType, storage,
        OpFoldResult(builder.getIndexAttr(0)),
        ArrayRef<OpFoldResult>{flatBytes},
        ArrayRef<OpFoldResult>{builder.getIndexAttr(1)});
    Value pageIndex = kb.toIndex(wholePage);
    Value tileKey = kb.mul(pageIndex, index(blockSize));
    tileKey = kb.add(tileKey, kb.toIndex(kb.andi(tileStart, pageMask)));
    tileBytes = kb.mul(tileKey, index(recordBytes));
  }
  // The copy of `byte` of key `key` (= a per-thread key + `keyConstant`) to
  // `dst`; `threadSource` is the per-thread part of the flat source.
  auto copy = [&](Value key, Value byte, Value dst, Value threadSource,
                  int64_t keyConstant) {
    if (wholePage) {
      Value source = kb.add(threadSource, index(keyConstant * recordBytes));
      nvgpu::DeviceAsyncCopyOp::create(
          builder, kb.loc, rawBytes, ValueRange{dst}, flatCache,
          ValueRange{source}, builder.getIndexAttr(16), Value(),
          builder.getUnitAttr());
      return;
    }
    Value at = kb.add(kb.mul(pageSlot, index(tileKeys)), key);
    Value page = kb.load(pages, {at});
    Value isLive = kb.cmpi(arith::CmpIPredicate::sge, page, kb.i32(0));
    Value keyPos = kb.add(tileStart, kb.toI32(key));
    Value offset = kb.andi(keyPos, pageMask);
    Value safePage = kb.toIndex(kb.maxs(page, kb.i32(0)));
    Value full = index(16);
    Value copied = kb.select(isLive, full, index(0));
    nvgpu::DeviceAsyncCopyOp::create(
        builder, kb.loc, rawBytes, ValueRange{dst}, storage,
        ValueRange{safePage, kb.toIndex(offset), byte},
        builder.getIndexAttr(16), copied, builder.getUnitAttr());
  };
  if (chunksPerRecord <= blockThreads) {
    // Thread t copies chunk t % C of keys t / C + K j (K = whole records
    // per pass): its chunk and first destination are fixed, the passes
    // differ by compile-time strides.
    int64_t keysPerPass = blockThreads / chunksPerRecord;
    Value byte = kb.rems(tid, index(chunksPerRecord));
    byte = kb.mul(byte, index(16));
    Value firstKey = kb.divs(tid, index(chunksPerRecord));
    Value threadDst = kb.add(kb.mul(firstKey, index(layout.rawStride)), byte);
    threadDst = kb.add(slotBase, threadDst);
    Value threadSource;
    if (wholePage) {
      threadSource = kb.add(kb.mul(firstKey, index(recordBytes)), byte);
      threadSource = kb.add(tileBytes, threadSource);
    }
    Value inPass = kb.cmpi(arith::CmpIPredicate::slt, tid,
                           index(keysPerPass * chunksPerRecord));
    for (int64_t pass = 0; pass * keysPerPass < tileKeys; ++pass) {
      Value key = kb.add(firstKey, index(pass * keysPerPass));
      Value dst =
          kb.add(threadDst, index(pass * keysPerPass * layout.rawStride));
      Value active = inPass;
      if ((pass + 1) * keysPerPass > tileKeys)
        active = kb.land(
            active, kb.cmpi(arith::CmpIPredicate::slt, key, index(tileKeys)));
      auto copyPass = [&] {
        copy(key, byte, dst, threadSource, pass * keysPerPass);
      };
      if (keysPerPass * chunksPerRecord == blockThreads &&
          (pass + 1) * keysPerPass <= tileKeys)
        copyPass();
      else
        kb.ifThen(active, copyPass);
    }
    return;
  }
  // Records of more chunks than threads: chunk t + T q of every key.
  for (int64_t q = 0; q * blockThreads < chunksPerRecord; ++q) {
    Value chunk = kb.add(tid, index(q * blockThreads));
    Value byte = kb.mul(chunk, index(16));
    Value inRecord =
        kb.cmpi(arith::CmpIPredicate::slt, chunk, index(chunksPerRecord));
    kb.ifThen(inRecord, [&] {
      Value threadSource = wholePage ? kb.add(tileBytes, byte) : Value();
      for (int64_t key = 0; key < tileKeys; ++key) {
        Value dst = kb.add(slotBase, byte);
        dst = kb.add(dst, index(key * layout.rawStride));
        copy(index(key), byte, dst, threadSource, key);
      }
    });
  }
}

Value XqaMlaBuilder::latentScale(Value threadWords, int64_t constant) {
  switch (record.latentFormat) {
  case MlaLatentFormat::E4M3BlockScaled:
    return rawF32(threadWords, constant + latentScaleLane.getOffset() / 4);
  case MlaLatentFormat::E2M1GroupScaled:
    return tokenLane ? rawF32(threadWords, constant + tokenLane.getOffset() / 4)
                     : tensorScale;
  default:
    return Value();
  }
}

Value XqaMlaBuilder::scalePair(Value low, Value high) {
  // Elements 0 and 2 of a word are the pair decodeWordHalves returns first.
  Value word = kb.ori(low, kb.shl(high, kb.i32(16)));
  return decodeWordHalves(kb, Encoding::f8e4m3, word)[0];
}

void XqaMlaBuilder::scoreTile(Value pageSlot) {
  // Warp w scores keys n0 + g (B operand columns), n0 = 8w; element e of
  // the result is row g + 8 (e / 2), key n0 + 2t + (e % 2). Two accumulator
  // chains (even and odd k-steps) per scale block keep two mma in flight.
  Value n0 = kb.mul(warp, index(8));
  Value bKey = kb.add(n0, groupId);
  Value keyLow = kb.add(n0, kb.mul(threadInGroup, index(2)));
  Value aRow = kb.rems(lane, index(16));
  Value aColumnOffset = kb.divs(lane, index(16));
  aColumnOffset = kb.mul(aColumnOffset, index(8));
  int64_t stride = strideWords();
  // Words of the B key's record from word t, and of key 2t's record.
  Value bKeyWords = kb.mul(bKey, index(stride));
  Value bWords = kb.add(bKeyWords, threadInGroup);
  Value lowKeyWords = kb.mul(keyLow, index(stride));
  // The B key's group-scale byte of the thread's word: group t / 2 of the
  // word's 32 channels.
  Value bScaleBytes = kb.mul(bKey, index(layout.rawStride));
  bScaleBytes = kb.add(bScaleBytes, kb.divs(threadInGroup, index(2)));

  SmallVector<Value> logit(4, zero);
  for (const OperandLane *l : {&latentLane, &ropeLane}) {
    MmaBuilder &tc = mmaOf(*l);
    bool isLatent = l == &latentLane;
    int64_t steps = l->count / 16;
    auto blockOf = [&](int64_t step) -> int64_t {
      return isLatent ? step * 16 / latentGroup : 0;
    };
    SmallVector<Value> laneTotal(4, zero);
    SmallVector<Value> chains[2] = {SmallVector<Value>(4, zero),
                                    SmallVector<Value>(4, zero)};
    auto flush = [&](int64_t block) {
      // The scales of keys 2t and 2t + 1 (none: 1).
      Value low, high;
      if (isLatent) {
        low = latentScale(lowKeyWords, block);
        high = latentScale(lowKeyWords, stride + block);
      } else if (ropeScaleLane) {
        low = rawF32(lowKeyWords, ropeScaleLane.getOffset() / 4);
        high = rawF32(lowKeyWords, stride + ropeScaleLane.getOffset() / 4);
      }
      for (int64_t e = 0; e < 4; ++e) {
        Value sum = kb.fadd(chains[0][e], chains[1][e]);
        laneTotal[e] = low ? kb.fma(sum, e % 2 ? high : low, laneTotal[e])
                           : kb.fadd(sum, laneTotal[e]);
        chains[0][e] = chains[1][e] = zero;
      }
    };
    int64_t current = blockOf(0);
    SmallVector<ChannelPair> decoded;
    for (int64_t step = 0; step < steps; ++step) {
      if (blockOf(step) != current) {
        flush(current);
        current = blockOf(step);
      }
      SmallVector<Value> b(2);
      if (l->bf16) {
        // Channels 16 step + 8 r + 2t, + 1: the raw words are operands.
        for (int64_t r = 0; r < 2; ++r)
          b[r] = rawWord(bWords, l->lane.getOffset() / 4 + 8 * step + 4 * r);
      } else {
        int64_t perWord = l->stepsPerWord();
        if (step % perWord == 0) {
          // Channels 4 w (step / perWord) + w t .. of the B key, w the word's
          // channels: one word serves perWord k-steps.
          Value word =
              rawWord(bWords, l->lane.getOffset() / 4 + 4 * (step / perWord));
          decoded = decodeWordPairs(kb, l->encoding, word);
          for (auto [pair, expected] : llvm::zip_equal(decoded, l->pairs)) {
            (void)expected;
            assert(pair.low == expected.first && pair.high == expected.second &&
                   "the query tile is laid out for another pair order");
          }
          if (l->encoding == Encoding::nvfp4) {
            // One e4m3 group scale covers the word's 8 channels.
            Value code = rawByte(bScaleBytes, latentScaleLane.getOffset() +
                                                  2 * (step / perWord));
            Value scale = scalePair(code, code);
            for (ChannelPair &pair : decoded)
              pair.pair =
                  arith::MulFOp::create(builder, kb.loc, pair.pair, scale);
          }
        }
        int64_t p0 = 2 * (step % perWord);
        b = {decoded[p0].pair, decoded[p0 + 1].pair};
      }
      Value aColumn = kb.add(aColumnOffset, index(l->firstColumn + 16 * step));
      SmallVector<Value> a;
      for (Value word :
           tc.ldmatrix(queryTile, aRow, aColumn, 4, /*transpose=*/false))
        a.push_back(l->bf16 ? word : f16PairOf(kb, word));
      SmallVector<Value> &chain = chains[step % 2];
      chain = tc.mma(a, b, chain);
    }
    flush(current);
    // The bit trick's e2m1 pairs are short of 2^14 (KernelBuilder::
    // fp4Subnormal); the chips' cvt is not.
    bool subnormalCodes = l->encoding == Encoding::nvfp4 && !kb.hardwareFp4;
    for (int64_t e = 0; e < 4; ++e) {
      Value total = laneTotal[e];
      if (subnormalCodes)
        total = kb.fmul(total, kb.f32(kFp4SubnormalScale));
      if (!l->bf16)
        total = kb.fmul(total, rowInverse[e / 2]);
      logit[e] = kb.fadd(logit[e], total);
    }
  }

  // Base-2 logits, -inf for dead keys (outside the split or the causal
  // range, on an unmapped page), as float2 per row.
  Value pageAt = kb.add(kb.mul(pageSlot, index(tileKeys)), keyLow);
  auto pagePair = vector::LoadOp::create(
      builder, kb.loc, VectorType::get({2}, builder.getI32Type()), pages,
      ValueRange{pageAt}, /*nontemporal=*/false, llvm::MaybeAlign(8));
  SmallVector<Value> isLive(2);
  for (int64_t k = 0; k < 2; ++k) {
    Value page = vector::ExtractOp::create(builder, kb.loc, pagePair, k);
    isLive[k] = kb.cmpi(arith::CmpIPredicate::sge, page, kb.i32(0));
  }
  for (int64_t h = 0; h < 2; ++h) {
    SmallVector<Value> pair(2);
    for (int64_t k = 0; k < 2; ++k) {
      Value scaled = kb.fmul(logit[2 * h + k], softmaxScale);
      Value x = kb.finiteLogit(scaled);
      pair[k] = kb.select(isLive[k], x, negInf);
    }
    Value row = kb.add(groupId, index(8 * h));
    Value at = kb.mul(row, index(layout.logitStride));
    at = kb.add(at, keyLow);
    Value both = vector::FromElementsOp::create(
        builder, kb.loc, VectorType::get({2}, builder.getF32Type()), pair);
    vector::StoreOp::create(builder, kb.loc, both, logits, ValueRange{at},
                            /*nontemporal=*/false, llvm::MaybeAlign(8));
  }
}

void XqaMlaBuilder::accumulateTile(SmallVectorImpl<Value> &s) {
  Location loc = kb.loc;
  int64_t keyTiles = tileKeys / 8;
  // x[nt * 4 + e]: row g + 8 (e / 2), key 8 nt + 2t + (e % 2).
  SmallVector<Value> x(keyTiles * 4);
  auto keyOf = [&](int64_t nt, int64_t e) {
    Value key = kb.mul(threadInGroup, index(2));
    return kb.add(key, index(8 * nt + e % 2));
  };
  auto loadPair = [&](Value memref, Value at, Type element) {
    return vector::LoadOp::create(builder, kb.loc,
                                  VectorType::get({2}, element), memref,
                                  ValueRange{at},
                                  /*nontemporal=*/false, llvm::MaybeAlign(8))
        .getResult();
  };
  Type f32 = builder.getF32Type();
  for (int64_t nt = 0; nt < keyTiles; ++nt)
    for (int64_t h = 0; h < 2; ++h) {
      Value row = rowOf(h);
      Value rowStart = kb.mul(row, index(layout.logitStride));
      Value key = keyOf(nt, 0);
      Value at = kb.add(rowStart, key);
      Value pair = loadPair(logits, at, f32);
      for (int64_t k = 0; k < 2; ++k)
        x[nt * 4 + 2 * h + k] =
            vector::ExtractOp::create(builder, kb.loc, pair, k);
      if (!warpgroup)
        continue;
      // The other warpgroup's partial sums, then the softmax scale and
      // the mask (-inf for dead keys: outside the split or the causal
      // range, on an unmapped page).
      Value otherAt =
          kb.add(at, index(kXqaMlaWarpgroupHeads * layout.logitStride));
      Value other = loadPair(logits, otherAt, f32);
      Value pageAt = kb.mul(currentPageSlot, index(tileKeys));
      pageAt = kb.add(pageAt, key);
      Value pagePair = loadPair(pages, pageAt, builder.getI32Type());
      for (int64_t k = 0; k < 2; ++k) {
        Value part = vector::ExtractOp::create(builder, kb.loc, other, k);
        Value sum = kb.fadd(x[nt * 4 + 2 * h + k], part);
        Value scaled = kb.fmul(sum, softmaxScale);
        Value logit = kb.finiteLogit(scaled);
        Value page = vector::ExtractOp::create(builder, kb.loc, pagePair, k);
        Value isLive = kb.cmpi(arith::CmpIPredicate::sge, page, kb.i32(0));
        x[nt * 4 + 2 * h + k] = kb.select(isLive, logit, negInf);
      }
    }

  // The online softmax (as the paged XQA kernel: a finite maximum, so that
  // ex2.approx(-inf) = +0 covers masked keys and a row's first maximum).
  // A row's maximum moves only when some row's logits pass its maximum by
  // more than kMaxSlack; every row then takes its new maximum (a warp-
  // uniform choice: every warp runs the same softmax on the same logits).
  SmallVector<Value> p(keyTiles * 4), alphas(2), kept(2), raised(2);
  Value rescale = kb.boolean(false);
  for (int64_t h = 0; h < 2; ++h) {
    Value rowMax = quadRowMax(x, h, negInf);
    Value oldMax = s[maxAt(h)];
    kept[h] = oldMax;
    raised[h] = kb.fmax(oldMax, rowMax);
    Value limit = kb.fadd(oldMax, kb.f32(float(kMaxSlack)));
    rescale =
        kb.lor(rescale, kb.cmpf(arith::CmpFPredicate::OGT, raised[h], limit));
  }
  Value anyRescale =
      NVVM::VoteSyncOp::create(builder, loc, builder.getI1Type(), kb.i32(-1),
                               rescale, NVVM::VoteSyncKind::any);
  for (int64_t h = 0; h < 2; ++h) {
    Value oldMax = kept[h];
    Value newMax = kb.select(anyRescale, raised[h], oldMax);
    Value noKey = kb.cmpf(arith::CmpFPredicate::OEQ, newMax, negInf);
    Value finiteMax = kb.select(noKey, zero, newMax);
    Value alpha = f16Mma.exp2(kb.fsub(oldMax, finiteMax));
    Value sum = kb.fmul(s[sumAt(h)], alpha);
    for (int64_t nt = 0; nt < keyTiles; ++nt)
      for (int64_t e = 2 * h; e < 2 * h + 2; ++e) {
        Value w = f16Mma.exp2(kb.fsub(x[nt * 4 + e], finiteMax));
        sum = kb.fadd(sum, w);
        p[nt * 4 + e] = w;
      }
    alphas[h] = alpha;
    s[maxAt(h)] = newMax;
    s[sumAt(h)] = sum;
  }
  // P V, one value block of this warp at a time (eligibility row M5: a
  // warp's channels are one block, inside one, or whole blocks).
  const OperandLane &v = latentLane;
  MmaBuilder &tc = mmaOf(v);
  int64_t width = v.wordChannels;
  int64_t chunkChannels = 8 * width; ///< n-tile column g is word g
  int64_t chunksPerBlock = blockChannels / chunkChannels;
  int64_t tilesPerBlock = chunksPerBlock * width;
  int64_t keySteps = tileKeys / 16;
  Value channelBase = kb.mul(warpgroup ? wgIndex : warp, index(warpChannels));
  Value twoT = kb.mul(threadInGroup, index(2));
  int64_t stride = strideWords();

  // Each block's value scales of this tile's keys 8 nt + 2t + e, their
  // largest over the tile (every quad holds all 32 keys: warp-uniform),
  // and whether the block's exponent leaves its window.
  SmallVector<SmallVector<Value>> keyScales(valueBlocks);
  SmallVector<Value> targets(valueBlocks), leaves(valueBlocks);
  Value anyLeaves = kb.boolean(false);
  if (perKeyValueScale()) {
    for (int64_t bw = 0; bw < valueBlocks; ++bw) {
      Value firstChannel = kb.add(channelBase, index(bw * blockChannels));
      Value block = kb.divs(firstChannel, index(latentGroup));
      Value scaleWords = kb.add(kb.mul(twoT, index(stride)), block);
      Value largest = zero;
      for (int64_t nt = 0; nt < keyTiles; ++nt)
        for (int64_t e = 0; e < 2; ++e) {
          Value scale = latentScale(scaleWords, (8 * nt + e) * stride);
          keyScales[bw].push_back(scale);
          largest = kb.fmax(largest, scale);
        }
      largest = kb.fmax(largest, f16Mma.shuffleXor(largest, 1));
      largest = kb.fmax(largest, f16Mma.shuffleXor(largest, 2));
      targets[bw] = valueExponent(largest);
      Value distance = kb.sub(s[expAt(bw)], targets[bw]);
      Value negated = kb.sub(kb.i32(0), distance);
      distance = kb.maxs(distance, negated);
      leaves[bw] = kb.cmpi(arith::CmpIPredicate::sgt, distance,
                           kb.i32(kValueExponentWindow));
      anyLeaves = kb.lor(anyLeaves, leaves[bw]);
    }
  }

  // The accumulators decay when the maxima moved, and move to a block's
  // new exponent when its scales left the window (both uniform across the
  // warp, and rare once a split's first tiles are past).
  Value update = kb.lor(anyRescale, anyLeaves);
  int64_t accCount = warpTiles * 4;
  SmallVector<Type> stateTypes(accCount, builder.getF32Type());
  stateTypes.append(expCount(), builder.getI32Type());
  auto current = [&]() {
    return SmallVector<Value>(s.begin() + accAt(0, 0), s.end());
  };
  SmallVector<Value> updated = kb.ifElse(
      update, stateTypes,
      [&]() -> SmallVector<Value> {
        SmallVector<Value> state = current();
        if (perKeyValueScale())
          state = kb.ifElse(
              anyLeaves, stateTypes,
              [&]() { return moveExponents(state, targets, leaves); },
              [&]() { return state; });
        for (int64_t nt = 0; nt < warpTiles; ++nt)
          for (int64_t e = 0; e < 4; ++e)
            state[nt * 4 + e] = kb.fmul(state[nt * 4 + e], alphas[e / 2]);
        return state;
      },
      current);
  std::copy(updated.begin(), updated.end(), s.begin() + accAt(0, 0));
  if (warpgroup)
    return accumulateWarpgroup(p, keyScales, s);

  // Words of two keys -> B registers: one prmt gathers the same channels
  // of both (low half key 2t, high half key 2t + 1). The chips' e4m3
  // conversion pairs adjacent bytes, the others the two halves.
  bool adjacentBytes = v.encoding == Encoding::f8e4m3 && kb.hardwareFp8;
  int32_t lowSelector = adjacentBytes ? 0x5140 : 0x5410;
  int32_t highSelector = adjacentBytes ? 0x7362 : 0x7632;
  // The thread's words: key 2t's record, word g of each chunk of the
  // warp's channels; the rest (key, chunk) is compile-time.
  Value pairWords = kb.mul(twoT, index(stride));
  pairWords = kb.add(pairWords, groupId);
  pairWords = kb.add(pairWords, kb.mul(warp, index(warpChannels / width)));
  // Its group-scale bytes (e2m1: word g of a chunk is group g / 2).
  Value pairScaleBytes = kb.mul(twoT, index(layout.rawStride));
  pairScaleBytes = kb.add(pairScaleBytes, kb.divs(groupId, index(2)));
  pairScaleBytes =
      kb.add(pairScaleBytes, kb.mul(warp, index(warpChannels / 16)));
  // Key 2t + `key` (compile-time) and key + 1, chunk channel `channel`.
  auto keyPairRegisters = [&](int64_t key, int64_t channel) {
    int64_t constant = key * stride + v.lane.getOffset() / 4 + channel / width;
    Value wordA = rawWord(pairWords, constant);
    Value wordB = rawWord(pairWords, constant + stride);
    SmallVector<Value> registers(width);
    for (int64_t half = 0; half < 2; ++half) {
      Value selector = kb.i32(half ? highSelector : lowSelector);
      Value gathered =
          NVVM::PermuteOp::create(builder, loc, builder.getI32Type(), wordA,
                                  wordB, selector, NVVM::PermuteMode::DEFAULT);
      if (adjacentBytes) {
        for (const ChannelPair &pair :
             decodeWordPairs(kb, v.encoding, gathered))
          registers[half * width / 2 + pair.low / 2] = pair.pair;
      } else {
        SmallVector<Value> halves = decodeWordHalves(kb, v.encoding, gathered);
        for (auto [j, pair] : llvm::enumerate(halves))
          registers[half * width / 2 + int64_t(j)] = pair;
      }
    }
    if (v.encoding == Encoding::nvfp4) {
      int64_t at =
          key * layout.rawStride + latentScaleLane.getOffset() + channel / 16;
      Value lowScale = rawByte(pairScaleBytes, at);
      Value highScale = rawByte(pairScaleBytes, at + layout.rawStride);
      Value scale = scalePair(lowScale, highScale);
      for (Value &reg : registers)
        reg = arith::MulFOp::create(builder, loc, reg, scale);
    }
    for (Value &reg : registers)
      reg = tc.bitsOperand(reg);
    return registers;
  };

  for (int64_t bw = 0; bw < valueBlocks; ++bw) {
    SmallVector<Value> scaled = valueOperand(p, keyScales[bw], s, bw);
    // A operands per k-step (16 keys: key tiles 2 ks, 2 ks + 1): a0 = row
    // g, a1 = row g + 8 of the first key tile, a2, a3 of the second.
    SmallVector<SmallVector<Value>> a(keySteps);
    for (int64_t ks = 0; ks < keySteps; ++ks) {
      int64_t lo = 2 * ks * 4, hi = (2 * ks + 1) * 4;
      a[ks] = {tc.packPair(scaled[lo], scaled[lo + 1]),
               tc.packPair(scaled[lo + 2], scaled[lo + 3]),
               tc.packPair(scaled[hi], scaled[hi + 1]),
               tc.packPair(scaled[hi + 2], scaled[hi + 3])};
    }
    // n-tile j of chunk c, column n: channel chunk + width n + j; the
    // products accumulate straight into the (block-exponent) accumulators.
    for (int64_t c = 0; c < chunksPerBlock; ++c) {
      int64_t channel = bw * blockChannels + c * chunkChannels;
      int64_t firstTile = bw * tilesPerBlock + c * width;
      for (int64_t ks = 0; ks < keySteps; ++ks) {
        SmallVector<Value> registers[2];
        for (int64_t r = 0; r < 2; ++r)
          registers[r] = keyPairRegisters(16 * ks + 8 * r, channel);
        for (int64_t j = 0; j < width; ++j) {
          SmallVector<Value> acc(4);
          for (int64_t e = 0; e < 4; ++e)
            acc[e] = s[accAt(firstTile + j, e)];
          acc = tc.mma(a[ks], {registers[0][j], registers[1][j]}, acc);
          for (int64_t e = 0; e < 4; ++e)
            s[accAt(firstTile + j, e)] = acc[e];
        }
      }
    }
  }
}

//===----------------------------------------------------------------------===//
// The warpgroup kernel (sm_90a)
//===----------------------------------------------------------------------===//

SmallVector<int64_t> XqaMlaBuilder::decodedOrder(const OperandLane &l) const {
  SmallVector<int64_t> order;
  if (l.bf16) {
    for (int64_t c = 0; c < 8; ++c)
      order.push_back(c);
    return order;
  }
  for (int64_t w = 0; w < 8 / l.wordChannels; ++w)
    for (auto [low, high] : l.pairs) {
      order.push_back(w * l.wordChannels + low);
      order.push_back(w * l.wordChannels + high);
    }
  return order;
}

Value XqaMlaBuilder::descriptor(Value offset, int64_t leading, int64_t stride) {
  // Bits [0, 14): the start address / 16; [16, 30): the leading byte
  // offset / 16; [32, 46): the stride byte offset / 16; swizzle mode 0.
  Value address = kb.add(smemAddress, kb.toI64(offset));
  Value start = kb.shru(address, kb.i64(4));
  start = kb.andi(start, kb.i64(0x3FFF));
  int64_t fields = (leading >> 4) << 16 | (stride >> 4) << 32;
  return kb.ori(start, kb.i64(fields));
}

Value XqaMlaBuilder::advance(Value descriptor, int64_t bytes) {
  assert(bytes % 16 == 0 && "wgmma operands start on 16 bytes");
  if (bytes == 0)
    return descriptor;
  return kb.add(descriptor, kb.i64(bytes / 16));
}

SmallVector<Value> XqaMlaBuilder::wgmma(Value descA, Value descB,
                                        ArrayRef<Value> acc, int64_t n,
                                        bool bf16, bool transposeB) {
  MLIRContext *context = builder.getContext();
  Location loc = kb.loc;
  Type f32 = builder.getF32Type();
  auto structType =
      LLVM::LLVMStructType::getLiteral(context, SmallVector<Type>(n / 2, f32));
  Value inout = LLVM::UndefOp::create(builder, loc, structType);
  for (auto [i, value] : llvm::enumerate(acc))
    inout = LLVM::InsertValueOp::create(builder, loc, inout, value,
                                        ArrayRef<int64_t>{int64_t(i)});
  NVVM::WGMMATypes type = bf16 ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16;
  // Without accumulators D = A B (scale-d 0).
  NVVM::WGMMAScaleOut scaleD =
      acc.empty() ? NVVM::WGMMAScaleOut::zero : NVVM::WGMMAScaleOut::one;
  NVVM::MMALayout layoutB =
      transposeB ? NVVM::MMALayout::row : NVVM::MMALayout::col;
  auto shape = NVVM::MMAShapeAttr::get(context, 64, int(n), 16);
  Value d = NVVM::WgmmaMmaAsyncOp::create(
      builder, loc, structType, inout, descA, descB, shape, type, type,
      NVVM::WGMMATypes::f32, scaleD, NVVM::WGMMAScaleIn::one,
      NVVM::WGMMAScaleIn::one, NVVM::MMALayout::row, layoutB,
      NVVM::MMAIntOverflowAttr());
  SmallVector<Value> result;
  for (int64_t i = 0; i < n / 2; ++i)
    result.push_back(LLVM::ExtractValueOp::create(builder, loc, d, i));
  return result;
}

/// An f16x2 or bf16x2 pair (or its i32 bits) as i32 bits.
static Value pairBits(KernelBuilder &kb, Value pair) {
  if (pair.getType().isInteger(32))
    return pair;
  Value word = vector::BitCastOp::create(
      kb.b, kb.loc, VectorType::get({1}, kb.b.getI32Type()), pair);
  return vector::ExtractOp::create(kb.b, kb.loc, word, 0);
}

void XqaMlaBuilder::loadQueryWarpgroup(Value token, Value firstHead) {
  // Warp w loads rows [8w, 8w + 8): lane l takes row 8w + l % 8 and the
  // 8-channel pieces l / 8 + 4q, so the 8 lanes of a quarter-warp store
  // the 8 rows of one core matrix (128 contiguous bytes). The element at
  // (row, column) is at byte ((column / 8) 8 + row / 8) 128 + (row % 8) 16
  // + position 2 (as wgmma's K-major A: K core matrices 1024 bytes apart,
  // M core matrices 128).
  Location loc = kb.loc;
  Type f16 = builder.getF16Type(), f32 = builder.getF32Type();
  Type queryElement =
      cast<MemRefType>(op.getQuery().getType()).getElementType();
  auto pieceType = VectorType::get({kQueryPiece}, queryElement);
  int64_t pieceSets = keyDim / kQueryPiece / 4;
  int64_t latentSets = latent / kQueryPiece / 4;
  Value rowInWarp = kb.rems(lane, index(8));
  Value row = kb.mul(warp, index(8));
  row = kb.add(row, rowInWarp);
  Value head = kb.add(firstHead, row);
  Value pieceOfLane = kb.divs(lane, index(8));
  auto pieceAt = [&](int64_t q) {
    Value piece = kb.add(pieceOfLane, index(4 * q));
    Value column = kb.mul(piece, index(kQueryPiece));
    return vector::LoadOp::create(builder, loc, pieceType, query,
                                  ValueRange{token, head, column})
        .getResult();
  };
  // The row's largest magnitude over its f16 lanes, across its 4 lanes.
  Value largest = zero;
  for (int64_t q = 0; q < pieceSets; ++q) {
    const OperandLane &l = q < latentSets ? latentLane : ropeLane;
    if (l.bf16)
      continue;
    Value loaded = pieceAt(q);
    for (int64_t e = 0; e < kQueryPiece; ++e) {
      Value x = vector::ExtractOp::create(builder, loc, loaded, e);
      largest = kb.fmax(largest, kb.fabs(kb.toF32(x)));
    }
  }
  largest = kb.fmax(largest, f16Mma.shuffleXor(largest, 8));
  largest = kb.fmax(largest, f16Mma.shuffleXor(largest, 16));
  auto [factor, inverse] = normalization(largest);
  Value storesInverse =
      kb.cmpi(arith::CmpIPredicate::eq, pieceOfLane, index(0));
  kb.ifThen(storesInverse, [&] { kb.store(inverse, queryInverse, {row}); });

  Value rowGroup = kb.divs(row, index(8));
  Value threadBytes = kb.mul(pieceOfLane, index(8 * 128));
  threadBytes = kb.add(threadBytes, kb.mul(rowGroup, index(128)));
  threadBytes = kb.add(threadBytes, kb.mul(rowInWarp, index(16)));
  Value threadWords = kb.divs(threadBytes, index(4));
  threadWords = kb.add(threadWords, index(layout.query / 4));
  auto splat = vector::BroadcastOp::create(
      builder, loc, VectorType::get({kQueryPiece}, f32), factor);
  for (int64_t q = 0; q < pieceSets; ++q) {
    const OperandLane &l = q < latentSets ? latentLane : ropeLane;
    Value loaded = pieceAt(q);
    Value halves;
    if (l.bf16) {
      halves = vector::BitCastOp::create(
          builder, loc, VectorType::get({kQueryPiece}, f16), loaded);
    } else {
      Value wide = arith::ExtFOp::create(
          builder, loc, VectorType::get({kQueryPiece}, f32), loaded);
      Value scaled = arith::MulFOp::create(builder, loc, wide, splat);
      Value rounded = arith::TruncFOp::create(
          builder, loc, VectorType::get({kQueryPiece}, f16), scaled);
      halves = vector::ShuffleOp::create(builder, loc, rounded, rounded,
                                         decodedOrder(l));
    }
    Value bits = vector::BitCastOp::create(
        builder, loc, VectorType::get({4}, builder.getI32Type()), halves);
    Value at = kb.add(threadWords, index(4 * q * 8 * 128 / 4));
    vector::StoreOp::create(builder, loc, bits, words, ValueRange{at},
                            /*nontemporal=*/false, llvm::MaybeAlign(16));
  }
}

void XqaMlaBuilder::decodeTile() {
  // Thread (warp w, lane l) decodes key k = 8 (w % 4) + l % 8 and the
  // pieces 8 j + r, r = 4 (w / 4) + l / 8, of every pass j: a quarter-warp
  // stores one core matrix (8 keys x 16 bytes), and a warp's raw reads fall
  // in different banks. The decoded element (key, channel) is at byte
  // ((channel / 8) K8 + key / 8) 128 + (key % 8) 16 + position 2, K8 the
  // tile's 8-key groups: a K-major B for S (K core matrices K8 128 bytes
  // apart, N 128) and an MN-major B for P V (K 128, N K8 128).
  assert(tileKeys == 32 && blockThreads == 256 &&
         "the decode's thread mapping is for 32 keys and 8 warps");
  Location loc = kb.loc;
  Type i32 = builder.getI32Type();
  int64_t keyGroups = tileKeys / 8;
  int64_t passes = keyDim / 64;
  int64_t latentPasses = latent / 64;
  Value keyInGroup = kb.rems(lane, index(8));
  Value keyGroup = kb.rems(warp, index(4));
  Value key = kb.mul(keyGroup, index(8));
  key = kb.add(key, keyInGroup);
  Value r = kb.mul(wgIndex, index(4));
  r = kb.add(r, kb.divs(lane, index(8)));
  Value keyWords = kb.mul(key, index(strideWords()));
  Value keyBytes = kb.mul(key, index(layout.rawStride));
  Value storeBytes = kb.mul(r, index(keyGroups * 128));
  storeBytes = kb.add(storeBytes, kb.mul(keyGroup, index(128)));
  storeBytes = kb.add(storeBytes, kb.mul(keyInGroup, index(16)));
  storeBytes = kb.add(storeBytes, decodedBase);
  Value storeWords = kb.divs(storeBytes, index(4));
  for (int64_t j = 0; j < passes; ++j) {
    bool isLatent = j < latentPasses;
    const OperandLane &l = isLatent ? latentLane : ropeLane;
    // The piece within its lane: 8 j' + r.
    int64_t jInLane = isLatent ? j : j - latentPasses;
    int64_t pieceWords = 8 / l.wordChannels; // 32-bit words of codes
    Value first = kb.mul(r, index(pieceWords));
    first = kb.add(first, keyWords);
    int64_t constant = l.lane.getOffset() / 4 + 8 * jInLane * pieceWords;
    SmallVector<Value> out;
    if (l.bf16) {
      for (int64_t w = 0; w < 4; ++w)
        out.push_back(rawWord(first, constant + w));
    } else {
      Value scale;
      if (l.encoding == Encoding::nvfp4) {
        // Group 16 covers pieces 2m, 2m + 1: byte 4 j' + r / 2.
        Value scaleByte = kb.add(keyBytes, kb.divs(r, index(2)));
        Value code =
            rawByte(scaleByte, latentScaleLane.getOffset() + 4 * jInLane);
        scale = scalePair(code, code);
      }
      for (int64_t w = 0; w < pieceWords; ++w) {
        Value word = rawWord(first, constant + w);
        for (ChannelPair &pair : decodeWordPairs(kb, l.encoding, word)) {
          Value halves = pair.pair;
          if (scale)
            halves = arith::MulFOp::create(builder, loc, halves, scale);
          out.push_back(pairBits(kb, halves));
        }
      }
    }
    Value bits = vector::FromElementsOp::create(builder, loc,
                                                VectorType::get({4}, i32), out);
    Value at = kb.add(storeWords, index(j * 8 * keyGroups * 128 / 4));
    vector::StoreOp::create(builder, loc, bits, words, ValueRange{at},
                            /*nontemporal=*/false, llvm::MaybeAlign(16));
  }
}

void XqaMlaBuilder::scoreTileWarpgroup() {
  // S = Q Kᵀ over all the tile's keys (wgmma N = 32), the k-steps split
  // between the warpgroups: each reads half of the query tile per tile
  // (the k-steps' A, the larger share of S's shared-memory traffic) and
  // runs half the dependent chain. Element i of a chain is row 16 (w % 4)
  // + g + 8 (i / 2 % 2), key 8 (i / 4) + 2t + i % 2 (the mma.sync C layout
  // per n8 chunk). Each warpgroup writes its partial sums, times the keys'
  // scales and the lanes' factors, into its slot of the logits; the
  // softmax adds the slots, scales and masks.
  int64_t keyGroups = tileKeys / 8;
  Value queryDesc = descriptor(index(layout.query), 8 * 128, 128);
  Value keyDesc = descriptor(decodedBase, keyGroups * 128, 128);
  int64_t stride = strideWords();
  Value keyLow = kb.mul(threadInGroup, index(2));
  Value lowKeyWords = kb.mul(keyLow, index(stride));
  struct Step {
    const OperandLane *lane;
    int64_t block, column;
  };
  SmallVector<Step> steps;
  for (const OperandLane *l : {&latentLane, &ropeLane}) {
    int64_t group = l == &latentLane ? latentGroup : l->count;
    for (int64_t column = 0; column < l->count; column += 16)
      steps.push_back({l, column / group, l->firstColumn + column});
  }
  int64_t half = int64_t(steps.size() + 1) / 2;
  int64_t values = tileKeys / 2; // accumulators per thread

  // Warpgroup g's k-steps [from, to): one chain per (lane, scale block).
  auto partial = [&](int64_t from, int64_t to) -> SmallVector<Value> {
    struct Chain {
      const OperandLane *lane;
      int64_t block;
      SmallVector<Value> acc;
    };
    SmallVector<Chain> chains;
    NVVM::WgmmaFenceAlignedOp::create(builder, kb.loc);
    for (int64_t k = from; k < to; ++k) {
      const Step &step = steps[k];
      if (chains.empty() || chains.back().lane != step.lane ||
          chains.back().block != step.block)
        chains.push_back({step.lane, step.block, {}});
      Chain &chain = chains.back();
      Value a = advance(queryDesc, step.column / 8 * 8 * 128);
      Value b = advance(keyDesc, step.column / 8 * keyGroups * 128);
      chain.acc = wgmma(a, b, chain.acc, tileKeys, step.lane->bf16,
                        /*transposeB=*/false);
    }
    NVVM::WgmmaGroupSyncAlignedOp::create(builder, kb.loc);
    NVVM::WgmmaWaitGroupSyncOp::create(builder, kb.loc, 0);
    // Each chain's sums times its keys' scales (none: 1), then the lane's
    // factors, as scoreTile does.
    SmallVector<Value> logit(values, zero);
    for (const OperandLane *l : {&latentLane, &ropeLane}) {
      SmallVector<Value> laneTotal(values, zero);
      bool any = false;
      for (const Chain &chain : chains) {
        if (chain.lane != l)
          continue;
        any = true;
        for (int64_t j = 0; j < keyGroups; ++j) {
          // Keys 8j + 2t and + 1.
          Value low, high;
          int64_t keyConstant = 8 * j * stride;
          if (l == &latentLane) {
            low = latentScale(lowKeyWords, keyConstant + chain.block);
            high = latentScale(lowKeyWords, keyConstant + stride + chain.block);
          } else if (ropeScaleLane) {
            int64_t at = keyConstant + ropeScaleLane.getOffset() / 4;
            low = rawF32(lowKeyWords, at);
            high = rawF32(lowKeyWords, at + stride);
          }
          for (int64_t e = 0; e < 4; ++e) {
            int64_t i = 4 * j + e;
            laneTotal[i] =
                low ? kb.fma(chain.acc[i], e % 2 ? high : low, laneTotal[i])
                    : kb.fadd(chain.acc[i], laneTotal[i]);
          }
        }
      }
      if (!any)
        continue;
      bool subnormalCodes = l->encoding == Encoding::nvfp4 && !kb.hardwareFp4;
      for (int64_t i = 0; i < values; ++i) {
        Value total = laneTotal[i];
        if (subnormalCodes)
          total = kb.fmul(total, kb.f32(kFp4SubnormalScale));
        if (!l->bf16)
          total = kb.fmul(total, rowInverse[i / 2 % 2]);
        logit[i] = kb.fadd(logit[i], total);
      }
    }
    return logit;
  };
  SmallVector<Type> types(values, builder.getF32Type());
  Value isFirst = kb.cmpi(arith::CmpIPredicate::eq, wgIndex, index(0));
  SmallVector<Value> logit = kb.ifElse(
      isFirst, types, [&] { return partial(0, half); },
      [&] { return partial(half, int64_t(steps.size())); });

  // The warpgroup's slot of partial logits, [row][key], as float2.
  Value slotStart =
      kb.mul(wgIndex, index(kXqaMlaWarpgroupHeads * layout.logitStride));
  for (int64_t j = 0; j < keyGroups; ++j)
    for (int64_t h = 0; h < 2; ++h) {
      Value row = rowOf(h);
      Value at = kb.mul(row, index(layout.logitStride));
      at = kb.add(at, slotStart);
      at = kb.add(at, keyLow);
      at = kb.add(at, index(8 * j));
      SmallVector<Value> pair = {logit[4 * j + 2 * h],
                                 logit[4 * j + 2 * h + 1]};
      Value both = vector::FromElementsOp::create(
          builder, kb.loc, VectorType::get({2}, builder.getF32Type()), pair);
      vector::StoreOp::create(builder, kb.loc, both, logits, ValueRange{at},
                              /*nontemporal=*/false, llvm::MaybeAlign(8));
    }
}

void XqaMlaBuilder::accumulateWarpgroup(ArrayRef<Value> p,
                                        ArrayRef<SmallVector<Value>> keyScales,
                                        SmallVectorImpl<Value> &s) {
  // The warpgroup's P tiles (one per value block): A = P times the key's
  // value scale times the warp's 2^e of the block (P 2^10 where the keys
  // share a scale), rows 16 (w % 4) + g (+ 8), keys 8 nt + 2t (+ 1), as
  // wgmma's K-major A: element (row, key) at byte ((key / 8) 8 + row / 8)
  // 128 + (row % 8) 16 + (key % 8) 2.
  Location loc = kb.loc;
  MmaBuilder &tc = mmaOf(latentLane);
  int64_t keyTiles = tileKeys / 8;
  int64_t tileBytes = kXqaMlaWarpgroupHeads * tileKeys * 2;
  Value tileOffset = kb.mul(wgIndex, index(valueBlocks * tileBytes));
  tileOffset = kb.add(tileOffset, index(layout.pTiles));
  Value rowGroup = kb.divs(warpRowBase, index(8));
  Value threadBytes = kb.mul(rowGroup, index(128));
  threadBytes = kb.add(threadBytes, kb.mul(groupId, index(16)));
  threadBytes = kb.add(threadBytes, kb.mul(threadInGroup, index(4)));
  threadBytes = kb.add(threadBytes, tileOffset);
  Value threadWords = kb.divs(threadBytes, index(4));
  for (int64_t bw = 0; bw < valueBlocks; ++bw) {
    SmallVector<Value> scaled = valueOperand(p, keyScales[bw], s, bw);
    for (int64_t nt = 0; nt < keyTiles; ++nt)
      for (int64_t h = 0; h < 2; ++h) {
        Value packed =
            tc.packPair(scaled[nt * 4 + 2 * h], scaled[nt * 4 + 2 * h + 1]);
        Value bits = pairBits(kb, packed);
        int64_t constant = (bw * tileBytes + (nt * 8 + h) * 128) / 4;
        Value at = kb.add(threadWords, index(constant));
        kb.store(bits, words, {at});
      }
  }
  // Every warp of the warpgroup wrote its rows: publish them to the async
  // proxy and wait for the warpgroup alone (named barrier 1 + g).
  NVVM::FenceProxyOp::create(
      builder, loc, NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(builder.getContext(),
                                 NVVM::SharedSpace::shared_cta));
  Value barrierId = kb.toI32(kb.add(wgIndex, index(1)));
  Value groupThreads = kb.i32(int32_t(kXqaMlaWarpgroupThreads / 2));
  NVVM::BarrierOp::create(builder, loc, Type(), barrierId, groupThreads,
                          NVVM::BarrierReductionAttr(), Value());

  // O += A V over the warpgroup's channels: V is the decoded tile read
  // MN-major (K = keys: core matrices 128 bytes apart; N = channels:
  // K8 128 bytes apart).
  int64_t keyGroups = tileKeys / 8;
  Value pDesc = descriptor(tileOffset, 8 * 128, 128);
  Value channelOffset =
      kb.mul(wgIndex, index(warpChannels / 8 * keyGroups * 128));
  channelOffset = kb.add(channelOffset, decodedBase);
  Value valueDesc = descriptor(channelOffset, 128, keyGroups * 128);
  int64_t tilesPerBlock = blockChannels / 8;
  NVVM::WgmmaFenceAlignedOp::create(builder, loc);
  for (int64_t bw = 0; bw < valueBlocks; ++bw) {
    SmallVector<Value> acc;
    for (int64_t i = 0; i < tilesPerBlock * 4; ++i)
      acc.push_back(s[accAt(bw * tilesPerBlock, 0) + i]);
    for (int64_t ks = 0; ks < tileKeys / 16; ++ks) {
      Value a = advance(pDesc, bw * tileBytes + 2 * ks * 8 * 128);
      Value b = advance(valueDesc, bw * blockChannels / 8 * keyGroups * 128 +
                                       2 * ks * 128);
      acc = wgmma(a, b, acc, blockChannels, latentLane.bf16,
                  /*transposeB=*/true);
    }
    for (int64_t i = 0; i < tilesPerBlock * 4; ++i)
      s[accAt(bw * tilesPerBlock, 0) + i] = acc[i];
  }
  // Left in flight: tileLoopWarpgroup decodes the next tile under it.
  NVVM::WgmmaGroupSyncAlignedOp::create(builder, loc);
}

void XqaMlaBuilder::useSlot(Value slot) {
  rawBaseBytes = kb.mul(slot, index(tileKeys * layout.rawStride));
  rawBaseBytes = kb.add(rawBaseBytes, index(layout.raw));
  rawBaseWords = kb.mul(slot, index(tileKeys * strideWords()));
  rawBaseWords = kb.add(rawBaseWords, index(layout.raw / 4));
  decodedBase = kb.mul(slot, index(tileKeys * keyDim * 2));
  decodedBase = kb.add(decodedBase, index(layout.decoded));
}

void XqaMlaBuilder::decodeAndPublish() {
  decodeTile();
  // Written through the generic proxy, read by wgmma through the async
  // proxy (the query tile too, before the first tile's decode).
  NVVM::FenceProxyOp::create(
      builder, kb.loc, NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(builder.getContext(),
                                 NVVM::SharedSpace::shared_cta));
}

SmallVector<Value> XqaMlaBuilder::tileLoopWarpgroup(ArrayRef<Value> init) {
  Location loc = kb.loc;
  Value zeroI32 = kb.i32(0), oneI32 = kb.i32(1), twoI32 = kb.i32(2),
        threeI32 = kb.i32(3);
  // Prologue: the pages of tiles 0, 1 and 2, the raw copies of tiles 0 and
  // 1, tile 0 decoded (slot 0). The block barrier also publishes the query
  // tile's row scales.
  Value nonEmpty = kb.cmpi(arith::CmpIPredicate::sgt, tileCount, zeroI32);
  Value twoTiles = kb.cmpi(arith::CmpIPredicate::sgt, tileCount, oneI32);
  lookupPages(zeroI32, index(0));
  lookupPages(oneI32, index(1));
  kb.barrier();
  kb.ifThen(nonEmpty, [&] { issueTile(zeroI32, index(0), index(0)); });
  NVVM::CpAsyncCommitGroupOp::create(builder, loc);
  kb.ifThen(twoTiles, [&] { issueTile(oneI32, index(1), index(1)); });
  NVVM::CpAsyncCommitGroupOp::create(builder, loc);
  lookupPages(twoI32, index(2));
  for (int64_t h = 0; h < 2; ++h)
    rowInverse[h] =
        anyF16Query() ? kb.load(queryInverse, {rowOf(h)}) : kb.f32(1.0f);
  NVVM::CpAsyncWaitGroupOp::create(builder, loc, 1);
  kb.barrier();
  kb.ifThen(nonEmpty, [&] {
    useSlot(index(0));
    decodeAndPublish();
  });

  // Tile i: raw slot, decoded slot i % 2, pages i % 3. Its P V runs while
  // tile i + 1 (copied a tile ago) is decoded into the other slot and tile
  // i + 2 is copied into tile i's raw slot; the accumulators are touched
  // only after the wait at the end.
  Value loopBegin = index(0), loopStep = index(1);
  Value loopEnd = kb.toIndex(tileCount);
  return kb.forLoop(
      loopBegin, loopEnd, loopStep, init,
      [&](Value iteration, ValueRange carried) -> SmallVector<Value> {
        SmallVector<Value> s(carried.begin(), carried.end());
        Value i = kb.toI32(iteration);
        kb.barrier();
        Value slot = kb.toIndex(kb.rems(i, twoI32));
        useSlot(slot);
        currentPageSlot = kb.toIndex(kb.rems(i, threeI32));
        scoreTileWarpgroup();
        kb.barrier();
        accumulateTile(s);
        Value nextTile = kb.add(i, oneI32);
        Value more = kb.cmpi(arith::CmpIPredicate::slt, nextTile, tileCount);
        kb.ifThen(more, [&] {
          // Every warp is past tile i's raw records (scales included).
          NVVM::CpAsyncWaitGroupOp::create(builder, loc, 0);
          kb.barrier();
          Value afterNext = kb.add(i, twoI32);
          Value copies =
              kb.cmpi(arith::CmpIPredicate::slt, afterNext, tileCount);
          Value afterNextPages = kb.toIndex(kb.rems(afterNext, threeI32));
          kb.ifThen(copies,
                    [&] { issueTile(afterNext, slot, afterNextPages); });
          NVVM::CpAsyncCommitGroupOp::create(builder, loc);
          Value later = kb.add(i, threeI32);
          lookupPages(later, kb.toIndex(kb.rems(later, threeI32)));
          Value nextSlot = kb.toIndex(kb.rems(nextTile, twoI32));
          useSlot(nextSlot);
          decodeAndPublish();
        });
        NVVM::WgmmaWaitGroupSyncOp::create(builder, loc, 0);
        return s;
      });
}

void XqaMlaBuilder::writePartialsWarpgroup(ArrayRef<Value> s, Value split,
                                           Value firstRow, Value partialOut,
                                           Value partialStats) {
  // Rows 16 (w % 4) + g (+ 8): accumulator 4 j + 2h + e of value block bw
  // is decoded position channelBase + bw B + 8 j + 2t + e, which holds
  // channel (position / 8) 8 + order[position % 8]; warpgroup 0 writes the
  // (natural) max and the sum.
  SmallVector<int64_t> order = decodedOrder(latentLane);
  Value channelBase = kb.mul(wgIndex, index(warpChannels));
  Value firstOfQuad =
      kb.cmpi(arith::CmpIPredicate::eq, threadInGroup, index(0));
  Value writesStats = kb.land(
      firstOfQuad, kb.cmpi(arith::CmpIPredicate::eq, wgIndex, index(0)));
  // order[2t + e] for this thread, e = 0, 1.
  SmallVector<Value> within(2);
  for (int64_t e = 0; e < 2; ++e) {
    Value value = index(order[e]);
    for (int64_t t = 1; t < 4; ++t) {
      Value isT = kb.cmpi(arith::CmpIPredicate::eq, threadInGroup, index(t));
      Value candidate = index(order[2 * t + e]);
      value = kb.select(isT, candidate, value);
    }
    within[e] = kb.add(channelBase, value);
  }
  int64_t tilesPerBlock = blockChannels / 8;
  SmallVector<SmallVector<Value>> undo;
  for (int64_t bw = 0; bw < valueBlocks; ++bw)
    undo.push_back(undoFactors(s, bw));
  for (int64_t h = 0; h < 2; ++h) {
    Value outRow = kb.add(firstRow, rowOf(h));
    writeRowStats(s, h, split, outRow, partialStats, writesStats);
    for (int64_t nt = 0; nt < warpTiles; ++nt)
      for (int64_t e = 0; e < 2; ++e) {
        Value value = s[accAt(nt, 2 * h + e)];
        for (Value factor : undo[nt / tilesPerBlock])
          value = kb.fmul(value, factor);
        Value channel = kb.add(within[e], index(8 * nt));
        kb.store(value, partialOut, {split, outRow, channel});
      }
  }
}

SmallVector<Value> XqaMlaBuilder::valueOperand(ArrayRef<Value> p,
                                               ArrayRef<Value> keyScales,
                                               ArrayRef<Value> s, int64_t bw) {
  // A = P times each key's value scale times the block's 2^exponent
  // (P <= 2^4, so A stays below 2^15), or P 2^10 where the keys share one
  // scale (applied to the partial results instead).
  SmallVector<Value> scaled(p);
  int64_t keyTiles = tileKeys / 8;
  if (perKeyValueScale()) {
    Value factor = kb.powerOfTwo(s[expAt(bw)]);
    for (int64_t nt = 0; nt < keyTiles; ++nt)
      for (int64_t e = 0; e < 2; ++e) {
        Value scale = kb.fmul(keyScales[nt * 2 + e], factor);
        scaled[nt * 4 + e] = kb.fmul(p[nt * 4 + e], scale);
        scaled[nt * 4 + e + 2] = kb.fmul(p[nt * 4 + e + 2], scale);
      }
  } else {
    Value factor = kb.f32(std::ldexp(1.0f, kSharedScaleExponent));
    for (Value &x : scaled)
      x = kb.fmul(x, factor);
  }
  return scaled;
}

Value XqaMlaBuilder::valueExponent(Value largest) {
  // largest = 1.f x 2^(E - 127) (E its exponent field): 2^(127 + T - E)
  // brings it into [2^T, 2^(T + 1)), T = kValueScaleTarget; clamped so that
  // 2^e stays a normal fp32.
  Value bits = kb.bitcast(builder.getI32Type(), largest);
  Value field = kb.shru(bits, kb.i32(23));
  Value exponent = kb.sub(kb.i32(127 + kValueScaleTarget), field);
  exponent = kb.mins(exponent, kb.i32(126));
  return kb.maxs(exponent, kb.i32(-126));
}

SmallVector<Value> XqaMlaBuilder::moveExponents(ArrayRef<Value> state,
                                                ArrayRef<Value> targets,
                                                ArrayRef<Value> leaves) {
  // A raised exponent is held where the largest accumulator would pass
  // 2^119 (the tile's products are then below 2^-90 of it); a lowered
  // one only shrinks the accumulators. The move is two exact powers of
  // two (each in [2^-126, 2^126]).
  SmallVector<Value> result(state);
  int64_t accCount = warpTiles * 4;
  Value largest = zero;
  for (int64_t i = 0; i < accCount; ++i)
    largest = kb.fmax(largest, kb.fabs(state[i]));
  for (int32_t mask = 16; mask >= 1; mask /= 2)
    largest = kb.fmax(largest, f16Mma.shuffleXor(largest, mask));
  Value largestBits = kb.bitcast(builder.getI32Type(), largest);
  Value largestField = kb.shru(largestBits, kb.i32(23));
  Value room = kb.sub(kb.i32(127 + 119), largestField);
  int64_t tilesPerBlock = warpTiles / valueBlocks;
  for (int64_t bw = 0; bw < valueBlocks; ++bw) {
    Value old = state[accCount + bw];
    Value raised = kb.mins(targets[bw], kb.add(old, room));
    Value rises = kb.cmpi(arith::CmpIPredicate::sgt, targets[bw], old);
    Value next = kb.select(rises, raised, targets[bw]);
    next = kb.select(leaves[bw], next, old);
    Value move = kb.sub(next, old);
    Value first = kb.mins(move, kb.i32(126));
    first = kb.maxs(first, kb.i32(-126));
    Value second = kb.sub(move, first);
    Value firstFactor = kb.powerOfTwo(first);
    Value secondFactor = kb.powerOfTwo(second);
    for (int64_t i = bw * tilesPerBlock * 4; i < (bw + 1) * tilesPerBlock * 4;
         ++i)
      result[i] = kb.fmul(kb.fmul(state[i], firstFactor), secondFactor);
    result[accCount + bw] = next;
  }
  return result;
}

SmallVector<Value> XqaMlaBuilder::undoFactors(ArrayRef<Value> s, int64_t bw) {
  // In order: the constant part (the e2m1 bit trick's 2^14 in P V's B
  // operand, P 2^10 for shared scales), then 2^-e, then a tensor scale
  // (so that no factor underflows what a later one would restore).
  SmallVector<Value> factors;
  float constant =
      perKeyValueScale() ? 1.0f : std::ldexp(1.0f, -kSharedScaleExponent);
  if (latentLane.encoding == Encoding::nvfp4)
    constant *= kFp4SubnormalScale;
  if (constant != 1.0f)
    factors.push_back(kb.f32(constant));
  if (perKeyValueScale()) {
    Value negated = kb.sub(kb.i32(0), s[expAt(bw)]);
    factors.push_back(kb.powerOfTwo(negated));
  } else if (tensorScale) {
    factors.push_back(tensorScale);
  }
  return factors;
}

void XqaMlaBuilder::writeRowStats(ArrayRef<Value> s, int64_t h, Value split,
                                  Value outRow, Value partialStats,
                                  Value writes) {
  Value sum = s[sumAt(h)];
  sum = kb.fadd(sum, f16Mma.shuffleXor(sum, 1));
  sum = kb.fadd(sum, f16Mma.shuffleXor(sum, 2));
  kb.ifThen(writes, [&] {
    Value naturalMax = kb.fmul(s[maxAt(h)], kb.f32(float(M_LN2)));
    kb.store(naturalMax, partialStats, {split, outRow, index(0)});
    kb.store(sum, partialStats, {split, outRow, index(1)});
  });
}

void XqaMlaBuilder::writePartials(ArrayRef<Value> s, Value split,
                                  Value firstRow, Value partialOut,
                                  Value partialStats) {
  // Rows g and g + 8: unnormalized outputs of this warp's channels; warp 0
  // writes the (natural) max and the sum. Element e of n-tile j of chunk c
  // is channel c C + w (2t + e % 2) + j (C = 8 w, w the latent's channels
  // per word): a thread's 2w channels of a chunk are contiguous.
  int64_t width = latentLane.wordChannels;
  int64_t chunkChannels = 8 * width;
  int64_t chunks = warpChannels / chunkChannels;
  Value channelBase = kb.mul(warp, index(warpChannels));
  Value firstOfQuad =
      kb.cmpi(arith::CmpIPredicate::eq, threadInGroup, index(0));
  Value writesStats =
      kb.land(firstOfQuad, kb.cmpi(arith::CmpIPredicate::eq, warp, index(0)));
  Value threadChannels = kb.mul(threadInGroup, index(2 * width));
  int64_t chunksPerBlock = chunks / valueBlocks;
  SmallVector<SmallVector<Value>> undo;
  for (int64_t bw = 0; bw < valueBlocks; ++bw)
    undo.push_back(undoFactors(s, bw));
  for (int64_t h = 0; h < 2; ++h) {
    Value outRow = kb.add(firstRow, kb.add(groupId, index(8 * h)));
    writeRowStats(s, h, split, outRow, partialStats, writesStats);
    for (int64_t c = 0; c < chunks; ++c) {
      SmallVector<Value> values;
      for (int64_t k = 0; k < 2 * width; ++k) {
        Value value = s[accAt(c * width + k % width, 2 * h + k / width)];
        for (Value factor : undo[c / chunksPerBlock])
          value = kb.fmul(value, factor);
        values.push_back(value);
      }
      Value channel = kb.add(channelBase, index(c * chunkChannels));
      channel = kb.add(channel, threadChannels);
      for (int64_t q = 0; q < 2 * width; q += 4) {
        Value quad = vector::FromElementsOp::create(
            builder, kb.loc, VectorType::get({4}, builder.getF32Type()),
            ArrayRef<Value>(values).slice(q, 4));
        Value at = kb.add(channel, index(q));
        vector::StoreOp::create(builder, kb.loc, quad, partialOut,
                                ValueRange{split, outRow, at},
                                /*nontemporal=*/false, llvm::MaybeAlign(16));
      }
    }
  }
}

gpu::GPUFuncOp XqaMlaBuilder::build(SmallVectorImpl<Value> &hostOperands) {
  MLIRContext *context = op.getContext();
  Location loc = op.getLoc();
  warpgroup = plan.getHeadsPerBlock() == kXqaMlaWarpgroupHeads;
  kb.hardwareFp8 = kernels.hardwareFp8;
  kb.hardwareFp4 = kernels.hardwareFp4;
  // e2m1 pairs stay codes x 2^-14; the sums take the 2^14 (in S, on the
  // logits; in P V, in the inverse of P's normalization).
  kb.fp4Subnormal = true;
  recordType = cache.type.getRecord();
  record = describeMlaRecord(recordType);
  LaneAttr latentAttr = recordType.getLane("latent");
  LaneAttr ropeAttr = recordType.getLane("rope");
  if (latentAttr.isScaled())
    latentScaleLane = recordType.getLane(latentAttr.getScaleLane());
  if (ropeAttr.isScaled())
    ropeScaleLane = recordType.getLane(ropeAttr.getScaleLane());
  if (record.latentFormat == MlaLatentFormat::E2M1GroupScaled &&
      recordType.getMode() == ScaleGranularity::token)
    tokenLane = recordType.getLane("token_scale");
  latent = record.latent;
  keyDim = latent + record.rope;
  latentLane = describeLane(latentAttr, 0);
  ropeLane = describeLane(ropeAttr, latent);
  recordBytes = record.recordBytes;
  numHeads = static_cast<int64_t>(op.getNumHeads());
  headGroups = numHeads / plan.getHeadsPerBlock();
  tileKeys = plan.getKeysPerTile();
  blockSize = cache.type.getBlockSize();
  latentGroup = record.latentFormat == MlaLatentFormat::E4M3BlockScaled
                    ? record.latentScaleGroup
                    : latent;
  if (warpgroup) {
    // A warpgroup owns half the latent in P V.
    blockThreads = kXqaMlaWarpgroupThreads;
    warpChannels = latent / 2;
    blockChannels = xqaMlaWarpgroupBlockChannels(record);
    layout = layoutXqaMlaWarpgroupShared(record, tileKeys);
  } else {
    warpChannels = latent / kXqaMlaWarps;
    blockChannels = std::min(latentGroup, warpChannels);
    layout = layoutXqaMlaShared(record, tileKeys);
  }
  warpTiles = warpChannels / 8;
  valueBlocks = warpChannels / blockChannels;

  // Kernel arguments: the op's buffers, the records, then the workspace.
  hostOperands.assign({op.getQuery(), op.getBlockTable(), op.getSeqLens()});
  if (op.getQueryStart())
    hostOperands.push_back(op.getQueryStart());
  if (op.getOuterScale())
    hostOperands.push_back(op.getOuterScale());
  hostOperands.push_back(cache.storage);
  SmallVector<Type> argTypes = llvm::to_vector(
      llvm::map_range(hostOperands, [](Value v) { return v.getType(); }));
  Type f32 = builder.getF32Type();
  argTypes.push_back(workspaceOutputType(context, latent));
  argTypes.push_back(workspaceStatsType(context));

  gpu::GPUFuncOp kernel = kernels.create(
      builder, loc,
      warpgroup ? "pattn_xqa_mla_wgmma_decode" : "pattn_xqa_mla_decode",
      argTypes, {});
  setLaunchBounds(kernel, blockThreads,
                  xqaMlaResidentBlocks(plan, kernels.chips));
  unsigned next = 0;
  query = kernel.getArgument(next++);
  blockTable = kernel.getArgument(next++);
  Value seqLens = kernel.getArgument(next++);
  Value queryStart = op.getQueryStart() ? kernel.getArgument(next++) : Value();
  outerScale = op.getOuterScale() ? kernel.getArgument(next++) : Value();
  storage = kernel.getArgument(next++);
  Value partialOut = kernel.getArgument(next++);
  Value partialStats = kernel.getArgument(next++);

  smem = gpu::DynamicSharedMemoryOp::create(
      builder, loc,
      MemRefType::get(
          {ShapedType::kDynamic}, builder.getIntegerType(8), AffineMap(),
          gpu::AddressSpaceAttr::get(context, gpu::AddressSpace::Workgroup)));
  Type f16 = builder.getF16Type(), i32 = builder.getI32Type();
  int64_t rows = plan.getHeadsPerBlock();
  queryTile = view(layout.query, {rows, layout.rowStride}, f16);
  queryBf16 =
      view(layout.query, {rows, layout.rowStride}, builder.getBF16Type());
  queryInverse = view(layout.queryScales, {rows}, f32);
  // The warpgroup kernel: a slot of partial logits per warpgroup.
  int64_t logitSlots = warpgroup ? 2 : 1;
  logits = view(layout.logits, {logitSlots * rows * layout.logitStride}, f32);
  pages = view(layout.pages, {3 * tileKeys}, i32);
  words = view(0, {layout.total / 4}, i32);
  bytes = view(0, {layout.total}, builder.getIntegerType(8));

  tid = kb.threadId();
  warp = kb.divs(tid, index(kWarpThreads));
  lane = kb.rems(tid, index(kWarpThreads));
  groupId = kb.divs(lane, index(4));
  threadInGroup = kb.rems(lane, index(4));
  zero = kb.f32(0.0f);
  negInf = kb.f32(-std::numeric_limits<float>::infinity());
  Value split = kb.blockId(gpu::Dimension::x);
  Value row = kb.blockId(gpu::Dimension::y);
  Value token = kb.divs(row, index(headGroups));
  Value headGroup = kb.rems(row, index(headGroups));
  Value firstHead = kb.mul(headGroup, index(plan.getHeadsPerBlock()));
  if (warpgroup) {
    wgIndex = kb.divs(warp, index(4));
    Value warpInGroup = kb.rems(warp, index(4));
    warpRowBase = kb.mul(warpInGroup, index(16));
    Value address =
        memref::ExtractAlignedPointerAsIndexOp::create(builder, loc, smem);
    smemAddress = kb.toI64(address);
  }

  // The token's keys, cut to this split: splits of ceil(max keys /
  // gridDim.x) keys rounded up to whole tiles (host-known sizes only).
  auto [seq, queryTokens, position] =
      findQuerySequence(kb, token, queryStart, blockTable);
  sequence = seq;
  Value length = kb.load(seqLens, {sequence});
  Value queryPos = kb.add(kb.sub(length, queryTokens), position);
  Value end = kb.mins(length, kb.add(queryPos, kb.i32(1)));
  Value tableWidth =
      kb.toI32(memref::DimOp::create(builder, loc, blockTable, 1));
  Value maxKeys = kb.mul(tableWidth, kb.i32(int32_t(blockSize)));
  Value splits =
      kb.toI32(gpu::GridDimOp::create(builder, loc, gpu::Dimension::x));
  Value perSplit = kb.divs(kb.add(maxKeys, kb.sub(splits, kb.i32(1))), splits);
  perSplit = kb.mul(ceilDiv(perSplit, tileKeys), kb.i32(int32_t(tileKeys)));
  first = kb.mul(kb.toI32(split), perSplit);
  last = kb.mins(end, kb.add(first, perSplit));
  Value nonEmpty = kb.cmpi(arith::CmpIPredicate::sgt, last, first);
  Value span = kb.sub(last, first);
  Value tiles = ceilDiv(span, tileKeys);
  tileCount = kb.select(nonEmpty, tiles, kb.i32(0));

  if (warpgroup)
    loadQueryWarpgroup(token, firstHead);
  else
    loadQuery(token, firstHead);
  if (outerScale)
    tensorScale = kb.load(outerScale, {index(0)});

  std::optional<APFloat> scale = op.getSoftmaxScale();
  float softmax =
      scale ? scale->convertToFloat() : 1.0f / std::sqrt(float(keyDim));
  // Logits in base 2: every exponential is one ex2.approx.
  softmaxScale = kb.f32(softmax * float(M_LOG2E));

  SmallVector<Value> init = {negInf, negInf, zero, zero};
  for (int64_t i = 0; i < warpTiles * 4; ++i)
    init.push_back(zero);
  for (int64_t bw = 0; bw < expCount(); ++bw)
    init.push_back(kb.i32(0));
  Value firstRow = kb.add(kb.mul(token, index(numHeads)), firstHead);
  if (warpgroup) {
    SmallVector<Value> state = tileLoopWarpgroup(init);
    writePartialsWarpgroup(state, split, firstRow, partialOut, partialStats);
    gpu::ReturnOp::create(builder, loc);
    return kernel;
  }

  // Prologue: tile 0's pages, its copy, then tile 1's pages. The barrier
  // also publishes the query tile.
  Value zeroI32 = kb.i32(0), oneI32 = kb.i32(1), twoI32 = kb.i32(2),
        threeI32 = kb.i32(3);
  lookupPages(zeroI32, index(0));
  kb.barrier();
  kb.ifThen(nonEmpty, [&] { issueTile(zeroI32, index(0), index(0)); });
  NVVM::CpAsyncCommitGroupOp::create(builder, loc);
  lookupPages(oneI32, index(1));
  for (int64_t h = 0; h < 2; ++h)
    rowInverse[h] =
        anyF16Query() ? kb.load(queryInverse, {rowOf(h)}) : kb.f32(1.0f);

  Value loopBegin = index(0), loopStep = index(1);
  Value loopEnd = kb.toIndex(tileCount);
  SmallVector<Value> state = kb.forLoop(
      loopBegin, loopEnd, loopStep, init,
      [&](Value iteration, ValueRange carried) -> SmallVector<Value> {
        SmallVector<Value> s(carried.begin(), carried.end());
        Value i = kb.toI32(iteration);
        // Tile i is in raw slot i % 2 with its pages in slot i % 3.
        NVVM::CpAsyncWaitGroupOp::create(builder, loc, 0);
        kb.barrier();
        // Every warp is past tile i - 1: its raw slot takes tile i + 1,
        // whose pages were looked up a tile ago.
        Value nextTile = kb.add(i, oneI32);
        Value more = kb.cmpi(arith::CmpIPredicate::slt, nextTile, tileCount);
        Value nextRaw = kb.toIndex(kb.rems(nextTile, twoI32));
        Value nextPages = kb.toIndex(kb.rems(nextTile, threeI32));
        kb.ifThen(more, [&] { issueTile(nextTile, nextRaw, nextPages); });
        NVVM::CpAsyncCommitGroupOp::create(builder, loc);
        Value afterNext = kb.add(i, twoI32);
        lookupPages(afterNext, kb.toIndex(kb.rems(afterNext, threeI32)));
        Value rawSlot = kb.toIndex(kb.rems(i, twoI32));
        rawBaseBytes = kb.mul(rawSlot, index(tileKeys * layout.rawStride));
        rawBaseBytes = kb.add(rawBaseBytes, index(layout.raw));
        rawBaseWords = kb.mul(rawSlot, index(tileKeys * strideWords()));
        rawBaseWords = kb.add(rawBaseWords, index(layout.raw / 4));
        scoreTile(kb.toIndex(kb.rems(i, threeI32)));
        kb.barrier();
        accumulateTile(s);
        return s;
      });

  writePartials(state, split, firstRow, partialOut, partialStats);
  gpu::ReturnOp::create(builder, loc);
  return kernel;
}

} // namespace

auto ::pattn::buildXqaMlaDecodeKernels(KernelModule &kernels, MlaDecodeOp op,
                                       XqaMlaPlanAttr plan,
                                       const RecordBuffers &cache)
    -> DecodeKernels {
  DecodeKernels result;
  XqaMlaBuilder builder(kernels, op, plan, cache);
  result.decode = builder.build(result.decodeOperands);
  result.merge = buildMlaMergeKernel(kernels, op, result.mergeOperands);
  result.numHeads = static_cast<int64_t>(op.getNumHeads());
  result.valueDim = cache.type.getRecord().getLane("latent").getCount();
  result.blockSize = cache.type.getBlockSize();
  result.decodeBlocksPerToken = result.numHeads / plan.getHeadsPerBlock();
  result.sharedBytes = plan.getSharedBytes();
  result.blockThreads = plan.getHeadsPerBlock() == kXqaMlaWarpgroupHeads
                            ? kXqaMlaWarpgroupThreads
                            : kXqaMlaThreads;
  return result;
}
