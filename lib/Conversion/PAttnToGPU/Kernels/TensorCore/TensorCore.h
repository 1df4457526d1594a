//===- TensorCore.h - mma.sync building blocks ------------------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// The warp-level pieces the tensor-core kernels (Decode/XqaPaged*.cpp,
// Decode/XqaMla*.cpp) are built from: mma.sync.m16n8k16 with fp32
// accumulation over f16 or bf16 operands, ldmatrix from shared memory,
// operand packing, warp shuffles, the base-2 online softmax of one mma C
// row, wgmma with its descriptors, the cp.async ring, and the mbarriers of
// a ring that a copy warp fills.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_TENSORCORE_TENSORCORE_H
#define PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_TENSORCORE_TENSORCORE_H

#include "Kernels/Common/KernelBuilder.h"

namespace pattn {

class MmaBuilder {
public:
  MmaBuilder(KernelBuilder &kb, bool bf16) : kb(kb), bf16(bf16) {}

  /// f16 or bf16: the operand element type.
  mlir::Type operandType() const;
  /// A pair of the operand type (or its bits) as an mma operand register:
  /// itself for f16, an i32 for bf16.
  mlir::Value bitsOperand(mlir::Value halves);
  /// A decoded pair as an operand register, rounded to the operand type
  /// first when it is of the other 16-bit type.
  mlir::Value operand(mlir::Value pair);
  /// Two fp32 values rounded to the operand type and packed (low first).
  mlir::Value packPair(mlir::Value lowF32, mlir::Value highF32);
  /// D = A B + C for mma.sync.m16n8k16.row.col (4 A, 2 B, 4 C registers).
  llvm::SmallVector<mlir::Value> mma(llvm::ArrayRef<mlir::Value> a,
                                     llvm::ArrayRef<mlir::Value> b,
                                     llvm::ArrayRef<mlir::Value> c);
  /// ldmatrix of `tiles` (1, 2 or 4) 8x8 matrices of 16-bit elements from
  /// `view` (a 2-D f16 workgroup memref), this lane addressing the row at
  /// (row, column); one 32-bit word per matrix.
  llvm::SmallVector<mlir::Value> ldmatrix(mlir::Value view, mlir::Value row,
                                          mlir::Value column, int64_t tiles,
                                          bool transpose);
  /// The four A registers of an m16 x k16 tile of `view` (a 2-D f16
  /// workgroup memref holding operand bits) by ldmatrix.x4, this lane
  /// addressing (row, column): rows (lane % 16), columns 8 (lane / 16) of
  /// the tile.
  llvm::SmallVector<mlir::Value> loadOperandA(mlir::Value view, mlir::Value row,
                                              mlir::Value column);
  /// ldmatrix (x4, or x2 when `pair` is false) of 16 rows of `rowsView`
  /// from `key0` times 8-element segment `segment` (and `segment` + 1):
  /// fragment 2 * σ + h is segment `segment` + σ of rows key0 + 8h ..., as
  /// 32-bit words (`lane`: this lane of the warp).
  llvm::SmallVector<mlir::Value>
  loadSegments(mlir::Value rowsView, mlir::Value lane, mlir::Value key0,
               mlir::Value segment, bool pair, bool transpose);
  /// loadSegments (x4) with the matrices keys-major: fragment 2h + σ is
  /// segment `segment` + σ of rows key0 + 8h ... The two words of one key
  /// half are consecutive registers, as an mma B operand of keys (or the
  /// A operand of transposed 16-bit values) takes them, so no register
  /// moves pair them up (docs/Lowering.md, "ldmatrix order").
  llvm::SmallVector<mlir::Value>
  loadSegmentsKeysMajor(mlir::Value rowsView, mlir::Value lane,
                        mlir::Value key0, mlir::Value segment, bool transpose);
  mlir::Value shuffleXor(mlir::Value v, int32_t mask);
  /// The largest `v` among the four lanes of this lane's quad: the lanes
  /// that hold one row of an mma C fragment.
  mlir::Value quadMax(mlir::Value v);
  /// 2^x (ex2.approx.ftz: the logits are kept in base 2; one MUFU, where
  /// the non-ftz form adds a subnormal range check and two multiplies.
  /// Weights below 2^-126 of the row's maximum flush to zero.)
  mlir::Value exp2(mlir::Value x);

