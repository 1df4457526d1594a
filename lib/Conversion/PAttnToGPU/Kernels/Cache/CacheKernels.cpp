//===- CacheKernels.cpp - Quantizing cache writes on the GPU --------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the kernels of pattn.write_cache and
// pattn.write_record. Every byte they store is the byte pattn's numerics
// library computes for the same input: scales are derived with the same
// fp32 operations in the same order, and codes go through KernelBuilder's
// encoders, which mirror the library's.
//
//===----------------------------------------------------------------------===//

#include "Kernels/Common/KernelBuilder.h"
#include "Kernels/Kernels.h"
#include "Kernels/TensorCore/TensorCore.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <optional>

using namespace mlir;
using namespace pattn;

/// max |x[i]| over i in [begin, begin + count), each thread on its own.
static Value rangeAbsMax(KernelBuilder &kb, int64_t count,
                         function_ref<Value(Value)> element) {
  return kb.forLoop(kb.index(0), kb.index(count), kb.index(1), {kb.f32(0.0f)},
                    [&](Value i, ValueRange c) -> SmallVector<Value> {
                      return {kb.fmax(c[0], kb.fabs(element(i)))};
                    })[0];
}

/// The e2m1 codes of an nvfp4 group and its e4m3 scale, as the numerics
/// library computes them: sf = e4m3(amax / 6 / outer), code = e2m1(x /
/// (decode(sf) * outer)); a zero group, outer or decoded scale writes zeros.
struct Nvfp4Group {
  Value scaleCode;   ///< i32
  Value zero;        ///< i1: write zeros
  Value denominator; ///< f32
  /// The code of x: e2m1(x / denominator), or 0 for a zero group.
  Value code(KernelBuilder &kb, Value x) const {
    Value quotient = kb.fdiv(x, denominator);
    Value code = kb.encodeE2M1(quotient);
    Value nibble = kb.andi(code, kb.i32(0xF));
    return kb.select(zero, kb.i32(0), nibble);
  }
};

static Nvfp4Group nvfp4Group(KernelBuilder &kb, Value amax, Value outer) {
  float largestCode = encodingInfo(Encoding::nvfp4).minifloat->maxFinite;
  Value ratio = kb.fdiv(kb.fdiv(amax, kb.f32(largestCode)), outer);
  Value sf = kb.encodeMinifloat(ratio, MinifloatFormat::e4m3());
  Value denominator = kb.fmul(kb.decodeE4M3(sf), outer);
  auto isZero = [&](Value v) {
    return kb.cmpf(arith::CmpFPredicate::OEQ, v, kb.f32(0.0f));
  };
  Value zeroAmax = isZero(amax);
  Value zeroOuter = isZero(outer);
  Value zeroInput = kb.lor(zeroAmax, zeroOuter);
  Value zeroDenominator = isZero(denominator);
  Value zero = kb.lor(zeroInput, zeroDenominator);
  return {kb.select(zero, kb.i32(0), sf), zero, denominator};
}

/// The index of slot `slot` of `slots` as (page, offset), or nothing.
static std::pair<Value, Value> slotAddress(KernelBuilder &kb, Value slot,
                                           int64_t blockSize) {
  Value slot64 = kb.toI64(slot);
  Value page = kb.toIndex(kb.divs(slot64, kb.i64(blockSize)));
  Value offset = kb.toIndex(kb.rems(slot64, kb.i64(blockSize)));
  return {page, offset};
}

void pattn::raiseRejection(KernelBuilder &kb, Value flags, Value block,
                           Value errorWord, int32_t bit) {
  Value raised = kb.i32(1);
  kb.store(raised, flags, {block});
  Value bitValue = kb.i32(bit);
  Value zero = kb.index(0);
  memref::AtomicRMWOp::create(kb.b, kb.loc, arith::AtomicRMWKind::ori, bitValue,
                              errorWord, {zero});
}

Value pattn::checksPassed(KernelBuilder &kb, Value flags, Value lane) {
  Value blocks = memref::DimOp::create(kb.b, kb.loc, flags, 0);
  Value last = kb.sub(blocks, kb.index(1));
  Value verdict = kb.load(flags, {kb.mins(lane, last)});
  Value inRange = kb.cmpi(arith::CmpIPredicate::slt, lane, blocks);
  Value failed = kb.cmpi(arith::CmpIPredicate::ne, verdict, kb.i32(0));
  Value laneFailed = kb.land(inRange, failed);
  Value anyFailed =
      NVVM::VoteSyncOp::create(kb.b, kb.loc, kb.b.getI1Type(), kb.i32(-1),
                               laneFailed, NVVM::VoteSyncKind::any);
  return kb.xori(anyFailed, kb.boolean(true));
}

/// The type of a check's verdicts: one per check block.
static MemRefType flagsType(MLIRContext *context) {
  return MemRefType::get({ShapedType::kDynamic}, IntegerType::get(context, 32));
}

/// The type of the runtime's device error word.
static MemRefType errorWordType(MLIRContext *context) {
  return MemRefType::get({1}, IntegerType::get(context, 32));
}

Value pattn::clearCheckVerdict(KernelBuilder &kb, Value flags, Value tid) {
  Value block = kb.blockId(gpu::Dimension::x);
  Value isFirst = kb.cmpi(arith::CmpIPredicate::eq, tid, kb.index(0));
  kb.ifThen(isFirst, [&] { kb.store(kb.i32(0), flags, {block}); });
  kb.barrier();
  return block;
}

