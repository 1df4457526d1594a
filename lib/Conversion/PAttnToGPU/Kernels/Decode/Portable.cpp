//===- Portable.cpp - The portable split-KV decode kernels ----------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the portable (fp32) decode of pattn.paged_attention
// and pattn.mla_decode. A decode block owns one (query token, head) and one
// split of the keys: 128 threads score 128 keys at a time into shared
// memory, then accumulate the softmax-weighted values with each thread
// owning a slice of the output channels (online softmax across chunks). A
// merge block per (token, head) combines the splits, adds the sinks, applies
// the output channel scale and rounds once. Caches are read through a
// KVSource, so paged caches of every encoding and MLA records share the
// kernel skeleton.
//
//===----------------------------------------------------------------------===//

#include "Kernels/Codecs/Codecs.h"
#include "Kernels/Common/KernelBuilder.h"
#include "Kernels/Kernels.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>
#include <limits>
#include <optional>

using namespace mlir;
using namespace pattn;

namespace {

/// A cached token as the kernel addresses it.
struct Row {
  Value page;   ///< physical page (index)
  Value offset; ///< slot within the page (index)
  Value kvHead; ///< index
};

/// Reads dequantized K and V elements. Host operands are collected first;
/// once the kernel exists, `bind` maps them to the kernel's arguments.
class KVSource {
public:
  virtual ~KVSource() = default;
  /// Channels of K (the query's head_dim) and of V (the output's).
  virtual int64_t keyDim() const = 0;
  virtual int64_t valueDim() const = 0;
  virtual int64_t kvHeads() const = 0;
  /// fp32 dots of K[row] with the `heads` query rows in the workgroup
  /// buffer `query` (row j at j * keyDim()), all K scales applied. The key
  /// is loaded and dequantized once for all heads.
  virtual SmallVector<Value> keyDots(KernelBuilder &kb, const Row &row,
                                     Value query, int64_t heads) = 0;
  /// How many consecutive value channels one thread reads at a time when a
  /// block serves `heads` heads: a divisor of valueDim() small enough that
  /// heads x elements accumulators stay in registers.
  virtual int64_t valueVectorElements(int64_t heads) const = 0;
  /// True when keys and values are plain f16/bf16: their decode needs few
  /// registers.
  virtual bool decodesCheaply() const { return false; }
  /// V[row][first, first + elements) as fp32, all V scales applied.
  virtual SmallVector<Value> valueVector(KernelBuilder &kb, const Row &row,
                                         Value first, int64_t elements) = 0;

  SmallVector<Value> hostOperands;
  /// Kernel-side values, parallel to hostOperands.
  SmallVector<Value> kernelOperands;
  void bind(ValueRange arguments) {
    kernelOperands.assign(arguments.begin(), arguments.end());
  }

protected:
  /// Registers a host operand (may be null) and returns its position.
  int add(Value value) {
    if (!value)
      return -1;
    hostOperands.push_back(value);
    return hostOperands.size() - 1;
  }
  Value get(int position) const {
    return position < 0 ? Value() : kernelOperands[position];
  }
};

//===----------------------------------------------------------------------===//
// Paged caches
//===----------------------------------------------------------------------===//

/// One side (K or V) of a paged cache.
struct PagedSide {
  CacheType type;
  int storage = -1, groupScales = -1, tokenScales = -1, scale = -1;
};

class PagedSource : public KVSource {
public:
  PagedSource(const CacheBuffers &key, Value keyScale,
              const CacheBuffers &value, Value valueScale) {
    this->key = describe(key, keyScale);
    this->value = describe(value, valueScale);
    keyScaleHost = keyScale;
  }

  int64_t keyDim() const override { return key.type.getHeadDim(); }
  bool decodesCheaply() const override {
    auto plain = [](const PagedSide &side) {
      Encoding encoding = side.type.getEncoding();
      return encoding == Encoding::f16 || encoding == Encoding::bf16;
    };
    return plain(key) && plain(value);
  }
  int64_t valueDim() const override { return value.type.getHeadDim(); }
  int64_t kvHeads() const override { return key.type.getKvHeads(); }

  /// The key row is read in aligned vectors of up to 16 bytes and each
  /// 32-bit word is decoded with shifts and masks (its element positions are
  /// constants), so there is one load per vector instead of one per code;
  /// the query rows are read from shared memory as vectors too.
  SmallVector<Value> keyDots(KernelBuilder &kb, const Row &row, Value query,
                             int64_t heads) override {
    int64_t dim = key.type.getHeadDim();
    int64_t rowBytes = key.type.getRowBytes();
    int64_t vectorBytes = rowBytes % 16 == 0 ? 16 : rowBytes % 8 == 0 ? 8 : 4;
    int64_t perWord = elementsPerWord(key.type.getEncoding());
    int64_t perVector = perWord * vectorBytes / 4;
    auto queryType = VectorType::get({perVector}, kb.b.getF32Type());

    SmallVector<Value> sums = kb.forLoop(
        kb.index(0), kb.index(rowBytes), kb.index(vectorBytes),
        SmallVector<Value>(heads, kb.f32(0.0f)),
        [&](Value byte, ValueRange carried) -> SmallVector<Value> {
          // The first channel of this vector.
          Value firstChannel =
              kb.divs(kb.mul(byte, kb.index(perWord)), kb.index(4));
          SmallVector<Value> elements =
              readVector(kb, key, row, byte, vectorBytes, firstChannel);
          SmallVector<Value> next;
          for (int64_t j = 0; j < heads; ++j) {
            Value q = vector::LoadOp::create(
                kb.b, kb.loc, queryType, query,
                ValueRange{kb.add(firstChannel, kb.index(j * dim))},
                /*nontemporal=*/false, llvm::MaybeAlign(4 * perVector));
            Value sum = carried[j];
            for (int64_t e = 0; e < perVector; ++e)
              sum = kb.fma(vector::ExtractOp::create(kb.b, kb.loc, q, e),
                           elements[e], sum);
            next.push_back(sum);
          }
          return next;
        });
    Value outer = outerScale(kb, key, row);
    for (Value &sum : sums)
      sum = kb.fmul(sum, outer);
    return sums;
  }

  /// Value rows are read as aligned vectors of 16 bytes where the registers
  /// allow (heads x elements <= 64 accumulators), else 8 or 4.
  int64_t valueVectorElements(int64_t heads) const override {
    int64_t rowBytes = value.type.getRowBytes();
    int64_t perWord = elementsPerWord(value.type.getEncoding());
    for (int64_t bytes : {16, 8})
      if (rowBytes % bytes == 0 && heads * perWord * bytes / 4 <= 64)
        return perWord * bytes / 4;
    return perWord;
  }

  SmallVector<Value> valueVector(KernelBuilder &kb, const Row &row, Value first,
                                 int64_t elements) override {
    int64_t perWord = elementsPerWord(value.type.getEncoding());
    Value byte = kb.divs(kb.mul(first, kb.index(4)), kb.index(perWord));
    SmallVector<Value> values =
        readVector(kb, value, row, byte, elements / perWord * 4, first);
    Value outer = outerScale(kb, value, row);
    for (Value &v : values)
      v = kb.fmul(v, outer);
    return values;
  }

private:
  PagedSide key, value;
  Value keyScaleHost;