  /// One row of the online softmax over a tile, in base 2: the row's
  /// running maximum goes from `oldMax` to `newMax` (both -inf while the
  /// row has seen no key), its running sum decays by `alpha` and takes the
  /// tile's weights 2^(logit - max).
  struct SoftmaxRow {
    mlir::Value alpha, sum;
    llvm::SmallVector<mlir::Value> weights; ///< one per logit, in order
  };
  /// The exponents subtract a finite maximum (0 while the row has seen no
  /// key), so a masked logit (-inf) and a row's first maximum (old -inf)
  /// both give exactly 0 without a select per element: ex2.approx(-inf)
  /// = +0. `negInf` and `zero` are the kernel's f32 constants.
  SoftmaxRow softmaxRow(mlir::Value oldMax, mlir::Value newMax,
                        mlir::Value oldSum, llvm::ArrayRef<mlir::Value> logits,
                        mlir::Value negInf, mlir::Value zero);

  /// The per-thread state of an online softmax over `mTiles` m16 tiles
  /// of rows, each thread holding rows g and g + 8 of each (the first
  /// `rowHalves` of them real; 1: rows g + 8 are padding), and the output
  /// accumulators of `nTiles` 8-channel n-tiles: the running maxima, then
  /// the running sums, then the accumulators.
  struct SoftmaxTiles {
    int64_t mTiles, nTiles, rowHalves;
    int64_t maxAt(int64_t mt, int64_t h) const { return mt * 2 + h; }
    int64_t sumAt(int64_t mt, int64_t h) const {
      return 2 * mTiles + mt * 2 + h;
    }
    int64_t accAt(int64_t mt, int64_t nt, int64_t e) const {
      return 4 * mTiles + (mt * nTiles + nt) * 4 + e;
    }
  };
  /// The online softmax update of a warp's 16-key steps of a tile:
  /// `logits` per step (base 2, the step's two n-tiles of each m-tile as
  /// mma C fragments) update the maxima and sums of `state` with one row
  /// maximum, quad reduction and alpha for all of them, and decay its
  /// accumulators (only when some row of the warp has a new maximum);
  /// returns P as the A operands of P V, per step, then per m-tile.
  llvm::SmallVector<llvm::SmallVector<llvm::SmallVector<mlir::Value>>>
  softmaxSteps(const SoftmaxTiles &tiles,
               llvm::ArrayRef<llvm::SmallVector<mlir::Value>> logits,
               llvm::SmallVectorImpl<mlir::Value> &state, mlir::Value negInf,
               mlir::Value zero);
  /// softmaxSteps in two halves, for a kernel whose accumulators are still
  /// in flight while P is formed (wgmma): the maxima, sums and P (with
  /// each row's alpha and whether any row of the thread grew), then the
  /// accumulators' decay once they have landed.
  struct SoftmaxWeights {
    llvm::SmallVector<llvm::SmallVector<llvm::SmallVector<mlir::Value>>>
        pOperands;
    llvm::SmallVector<mlir::Value> alphas;
    mlir::Value rescale;
  };
  SoftmaxWeights
  softmaxWeights(const SoftmaxTiles &tiles,
                 llvm::ArrayRef<llvm::SmallVector<mlir::Value>> logits,
                 llvm::SmallVectorImpl<mlir::Value> &state, mlir::Value negInf,
                 mlir::Value zero);
  void decayAccumulators(const SoftmaxTiles &tiles,
                         const SoftmaxWeights &weights,
                         llvm::SmallVectorImpl<mlir::Value> &state);

  KernelBuilder &kb;
  /// bf16 operands (else f16).
  bool bf16;
};

/// An f16x2 or bf16x2 pair (or its i32 bits) as i32 bits: an mma operand
/// register as stored into a shared operand tile.
mlir::Value pairBits(KernelBuilder &kb, mlir::Value pair);

/// wgmma.mma_async (sm_90a): shared-memory matrix descriptors and the
/// m64nNk16 instruction with fp32 accumulators.
class WgmmaOps {
public:
  explicit WgmmaOps(KernelBuilder &kb) : kb(kb) {}