auto ::pattn::buildSlotCheckKernel(KernelModule &kernels, Location loc,
                                   Value slots, Value storage,
                                   int64_t blockSize, RotaryOp rotary)
    -> Kernel {
  MLIRContext *context = slots.getContext();
  OpBuilder builder(context);
  SmallVector<Value> operands = {slots, storage};
  if (rotary)
    llvm::append_range(operands, rotaryReads(rotary));
  Kernel result =
      kernels.create(builder, loc, "pattn_check_slots", operands,
                     {flagsType(context), errorWordType(context)}, {});
  gpu::GPUFuncOp kernel = result.func;
  KernelBuilder kb(builder, loc);
  Value slotArg = kernel.getArgument(0), storageArg = kernel.getArgument(1);
  unsigned arguments = kernel.getNumArguments();
  Value flags = kernel.getArgument(arguments - 2);
  Value errorWord = kernel.getArgument(arguments - 1);
  Value tid = kb.threadId();
  Value block = clearCheckVerdict(kb, flags, tid);
  // Every thread that sees a bad slot stores the same 1: the race is benign.
  Value capacity = kb.toI64(kb.mul(
      memref::DimOp::create(builder, loc, storageArg, 0), kb.index(blockSize)));
  Value count = memref::DimOp::create(builder, loc, slotArg, 0);
  Value last = kb.sub(count, kb.index(1));
  // kCheckItemsPerThread loads in flight per thread and step, each a grid
  // of threads apart, then one branch.
  Value threads =
      kb.mul(gpu::GridDimOp::create(builder, loc, gpu::Dimension::x),
             kb.index(kBlockThreads));
  Value first = kb.add(kb.mul(block, kb.index(kBlockThreads)), tid);
  Value step = kb.mul(threads, kb.index(kCheckItemsPerThread));
  kb.forLoop(
      first, count, step, {},
      [&](Value start, ValueRange) -> SmallVector<Value> {
        Value bad = kb.boolean(false);
        for (int64_t j = 0; j < kCheckItemsPerThread; ++j) {
          Value offset = kb.mul(threads, kb.index(j));
          Value i = kb.add(start, offset);
          Value inside = kb.cmpi(arith::CmpIPredicate::sle, i, last);
          Value slot = kb.toI64(kb.load(slotArg, {kb.mins(i, last)}));
          Value low = kb.cmpi(arith::CmpIPredicate::slt, slot, kb.i64(-1));
          Value high = kb.cmpi(arith::CmpIPredicate::sge, slot, capacity);
          bad = kb.lor(bad, kb.land(inside, kb.lor(low, high)));
        }
        kb.ifThen(bad, [&] {
          raiseRejection(kb, flags, block, errorWord, kSlotOutOfRangeBit);
        });
        return {};
      });
  if (rotary) {
    RotaryArguments a =
        bindRotaryArguments(rotary, kernel.getArguments().drop_front(2));
    emitPositionChecks(kb, rotary, a, first, threads, flags, block, errorWord);
  }
  gpu::ReturnOp::create(builder, loc);
  return result;
}

/// A gated kernel's check verdicts: the last argument of its function type
/// (block arguments go on with the workgroup buffers).
static Value verdictsOf(gpu::GPUFuncOp kernel) {
  return kernel.getArgument(kernel.getFunctionType().getNumInputs() - 1);
}

/// True when `slot` names a cache slot (is not -1).
static Value mappedSlot(KernelBuilder &kb, Value slot) {
  Value zero = arith::ConstantIntOp::create(kb.b, kb.loc, slot.getType(), 0);
  return kb.cmpi(arith::CmpIPredicate::sge, slot, zero);
}

/// True when this token is written: every check block passed and the
/// token's `slot` is not -1. All 32 lanes of the warp (`lane`) must reach
/// it.
static Value writesSlot(KernelBuilder &kb, gpu::GPUFuncOp kernel, Value slot,
                        Value lane) {
  Value batchValid = checksPassed(kb, verdictsOf(kernel), lane);
  return kb.land(batchValid, mappedSlot(kb, slot));
}