  PagedSide describe(const CacheBuffers &buffers, Value scale) {
    PagedSide side;
    side.type = buffers.type;
    side.storage = add(buffers.storage);
    side.groupScales = add(buffers.groupScales);
    side.tokenScales = add(buffers.tokenScales);
    side.scale = add(scale);
    return side;
  }

  /// Indices of byte `byte` of `row` in the storage (or of entry `byte` in
  /// the group-scale buffer, which shares the page layout).
  SmallVector<Value> address(const PagedSide &side, const Row &row,
                             Value byte) const {
    if (side.type.getLayout() == Layout::hnd)
      return {row.page, row.kvHead, row.offset, byte};
    return {row.page, row.offset, row.kvHead, byte};
  }

  /// The elements of `bytes` bytes of `side`'s row starting at byte `byte`
  /// (channel `firstChannel`), read as one aligned vector load and decoded
  /// word by word, with group and channel scales applied (not the outer one).
  /// A channel scale multiplies its code, `code * s` as SPEC §2 defines
  /// dequantization: multiplying the query by s instead would overflow where
  /// a huge scale meets a zero code (the fold trap, in fp32).
  SmallVector<Value> readVector(KernelBuilder &kb, const PagedSide &side,
                                const Row &row, Value byte, int64_t bytes,
                                Value firstChannel) {
    MLIRContext *context = kb.b.getContext();
    Encoding encoding = side.type.getEncoding();
    int64_t perWord = elementsPerWord(encoding);
    auto bytesType = VectorType::get({bytes}, IntegerType::get(context, 8));
    auto wordsType = VectorType::get({bytes / 4}, kb.b.getI32Type());
    Value loaded = vector::LoadOp::create(
        kb.b, kb.loc, bytesType, get(side.storage), address(side, row, byte),
        /*nontemporal=*/false, llvm::MaybeAlign(bytes));
    Value words = vector::BitCastOp::create(kb.b, kb.loc, wordsType, loaded);
    SmallVector<Value> elements;
    for (int64_t w = 0; w < bytes / 4; ++w) {
      Value word = vector::ExtractOp::create(kb.b, kb.loc, words, w);
      Value wordChannel = kb.add(firstChannel, kb.index(w * perWord));
      SmallVector<Value> decoded = decodeWord(kb, encoding, word);
      Value groupScale;
      if (encoding == Encoding::nvfp4)
        groupScale = kb.decodeE4M3(kb.loadByte(
            get(side.groupScales),
            address(side, row, kb.divs(wordChannel, kb.index(16)))));
      for (int64_t k = 0; k < perWord; ++k) {
        Value element = decoded[k];
        if (groupScale)
          element = kb.fmul(element, groupScale);
        if (side.type.getScale() == ScaleGranularity::channel)
          element = kb.fmul(
              element, kb.load(get(side.scale),
                               {row.kvHead, kb.add(wordChannel, kb.index(k))}));
        elements.push_back(element);
      }
    }
    return elements;
  }

  /// The scale applied once per row: tensor, token, or 1 (none, channel).
  Value outerScale(KernelBuilder &kb, const PagedSide &side, const Row &row) {
    switch (side.type.getScale()) {
    case ScaleGranularity::tensor:
      return kb.load(get(side.scale), {kb.index(0)});
    case ScaleGranularity::token:
      return kb.load(get(side.tokenScales), {row.page, row.offset, row.kvHead});
    case ScaleGranularity::none:
    case ScaleGranularity::channel:
      return kb.f32(1.0f);
    }
    llvm_unreachable("unknown granularity");
  }
};

//===----------------------------------------------------------------------===//
// Record caches (MLA)
//===----------------------------------------------------------------------===//

class RecordSource : public KVSource {
public:
  RecordSource(const RecordBuffers &cache, Value outerScale)
      : record(cache.type.getRecord()) {
    storage = add(cache.storage);
    outer = add(outerScale);
    latent = record.getLane("latent");
    rope = record.getLane("rope");
  }

  int64_t keyDim() const override {
    return int64_t(latent.getCount()) + rope.getCount();
  }
  int64_t valueDim() const override { return latent.getCount(); }
  int64_t kvHeads() const override { return 1; }

  SmallVector<Value> keyDots(KernelBuilder &kb, const Row &row, Value query,
                             int64_t heads) override {
    SmallVector<Value> latentSums = laneDots(kb, row, latent, query, 0, heads);
    SmallVector<Value> ropeSums =
        laneDots(kb, row, rope, query, latent.getCount(), heads);
    for (int64_t j = 0; j < heads; ++j)
      latentSums[j] = kb.fadd(latentSums[j], ropeSums[j]);
    return latentSums;
  }

  /// Four latent channels per thread: 128 threads then cover a 512-wide
  /// latent without splitting keys across threads.
  int64_t valueVectorElements(int64_t heads) const override {
    return latent.getCount() % 4 == 0 ? 4 : 1;
  }

  SmallVector<Value> valueVector(KernelBuilder &kb, const Row &row, Value first,
                                 int64_t elements) override {
    Value outer = laneOuterScale(kb, row, latent);
    SmallVector<Value> values;
    int64_t bits = latent.getElementType().getIntOrFloatBitWidth();
    int64_t width = elements * bits / 8;
    if (runBytes(latent) && width >= 2 && (width == 2 || width % 4 == 0) &&
        latent.getOffset() % width == 0) {
      for (Value value : laneRun(kb, row, latent, first, width))
        values.push_back(kb.fmul(value, outer));
      return values;
    }
    for (int64_t k = 0; k < elements; ++k)
      values.push_back(kb.fmul(
          laneElement(kb, row, latent, kb.add(first, kb.index(k))), outer));
    return values;
  }

private:
  RecordType record;
  LaneAttr latent, rope;
  int storage = -1, outer = -1;

  /// Dots of `lane` with query channels [queryOffset, queryOffset + count)
  /// of each of the `heads` query rows.
  SmallVector<Value> laneDots(KernelBuilder &kb, const Row &row, LaneAttr lane,
                              Value query, int64_t queryOffset, int64_t heads) {
    int64_t dim = keyDim();
    Value outer = laneOuterScale(kb, row, lane);
    if (int64_t width = runBytes(lane)) {
      // One aligned `width`-byte load per step, decoded word by word.
      int64_t perRun =
          width * 8 / lane.getElementType().getIntOrFloatBitWidth();
      SmallVector<Value> sums = kb.forLoop(
          kb.index(0), kb.index(lane.getCount()), kb.index(perRun),
          SmallVector<Value>(heads, kb.f32(0.0f)),
          [&](Value first, ValueRange carried) -> SmallVector<Value> {
            SmallVector<Value> elements = laneRun(kb, row, lane, first, width);
            SmallVector<Value> next(carried.begin(), carried.end());
            for (auto [k, element] : llvm::enumerate(elements))
              for (int64_t j = 0; j < heads; ++j) {
                Value q = kb.load(
                    query, {kb.add(first, kb.index(j * dim + queryOffset +
                                                   int64_t(k)))});
                next[j] = kb.fma(q, element, next[j]);
              }
            return next;
          });
      for (Value &sum : sums)
        sum = kb.fmul(sum, outer);
      return sums;
    }
    SmallVector<Value> sums = kb.forLoop(
        kb.index(0), kb.index(lane.getCount()), kb.index(1),
        SmallVector<Value>(heads, kb.f32(0.0f)),
        [&](Value channel, ValueRange carried) -> SmallVector<Value> {
          Value element = laneElement(kb, row, lane, channel);
          SmallVector<Value> next;
          for (int64_t j = 0; j < heads; ++j) {
            Value q = kb.load(
                query, {kb.add(channel, kb.index(j * dim + queryOffset))});
            next.push_back(kb.fma(q, element, carried[j]));
          }
          return next;
        });
    for (Value &sum : sums)
      sum = kb.fmul(sum, outer);
    return sums;
  }

