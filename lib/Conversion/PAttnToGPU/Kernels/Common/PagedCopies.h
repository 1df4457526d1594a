//===- PagedCopies.h - Paged cache tiles into a cp.async ring ---*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// The step every tensor-core kernel over a paged cache shares: the tiles of
// a block's key range, looked up in the block table a tile ahead and copied
// with cp.async from both sides' pages into a ring of shared-memory stages
// (raw bytes, each key's nvfp4 group scales and per-token scale beside
// them, and a liveness flag per key). The XQA decode and the prefill family
// read their tiles through it.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_COMMON_PAGEDCOPIES_H
#define PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_COMMON_PAGEDCOPIES_H

#include "Kernels/Common/DecodeCommon.h"
#include "Kernels/Common/KernelBuilder.h"
#include "Kernels/Kernels.h"
#include "Planning/DecodePlan.h"
#include "pattn/Dialect/PAttn/IR/PAttnOps.h"

#include "llvm/ADT/SmallVector.h"

#include <utility>

namespace pattn {

class CpAsyncRing;

/// One side (K or V) of a paged cache as a tile copier reads it.
struct PagedSide {
  CacheType type;
  mlir::Value storage, groupScales, tokenScales, scale; ///< kernel arguments
  /// Codes per 32-bit word (2, 4 or 8) and 16-byte row segments.
  int64_t perWord = 0, segments = 0;
  /// Within a ring stage (bytes; -1 when absent): the raw rows, each
  /// rowStride bytes, the keys' group scales (groupStride bytes each) and
  /// their per-token scales (f32).
  int64_t rows = 0, rowStride = 0, groupOffset = -1, groupStride = 0,
          tokenOffset = -1;
  /// The storage as memref<?xi8>, and the byte strides of its page, token
  /// and KV-head dimensions (NHD or HND).
  mlir::Value flat;
  int64_t pageStride = 0, tokenStride = 0, headStride = 0;
};

/// The arguments of a tensor-core kernel over a paged cache: the op's
/// buffers, then each side's (pages, group scales, token scales, scale),
/// then the workspace. With a fused `fold` the query is the fold's input
/// and its table (FoldScales) replaces the query exponents. With
/// `writesOutput` the op's sinks, out_scale and output come before the
/// workspace (a kernel that finishes unsplit rows itself).
DecodeSignature pagedTensorCoreSignature(pattn::PagedAttentionOp op,
                                         const CacheBuffers &keyBuffers,
                                         const CacheBuffers &valueBuffers,
                                         const FusedFold *fold = nullptr,
                                         bool writesOutput = false);

/// `side` as read from `buffers`, its arguments those of `signature`, its
/// place in a ring stage that of `layout`.
void describePagedSide(PagedSide &side, const CacheBuffers &buffers, bool isKey,
                       const DecodeSignature &signature,
                       const XqaSharedLayout &layout);

/// Sets side.flat and the byte strides from side.storage (contiguous inside
/// each page, pages contiguous or a static stride apart, at a static offset:
/// bind_cache checks that, BufferRules' hasPagedLayout).
void flattenPagedStorage(KernelBuilder &kb, PagedSide &side, int64_t blockSize);

/// The ring in a kernel's dynamic shared memory (byte offsets) and its
/// tiles: `tileKeys` keys per stage, the cache's pages of `blockSize`,
/// copied by `copyThreads` threads (the block, or a copy warp of 32).
struct PagedRingLayout {
  int64_t ring = 0, stageBytes = 0, total = 0;
  int64_t tileKeys = 0, blockSize = 0;
  int64_t copyThreads = kBlockThreads;
  /// Each side's rows stored as wgmma's core matrices (8 keys x 16 bytes,
  /// 128 contiguous bytes) rather than a row every rowStride bytes: the
  /// 16-byte chunk `segment` of key k at ((segment x tileKeys / 8 + k / 8)
  /// 128 + (k % 8) 16) of the side's rows. Eight consecutive copying
  /// threads then take one segment of eight keys (one core matrix, no bank
  /// conflict). Needs copyThreads a multiple of 8 x every side's segments.
  bool coreMatrices = false;
};

/// The byte, from `base` (index), of 16-byte chunk `chunk` of row `row`
/// (index) of a tile of `rows` rows stored as wgmma's core matrices (no
/// swizzle): core matrix (chunk, row / 8), 128 bytes each, chunk-major, at
/// ((chunk x rows / 8 + row / 8) 128 + (row % 8) 16). The ring's rows
/// (PagedRingLayout::coreMatrices), the prefill's decoded tiles and query
/// tile use it.
mlir::Value coreMatrixByte(KernelBuilder &kb, mlir::Value base, mlir::Value row,
                           mlir::Value chunk, int64_t rows);

/// Where a block reads: its copying thread (0 ... copyThreads - 1),
/// sequence (i32) and KV head (index), the block table, and its keys
/// [first, last) of the sequence (i32).
struct PagedBlock {
  mlir::Value tid, seq, kvHead, blockTable, first, last;
};

/// The copies of one kernel's tiles. Tile t of the block holds keys
/// tileBase(t) ... + tileKeys - 1 (tiles start at multiples of tileKeys);
/// keys outside [first, last) or on a -1 page are zero-filled and flagged
/// dead in `liveKeys` ([stages x tileKeys] i32 of shared memory).
class PagedTileCopies {
public:
  /// Computes each thread's part of its addresses (before the loop: none
  /// of it depends on the tile).
  PagedTileCopies(KernelBuilder &kb, mlir::Value smem, PagedRingLayout layout,
                  PagedSide &key, PagedSide &value, mlir::Value liveKeys,
                  const PagedBlock &block);