namespace {

/// A write-cache kernel's arguments (null where the op has none) and the
/// token and KV head of its block.
struct WriteCacheKernel {
  Kernel kernel;
  Value values, slots, storage, groupScales, tokenScales, scale;
  /// The fused rotary's arguments begin here.
  unsigned rotaryFirst = 0;
  /// The warps' prepared rows in shared memory (fused with a rotary op),
  /// [kWriteWarpsPerBlock, head_dim] f32.
  Value row;
};

/// The kernel of `op`: its buffers, then the slot check's flag. Fused with
/// a rotary op, the kernel reads the rotary's input instead of the values
/// (the rotary's output, which nothing else reads).
WriteCacheKernel createWriteCacheKernel(KernelModule &kernels,
                                        OpBuilder &builder, WriteCacheOp op,
                                        const CacheBuffers &cache,
                                        RotaryOp rotary) {
  SmallVector<Value> operands;
  if (!rotary)
    operands.push_back(op.getValues());
  operands.append({op.getSlots(), cache.storage});
  if (cache.groupScales)
    operands.push_back(cache.groupScales);
  if (cache.tokenScales)
    operands.push_back(cache.tokenScales);
  if (op.getScale())
    operands.push_back(op.getScale());
  WriteCacheKernel w;
  w.rotaryFirst = operands.size();
  if (rotary)
    llvm::append_range(operands, rotaryReads(rotary));
  SmallVector<Type> shared;
  if (rotary) // each warp's prepared row, as f32
    shared.push_back(workgroupMemRefType(
        {kWriteWarpsPerBlock, cache.type.getHeadDim()}, builder.getF32Type()));
  w.kernel = kernels.create(builder, op.getLoc(), "pattn_write_cache", operands,
                            {flagsType(op.getContext())}, shared);
  gpu::GPUFuncOp kernel = w.kernel.func;
  unsigned arg = 0;
  auto next = [&]() { return kernel.getArgument(arg++); };
  w.values = rotary ? Value() : next();
  w.slots = next();
  w.storage = next();
  w.groupScales = cache.groupScales ? next() : Value();
  w.tokenScales = cache.tokenScales ? next() : Value();
  w.scale = op.getScale() ? next() : Value();
  if (rotary)
    w.row = kernel.getWorkgroupAttributions().front();
  return w;
}

/// Whether a lane loads its values and stores its codes as vectors (where
/// the buffers are aligned for them). It pays for 16-bit codes, fp8 (its
/// pairs convert in one instruction) and nvfp4 (fewer lanes to a group);
/// i8 and i4 rows, whose kernels are bound by instruction issue, measured
/// slower with the packing and checks it takes (bench/results/
/// 2026-12-06-h100-append-runs.md), and keep element loads and byte stores.
static bool vectorRuns(Encoding encoding) {
  return encoding != Encoding::i8 && encoding != Encoding::i4;
}

/// The lanes of a row: a group of 16 channels a lane for nvfp4 rows of 64
/// to 512 channels (written without a fused rotary, whose row a whole warp
/// prepares), so that each group scale is computed by one lane; the whole
/// warp otherwise.
static int64_t rowLanes(Encoding encoding, int64_t headDim, bool rotary) {
  int64_t groups = headDim / 16;
  bool grouped = encoding == Encoding::nvfp4 && !rotary && headDim % 16 == 0 &&
                 groups >= 4 && groups <= 32 && 32 % groups == 0;
  return grouped ? groups : 32;
}

/// The channels a lane writes per step: a whole nvfp4 group where a lane
/// takes one (rowLanes), runs of 4 (one 8-byte load of f16 values) with
/// vector runs when every step of a row is whole, pairs otherwise (a pair
/// of 4-bit codes is a byte).
static int64_t runChannels(Encoding encoding, int64_t headDim, bool rotary) {
  if (rowLanes(encoding, headDim, rotary) < 32)
    return 16;
  return vectorRuns(encoding) && headDim % 128 == 0 ? 4 : 2;
}

/// What every row of a write-cache warp shares.
struct RowWriterShared {
  Value warp, lane;
  /// The lanes of a row (rowLanes) and this lane's place among them.
  int64_t rowLanes = 32;
  Value rowLane;
  /// The scale of a `tensor`-scaled row, read once by the kernel.
  Value tensorScale;
  /// Whether a run's values load, and its codes store, as one vector
  /// (KernelBuilder::vectorAligned; uniform over the grid). valuesAligned
  /// is null with a fused rotary, whose rows are in shared memory.
  Value valuesAligned, storageAligned;
};

/// Quantizes one head row of a write into its cache row, one warp per row:
/// in step s lane l takes the run of runChannels(head_dim) consecutive
/// channels numbered l + 32 s, loads its values with one vector load and
/// stores its codes with one word-wide store.
struct CacheRowWriter {
  KernelBuilder &kb;
  CacheType type;
  const WriteCacheKernel &w;
  RowWriterShared shared;
  Value token, valueHead, kvHead, page, offset;
  Value tokenScale; ///< `token` granularity only
  /// rowAbsMax, taken before the row's write branch where the rows of a
  /// warp differ by lane (rowLanes < 32), else null.
  Value tokenAmax;
  /// The lane's elements of each step (as f32), loaded by preload before
  /// the slot and the check's verdicts, so that the row's loads are in
  /// flight while those are read; empty with a fused rotary, whose row the
  /// warp computes after the check.
  SmallVector<SmallVector<Value>> preloaded;