  /// The paged encoding whose word decoder reads `type` codes, if any (f32
  /// lanes hold scales and are read one by one).
  static std::optional<Encoding> wordEncoding(Type type) {
    if (type.isF16())
      return Encoding::f16;
    if (type.isBF16())
      return Encoding::bf16;
    if (isa<Float8E4M3FNType>(type))
      return Encoding::f8e4m3;
    if (isa<Float8E5M2Type>(type))
      return Encoding::f8e5m2;
    if (isa<Float4E2M1FNType>(type))
      return Encoding::nvfp4; // its codes; the group scale is the lane's
    if (type.isInteger(8))
      return Encoding::i8;
    return std::nullopt;
  }

  /// The widest vector read (16, 8 or 4 bytes) that tiles `lane` with
  /// aligned loads, or 0 when its elements are read one by one. Records are
  /// multiples of 16 bytes, so the lane's offset decides the alignment.
  static int64_t runBytes(LaneAttr lane) {
    if (!wordEncoding(lane.getElementType()))
      return 0;
    int64_t bytes =
        lane.getCount() * lane.getElementType().getIntOrFloatBitWidth() / 8;
    for (int64_t width : {16, 8, 4})
      if (lane.getOffset() % width == 0 && bytes % width == 0)
        return width;
    return 0;
  }

  /// Elements [first, first + width * 8 / bits) of `lane` from one aligned
  /// load of `width` bytes (2, 4, 8 or 16), with its scale lane applied;
  /// `first` is a multiple of that count.
  SmallVector<Value> laneRun(KernelBuilder &kb, const Row &row, LaneAttr lane,
                             Value first, int64_t width) {
    MLIRContext *context = kb.b.getContext();
    Type type = lane.getElementType();
    int64_t bits = type.getIntOrFloatBitWidth();
    int64_t count = width * 8 / bits, perWord = 32 / bits;
    Value byte = kb.add(kb.index(lane.getOffset()),
                        kb.divs(kb.mul(first, kb.index(bits)), kb.index(8)));
    Value loaded = vector::LoadOp::create(
        kb.b, kb.loc, VectorType::get({width}, IntegerType::get(context, 8)),
        get(storage), byteAddress(kb, row, byte), /*nontemporal=*/false,
        llvm::MaybeAlign(width));
    SmallVector<Value> words;
    if (width == 2) {
      auto halfType = IntegerType::get(context, 16);
      Value half = vector::ExtractOp::create(
          kb.b, kb.loc,
          vector::BitCastOp::create(kb.b, kb.loc,
                                    VectorType::get({1}, halfType), loaded),
          0);
      words.push_back(
          arith::ExtUIOp::create(kb.b, kb.loc, kb.b.getI32Type(), half));
    } else {
      Value packed = vector::BitCastOp::create(
          kb.b, kb.loc, VectorType::get({width / 4}, kb.b.getI32Type()),
          loaded);
      for (int64_t w = 0; w < width / 4; ++w)
        words.push_back(vector::ExtractOp::create(kb.b, kb.loc, packed, w));
    }
    std::optional<LaneAttr> scaleLane;
    int64_t group = 0;
    if (lane.isScaled()) {
      scaleLane = record.getLane(lane.getScaleLane());
      group = lane.getCount() / scaleLane->getCount();
    }
    auto scaleOf = [&](Value channel) {
      return decodeLaneValue(kb, row, *scaleLane,
                             kb.divs(channel, kb.index(group)));
    };
    SmallVector<Value> elements;
    for (auto [w, word] : llvm::enumerate(words)) {
      SmallVector<Value> decoded = decodeWord(kb, *wordEncoding(type), word);
      Value wordChannel = kb.add(first, kb.index(int64_t(w) * perWord));
      // A word never straddles a group when the group is a multiple of it.
      Value wordScale =
          scaleLane && group % perWord == 0 ? scaleOf(wordChannel) : Value();
      for (int64_t k = 0; k < perWord && int64_t(elements.size()) < count;
           ++k) {
        Value element = decoded[k];
        if (scaleLane)
          element = kb.fmul(
              element, wordScale ? wordScale
                                 : scaleOf(kb.add(wordChannel, kb.index(k))));
        elements.push_back(element);
      }
    }
    return elements;
  }

  SmallVector<Value> byteAddress(KernelBuilder &kb, const Row &row,
                                 Value byte) const {
    return {row.page, row.offset, byte};
  }

  /// Element `channel` of `lane`, with its scale lane applied.
  Value laneElement(KernelBuilder &kb, const Row &row, LaneAttr lane,
                    Value channel) {
    Value value = decodeLaneValue(kb, row, lane, channel);
    if (!lane.isScaled())
      return value;
    LaneAttr scaleLane = record.getLane(lane.getScaleLane());
    int64_t group = lane.getCount() / scaleLane.getCount();
    Value scale =
        decodeLaneValue(kb, row, scaleLane, kb.divs(channel, kb.index(group)));
    return kb.fmul(value, scale);
  }

  /// The raw value of element `channel` of `lane`.
  Value decodeLaneValue(KernelBuilder &kb, const Row &row, LaneAttr lane,
                        Value channel) {
    Value base = kb.index(lane.getOffset());
    Type type = lane.getElementType();
    Value data = get(storage);
    if (type.isF32())
      return kb.loadF32Bytes(
          data,
          byteAddress(kb, row, kb.add(base, kb.mul(channel, kb.index(4)))));
    if (type.isF16() || type.isBF16()) {
      Value bits = kb.loadU16Bytes(
          data,
          byteAddress(kb, row, kb.add(base, kb.mul(channel, kb.index(2)))));
      return type.isF16() ? kb.decodeF16Bits(bits) : kb.decodeBF16Bits(bits);
    }
    if (isa<Float4E2M1FNType>(type)) {
      Value byte = kb.loadByte(
          data,
          byteAddress(kb, row, kb.add(base, kb.divs(channel, kb.index(2)))));
      Value shift = kb.mul(kb.toI32(kb.rems(channel, kb.index(2))), kb.i32(4));
      return kb.decodeE2M1(kb.andi(kb.shru(byte, shift), kb.i32(0xF)));
    }
    Value byte = kb.loadByte(data, byteAddress(kb, row, kb.add(base, channel)));
    if (isa<Float8E4M3FNType>(type))
      return kb.decodeE4M3(byte);
    if (isa<Float8E5M2Type>(type))
      return kb.decodeE5M2(byte);
    Value signedCode = kb.sub(
        arith::XOrIOp::create(kb.b, kb.loc, byte, kb.i32(0x80)), kb.i32(0x80));
    return kb.toF32(signedCode);
  }

