//===- PortableSources.cpp - The portable decode's cache readers ----------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the KVSources of the portable decode: a paged cache
// (every encoding, tensor/channel/token scales, nvfp4 group scales) read in
// aligned vectors and decoded word by word, and MLA records read lane by
// lane.
//
//===----------------------------------------------------------------------===//

#include "Kernels/Decode/PortableSources.h"
#include "Kernels/Codecs/Codecs.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <optional>

using namespace mlir;
using namespace pattn;
using namespace pattn::portable;

namespace {

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
      return encodingInfo(encoding).isPlainFloat();
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
      const numerics::EncodingInfo &info = encodingInfo(encoding);
      if (info.hasGroupScales()) {
        Value group =
            kb.divs(wordChannel, kb.index(int64_t(info.groupScales.size)));
        groupScale = kb.decodeE4M3(
            kb.loadByte(get(side.groupScales), address(side, row, group)));
      }
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

} // namespace

std::unique_ptr<KVSource> portable::makePagedSource(const CacheBuffers &key,
                                                    Value keyScale,
                                                    const CacheBuffers &value,
                                                    Value valueScale) {
  return std::make_unique<PagedSource>(key, keyScale, value, valueScale);
}

std::unique_ptr<KVSource> portable::makeRecordSource(const RecordBuffers &cache,
                                                     Value outerScale) {
  return std::make_unique<RecordSource>(cache, outerScale);
}