  int64_t run() const {
    return runChannels(type.getEncoding(), type.getHeadDim(),
                       /*rotary=*/bool(w.row));
  }
  int64_t runs() const { return type.getHeadDim() / run(); }
  /// The steps of rowLanes runs that cover the row (the same for every
  /// lane).
  int64_t steps() const { return llvm::divideCeil(runs(), shared.rowLanes); }
  int64_t codeBits() const {
    return encodingInfo(type.getEncoding()).bitsPerCode;
  }
  /// Bytes of a run's codes in the row.
  int64_t runBytes() const { return run() * codeBits() / 8; }
  /// The index of byte `byte` of the row in the storage (or in a buffer of
  /// the same layout: the group scales).
  SmallVector<Value> rowAddress(Value byte) {
    if (type.getLayout() == Layout::hnd)
      return {page, kvHead, offset, byte};
    return {page, offset, kvHead, byte};
  }
  Value scaleOf(Value channel) {
    switch (type.getScale()) {
    case ScaleGranularity::tensor:
      return shared.tensorScale;
    case ScaleGranularity::channel:
      return kb.load(w.scale, {kvHead, channel});
    case ScaleGranularity::token:
      return tokenScale;
    case ScaleGranularity::none:
      return kb.f32(1.0f);
    }
    llvm_unreachable("unknown granularity");
  }
  /// This lane's run of step `step`, clamped into the row, and whether it
  /// is one (null when every lane's is: the row is a multiple of 32 runs).
  std::pair<Value, Value> runOf(int64_t step) {
    Value index = kb.add(shared.rowLane, kb.index(step * shared.rowLanes));
    if (runs() % shared.rowLanes == 0)
      return {index, Value()};
    Value inRow = kb.cmpi(arith::CmpIPredicate::slt, index, kb.index(runs()));
    return {kb.mins(index, kb.index(runs() - 1)), inRow};
  }
  /// The first channel of this lane's run of step `step`.
  Value firstChannel(int64_t step) {
    Value index = runOf(step).first;
    return kb.mul(index, kb.index(run()));
  }
  /// Reads the elements of this lane's run of step `step`, as f32.
  SmallVector<Value> loadRun(int64_t step);
  /// The elements of this lane's run of step `step`: preloaded, or read
  /// from the fused rotary's row.
  SmallVector<Value> runValues(int64_t step) {
    return preloaded.empty() ? loadRun(step) : preloaded[step];
  }
  /// Loads every element of the lane (all steps) into `preloaded`.
  void preload() {
    for (int64_t step = 0; step < steps(); ++step)
      preloaded.push_back(loadRun(step));
  }
  /// max(0, |x| for x in `xs`) (maxnum: a NaN counts as 0, as in a running
  /// max from 0), 0 for a lane past the row.
  Value runAbsMax(ArrayRef<Value> xs, Value inRow) {
    Value zero = kb.f32(0.0f);
    Value largest = zero;
    for (Value x : xs)
      largest = kb.fmax(largest, kb.fabs(x));
    return inRow ? kb.select(inRow, largest, zero) : largest;
  }
  /// max over the lanes l ^ m of `v`, m < `lanes` (a power of two).
  Value laneMax(Value v, int64_t lanes) {
    return kb.laneReduce(v, lanes,
                         [&](Value a, Value b) { return kb.fmax(a, b); });
  }
  /// max |x| over the row, reduced across its lanes: every lane of the
  /// warp takes part (the shuffles name all 32).
  Value rowAbsMax() {
    Value own = kb.f32(0.0f);
    for (int64_t step = 0; step < steps(); ++step) {
      Value inRow = runOf(step).second;
      SmallVector<Value> xs = runValues(step);
      own = kb.fmax(own, runAbsMax(xs, inRow));
    }
    return laneMax(own, shared.rowLanes);
  }
  /// Per-token scale: amax / max code (nvfp4: the outer scale
  /// amax / (6 * 448)), stored once per row by lane 0.
  void storeTokenScale() {
    Encoding encoding = type.getEncoding();
    float maxCode = encodingInfo(encoding).maxCodeMagnitude;
    Value amax = tokenAmax ? tokenAmax : rowAbsMax();
    tokenScale = kb.fdiv(amax, kb.f32(maxCode));
    Value isFirst =
        kb.cmpi(arith::CmpIPredicate::eq, shared.rowLane, kb.index(0));
    kb.ifThen(isFirst, [&] {
      kb.store(tokenScale, w.tokenScales, {page, offset, kvHead});
    });
  }
  /// Quantizes and stores this lane's run of step `step` (nvfp4: with its
  /// group's scale, reduced across the group's lanes).
  void storeRun(int64_t step);
  /// The stored code of each element of a run starting at channel `first`.
  SmallVector<Value> encodeRun(Value first, ArrayRef<Value> xs,
                               const Nvfp4Group *group);
  /// Packs a run's codes little-endian into 32-bit words and stores them.
  void storeCodes(Value first, ArrayRef<Value> codes);
};

SmallVector<Value> CacheRowWriter::loadRun(int64_t step) {
  Value first = firstChannel(step);
  auto channel = [&](int64_t i) {
    return i ? kb.add(first, kb.index(i)) : first;
  };
  SmallVector<Value> xs;
  if (w.row) {
    for (int64_t i = 0; i < run(); ++i)
      xs.push_back(kb.load(w.row, {shared.warp, channel(i)}));
    return xs;
  }
  SmallVector<Value> at = {token, valueHead, first};
  Type element = cast<MemRefType>(w.values.getType()).getElementType();
  int64_t bytes = run() * element.getIntOrFloatBitWidth() / 8;
  // One ld.global.v of the run's words where the buffer is aligned.
  auto wide = [&]() -> SmallVector<Value> {
    int64_t bits = element.getIntOrFloatBitWidth(), perWord = 32 / bits;
    // At most 16 bytes a load.
    int64_t chunkWords = std::min<int64_t>(bytes, 16) / 4;
    SmallVector<Value> words;
    for (int64_t c = 0; c < bytes / 4; c += chunkWords) {
      Value channel = c ? kb.add(first, kb.index(c * perWord)) : first;
      SmallVector<Value> chunkAt = {token, valueHead, channel};
      llvm::append_range(words,
                         kb.loadGlobalWords(w.values, chunkAt, chunkWords));
    }
    SmallVector<Value> values;
    for (int64_t i = 0; i < run(); ++i) {
      Value word = words[i / perWord];
      if (bits == 32) {
        values.push_back(kb.bitcast(kb.b.getF32Type(), word));
        continue;
      }
      if (i % perWord)
        word = kb.shru(word, kb.i32(16));
      Value half =
          arith::TruncIOp::create(kb.b, kb.loc, kb.b.getI16Type(), word);
      values.push_back(kb.toF32(kb.bitcast(element, half)));
    }
    return values;
  };
  auto scalar = [&]() -> SmallVector<Value> {
    SmallVector<Value> values;
    for (int64_t i = 0; i < run(); ++i)
      values.push_back(
          kb.toF32(kb.load(w.values, {token, valueHead, channel(i)})));
    return values;
  };
  if (!shared.valuesAligned)
    return scalar();
  SmallVector<Type> types(run(), kb.b.getF32Type());
  return kb.ifElse(shared.valuesAligned, types, wide, scalar);
}

SmallVector<Value> CacheRowWriter::encodeRun(Value first, ArrayRef<Value> xs,
                                             const Nvfp4Group *group) {
  Encoding encoding = type.getEncoding();
  SmallVector<Value> codes;
  if (encoding == Encoding::f16 || encoding == Encoding::bf16) {
    for (Value x : xs)
      codes.push_back(encoding == Encoding::f16 ? kb.encodeF16Bits(x)
                                                : kb.encodeBF16Bits(x));
    return codes;
  }
  if (group) {
    for (Value x : xs)
      codes.push_back(group->code(kb, x));
    return codes;
  }
  SmallVector<Value> scales;
  for (int64_t i = 0; i < int64_t(xs.size()); ++i)
    scales.push_back(scaleOf(i ? kb.add(first, kb.index(i)) : first));
  if (encoding == Encoding::f8e4m3 || encoding == Encoding::f8e5m2) {
    // Pairs: one hardware conversion each on chips that have it.
    for (size_t i = 0; i < xs.size(); i += 2) {
      Value t0 = kb.fdiv(xs[i], scales[i]);
      Value t1 = kb.fdiv(xs[i + 1], scales[i + 1]);
      auto [code0, code1] =
          kb.quantizeFp8Pair(encoding, t0, scales[i], t1, scales[i + 1]);
      codes.append({code0, code1});
    }
    return codes;
  }
  for (auto [x, scale] : llvm::zip(xs, scales))
    codes.push_back(kb.quantize(encoding, x, scale));
  return codes;
}

void CacheRowWriter::storeCodes(Value first, ArrayRef<Value> codes) {
  int64_t bits = codeBits(), perWord = 32 / bits;
  if (!shared.storageAligned && bits <= 8) {
    // Byte by byte: a code, or a pair of 4-bit codes, low nibble first.
    int64_t perByte = 8 / bits;
    Value byte = kb.divs(first, kb.index(perByte));
    for (size_t i = 0; i < codes.size(); i += perByte) {
      Value code = codes[i];
      if (perByte == 2) {
        Value high = kb.shl(codes[i + 1], kb.i32(4));
        code = kb.ori(code, high);
      }
      Value at = i ? kb.add(byte, kb.index(int64_t(i) / perByte)) : byte;
      kb.storeByte(code, w.storage, rowAddress(at));
    }
    return;
  }
  SmallVector<Value> words;
  for (size_t i = 0; i < codes.size(); i += perWord) {
    Value word = codes[i];
    for (size_t j = 1; j < size_t(perWord) && i + j < codes.size(); ++j) {
      Value shifted = kb.shl(codes[i + j], kb.i32(int32_t(j * bits)));
      word = kb.ori(word, shifted);
    }
    words.push_back(word);
  }
  Value bit = kb.mul(first, kb.index(bits));
  Value byte = kb.divs(bit, kb.index(8));
  kb.storeWordBytes(words, runBytes(), shared.storageAligned, w.storage,
                    rowAddress(byte));
}

void CacheRowWriter::storeRun(int64_t step) {
  auto [index, inRow] = runOf(step);
  Value first = kb.mul(index, kb.index(run()));
  SmallVector<Value> xs = runValues(step);
  std::optional<Nvfp4Group> group;
  if (type.getEncoding() == Encoding::nvfp4) {
    // A group's runs are consecutive lanes of one step: its max |x| is a
    // reduction over them (every lane takes part; lanes past the row are
    // whole groups of their own, the row being a multiple of 16).
    int64_t groupSize = encodingInfo(Encoding::nvfp4).groupScales.size;
    Value amax = laneMax(runAbsMax(xs, inRow), groupSize / run());
    group = nvfp4Group(kb, amax, scaleOf(first));
  }
  auto store = [&] {
    SmallVector<Value> codes = encodeRun(first, xs, group ? &*group : nullptr);
    storeCodes(first, codes);
    if (!group)
      return;
    int64_t groupSize = encodingInfo(Encoding::nvfp4).groupScales.size;
    Value inGroup = kb.rems(first, kb.index(groupSize));
    Value leads = kb.cmpi(arith::CmpIPredicate::eq, inGroup, kb.index(0));
    kb.ifThen(leads, [&] {
      kb.storeByte(group->scaleCode, w.groupScales,
                   rowAddress(kb.divs(first, kb.index(groupSize))));
    });
  };
  if (inRow)
    kb.ifThen(inRow, store);
  else
    store();
}

/// The row of a live slot: the fused rotary's prologue (each warp its own
/// row in shared memory), the token scale, then every run.
void writeRow(CacheRowWriter &writer, WriteCacheOp op, RotaryOp rotary,
              gpu::GPUFuncOp kernel, const WriteCacheKernel &w, Value slot) {
  KernelBuilder &kb = writer.kb;
  if (rotary) {
    // The warp prepares its row as pattn.rotary stores it (rounded to the
    // values' type), then quantizes it.
    RotaryArguments a =
        bindRotaryArguments(rotary, kernel.getArguments().slice(w.rotaryFirst));
    Value inHead = kb.add(writer.valueHead, kb.index(rotary.getFirstHead()));
    Type rounded = cast<MemRefType>(op.getValues().getType()).getElementType();
    Value warp = writer.shared.warp;
    emitRotaryRow(kb, rotary, a, writer.token, inHead, writer.shared.lane,
                  rounded, [&](Value channel, Value value) {
                    kb.store(kb.toF32(value), w.row, {warp, channel});
                  });
    kb.syncWarp();
  }
  std::tie(writer.page, writer.offset) =
      slotAddress(kb, slot, writer.type.getBlockSize());
  if (writer.type.getScale() == ScaleGranularity::token)
    writer.storeTokenScale();
  for (int64_t step = 0; step < writer.steps(); ++step)
    writer.storeRun(step);
}

} // namespace

