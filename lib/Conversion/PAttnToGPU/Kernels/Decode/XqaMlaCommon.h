//===- XqaMlaCommon.h - What the tensor-core MLA kernels share --*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// The tensor-core decode of pattn.mla_decode, following its
// #pattn.xqa_mla_plan, is one of two kernels, chosen by the plan's
// heads_per_block: the mma.sync kernel (16 heads, XqaMlaMmaSync.cpp) and
// the warpgroup kernel (64 heads, sm_90a only, XqaMlaWgmma.cpp). Both copy
// a split's raw records with cp.async into a two-slot ring, 32 keys a tile
// (zero-filled for keys that are masked or unmapped), run the same online
// softmax over each tile's logits in shared memory, and keep the same
// value-block exponents and partial results. This header holds that shared
// layer: the kernel kinds, how a record lane feeds the tensor cores, and a
// builder base with the state and the steps of both kernels.
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
//===----------------------------------------------------------------------===//

#ifndef PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_DECODE_XQAMLACOMMON_H
#define PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_DECODE_XQAMLACOMMON_H

#include "Kernels/Common/DecodeCommon.h"
#include "Kernels/Common/KernelBuilder.h"
#include "Kernels/Kernels.h"
#include "Kernels/TensorCore/TensorCore.h"
#include "Planning/DecodePlan.h"

namespace pattn {

/// The decode kernel of each kind; `hostOperands` get its host operands
/// (without the workspace).
mlir::gpu::GPUFuncOp
buildXqaMlaMmaSyncKernel(KernelModule &kernels, pattn::MlaDecodeOp op,
                         pattn::XqaMlaPlanAttr plan, const RecordBuffers &cache,
                         llvm::SmallVectorImpl<mlir::Value> &hostOperands);
mlir::gpu::GPUFuncOp
buildXqaMlaWgmmaKernel(KernelModule &kernels, pattn::MlaDecodeOp op,
                       pattn::XqaMlaPlanAttr plan, const RecordBuffers &cache,
                       llvm::SmallVectorImpl<mlir::Value> &hostOperands);

namespace xqa_mla {

/// Elements of one 16-byte load of the query.
inline constexpr int64_t kQueryPiece = 8;

/// How one lane of the record (latent or rope) feeds the mma.
struct OperandLane {
  pattn::LaneAttr lane;
  pattn::Encoding encoding = pattn::Encoding::bf16;
  /// bf16 operands (the raw words, the raw query); else f16 (decoded codes,
  /// the normalized query).
  bool bf16 = true;
  /// Channels per 32-bit word: 2 (bf16), 4 (e4m3) or 8 (e2m1).
  int64_t wordChannels = 2;
  /// The decoder's pairs within a word (wordPairOrder).
  llvm::SmallVector<std::pair<int64_t, int64_t>> pairs;
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

/// The state and the steps both kernels share. A kernel's build runs the
/// shared steps in its own order around its own S and P V.
class XqaMlaBuilder {
public:
  XqaMlaBuilder(KernelModule &kernels, pattn::MlaDecodeOp op,
                pattn::XqaMlaPlanAttr plan, const RecordBuffers &cache)
      : kernels(kernels), op(op), plan(plan), cache(cache),
        builder(op.getContext()), kb(builder, op.getLoc()),
        f16Mma(kb, /*bf16=*/false), bf16Mma(kb, /*bf16=*/true),
        blockThreads(plan.getThreads()) {}
  virtual ~XqaMlaBuilder() = default;

  /// Where the block stands: its split, query token and first head.
  struct BlockPosition {
    mlir::Value split, token, firstHead;
  };

  /// The kernel, in the steps both kinds share: the record and the
  /// latent's division, the signature, the shared views, the block's
  /// position and split, the query rows, the scales, the tile loop, the
  /// partial rows. Each kind fills in the hooks below.
  mlir::gpu::GPUFuncOp build(llvm::SmallVectorImpl<mlir::Value> &hostOperands);

protected:
  /// The kernel's family name.
  virtual llvm::StringRef kernelName() const = 0;
  /// Slots of logits in shared memory.
  virtual int64_t logitSlots() const = 0;
  /// How the warps divide the latent in P V, and the shared layout.
  virtual void layOut() = 0;
  /// The block's warps set up and its split cut; whether it has keys.
  virtual mlir::Value startBlock(const BlockPosition &block) = 0;
  /// The block's query rows into shared memory.
  virtual void loadQueryRows(mlir::Value token, mlir::Value firstHead) = 0;
  /// The tile loop from `init`; the final state.
  virtual llvm::SmallVector<mlir::Value>
  runTiles(llvm::ArrayRef<mlir::Value> init, mlir::Value nonEmpty) = 0;
  /// The rows' unnormalized outputs and statistics into the workspace.
  virtual void writeRows(llvm::ArrayRef<mlir::Value> state, mlir::Value split,
                         mlir::Value firstRow) = 0;

