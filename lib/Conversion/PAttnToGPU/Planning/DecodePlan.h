//===- DecodePlan.h - How each backend tiles a decode -----------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// The decode planner: from an attention op, its recorded backend and the
// chip capability table, the tiling its kernels use (#pattn.xqa_plan or
// #pattn.portable_plan). --pattn-plan-decode writes it on the op and
// --convert-pattn-to-gpu obeys it; the XQA shared-memory layout is computed
// here once so that the plan's byte count and the kernel's buffers agree.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_LIB_CONVERSION_PATTNTOGPU_PLANNING_DECODEPLAN_H
#define PATTN_LIB_CONVERSION_PATTNTOGPU_PLANNING_DECODEPLAN_H

#include "Kernels/Kernels.h"
#include "pattn/Dialect/PAttn/IR/PAttnOps.h"
#include "pattn/Dialect/PAttn/Transforms/Eligibility.h"
#include "pattn/Target/TargetDescription.h"

#include "llvm/ADT/ArrayRef.h"

#include <string>

namespace pattn {

/// Query heads of one KV head that a portable decode block serves together:
/// the largest divisor of the group size up to 8.
int64_t portableHeadsPerBlock(int64_t group);

/// The element type of the XQA kernel's mma operands: bf16 when the query
/// or either cache is bf16, else f16 (every quantized code and every
/// nvfp4 code x group scale is exact in both).
bool xqaUsesBf16(mlir::Type activation, pattn::CacheType key,
                 pattn::CacheType value);

/// Byte offsets into the XQA kernel's dynamic shared memory. The ring holds
/// `stages` tiles of raw cache bytes (rows padded by 16 bytes, so that
/// ldmatrix rows fall in different banks), each with its nvfp4 group scales
/// and per-token scales. The mma operands are decoded in registers from
/// ldmatrix fragments of the ring, so there is no decoded copy. After the
/// key loop the ring is reused to merge the key warps.
struct XqaSharedLayout {
  int64_t query = 0, queryStride = 0; ///< rows x (head_dim + 8) elements
  /// Per ring slot and key, an i32 flag: the key's page is not -1.
  int64_t liveKeys = 0;
  int64_t ring = 0, stageBytes = 0;
  /// Within a stage; -1 when absent.
  int64_t keyRows = 0, valueRows = 0, keyGroupScales = -1,
          valueGroupScales = -1, keyTokenScales = -1, valueTokenScales = -1;
  int64_t keyRowStride = 0, valueRowStride = 0; ///< bytes
  int64_t keyGroupStride = 0, valueGroupStride = 0;
  /// With a copy warp: per stage, the full and empty mbarriers (8 bytes
  /// each; StageBarriers); -1 without.
  int64_t barriers = -1;
  /// The key-warp merge: per key warp, rows x (value_dim + 2) fp32.
  int64_t merge = 0;
  int64_t total = 0;
};

XqaSharedLayout layoutXqaShared(pattn::CacheType key, pattn::CacheType value,
                                int64_t rows, int64_t keysPerTile,
                                int64_t stages, int64_t keyWarps,
                                bool copyWarp = false);

/// XQA blocks of `sharedBytes` that one SM of every chip of `chips` holds at
/// once (at most 4, which leaves 128 registers per thread).
int64_t xqaResidentBlocks(int64_t sharedBytes, llvm::ArrayRef<Chip> chips);

/// Tensor-core MLA blocks resident per SM. The mma.sync kernel: as
/// xqaResidentBlocks, but at most 3, which leaves the kernel 168 registers
/// per thread (the fp8 preset uses them all; the nvfp4 presets fit 128
/// without spilling, but a fourth block measured 4-5% slower at B32 L8K on
/// the H200: more splits, more partial results to write and merge). The
/// warpgroup kernel: one (256 threads holding 128 fp32 accumulators each).
int64_t xqaMlaResidentBlocks(pattn::TensorCoreKernel kernel,
                             int64_t sharedBytes, llvm::ArrayRef<Chip> chips);

/// The XQA paged plan's split bounds: a split has at least 4 tiles, and a
/// launch at most 64 splits.
inline constexpr int64_t kXqaLeastTilesPerSplit = 4;
inline constexpr int64_t kXqaMostSplits = 64;
/// The tensor-core MLA plans': an MLA tile is 32 keys, and a block's tile
/// costs more than a paged one, so a short sequence spreads over more
/// splits.
inline constexpr int64_t kXqaMlaLeastTilesPerSplit = 2;
inline constexpr int64_t kXqaMlaMostSplits = 128;

/// What a caller asks of an XQA plan (0: the planner chooses): keys per
/// tile and ring stages.
struct XqaPlanRequest {
  int64_t keysPerTile = 0;
  int64_t stages = 0;
  /// A copy warp for a decode plan (not a prompt's query tiles).
  bool copyWarp = false;
  /// Scores a tile ahead (XqaPlanAttr's scores_ahead) where the plan has
  /// rows = 8, no copy warp and a ring of at least 3 stages.
  bool scoresAhead = false;
  /// The KV heads whose blocks form one thread-block cluster
  /// (XqaPlanAttr's cluster_heads) where the plan is a decode without a
  /// copy warp, the count divides the KV heads and every chip has
  /// clusters; 0 or 1: none.
  int64_t clusterHeads = 0;
  /// The splits of a (sequence, KV head) that form one thread-block
  /// cluster and merge themselves (XqaPlanAttr's cluster_splits) where the
  /// plan is a decode without a copy warp or a cluster of KV heads, of an
  /// op without a guard and not a split prompt's decode side, and every
  /// chip has clusters; 0 or 1: none.
  int64_t clusterSplits = 0;
  /// A block that merges its own rows where the host picks one split
  /// (XqaPlanAttr's merges_unsplit) where the plan is a decode without a
  /// copy warp, of an op without a guard and not a split prompt's decode
  /// side.
  bool mergesUnsplit = false;
};

/// The XQA plan of `op` for every chip of `chips` (the smallest shared
/// memory among them bounds it); `maxKeysPerSplit` caps a split's keys.
/// `request` asks for a tile size and a ring depth; where one does not fit
/// (a tile not a multiple of 16 x key_warps, or either over shared memory)
/// the planner chooses as if it were 0. `decodeTokens` (0: the op's own)
/// plans the decode kernel of a split prompt op for the sequences of at
/// most that many query tokens (query_tile = 0).
pattn::XqaPlanAttr planXqaDecode(pattn::PagedAttentionOp op,
                                 llvm::ArrayRef<Chip> chips,
                                 int64_t maxKeysPerSplit,
                                 XqaPlanRequest request = {},
                                 int64_t decodeTokens = 0);

/// The query tokens per sequence up to which a prompt op planned on the
/// prefill family runs on the decode kernel instead: those that fill one
/// m16 tile (floor(16 / g)), at least 1 and at most a decode's 8.
int64_t splitDecodeTokens(int64_t group);

/// The prefill family's block: rows (query tokens x g heads of one KV head)
/// of an m16 tile per warp: 64 (four warps) on mma.sync, 128 (two
/// warpgroups, each an m64 wgmma chain, sharing every K/V tile) on wgmma.
inline int64_t prefillRows(pattn::TensorCoreKernel kernel) {
  return kernel == pattn::TensorCoreKernel::wgmma ? 128 : 64;
}

/// The prefill kernel's shared memory: the XQA layout of its query tile,
/// liveness flags and ring (no key-warp merge: each warp owns its rows),
/// then one decoded 16-bit tile per quantized side, [keys][head_dim + 8]
/// elements (-1: an f16 or bf16 side, read from the ring as it is). The
/// wgmma kernel's regions hold core matrices instead (its decoded tiles
/// keys x head_dim elements, unpadded; V's twice, valueBuffer bytes apart:
/// tile i's V is decoded while tile i - 1's P V reads the other).
struct PrefillSharedLayout {
  XqaSharedLayout ring;
  int64_t decodedKeys = -1, decodedValues = -1, valueBuffer = 0;
  int64_t keyStride = 0, valueStride = 0; ///< bytes per decoded row
  int64_t total = 0;
};
PrefillSharedLayout layoutPrefillShared(
    pattn::CacheType key, pattn::CacheType value, int64_t keysPerTile,
    int64_t stages,
    pattn::TensorCoreKernel kernel = pattn::TensorCoreKernel::mma_sync);

/// Where the prefill family runs on wgmma: where it measured faster (the
/// default: both caches quantized), nowhere (prompt-kernel=
/// prefill-mma-sync), or wherever the kernel serves the op (prompt-kernel=
/// prefill-wgmma, for measuring it on 16-bit caches).
enum class PrefillWgmma { whereFaster, never, wherever };

/// Why the wgmma prefill kernel is not planned for `op` on `chips` under
/// `choice` (empty when it is): not asked for, a chip without wgmma, a row
/// of more than 256 bytes (its copies give each pass whole core matrices
/// of at most 16 segments), or (whereFaster) an f16 or bf16 cache, read in
/// place, which measured slower on wgmma than on mma.sync.
std::string prefillWgmmaRejection(pattn::PagedAttentionOp op,
                                  llvm::ArrayRef<Chip> chips,
                                  PrefillWgmma choice);

/// The prefill plan of a prompt `op` for every chip of `chips` (the
/// family serves what the XQA rows of the eligibility table take): the
/// wgmma kernel where `choice` plans it (prefillWgmmaRejection), else
/// mma.sync.
pattn::PrefillPlanAttr planPrefill(pattn::PagedAttentionOp op,
                                   llvm::ArrayRef<Chip> chips,
                                   int64_t maxKeysPerSplit,
                                   PrefillWgmma choice);

/// The latent and rope lanes of an MLA record as the eligibility table and
/// the tensor-core MLA kernel read them.
MlaRecordLayout describeMlaRecord(pattn::RecordType record);

/// Byte offsets into the tensor-core MLA kernel's dynamic shared memory
/// (all 16-byte aligned): the block's 16 query rows (16-bit operands, rows
/// padded by 8 elements so that ldmatrix rows fall in different banks);
/// two slots of raw records as cp.async copied them, a record every
/// `rawStride` bytes (an odd multiple of 16 bytes, so that the 8 keys or 8
/// words a warp's quad rows read fall in different banks); the tile's
/// logits; the page of each key of three tiles (the one computed, the one
/// copied, the one looked up); and per query row the inverse of its f16
/// normalization.
struct XqaMlaSharedLayout {
  int64_t query = 0, rowStride = 0;    ///< rowStride: elements
  int64_t raw = 0, rawStride = 0;      ///< rawStride: bytes
  int64_t logits = 0, logitStride = 0; ///< logitStride: f32 elements
  int64_t pages = 0;                   ///< i32 per key
  int64_t queryScales = 0;             ///< f32 per query row
  /// The warpgroup kernel only: two slots of the tile decoded into
  /// wgmma's operand layout, and the P V A operands (one 64 x keys f16 tile per
  /// value block of each warpgroup); -1 in the mma.sync kernel.
  int64_t decoded = -1, pTiles = -1;
  int64_t total = 0;
};

XqaMlaSharedLayout layoutXqaMlaShared(const MlaRecordLayout &record,
                                      int64_t keysPerTile);

/// The warpgroup kernel's layout: the 64 query rows and the decoded tile
/// as wgmma core matrices (8 rows x 16 bytes, 128 contiguous bytes; no
/// swizzle), the raw ring, logits, P tiles, pages and row scales.
XqaMlaSharedLayout layoutXqaMlaWarpgroupShared(const MlaRecordLayout &record,
                                               int64_t keysPerTile);

/// Channels of one P V value block of the warpgroup kernel (one scale per
/// key across them; the whole half of the latent that a warpgroup owns
/// where the keys share a scale), and the blocks per warpgroup.
int64_t xqaMlaWarpgroupBlockChannels(const MlaRecordLayout &record);

/// Why the warpgroup (wgmma) MLA kernel cannot serve `numHeads` heads over
/// `record` on every chip of `chips`; empty when it can.
std::string xqaMlaWarpgroupRejection(const MlaRecordLayout &record,
                                     int64_t numHeads,
                                     llvm::ArrayRef<Chip> chips);

/// The tensor-core MLA plans of `op` for a build for `chips`.
struct XqaMlaPlans {
  /// The warpgroup kernel (64 heads per block) where
  /// xqaMlaWarpgroupRejection finds nothing on `chips`, else the mma.sync
  /// kernel (16 heads per block), whose shared memory depends on the record
  /// only (--pattn-plan-decode checks that it fits every chip built for).
  pattn::XqaMlaPlanAttr plan;
  /// Where `plan` is the mma.sync kernel because some chips lack wgmma but
  /// the warpgroup kernel serves those that have it: the warpgroup plan
  /// keyed by each of them (the op's chip_plans); null otherwise.
  mlir::DictionaryAttr chipPlans;
  /// xqaMlaWarpgroupRejection's reason on `chips` (empty when `plan` is the
  /// warpgroup kernel).
  std::string notWarpgroup;
};
XqaMlaPlans planXqaMlaDecode(pattn::MlaDecodeOp op, llvm::ArrayRef<Chip> chips);

/// The plan of one tensor-core MLA kernel for `op` on `chips`.
pattn::XqaMlaPlanAttr planTensorCoreKernel(pattn::MlaDecodeOp op,
                                           pattn::TensorCoreKernel kernel,
                                           llvm::ArrayRef<Chip> chips);

/// Keys per tile of the tensor-core MLA kernel: 8 per warp.
inline constexpr int64_t kXqaMlaKeysPerTile = 32;
/// Warps of a tensor-core MLA block: 4 key groups for S, 4 slices of the
/// latent for P V.
inline constexpr int64_t kXqaMlaWarps = 4;
inline constexpr int64_t kXqaMlaThreads = 32 * kXqaMlaWarps;

/// Query heads per block of the tensor-core MLA kernel: one m16 tile.
inline constexpr int64_t kXqaMlaHeadsPerBlock = 16;

/// Query heads per block of the warpgroup (wgmma, sm_90a) MLA kernel: the
/// M = 64 rows of wgmma.m64nNk16; two warpgroups split P V's channels.
inline constexpr int64_t kXqaMlaWarpgroupHeads = 64;
inline constexpr int64_t kXqaMlaWarpgroupThreads = 256;

/// The portable plan of a paged_attention or mla_decode op; a prompt plan
/// (one split of up to 32768 keys, blocks on the grid's x) for a
/// paged_attention of more than 8 query tokens per sequence.
pattn::PortablePlanAttr planPortableDecode(mlir::Operation *op,
                                           int64_t keysPerSplit,
                                           llvm::ArrayRef<Chip> chips);

} // namespace pattn

#endif // PATTN_LIB_CONVERSION_PATTNTOGPU_PLANNING_DECODEPLAN_H