int64_t pattn::writeCacheRowsPerWarp(CacheType type, RotaryOp rotary) {
  // A fused rotary prepares its row in the warp's shared-memory row.
  if (rotary)
    return 1;
  int64_t lanes = rowLanes(type.getEncoding(), type.getHeadDim(), false);
  return kWriteRowsPerWarp * (32 / lanes);
}

auto ::pattn::buildWriteCacheKernel(KernelModule &kernels, WriteCacheOp op,
                                    const CacheBuffers &cache, RotaryOp rotary)
    -> Kernel {
  OpBuilder builder(op.getContext());
  Location loc = op.getLoc();
  WriteCacheKernel w =
      createWriteCacheKernel(kernels, builder, op, cache, rotary);
  gpu::GPUFuncOp kernel = w.kernel.func;
  KernelBuilder kb(builder, loc);
  kb.hardwareFp8 = kernels.hardwareFp8;
  Value tid = kb.threadId();
  Value warp = kb.divs(tid, kb.index(32));
  Value lane = kb.rems(tid, kb.index(32));
  int64_t perWarp = writeCacheRowsPerWarp(cache.type, rotary);
  Value block = kb.blockId(gpu::Dimension::x);
  Value warpIndex = kb.add(kb.mul(block, kb.index(kWriteWarpsPerBlock)), warp);
  Value firstRow = kb.mul(warpIndex, kb.index(perWarp));
  Value kvHeads = kb.index(cache.type.getKvHeads());
  Value tokens = memref::DimOp::create(builder, loc, w.slots, 0);
  Value rows = kb.mul(tokens, kvHeads);
  Value lastRow = kb.sub(rows, kb.index(1));
  RowWriterShared shared{warp, lane, 32, lane, {}, {}, {}};
  shared.rowLanes =
      rowLanes(cache.type.getEncoding(), cache.type.getHeadDim(), bool(rotary));
  // A warp step covers rowsPerStep rows, rowLanes lanes each.
  int64_t rowsPerStep = 32 / shared.rowLanes;
  Value rowOfLane;
  if (rowsPerStep > 1) {
    shared.rowLane = kb.rems(lane, kb.index(shared.rowLanes));
    rowOfLane = kb.divs(lane, kb.index(shared.rowLanes));
  }
  if (cache.type.getScale() == ScaleGranularity::tensor)
    shared.tensorScale = kb.load(w.scale, {kb.index(0)});
  int64_t run = runChannels(cache.type.getEncoding(), cache.type.getHeadDim(),
                            bool(rotary));
  bool vectors = vectorRuns(cache.type.getEncoding());
  if (vectors && !rotary) {
    Type element = cast<MemRefType>(w.values.getType()).getElementType();
    int64_t bytes = run * element.getIntOrFloatBitWidth() / 8;
    shared.valuesAligned =
        kb.vectorAligned(w.values, std::min<int64_t>(bytes, 16));
  }
  int64_t codeBytes =
      run * encodingInfo(cache.type.getEncoding()).bitsPerCode / 8;
  if (vectors && codeBytes > 1)
    shared.storageAligned = kb.vectorAligned(w.storage, codeBytes);
  // The warp's rows (uniform over it), each clamped into the batch for its
  // loads: first every row's elements, then the slots, then the check's
  // verdicts, so that all of them are in flight together.
  SmallVector<CacheRowWriter> writers;
  SmallVector<Value> inside, slots;
  for (int64_t i = 0; i < perWarp / rowsPerStep; ++i) {
    Value row = kb.add(firstRow, kb.index(i * rowsPerStep));
    if (rowOfLane)
      row = kb.add(row, rowOfLane);
    inside.push_back(kb.cmpi(arith::CmpIPredicate::slt, row, rows));
    row = kb.mins(row, lastRow);
    CacheRowWriter writer{kb, cache.type, w,  shared, {}, {},
                          {}, {},         {}, {},     {}, {}};
    writer.token = kb.divs(row, kvHeads);
    writer.kvHead = kb.rems(row, kvHeads);
    // The values' head: the cache's kv head, past first_head of a packed
    // row.
    writer.valueHead = writer.kvHead;
    if (int64_t firstHead = op.getFirstHead())
      writer.valueHead = kb.add(writer.kvHead, kb.index(firstHead));
    if (!rotary)
      writer.preload();
    // Rows that differ by lane reduce their max |x| before the write's
    // branch, whose lanes diverge.
    if (rowsPerStep > 1 && cache.type.getScale() == ScaleGranularity::token)
      writer.tokenAmax = writer.rowAbsMax();
    writers.push_back(std::move(writer));
  }
  for (CacheRowWriter &writer : writers)
    slots.push_back(kb.load(w.slots, {writer.token}));
  Value passed = checksPassed(kb, verdictsOf(kernel), lane);
  for (int64_t i = 0; i < int64_t(writers.size()); ++i) {
    Value slot = slots[i];
    Value mapped = mappedSlot(kb, slot);
    Value live = kb.land(kb.land(passed, inside[i]), mapped);
    kb.ifThen(live, [&] { writeRow(writers[i], op, rotary, kernel, w, slot); });
  }
  gpu::ReturnOp::create(builder, loc);
  return w.kernel;
}