  KernelModule &kernels;
  pattn::MlaDecodeOp op;
  pattn::XqaMlaPlanAttr plan;
  const RecordBuffers &cache;
  mlir::OpBuilder builder;
  KernelBuilder kb;
  MmaBuilder f16Mma, bf16Mma;
  /// Threads of a block.
  const int64_t blockThreads;

  // Static facts.
  pattn::RecordType recordType;
  MlaRecordLayout record;
  XqaMlaSharedLayout layout;
  OperandLane latentLane, ropeLane;
  pattn::LaneAttr latentScaleLane, ropeScaleLane, tokenLane;
  int64_t latent = 0, keyDim = 0, recordBytes = 0, numHeads = 0, headGroups = 0,
          tileKeys = 0, blockSize = 0;
  /// Latent channels per post-mma scale (the whole latent when one).
  int64_t latentGroup = 0;
  /// Of P V, per warp (per warpgroup in the warpgroup kernel).
  int64_t warpChannels = 0, warpTiles = 0;
  /// A warp's value blocks (channels of one scale) in P V.
  int64_t blockChannels = 0, valueBlocks = 0;

  // Kernel values.
  mlir::Value smem, query, storage, outerScale, blockTable, seqLens, queryStart,
      partialOut, partialStats, sequence, first, last, tileCount, tid, warp,
      lane, groupId, threadInGroup;
  mlir::Value queryTile, queryBf16, queryInverse, logits, pages, words, bytes;
  mlir::Value softmaxScale, negInf, zero;
  /// The query rows' inverse normalizations (rows g and g + 8).
  mlir::Value rowInverse[2];
  /// The current raw slot's first word and byte (index), set per tile;
  /// the tensor outer scale (nvfp4 tensor mode), loaded once.
  mlir::Value rawBaseWords, rawBaseBytes, tensorScale;

  mlir::Value index(int64_t v) { return kb.index(v); }
  /// A typed view of dynamic shared memory at byte `offset`.
  mlir::Value view(int64_t offset, llvm::ArrayRef<int64_t> shape,
                   mlir::Type element);
  mlir::Value ceilDiv(mlir::Value a, int64_t b);
  /// Stores two adjacent logits (one 8-byte vector) at element `at` of the
  /// logits buffer.
  void storeLogitPair(mlir::Value at, llvm::ArrayRef<mlir::Value> pair);
  /// for tile i (i32) in [0, tileCount): `body(i, state)` updates the
  /// loop state in place; returns the final one.
  llvm::SmallVector<mlir::Value>
  forEachTile(llvm::ArrayRef<mlir::Value> init,
              llvm::function_ref<void(mlir::Value,
                                      llvm::SmallVectorImpl<mlir::Value> &)>
                  body);
  MmaBuilder &mmaOf(const OperandLane &l) { return l.bf16 ? bf16Mma : f16Mma; }
  /// The largest of `init` and row h's (g or g + 8) elements of `values`
  /// (per key tile, the 4 elements of the mma C layout) across the quad.
  mlir::Value quadRowMax(llvm::ArrayRef<mlir::Value> values, int64_t h,
                         mlir::Value init);
  /// Two elements of `memref` (1-D) from `at`, 8-byte aligned.
  mlir::Value loadPair(mlir::Value memref, mlir::Value at, mlir::Type element);
  bool anyF16Query() const { return !latentLane.bf16 || !ropeLane.bf16; }
  /// Row h's (g or g + 8) index among the block's query rows.
  virtual mlir::Value rowOf(int64_t h) = 0;
  /// Whether each key has its own value scale (e4m3 blocks, the nvfp4
  /// per-token outer scale); else one scale serves every key.
  bool perKeyValueScale() const {
    return record.latentFormat == MlaLatentFormat::E4M3BlockScaled ||
           bool(tokenLane);
  }