  /// The record's outer scale for e2m1 lanes; 1 for every other lane.
  Value laneOuterScale(KernelBuilder &kb, const Row &row, LaneAttr lane) {
    if (!isa<Float4E2M1FNType>(lane.getElementType()))
      return kb.f32(1.0f);
    if (record.getMode() == ScaleGranularity::token)
      return decodeLaneValue(kb, row, record.getLane("token_scale"),
                             kb.index(0));
    return kb.load(get(outer), {kb.index(0)});
  }
};

//===----------------------------------------------------------------------===//
// The kernel skeleton
//===----------------------------------------------------------------------===//

/// What the skeleton needs to know about the attention op.
/// Decode blocks that must fit on one SM at once (the register budget).
constexpr int32_t kDecodeBlocksPerSM = 4;

struct DecodeParams {
  Location loc;
  Value query = {}, blockTable = {}, seqLens = {}, queryStart = {}, guard = {},
        queryExponents = {}, sinks = {}, outScale = {}, out = {};
  int32_t guardValue = 0;
  int64_t numHeads = 0;
  int64_t blockSize = 0;
  float softmaxScale = 1.0f;
  float softcap = 0.0f;
  int64_t window = -1;
};

/// True when the guard (if any) lets this launch run.
Value guardAllows(KernelBuilder &kb, Value guard, int32_t guardValue) {
  if (!guard)
    return kb.boolean(true);
  Value flag = kb.load(guard, {kb.index(0)});
  return kb.cmpi(arith::CmpIPredicate::eq, flag, kb.i32(guardValue));
}

} // namespace

MemRefType pattn::workspaceOutputType(MLIRContext *context, int64_t valueDim) {
  return MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic, valueDim},
                         Float32Type::get(context));
}

MemRefType pattn::workspaceStatsType(MLIRContext *context) {
  return MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic, 2},
                         Float32Type::get(context));
}

void pattn::setLaunchBounds(gpu::GPUFuncOp kernel, int64_t threads,
                            int64_t blocksPerSM) {
  Builder builder(kernel.getContext());
  kernel->setAttr(NVVM::NVVMDialect::getMaxntidAttrName(),
                  builder.getDenseI32ArrayAttr({int32_t(threads), 1, 1}));
  kernel->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                  builder.getI32IntegerAttr(int32_t(blocksPerSM)));
}

std::tuple<Value, Value, Value> pattn::findQuerySequence(KernelBuilder &kb,
                                                         Value token,
                                                         Value queryStart,
                                                         Value perSequence) {
  if (!queryStart)
    return {token, kb.i32(1), kb.i32(0)};
  // The batch is small (one entry per sequence): a linear scan is fine.
  Value batch = memref::DimOp::create(kb.b, kb.loc, perSequence, 0);
  Value token32 = kb.toI32(token);
  SmallVector<Value> found =
      kb.forLoop(kb.index(0), batch, kb.index(1), {kb.index(0)},
                 [&](Value b, ValueRange carried) -> SmallVector<Value> {
                   Value begin = kb.load(queryStart, {b});
                   Value owns =
                       kb.cmpi(arith::CmpIPredicate::sge, token32, begin);
                   return {kb.select(owns, b, carried[0])};
                 });
  Value sequence = found[0];
  Value begin = kb.load(queryStart, {sequence});
  Value end = kb.load(queryStart, {kb.add(sequence, kb.index(1))});
  return {sequence, kb.sub(end, begin), kb.sub(token32, begin)};
}