namespace {

/// Writes one token's record (pattn.write_record): the lanes of `record`
/// at (page, offset) of `storage`, from the token's latent and rope rows.
struct RecordWriter {
  RecordWriter(KernelBuilder &kb, RecordType record) : kb(kb), record(record) {}

  KernelBuilder &kb;
  RecordType record;
  LaneAttr latent, rope, latentScale, ropeScale, tokenLane;
  Value latentIn, ropeIn, storage, outerScale;
  Value token, tid, page, offset, isFirst;

  Value latentAt(Value i) { return kb.toF32(kb.load(latentIn, {token, i})); }
  Value ropeAt(Value i) { return kb.toF32(kb.load(ropeIn, {token, i})); }
  /// The index of byte `byte` of the lane at `laneOffset`.
  SmallVector<Value> byteAt(int64_t laneOffset, Value byte) {
    return {page, offset, kb.add(kb.index(laneOffset), byte)};
  }
  bool e2m1() const { return isa<Float4E2M1FNType>(latent.getElementType()); }

  void zeroGaps();
  /// The latent's outer scale (e2m1 latents only; null otherwise), and the
  /// per-token scale lane.
  Value writeOuterScale();
  void writeLatentPair(Value pair, Value outer);
  void writeRope();
};

void RecordWriter::zeroGaps() {
  // Zero every byte outside the lanes first, so a record is fully defined.
  SmallVector<std::pair<uint64_t, uint64_t>> gaps;
  uint64_t cursor = 0;
  SmallVector<LaneAttr> sorted(record.getLanes());
  llvm::sort(sorted, [](LaneAttr a, LaneAttr b) {
    return a.getOffset() < b.getOffset();
  });
  for (LaneAttr lane : sorted) {
    if (lane.getOffset() > cursor)
      gaps.push_back({cursor, lane.getOffset()});
    cursor = std::max<uint64_t>(cursor, lane.getEnd());
  }
  if (cursor < record.getBytes())
    gaps.push_back({cursor, record.getBytes()});
  for (auto [begin, end] : gaps)
    kb.forLoop(kb.add(tid, kb.index(begin)), kb.index(end),
               kb.index(kBlockThreads), {},
               [&](Value byte, ValueRange) -> SmallVector<Value> {
                 kb.storeByte(kb.i32(0), storage, {page, offset, byte});
                 return {};
               });
}

Value RecordWriter::writeOuterScale() {
  Value outer;
  if (e2m1()) {
    if (record.getMode() == ScaleGranularity::token)
      outer = kb.fdiv(rangeAbsMax(kb, latent.getCount(),
                                  [&](Value i) { return latentAt(i); }),
                      kb.f32(encodingInfo(Encoding::nvfp4).maxCodeMagnitude));
    else
      outer = kb.load(outerScale, {kb.index(0)});
  }
  if (tokenLane)
    kb.ifThen(isFirst, [&] {
      Value stored =
          record.getMode() == ScaleGranularity::token ? outer : kb.f32(0.0f);
      kb.storeF32Bytes(stored, storage,
                       byteAt(tokenLane.getOffset(), kb.index(0)));
    });
  return outer;
}

void RecordWriter::writeLatentPair(Value pair, Value outer) {
  int64_t group = latent.getCount() / latentScale.getCount();
  Value c0 = kb.mul(pair, kb.index(2));
  Value c1 = kb.add(c0, kb.index(1));
  Value groupIndex = kb.divs(c0, kb.index(group));
  Value groupBegin = kb.mul(groupIndex, kb.index(group));
  Value amax = rangeAbsMax(
      kb, group, [&](Value i) { return latentAt(kb.add(groupBegin, i)); });
  Value isGroupStart = kb.cmpi(arith::CmpIPredicate::eq, c0, groupBegin);
  if (e2m1()) {
    Nvfp4Group nv = nvfp4Group(kb, amax, outer);
    // One op-creating call per statement: the loads stay in order
    // whichever compiler evaluates the arguments.
    Value low = nv.code(kb, latentAt(c0));
    Value high = nv.code(kb, latentAt(c1));
    Value byte = kb.ori(low, kb.shl(high, kb.i32(4)));
    kb.storeByte(byte, storage, byteAt(latent.getOffset(), pair));
    kb.ifThen(isGroupStart, [&] {
      kb.storeByte(nv.scaleCode, storage,
                   byteAt(latentScale.getOffset(), groupIndex));
    });
    return;
  }
  // fp8_ds_mla: one fp32 scale amax / 448 per tile.
  float e4m3Largest = encodingInfo(Encoding::f8e4m3).maxCodeMagnitude;
  Value tileScale = kb.fdiv(amax, kb.f32(e4m3Largest));
  for (Value c : {c0, c1})
    kb.storeByte(kb.quantize(Encoding::f8e4m3, latentAt(c), tileScale), storage,
                 byteAt(latent.getOffset(), c));
  kb.ifThen(isGroupStart, [&] {
    kb.storeF32Bytes(
        tileScale, storage,
        byteAt(latentScale.getOffset(), kb.mul(groupIndex, kb.index(4))));
  });
}

void RecordWriter::writeRope() {
  // The rope: 16-bit values, or e4m3 with one fp32 scale rope_amax / 448.
  Value ropeScaleValue;
  if (ropeScale) {
    ropeScaleValue = kb.fdiv(
        rangeAbsMax(kb, rope.getCount(), [&](Value i) { return ropeAt(i); }),
        kb.f32(encodingInfo(Encoding::f8e4m3).maxCodeMagnitude));
    kb.ifThen(isFirst, [&] {
      kb.storeF32Bytes(ropeScaleValue, storage,
                       byteAt(ropeScale.getOffset(), kb.index(0)));
    });
  }
  Type ropeType = rope.getElementType();
  kb.forLoop(tid, kb.index(rope.getCount()), kb.index(kBlockThreads), {},
             [&](Value c, ValueRange) -> SmallVector<Value> {
               Value x = ropeAt(c);
               if (ropeScale)
                 kb.storeByte(kb.quantize(Encoding::f8e4m3, x, ropeScaleValue),
                              storage, byteAt(rope.getOffset(), c));
               else
                 kb.storeU16Bytes(
                     ropeType.isBF16() ? kb.encodeBF16Bits(x)
                                       : kb.encodeF16Bits(x),
                     storage, byteAt(rope.getOffset(), kb.mul(c, kb.index(2))));
               return {};
             });
}

} // namespace