  // The kernel's frame, in the order a build takes it.
  /// The record's static facts (but for the latent's division in P V).
  void describeRecord();
  OperandLane describeLane(pattn::LaneAttr lane, int64_t firstColumn);
  /// P V's division of the latent: `ownerChannels` per warp (warpgroup),
  /// in value blocks of `ownerBlockChannels`.
  void divideLatent(int64_t ownerChannels, int64_t ownerBlockChannels);
  /// The kernel `name` and its arguments: the op's buffers (also into
  /// `hostOperands`), the records, then the workspace.
  mlir::gpu::GPUFuncOp
  createKernel(llvm::StringRef name,
               llvm::SmallVectorImpl<mlir::Value> &hostOperands);
  /// The views of dynamic shared memory; `logitSlots` slots of logits.
  void createViews(int64_t logitSlots);
  BlockPosition locateBlock();
  /// The block's token's keys, cut to its split (first, last, tileCount);
  /// returns whether the split has any.
  mlir::Value cutSplit(const BlockPosition &block);
  /// The tensor outer scale and the (base-2) softmax scale.
  void loadScales();
  /// The loop state before the first tile.
  llvm::SmallVector<mlir::Value> initialState();
  /// rowInverse from the query tile's row scales.
  void loadRowInverses();

  // The tile's raw records.
  /// Threads 0 .. T-1 write the pages of tile `tileIndex` (i32) into page
  /// slot `slot` (index): -1 for keys outside [first, last) or unmapped.
  void lookupPages(mlir::Value tileIndex, mlir::Value slot);
  /// cp.async of tile `tileIndex`'s records (pages in page slot
  /// `pageSlot`) into raw slot `rawSlot`; dead keys are zero-filled.
  void issueTile(mlir::Value tileIndex, mlir::Value rawSlot,
                 mlir::Value pageSlot);
  /// issueTile's copies: every key from `wholePage` (a tile of live keys
  /// inside one page), or, when it is null, each key's from its entry.
  void issueTileCopies(mlir::Value tileIndex, mlir::Value rawSlot,
                       mlir::Value pageSlot, mlir::Value wholePage);
  /// rawBaseWords and rawBaseBytes of raw slot `slot` (index).
  void useRawSlot(mlir::Value slot);
  // Raw-record reads of the current tile. Every address is the slot's base
  // + a per-thread part (loop-invariant, computed once) + a compile-time
  // part, which the load's immediate offset absorbs.
  int64_t strideWords() const { return layout.rawStride / 4; }
  /// The 32-bit word at the slot's word `threadWords` + `constant`.
  mlir::Value rawWord(mlir::Value threadWords, int64_t constant);
  mlir::Value rawF32(mlir::Value threadWords, int64_t constant);
  /// The byte at the slot's byte `threadBytes` + `constant`, as an i32.
  mlir::Value rawByte(mlir::Value threadBytes, int64_t constant);
  /// The post-mma latent scale of the record whose words start at
  /// `threadWords` + `constant` (a block's index added to either), null for
  /// 1.
  mlir::Value latentScale(mlir::Value threadWords, int64_t constant);
  /// Two e4m3 group-scale bytes (of two keys) as one f16 pair.
  mlir::Value scalePair(mlir::Value low, mlir::Value high);
  /// 2^k and 2^-k for the k that brings `magnitude` (>= 0) into
  /// [2^14, 2^15) (clamped so both stay normal fp32).
  std::pair<mlir::Value, mlir::Value> normalization(mlir::Value magnitude);