namespace {

Value negInf(KernelBuilder &kb) {
  return kb.f32(-std::numeric_limits<float>::infinity());
}

Value isNegInf(KernelBuilder &kb, Value x) {
  return kb.cmpf(arith::CmpFPredicate::OEQ, x, negInf(kb));
}

/// exp(x - m), or 0 when x is -inf (also when m is).
Value weight(KernelBuilder &kb, Value x, Value m) {
  Value e = kb.exp(kb.fsub(x, m));
  return kb.select(isNegInf(kb, x), kb.f32(0.0f), e);
}

gpu::GPUFuncOp buildDecodeKernel(KernelModule &kernels, KVSource &source,
                                 const DecodeParams &p, PortablePlanAttr plan,
                                 SmallVectorImpl<Value> &hostOperands) {
  // Each key row is loaded and dequantized once for the block's heads.
  int64_t keysPerSplit = plan.getKeysPerSplit();
  MLIRContext *context = p.query.getContext();
  OpBuilder builder(context);
  Type f32 = Float32Type::get(context), i32 = IntegerType::get(context, 32);
  int64_t keyDim = source.keyDim(), valueDim = source.valueDim();
  int64_t kvHeads = source.kvHeads();
  int64_t group = p.numHeads / kvHeads;
  int64_t heads = plan.getHeadsPerBlock();
  int64_t headGroups = group / heads;

  // Kernel arguments: the op's buffers, the source's, then the workspace.
  hostOperands.assign({p.query, p.blockTable, p.seqLens});
  if (p.queryStart)
    hostOperands.push_back(p.queryStart);
  if (p.guard)
    hostOperands.push_back(p.guard);
  if (p.queryExponents)
    hostOperands.push_back(p.queryExponents);
  unsigned sourceBegin = hostOperands.size();
  llvm::append_range(hostOperands, source.hostOperands);
  SmallVector<Type> argTypes = llvm::to_vector(
      llvm::map_range(hostOperands, [](Value v) { return v.getType(); }));
  argTypes.push_back(workspaceOutputType(context, valueDim));
  argTypes.push_back(workspaceStatsType(context));

  auto workgroup = [&](int64_t size, Type element) -> Type {
    return MemRefType::get(
        {size}, element, AffineMap(),
        gpu::AddressSpaceAttr::get(context, gpu::AddressSpace::Workgroup));
  };
  // How the value side is spread over the threads: each thread reads
  // `elements` consecutive channels of a row as one vector; when a row needs
  // fewer than 128 threads, the block reads `lanes` keys at once and sums
  // the lanes' partial outputs at the end.
  int64_t elements = source.valueVectorElements(heads);
  int64_t vectorsPerRow = valueDim / elements;
  int64_t lanes = std::max<int64_t>(1, kBlockThreads / vectorsPerRow);
  int64_t vectorsPerThread =
      lanes == 1 ? llvm::divideCeil(vectorsPerRow, kBlockThreads) : 1;
  int64_t accumulators = vectorsPerThread * elements;
  int64_t reduceStride = valueDim + 1; // a lane's head: outputs, then sum

  // Shared memory: the block's query rows (reused for the lanes' partial
  // outputs once the keys are done), then per chunk each head's logits
  // (overwritten by its softmax weights) and each key's page slot.
  int64_t scratch =
      std::max(heads * keyDim, lanes > 1 ? lanes * heads * reduceStride : 0);
  gpu::GPUFuncOp kernel = kernels.create(
      builder, p.loc, "pattn_decode", argTypes,
      {workgroup(scratch, f32), workgroup(heads * kBlockThreads, f32),
       workgroup(kBlockThreads, i32), workgroup(kBlockThreads, i32)});
  // Where the kernel would need more than 128 registers (code decoding, or
  // 64+ accumulators), ask for 4 blocks of 128 threads per SM: ptxas then
  // stays within 128 registers instead of landing at 130-140 and fitting
  // only 3 blocks. A light f16 kernel (~72 registers) is left alone: with
  // the bound ptxas spends registers up to 128 and loses occupancy.
  // (H200, bench/results/2026-11-29-h200-portable-decode.md.)
  if (!source.decodesCheaply() || heads * accumulators >= 64)
    setLaunchBounds(kernel, kBlockThreads, kDecodeBlocksPerSM);
  KernelBuilder kb(builder, p.loc);
  kb.hardwareFp8 = kernels.hardwareFp8;
  kb.hardwareFp4 = kernels.hardwareFp4;

  unsigned arg = 0;
  auto next = [&]() { return kernel.getArgument(arg++); };
  Value query = next(), blockTable = next(), seqLens = next();
  Value queryStart = p.queryStart ? next() : Value();
  Value guard = p.guard ? next() : Value();
  Value queryExponents = p.queryExponents ? next() : Value();
  source.bind(
      kernel.getArguments().slice(sourceBegin, source.hostOperands.size()));
  arg = sourceBegin + source.hostOperands.size();
  Value partialOut = next(), partialStats = next();
  Value querySmem = kernel.getWorkgroupAttributions()[0];
  Value scores = kernel.getWorkgroupAttributions()[1];
  Value pages = kernel.getWorkgroupAttributions()[2];
  Value offsets = kernel.getWorkgroupAttributions()[3];

  // blockId.y = (token * kvHeads + kvHead) * headGroups + headGroup.
  Value tid = kb.threadId();
  Value split = kb.blockId(gpu::Dimension::x);
  Value row = kb.blockId(gpu::Dimension::y);
  Value token = kb.divs(row, kb.index(kvHeads * headGroups));
  Value kvHead = kb.rems(kb.divs(row, kb.index(headGroups)), kb.index(kvHeads));
  Value firstHead =
      kb.add(kb.mul(kvHead, kb.index(group)),
             kb.mul(kb.rems(row, kb.index(headGroups)), kb.index(heads)));
  Value lane = lanes > 1 ? kb.divs(tid, kb.index(vectorsPerRow)) : kb.index(0);
  Value firstVector = lanes > 1 ? kb.rems(tid, kb.index(vectorsPerRow)) : tid;
  Value active = lanes > 1 ? kb.cmpi(arith::CmpIPredicate::slt, tid,
                                     kb.index(lanes * vectorsPerRow))
                           : kb.boolean(true);
  auto at = [&](int64_t j, Value i) {
    return kb.add(kb.index(j * kBlockThreads), i);
  };

  kb.ifThen(guardAllows(kb, guard, p.guardValue), [&] {
    auto [sequence, queryTokens, position] =
        findQuerySequence(kb, token, queryStart, blockTable);
    Value length = kb.load(seqLens, {sequence});
    // Query token i of n sits at kv position L - n + i and sees keys up to
    // its own position (causal among the speculative tokens).
    Value queryPos = kb.add(kb.sub(length, queryTokens), position);
    Value end = kb.mins(length, kb.add(queryPos, kb.i32(1)));
    Value begin = kb.i32(0);
    if (p.window > 0)
      begin =
          kb.maxs(begin, kb.add(kb.sub(queryPos, kb.i32(p.window)), kb.i32(1)));
    Value splitBegin = kb.mul(kb.toI32(split), kb.i32(keysPerSplit));
    Value first = kb.maxs(begin, splitBegin);
    Value last = kb.mins(end, kb.add(splitBegin, kb.i32(keysPerSplit)));
    Value maxBlocks =
        kb.toI32(memref::DimOp::create(kb.b, kb.loc, blockTable, 1));

    // The block's query rows in shared memory as fp32.
    kb.forLoop(tid, kb.index(heads * keyDim), kb.index(kBlockThreads), {},
               [&](Value c, ValueRange) -> SmallVector<Value> {
                 Value head = kb.add(firstHead, kb.divs(c, kb.index(keyDim)));
                 Value channel = kb.rems(c, kb.index(keyDim));
                 kb.store(kb.toF32(kb.load(query, {token, head, channel})),
                          querySmem, {c});
                 return {};
               });
    kb.barrier();

    // Each head's logit scale: softmax_scale, times 2^e for the row
    // exponents of a folded query (exact; saturating, never inf).
    SmallVector<Value> logitScales(heads, kb.f32(p.softmaxScale));
    if (queryExponents)
      for (int64_t j = 0; j < heads; ++j) {
        Value head = kb.add(firstHead, kb.index(j));
        Value exponent = kb.load(queryExponents, {token, head});
        logitScales[j] = kb.ldexpSaturating(logitScales[j], exponent);
      }

    // Carried per head j: max, this lane's sum, then its accumulators
    // (vector s, element e at 2 + s * elements + e).
    int64_t perHead = 2 + accumulators;
    auto maxOf = [&](int64_t j) { return j * perHead; };
    auto sumOf = [&](int64_t j) { return j * perHead + 1; };
    auto accOf = [&](int64_t j, int64_t a) { return j * perHead + 2 + a; };
    SmallVector<Value> init;
    for (int64_t j = 0; j < heads; ++j) {
      init.append({negInf(kb), kb.f32(0.0f)});
      for (int64_t a = 0; a < accumulators; ++a)
        init.push_back(kb.f32(0.0f));
    }
    SmallVector<Value> state = kb.forLoop(
        kb.toIndex(first), kb.toIndex(kb.maxs(first, last)),
        kb.index(kBlockThreads), init,
        [&](Value chunk, ValueRange carried) -> SmallVector<Value> {
          // Phase 1: thread tid scores key chunk + tid for every head.
          Value key32 = kb.toI32(kb.add(chunk, tid));
          Value inRange = kb.cmpi(arith::CmpIPredicate::slt, key32, last);
          // Clamp so the block-table read stays in bounds for idle threads.
          Value blockIndex = kb.mins(kb.divs(key32, kb.i32(p.blockSize)),
                                     kb.sub(maxBlocks, kb.i32(1)));
          Value page = kb.load(blockTable, {sequence, kb.toIndex(blockIndex)});
          Value valid = kb.land(
              inRange, kb.cmpi(arith::CmpIPredicate::sge, page, kb.i32(0)));
          Value offset = kb.rems(key32, kb.i32(p.blockSize));
          Row keyRow{kb.toIndex(kb.maxs(page, kb.i32(0))), kb.toIndex(offset),
                     kvHead};
          SmallVector<Type> scoreTypes(heads, kb.b.getF32Type());
          SmallVector<Value> logits = kb.ifElse(
              valid, scoreTypes,
              [&]() -> SmallVector<Value> {
                SmallVector<Value> dots =
                    source.keyDots(kb, keyRow, querySmem, heads);
                for (auto [score, scale] : llvm::zip(dots, logitScales)) {
                  score = kb.finiteLogit(kb.fmul(score, scale));
                  if (p.softcap > 0.0f)
                    score = kb.fmul(kb.f32(p.softcap),
                                    kb.tanh(kb.fdiv(score, kb.f32(p.softcap))));
                }
                return dots;
              },
              [&]() -> SmallVector<Value> {
                return SmallVector<Value>(heads, negInf(kb));
              });
          for (int64_t j = 0; j < heads; ++j)
            kb.store(logits[j], scores, {at(j, tid)});
          kb.store(kb.select(valid, page, kb.i32(-1)), pages, {tid});
          kb.store(offset, offsets, {tid});
          kb.barrier();

          // Phase 2: every thread reads each head's chunk maximum; then each
          // thread turns its own logits into weights, once per key.
          Value count = kb.toIndex(
              kb.mins(kb.sub(last, kb.toI32(chunk)), kb.i32(kBlockThreads)));
          SmallVector<Value> newMax, alpha;
          for (int64_t j = 0; j < heads; ++j) {
            Value chunkMax = kb.forLoop(
                kb.index(0), count, kb.index(1), {negInf(kb)},
                [&](Value i, ValueRange c) -> SmallVector<Value> {
                  return {kb.fmax(c[0], kb.load(scores, {at(j, i)}))};
                })[0];
            Value oldMax = carried[maxOf(j)];
            newMax.push_back(kb.fmax(oldMax, chunkMax));
            // Rescale what was accumulated under the old maximum.
            alpha.push_back(kb.select(isNegInf(kb, oldMax), kb.f32(0.0f),
                                      kb.exp(kb.fsub(oldMax, newMax[j]))));
          }
          kb.barrier();
          for (int64_t j = 0; j < heads; ++j)
            kb.store(weight(kb, logits[j], newMax[j]), scores, {at(j, tid)});
          kb.barrier();

          // Phase 3: each lane takes every lanes-th key; a thread reads its
          // value vector once for all heads.
          SmallVector<Value> accInit;
          for (int64_t j = 0; j < heads; ++j)
            for (int64_t k = 1; k < perHead; ++k)
              accInit.push_back(kb.fmul(carried[j * perHead + k], alpha[j]));
          Value laneStart = kb.select(active, lane, count);
          SmallVector<Value> acc = kb.forLoop(
              laneStart, count, kb.index(lanes), accInit,
              [&](Value i, ValueRange c) -> SmallVector<Value> {
                auto slot = [&](int64_t j, int64_t k) {
                  return j * (perHead - 1) + k; // k = 0: sum, 1 + a: acc a
                };
                SmallVector<Value> w;
                for (int64_t j = 0; j < heads; ++j)
                  w.push_back(kb.load(scores, {at(j, i)}));
                Value keyPage = kb.load(pages, {i});
                Value live =
                    kb.cmpi(arith::CmpIPredicate::sge, keyPage, kb.i32(0));
                Row valueRow{kb.toIndex(kb.maxs(keyPage, kb.i32(0))),
                             kb.toIndex(kb.load(offsets, {i})), kvHead};
                SmallVector<Value> updated(c.begin(), c.end());
                for (int64_t j = 0; j < heads; ++j)
                  updated[slot(j, 0)] = kb.fadd(c[slot(j, 0)], w[j]);
                for (int64_t v = 0; v < vectorsPerThread; ++v) {
                  Value vector =
                      kb.add(firstVector, kb.index(v * kBlockThreads));
                  Value owns =
                      kb.land(live, kb.cmpi(arith::CmpIPredicate::slt, vector,
                                            kb.index(vectorsPerRow)));
                  SmallVector<Value> current;
                  for (int64_t j = 0; j < heads; ++j)
                    for (int64_t e = 0; e < elements; ++e)
                      current.push_back(c[slot(j, 1 + v * elements + e)]);
                  SmallVector<Value> next = kb.ifElse(
                      owns, TypeRange(ValueRange(current)),
                      [&]() -> SmallVector<Value> {
                        SmallVector<Value> values = source.valueVector(
                            kb, valueRow, kb.mul(vector, kb.index(elements)),
                            elements);
                        SmallVector<Value> sums;
                        for (int64_t j = 0; j < heads; ++j)
                          for (int64_t e = 0; e < elements; ++e)
                            sums.push_back(kb.fma(w[j], values[e],
                                                  current[j * elements + e]));
                        return sums;
                      },
                      [&]() -> SmallVector<Value> { return current; });
                  for (int64_t j = 0; j < heads; ++j)
                    for (int64_t e = 0; e < elements; ++e)
                      updated[slot(j, 1 + v * elements + e)] =
                          next[j * elements + e];
                }
                return updated;
              });
          kb.barrier();
          SmallVector<Value> nextState;
          for (int64_t j = 0; j < heads; ++j) {
            nextState.push_back(newMax[j]);
            for (int64_t k = 0; k < perHead - 1; ++k)
              nextState.push_back(acc[j * (perHead - 1) + k]);
          }
          return nextState;
        });

    // Partial results of this split: unnormalized output, max and sum.
    Value isFirst = kb.cmpi(arith::CmpIPredicate::eq, tid, kb.index(0));
    auto tokenHeadOf = [&](int64_t j) {
      return kb.add(kb.mul(token, kb.index(p.numHeads)),
                    kb.add(firstHead, kb.index(j)));
    };
    kb.ifThen(isFirst, [&] {
      for (int64_t j = 0; j < heads; ++j)
        kb.store(state[maxOf(j)], partialStats,
                 {split, tokenHeadOf(j), kb.index(0)});
    });
    if (lanes == 1) {
      for (int64_t j = 0; j < heads; ++j) {
        for (int64_t v = 0; v < vectorsPerThread; ++v) {
          Value vector = kb.add(firstVector, kb.index(v * kBlockThreads));
          kb.ifThen(kb.cmpi(arith::CmpIPredicate::slt, vector,
                            kb.index(vectorsPerRow)),
                    [&] {
                      for (int64_t e = 0; e < elements; ++e)
                        kb.store(state[accOf(j, v * elements + e)], partialOut,
                                 {split, tokenHeadOf(j),
                                  kb.add(kb.mul(vector, kb.index(elements)),
                                         kb.index(e))});
                    });
        }
        kb.ifThen(isFirst, [&] {
          kb.store(state[sumOf(j)], partialStats,
                   {split, tokenHeadOf(j), kb.index(1)});
        });
      }
    } else {
      // Sum the lanes through shared memory: [lane][head][channel | sum].
      kb.barrier();
      kb.ifThen(active, [&] {
        for (int64_t j = 0; j < heads; ++j) {
          Value base =
              kb.mul(kb.add(kb.mul(lane, kb.index(heads)), kb.index(j)),
                     kb.index(reduceStride));
          for (int64_t e = 0; e < elements; ++e)
            kb.store(
                state[accOf(j, e)], querySmem,
                {kb.add(base, kb.add(kb.mul(firstVector, kb.index(elements)),
                                     kb.index(e)))});
          kb.ifThen(kb.cmpi(arith::CmpIPredicate::eq, firstVector, kb.index(0)),
                    [&] {
                      kb.store(state[sumOf(j)], querySmem,
                               {kb.add(base, kb.index(valueDim))});
                    });
        }
      });
      kb.barrier();
      kb.forLoop(
          tid, kb.index(heads * reduceStride), kb.index(kBlockThreads), {},
          [&](Value index, ValueRange) -> SmallVector<Value> {
            Value j = kb.divs(index, kb.index(reduceStride));
            Value channel = kb.rems(index, kb.index(reduceStride));
            Value total = kb.f32(0.0f);
            for (int64_t l = 0; l < lanes; ++l)
              total = kb.fadd(
                  total,
                  kb.load(querySmem,
                          {kb.add(kb.index(l * heads * reduceStride), index)}));
            Value tokenHead = kb.add(kb.mul(token, kb.index(p.numHeads)),
                                     kb.add(firstHead, j));
            Value isSum =
                kb.cmpi(arith::CmpIPredicate::eq, channel, kb.index(valueDim));
            kb.ifElse(
                isSum, {},
                [&]() -> SmallVector<Value> {
                  kb.store(total, partialStats,
                           {split, tokenHead, kb.index(1)});
                  return {};
                },
                [&]() -> SmallVector<Value> {
                  kb.store(total, partialOut, {split, tokenHead, channel});
                  return {};
                });
            return {};
          });
    }
  });
  gpu::ReturnOp::create(builder, p.loc);
  return kernel;
}

/// Splits whose weights a merge block stages in shared memory at a time.
constexpr int64_t kMergeSplitsPerChunk = 256;
/// Splits per iteration of the merge's channel sum: their loads are in
/// flight together.
constexpr int64_t kMergeUnroll = 8;

/// acc = body(j, acc) for j in [0, count) in order (the same operations as
/// a plain loop), kMergeUnroll at a time.
static Value foldInOrder(KernelBuilder &kb, Value count, Value init,
                         function_ref<Value(Value, Value)> body) {
  Value unroll = kb.index(kMergeUnroll);
  Value whole = kb.mul(kb.divs(count, unroll), unroll);
  Value acc = kb.forLoop(kb.index(0), whole, unroll, {init},
                         [&](Value j, ValueRange c) -> SmallVector<Value> {
                           Value a = c[0];
                           for (int64_t u = 0; u < kMergeUnroll; ++u)
                             a = body(kb.add(j, kb.index(u)), a);
                           return {a};
                         })[0];
  return kb.forLoop(whole, count, kb.index(1), {acc},
                    [&](Value j, ValueRange c) -> SmallVector<Value> {
                      return {body(j, c[0])};
                    })[0];
}

gpu::GPUFuncOp buildMergeKernel(KernelModule &kernels, int64_t valueDim,
                                int64_t kvHeads, const DecodeParams &p,
                                SmallVectorImpl<Value> &hostOperands) {
  MLIRContext *context = p.query.getContext();
  OpBuilder builder(context);
  hostOperands.clear();
  if (p.guard)
    hostOperands.push_back(p.guard);
  if (p.sinks)
    hostOperands.push_back(p.sinks);
  if (p.outScale)
    hostOperands.push_back(p.outScale);
  hostOperands.push_back(p.out);
  SmallVector<Type> argTypes = llvm::to_vector(
      llvm::map_range(hostOperands, [](Value v) { return v.getType(); }));
  argTypes.push_back(workspaceOutputType(context, valueDim));
  argTypes.push_back(workspaceStatsType(context));
  // Per chunk of splits: their weights and their sums (staged), which also
  // hold the threads' partial maxima first.
  auto stageType = MemRefType::get(
      {kMergeSplitsPerChunk}, builder.getF32Type(), AffineMap(),
      gpu::AddressSpaceAttr::get(context, gpu::AddressSpace::Workgroup));
  gpu::GPUFuncOp kernel = kernels.create(builder, p.loc, "pattn_merge",
                                         argTypes, {stageType, stageType});
  KernelBuilder kb(builder, p.loc);
  Value weights = kernel.getWorkgroupAttributions()[0];
  Value sums = kernel.getWorkgroupAttributions()[1];

  unsigned arg = 0;
  auto next = [&]() { return kernel.getArgument(arg++); };
  Value guard = p.guard ? next() : Value();
  Value sinks = p.sinks ? next() : Value();
  Value outScale = p.outScale ? next() : Value();
  Value out = next(), partialOut = next(), partialStats = next();
  Type outType = cast<MemRefType>(out.getType()).getElementType();
  int64_t group = p.numHeads / kvHeads;

  // A block per (row, kBlockThreads channels): thread t merges one channel.
  Value tid = kb.threadId();
  Value tokenHead = kb.blockId(gpu::Dimension::x);
  Value channelBlock = kb.blockId(gpu::Dimension::y);
  Value channel = kb.mul(channelBlock, kb.index(kBlockThreads));
  channel = kb.add(channel, tid);
  Value token = kb.divs(tokenHead, kb.index(p.numHeads));
  Value head = kb.rems(tokenHead, kb.index(p.numHeads));
  Value kvHead = kb.divs(head, kb.index(group));
  Value splits = memref::DimOp::create(builder, p.loc, partialStats, 0);
  Value threads = kb.index(kBlockThreads);
  Value hasChannel =
      kb.cmpi(arith::CmpIPredicate::slt, channel, kb.index(valueDim));

  kb.ifThen(guardAllows(kb, guard, p.guardValue), [&] {
    // The largest split maximum (exact in any order): per thread, per warp
    // (shuffles), then across the warps through shared memory.
    Value ownMax = kb.forLoop(
        tid, splits, threads, {negInf(kb)},
        [&](Value s, ValueRange c) -> SmallVector<Value> {
          return {kb.fmax(c[0],
                          kb.load(partialStats, {s, tokenHead, kb.index(0)}))};
        })[0];
    for (int32_t mask = 16; mask >= 1; mask /= 2) {
      Value other = gpu::ShuffleOp::create(builder, p.loc, ownMax, kb.i32(mask),
                                           kb.i32(32), gpu::ShuffleMode::XOR)
                        .getShuffleResult();
      ownMax = kb.fmax(ownMax, other);
    }
    Value warp = kb.divs(tid, kb.index(32));
    Value laneOfWarp = kb.rems(tid, kb.index(32));
    Value leadsWarp =
        kb.cmpi(arith::CmpIPredicate::eq, laneOfWarp, kb.index(0));
    kb.ifThen(leadsWarp, [&] { kb.store(ownMax, weights, {warp}); });
    kb.barrier();
    Value globalMax = negInf(kb);
    for (int64_t w = 0; w < kBlockThreads / 32; ++w)
      globalMax = kb.fmax(globalMax, kb.load(weights, {kb.index(w)}));
    // Sinks of any float type, as ONNX Runtime's T-typed head_sink: f32.
    Value sink = sinks ? kb.toF32(kb.load(sinks, {head})) : Value();
    if (sink)
      globalMax = kb.fmax(globalMax, sink);
    kb.barrier();

    // Chunks of splits: their weights and sums staged by the block, then
    // the denominator and the channel's sum folded in split order (the
    // same operations, in the same order, as one thread walking them).
    Value chunk = kb.index(kMergeSplitsPerChunk);
    Value chunkBegin = kb.index(0);
    Value zeroDenominator = kb.f32(0.0f);
    Value zeroSum = kb.f32(0.0f);
    SmallVector<Value> totals = kb.forLoop(
        chunkBegin, splits, chunk, {zeroDenominator, zeroSum},
        [&](Value base, ValueRange c) -> SmallVector<Value> {
          Value count = kb.mins(chunk, kb.sub(splits, base));
          kb.forLoop(tid, count, threads, {},
                     [&](Value j, ValueRange) -> SmallVector<Value> {
                       Value s = kb.add(base, j);
                       Value m =
                           kb.load(partialStats, {s, tokenHead, kb.index(0)});
                       Value l =
                           kb.load(partialStats, {s, tokenHead, kb.index(1)});
                       kb.store(weight(kb, m, globalMax), weights, {j});
                       kb.store(l, sums, {j});
                       return {};
                     });
          kb.barrier();
          Value denominator =
              foldInOrder(kb, count, c[0], [&](Value j, Value acc) {
                Value l = kb.load(sums, {j});
                Value w = kb.load(weights, {j});
                return kb.fma(l, w, acc);
              });
          Value safeChannel = kb.mins(channel, kb.index(valueDim - 1));
          Value sum = foldInOrder(kb, count, c[1], [&](Value j, Value acc) {
            Value o =
                kb.load(partialOut, {kb.add(base, j), tokenHead, safeChannel});
            return kb.fma(o, kb.load(weights, {j}), acc);
          });
          kb.barrier();
          return {denominator, sum};
        });
    Value denominator = totals[0];
    // A sink adds exp(sink - max) to the denominator and nothing to the sum.
    if (sink)
      denominator = kb.fadd(denominator, weight(kb, sink, globalMax));
    Value empty = kb.cmpf(arith::CmpFPredicate::OEQ, denominator, kb.f32(0.0f));
    Value inverse =
        kb.select(empty, kb.f32(0.0f), kb.fdiv(kb.f32(1.0f), denominator));
    kb.ifThen(hasChannel, [&] {
      Value result = kb.fmul(totals[1], inverse);
      if (outScale)
        result = kb.fmul(result, kb.load(outScale, {kvHead, channel}));
      // The output's only rounding.
      Value rounded = arith::TruncFOp::create(kb.b, kb.loc, outType, result);
      kb.store(rounded, out, {token, head, channel});
    });
  });
  gpu::ReturnOp::create(builder, p.loc);
  return kernel;
}

DecodeKernels buildDecodeKernels(KernelModule &kernels, KVSource &source,
                                 const DecodeParams &params,
                                 PortablePlanAttr plan) {
  DecodeKernels result;
  result.decode =
      buildDecodeKernel(kernels, source, params, plan, result.decodeOperands);
  result.merge = buildMergeKernel(kernels, source.valueDim(), source.kvHeads(),
                                  params, result.mergeOperands);
  result.numHeads = params.numHeads;
  result.decodeBlocksPerToken =
      source.kvHeads() *
      (params.numHeads / source.kvHeads() / plan.getHeadsPerBlock());
  result.valueDim = source.valueDim();
  result.blockSize = params.blockSize;
  return result;
}

} // namespace