  /// The first key position of tile `tileIndex` (i32) of the block.
  mlir::Value tileBase(mlir::Value tileIndex);
  /// The block-table entries that issueTile reads for tile `tileIndex`
  /// (loads only; nothing waits on them): one per page of the tile when
  /// passes are page-aligned, else this thread's, one per pass of each
  /// group.
  llvm::SmallVector<mlir::Value> lookupPages(mlir::Value tileIndex);
  /// Copies tile `tileIndex` into ring slot `slot` with cp.async, given the
  /// block-table entries `pages` that lookupPages returned for it.
  void issueTile(mlir::Value tileIndex, mlir::Value slot,
                 mlir::ValueRange pages);
  /// The ring's prologue: tiles 0 ... stages - 2 in flight; returns the
  /// block-table entries of tile stages - 1 (the loop looks one tile
  /// further ahead than it copies, so no copy waits for its lookups).
  llvm::SmallVector<mlir::Value> startRing(CpAsyncRing &ring, int64_t stages);
  /// In the loop, at tile `tile` (i32): copies tile + stages - 1 into its
  /// slot (`i32Stages`: the stages as an i32 value), given the entries
  /// `pages` looked up for it; returns those of the tile after it.
  llvm::SmallVector<mlir::Value> copyAhead(CpAsyncRing &ring, mlir::Value tile,
                                           mlir::Value i32Stages,
                                           int64_t stages,
                                           mlir::ValueRange pages);
  /// Whether keys n0 ... n0 + 15 (index) of ring slot `slot` are all live:
  /// one flag per lane (`lane` of the warp) and a warp vote.
  mlir::Value stepAllLive(mlir::Value slot, mlir::Value n0, mlir::Value lane);

private:
  /// The sides whose rows have the same 16-byte segments, so that a thread
  /// copies the same chunk of each: `passes` passes of copyThreads chunks
  /// cover a tile, and pass p gives the thread key keyInPass + p x
  /// keysPerPass.
  struct CopyGroup {
    llvm::SmallVector<PagedSide *> sides;
    int64_t segments = 0, passes = 0, keysPerPass = 0;
    /// The copying threads are whole rows: a thread keeps its segment in
    /// every pass (else its chunks are computed per pass).
    bool uniformChunks = true;
    /// Per thread: the key within a pass (index and i32), the chunk's byte
    /// in its row, whether it is the row's first.
    mlir::Value keyInPass, keyInPassI32, byte, firstChunk;
    /// Per side: the thread's byte in a page of the storage (its KV head
    /// and chunk) and in a ring stage (its key of pass 0 and chunk).
    llvm::SmallVector<mlir::Value> pageBytes, stageBytes;
  };
  /// This thread's chunk of pass `pass` of `group`: its key in the tile,
  /// whether it starts the row, and per side its byte in a page and in a
  /// ring stage (but for the page and the stage).
  struct PassChunk {
    mlir::Value key, keyI32, firstChunk;
    llvm::SmallVector<mlir::Value> pageBytes, stageBytes;
  };
  PassChunk passChunk(const CopyGroup &group, int64_t pass);
  /// The block-table entry (of lookupPages' result) and the key offset in
  /// its page of pass `pass` of group `group`, for its key at `keyPos`.
  std::pair<mlir::Value, mlir::Value> passPage(mlir::ValueRange pages,
                                               int64_t group, int64_t pass,
                                               mlir::Value keyPos);
  /// `group`'s per-thread chunks where the rows are core matrices
  /// (PagedRingLayout::coreMatrices).
  void initCoreMatrixChunks(CopyGroup &group);
  /// Storage indices of byte `byte` of a cache row.
  llvm::SmallVector<mlir::Value> address(const PagedSide &side,
                                         mlir::Value page, mlir::Value offset,
                                         mlir::Value byte);
  mlir::Value view(int64_t offset, llvm::ArrayRef<int64_t> shape,
                   mlir::Type element);
  mlir::Value index(int64_t v) { return kb.index(v); }

  KernelBuilder &kb;
  mlir::Value smem;
  PagedRingLayout layout;
  /// The key side: its copies record each key's liveness.
  PagedSide &key;
  mlir::Value liveKeys;
  PagedBlock block;
  llvm::SmallVector<CopyGroup> copyGroups;
  /// Whether every pass of every group lies in one page at a position known
  /// but for keyInPass (tiles are whole pages, a pass at most one page):
  /// then the block-table entries of a tile are one per page, the same for
  /// every thread, and a pass's addresses are a constant from its page's.
  bool pageAlignedPasses = false;
  /// last - first, and the block table's last column.
  mlir::Value keySpan, lastBlock;
};

} // namespace pattn

#endif // PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_COMMON_PAGEDCOPIES_H