  /// A descriptor of the core matrices at byte `offset` (index) past
  /// `sharedBase` (the i64 shared address of dynamic shared memory): no
  /// swizzle, `leading` bytes between core matrices along K, `stride`
  /// bytes along M or N.
  mlir::Value descriptor(mlir::Value sharedBase, mlir::Value offset,
                         int64_t leading, int64_t stride);
  /// `descriptor` moved by `bytes` (a multiple of 16).
  mlir::Value advance(mlir::Value descriptor, int64_t bytes);
  /// D (m64 x n fp32, n / 2 per thread) = A B (+ D when `acc` is given):
  /// one wgmma.mma_async, f16 or bf16 operands, B K-major unless
  /// `transposeB` (B stored MN-major).
  llvm::SmallVector<mlir::Value> mma(mlir::Value descA, mlir::Value descB,
                                     llvm::ArrayRef<mlir::Value> acc, int64_t n,
                                     bool bf16, bool transposeB);
  /// D (m64 x n fp32) += A B with A from registers: `a`, the thread's four
  /// i32 pairs of the mma.sync m16n8k16 A fragment of its warp's 16 rows
  /// (warp w: rows 16 w ...), as FlashAttention-3 keeps P. Inline PTX:
  /// MLIR's wgmma op takes A from shared memory only.
  llvm::SmallVector<mlir::Value> mmaRegisterA(llvm::ArrayRef<mlir::Value> a,
                                              mlir::Value descB,
                                              llvm::ArrayRef<mlir::Value> acc,
                                              int64_t n, bool bf16,
                                              bool transposeB);

private:
  KernelBuilder &kb;
};

/// A ring of shared-memory slots that cp.async fills, one commit group per
/// tile: the tensor-core decodes' pipeline. Every tile closes its group,
/// copied or not (past the last tile), so that "at most n newer groups
/// pending" always means "this tile has landed". The kernels keep their own
/// schedule (how far ahead they copy, which slot a tile takes); the ring
/// keeps the group discipline.
class CpAsyncRing {
public:
  CpAsyncRing(KernelBuilder &kb, mlir::Value tileCount)
      : kb(kb), tileCount(tileCount) {}

  /// Copies with `copy` where `needed`, then closes the tile's group.
  void issueIf(mlir::Value needed, llvm::function_ref<void()> copy);
  /// Copies tile `tile` (i32) where it is below the tile count, then
  /// closes its group.
  void issue(mlir::Value tile, llvm::function_ref<void()> copy);
  /// Waits until at most `newerPending` groups younger than the awaited
  /// tile's are in flight, then a block barrier makes every thread's copies
  /// visible to all.
  void land(int32_t newerPending);

private:
  KernelBuilder &kb;
  mlir::Value tileCount;
};

/// The mbarriers of a ring that a copy warp fills and compute warps drain:
/// per stage a "full" barrier (the copy warp's lanes arrive once their
/// cp.async copies of the stage have landed) and an "empty" one (every
/// compute thread arrives once it has read the stage). Phase k of a
/// stage's barriers is the stage's k-th tile; a wait names the phase's
/// parity. No block-wide barrier per tile: a compute warp waits only for
/// the bytes it reads, the copy warp only for a free stage.
class StageBarriers {
public:
  /// 16 x `stages` bytes of `smem` (a workgroup i8 memref) at byte
  /// `offset` (a multiple of 8). `tryWait`: every chip of the module has
  /// mbarrier.try_wait (sm_90 and up), which suspends the waiting warp
  /// instead of polling.
  StageBarriers(KernelBuilder &kb, mlir::Value smem, int64_t offset,
                int64_t stages, bool tryWait);

  /// Initializes every stage's barriers (one thread; a block barrier must
  /// follow before any use).
  void init(int64_t copyThreads, int64_t computeThreads);
  /// Waits until stage `slot` (index) holds the tile of phase parity
  /// `parity` (i32, 0 or 1).
  void waitFull(mlir::Value slot, mlir::Value parity);
  /// Waits until the compute threads have released stage `slot`'s phase of
  /// parity `parity`.
  void waitEmpty(mlir::Value slot, mlir::Value parity);
  /// A copy thread's arrival at stage `slot`'s full barrier, completed when
  /// its cp.async copies issued so far (and its shared stores) are visible.
  void arriveFull(mlir::Value slot);
  /// A compute thread's arrival at stage `slot`'s empty barrier (after its
  /// last read of the stage).
  void arriveEmpty(mlir::Value slot);

private:
  /// The shared-window address (i32) of stage `slot`'s full (or empty)
  /// barrier.
  mlir::Value address(mlir::Value slot, bool empty);
  void wait(mlir::Value address, mlir::Value parity);

  KernelBuilder &kb;
  mlir::Value base; ///< i32 shared-window address of the first barrier
  int64_t stages;
  bool tryWait;
};

} // namespace pattn

#endif // PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_TENSORCORE_TENSORCORE_H