/// What the kernels need to know about a paged attention op.
static DecodeParams pagedParams(PagedAttentionOp op) {
  DecodeParams params{op.getLoc()};
  params.query = op.getQuery();
  params.blockTable = op.getBlockTable();
  params.seqLens = op.getSeqLens();
  params.queryStart = op.getQueryStart();
  params.guard = op.getGuard();
  params.guardValue = op.getGuardValue().value_or(0);
  params.queryExponents = op.getQueryExponents();
  params.sinks = op.getSinks();
  params.outScale = op.getOutScale();
  params.out = op.getOut();
  params.numHeads = static_cast<int64_t>(op.getNumHeads());
  params.blockSize = op.getKey().getType().getBlockSize();
  params.softmaxScale = op.getEffectiveSoftmaxScale();
  params.softcap = op.getSoftcap().convertToFloat();
  params.window = static_cast<int64_t>(op.getWindow());
  return params;
}

auto ::pattn::buildPagedDecodeKernels(KernelModule &kernels,
                                      PagedAttentionOp op,
                                      const CacheBuffers &key,
                                      const CacheBuffers &value,
                                      PortablePlanAttr plan) -> DecodeKernels {
  PagedSource source(key, op.getKScale(), value, op.getVScale());
  return buildDecodeKernels(kernels, source, pagedParams(op), plan);
}