  // The tile's softmax and the value scales of P V.
  /// What P V takes from a tile's softmax: P in the layout of the logits
  /// (tileLogits), each value block's scales of the thread's keys (keys
  /// 8 nt + 2t + e at 2 nt + e), and 2t (index).
  struct TileWeights {
    llvm::SmallVector<mlir::Value> p;
    llvm::SmallVector<llvm::SmallVector<mlir::Value>> keyScales;
    mlir::Value twoT;
  };
  /// The online softmax over the tile's logits and the rescale of the
  /// accumulators in the loop state `s`: everything of a tile but S and
  /// the products of P V. `valueOwner` is the thread's owner of
  /// warpChannels channels in P V (its warp, or its warpgroup).
  TileWeights softmaxTile(llvm::SmallVectorImpl<mlir::Value> &s,
                          mlir::Value valueOwner);
  /// The logits of keys `key` and + 1 of a row, read at `at` of the logits
  /// into `pair`, made ready for the softmax. By default they are (the
  /// mma.sync kernel's S stores them scaled and masked).
  virtual void finishLogits(mlir::Value at, mlir::Value key,
                            llvm::MutableArrayRef<mlir::Value> pair) {}
  /// x[nt * 4 + e]: row g + 8 (e / 2), key 8 nt + 2t + (e % 2).
  llvm::SmallVector<mlir::Value> tileLogits();
  /// P, the rows' decay, and whether any row's maximum moved.
  struct TileSoftmax {
    llvm::SmallVector<mlir::Value> p, alphas;
    mlir::Value anyRescale;
  };
  /// The softmax of the tile's logits `x`; the loop state's maxima and
  /// sums updated.
  TileSoftmax onlineSoftmax(llvm::ArrayRef<mlir::Value> x,
                            llvm::SmallVectorImpl<mlir::Value> &s);
  /// The value scales of a tile, and the block exponents they ask for.
  struct ValueScales {
    llvm::SmallVector<llvm::SmallVector<mlir::Value>> keyScales;
    llvm::SmallVector<mlir::Value> targets, leaves;
    mlir::Value anyLeaves;
  };
  /// Each block's value scales of this tile's keys 8 nt + 2t + e, the
  /// exponent that suits their largest over the tile, and whether the
  /// block's exponent leaves its window.
  ValueScales tileValueScales(mlir::Value channelBase, mlir::Value twoT,
                              llvm::ArrayRef<mlir::Value> s);
  /// The accumulators decayed by the softmax, and moved to new block
  /// exponents, in the loop state `s`.
  void rescaleAccumulators(const TileSoftmax &softmax,
                           const ValueScales &scales,
                           llvm::SmallVectorImpl<mlir::Value> &s);
  /// P V's A operand of value block `bw`, per the C layout of `p`: P
  /// times each key's value scale (`keyScales`, keys 8 nt + 2t + e at
  /// 2 nt + e) times 2^(the block's exponent in the loop state `s`), or
  /// P 2^10 where the keys share a scale (the state has no exponents).
  llvm::SmallVector<mlir::Value>
  valueOperand(llvm::ArrayRef<mlir::Value> p,
               llvm::ArrayRef<mlir::Value> keyScales,
               llvm::ArrayRef<mlir::Value> s, int64_t bw);
  /// The block exponent (i32) that brings `largest` (>= 0), the largest
  /// value scale of a tile, into [2^5, 2^6) (kValueScaleTarget).
  mlir::Value valueExponent(mlir::Value largest);
  /// The accumulators and block exponents after moving the blocks whose
  /// `leaves` is set toward `targets`.
  llvm::SmallVector<mlir::Value>
  moveExponents(llvm::ArrayRef<mlir::Value> state,
                llvm::ArrayRef<mlir::Value> targets,
                llvm::ArrayRef<mlir::Value> leaves);

  // The partial results.
  /// The factor that turns a value block's accumulators into partial
  /// results.
  llvm::SmallVector<mlir::Value> undoFactors(llvm::ArrayRef<mlir::Value> s,
                                             int64_t bw);
  /// Row h's (natural) max and its sum over the quad into the split's
  /// statistics, by the threads where `writes` holds.
  void writeRowStats(llvm::ArrayRef<mlir::Value> s, int64_t h,
                     mlir::Value split, mlir::Value outRow, mlir::Value writes);

  /// Loop state: max and sum of rows g and g + 8, the accumulators (n-tile
  /// nt, element e), then the value blocks' exponents (perKeyValueScale).
  static int64_t maxAt(int64_t h) { return h; }
  static int64_t sumAt(int64_t h) { return 2 + h; }
  static int64_t accAt(int64_t nt, int64_t e) { return 4 + nt * 4 + e; }
  int64_t expAt(int64_t bw) const { return accAt(warpTiles, 0) + bw; }
  int64_t expCount() const { return perKeyValueScale() ? valueBlocks : 0; }
};

} // namespace xqa_mla
} // namespace pattn

#endif // PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_DECODE_XQAMLACOMMON_H