auto ::pattn::buildWriteRecordKernel(KernelModule &kernels, WriteRecordOp op,
                                     const RecordBuffers &cache) -> Kernel {
  OpBuilder builder(op.getContext());
  Location loc = op.getLoc();
  SmallVector<Value> operands = {op.getLatent(), op.getRope(), op.getSlots(),
                                 cache.storage};
  if (op.getOuterScale())
    operands.push_back(op.getOuterScale());
  Kernel result = kernels.create(builder, loc, "pattn_write_record", operands,
                                 {flagsType(op.getContext())}, {});
  gpu::GPUFuncOp kernel = result.func;
  KernelBuilder kb(builder, loc);
  RecordType record = cache.type.getRecord();
  RecordWriter w(kb, record);
  w.latent = record.getLane("latent");
  w.rope = record.getLane("rope");
  w.latentScale = record.getLane(w.latent.getScaleLane());
  if (w.rope.isScaled())
    w.ropeScale = record.getLane(w.rope.getScaleLane());
  w.tokenLane = record.getLane("token_scale");
  w.latentIn = kernel.getArgument(0);
  w.ropeIn = kernel.getArgument(1);
  Value slots = kernel.getArgument(2);
  w.storage = kernel.getArgument(3);
  w.outerScale = op.getOuterScale() ? kernel.getArgument(4) : Value();

  w.token = kb.blockId(gpu::Dimension::x);
  w.tid = kb.threadId();
  Value slot = kb.load(slots, {w.token});
  Value lane = kb.rems(w.tid, kb.index(kWarpThreads));
  Value live = writesSlot(kb, kernel, slot, lane);
  kb.ifThen(live, [&] {
    std::tie(w.page, w.offset) =
        slotAddress(kb, slot, cache.type.getBlockSize());
    w.isFirst = kb.cmpi(arith::CmpIPredicate::eq, w.tid, kb.index(0));
    w.zeroGaps();
    Value outer = w.writeOuterScale();
    kb.forLoop(w.tid, kb.index(w.latent.getCount() / 2),
               kb.index(kBlockThreads), {},
               [&](Value pair, ValueRange) -> SmallVector<Value> {
                 w.writeLatentPair(pair, outer);
                 return {};
               });
    w.writeRope();
  });
  gpu::ReturnOp::create(builder, loc);
  return result;
}