auto ::pattn::buildPagedMergeKernel(KernelModule &kernels, PagedAttentionOp op,
                                    SmallVectorImpl<Value> &hostOperands)
    -> gpu::GPUFuncOp {
  CacheType value = op.getValue().getType();
  return buildMergeKernel(kernels, value.getHeadDim(), value.getKvHeads(),
                          pagedParams(op), hostOperands);
}

/// What the kernels need to know about an MLA decode op.
static DecodeParams mlaParams(MlaDecodeOp op, int64_t keyDim) {
  DecodeParams params{op.getLoc()};
  params.query = op.getQuery();
  params.blockTable = op.getBlockTable();
  params.seqLens = op.getSeqLens();
  params.queryStart = op.getQueryStart();
  params.out = op.getOut();
  params.numHeads = static_cast<int64_t>(op.getNumHeads());
  params.blockSize = op.getCache().getType().getBlockSize();
  std::optional<APFloat> scale = op.getSoftmaxScale();
  params.softmaxScale =
      scale ? scale->convertToFloat() : 1.0f / std::sqrt(float(keyDim));
  return params;
}

auto ::pattn::buildMlaDecodeKernels(KernelModule &kernels, MlaDecodeOp op,
                                    const RecordBuffers &cache,
                                    PortablePlanAttr plan) -> DecodeKernels {
  RecordSource source(cache, op.getOuterScale());
  return buildDecodeKernels(kernels, source, mlaParams(op, source.keyDim()),
                            plan);
}

auto ::pattn::buildMlaMergeKernel(KernelModule &kernels, MlaDecodeOp op,
                                  SmallVectorImpl<Value> &hostOperands)
    -> gpu::GPUFuncOp {
  RecordType record = op.getCache().getType().getRecord();
  int64_t latent = record.getLane("latent").getCount();
  int64_t keyDim = latent + record.getLane("rope").getCount();
  return buildMergeKernel(kernels, latent, /*kvHeads=*/1, mlaParams(op, keyDim),
                          hostOperands);
}
