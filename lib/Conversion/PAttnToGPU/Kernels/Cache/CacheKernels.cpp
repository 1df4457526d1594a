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

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;
using namespace pattn;

gpu::GPUFuncOp KernelModule::create(OpBuilder &builder, Location loc,
                                    StringRef name, TypeRange arguments,
                                    TypeRange workgroupBuffers) {
  builder.setInsertionPointToEnd(module.getBody());
  std::string unique = (name + "_" + Twine(counter++)).str();
  auto kernel = gpu::GPUFuncOp::create(builder, loc, unique,
                                       builder.getFunctionType(arguments, {}),
                                       workgroupBuffers, TypeRange());
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                  builder.getUnitAttr());
  // Kernels read shared buffers with vector loads of up to 16 bytes; the
  // lowering would otherwise align each buffer to its element only (4
  // bytes), and where ptxas placed one off a 16-byte boundary those loads
  // faulted (CUDA_ERROR_MISALIGNED_ADDRESS, head_dim 96 with one query head
  // per KV head: bench/results/2026-12-02-h200-onnx-vs-ort.md).
  for (unsigned index = 0; index < workgroupBuffers.size(); ++index)
    kernel.setWorkgroupAttributionAttr(
        index, LLVM::LLVMDialect::getAlignAttrName(),
        builder.getI64IntegerAttr(kSharedBufferAlignment));
  builder.setInsertionPointToStart(&kernel.front());
  return kernel;
}

Kernel KernelModule::create(OpBuilder &builder, Location loc, StringRef name,
                            ValueRange operands, TypeRange extra,
                            TypeRange workgroupBuffers) {
  SmallVector<Type> types(operands.getTypes());
  llvm::append_range(types, extra);
  return {create(builder, loc, name, types, workgroupBuffers),
          SmallVector<Value>(operands)};
}

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
  Value code(KernelBuilder &kb, Value x) const {
    Value code =
        kb.encodeMinifloat(kb.fdiv(x, denominator), MinifloatFormat::e2m1());
    return kb.select(zero, kb.i32(0), kb.andi(code, kb.i32(0xF)));
  }
};

static Nvfp4Group nvfp4Group(KernelBuilder &kb, Value amax, Value outer) {
  Value ratio = kb.fdiv(kb.fdiv(amax, kb.f32(6.0f)), outer);
  Value sf = kb.encodeMinifloat(ratio, MinifloatFormat::e4m3());
  Value denominator = kb.fmul(kb.decodeE4M3(sf), outer);
  auto isZero = [&](Value v) {
    return kb.cmpf(arith::CmpFPredicate::OEQ, v, kb.f32(0.0f));
  };
  Value zero = kb.lor(kb.lor(isZero(amax), isZero(outer)), isZero(denominator));
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

/// The type of the slot check's flag buffer.
static MemRefType flagType(MLIRContext *context) {
  return MemRefType::get({1}, IntegerType::get(context, 32));
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
  Kernel result = kernels.create(builder, loc, "pattn_check_slots", operands,
                                 {flagType(context), flagType(context)}, {});
  gpu::GPUFuncOp kernel = result.func;
  KernelBuilder kb(builder, loc);
  Value slotArg = kernel.getArgument(0), storageArg = kernel.getArgument(1);
  unsigned arguments = kernel.getNumArguments();
  Value flag = kernel.getArgument(arguments - 2);
  Value errorWord = kernel.getArgument(arguments - 1);
  Value tid = kb.threadId();
  Value isFirst = kb.cmpi(arith::CmpIPredicate::eq, tid, kb.index(0));
  kb.ifThen(isFirst, [&] { kb.store(kb.i32(0), flag, {kb.index(0)}); });
  kb.barrier();
  // Every thread that sees a bad slot stores the same 1: the race is benign.
  Value capacity = kb.toI64(kb.mul(
      memref::DimOp::create(builder, loc, storageArg, 0), kb.index(blockSize)));
  Value count = memref::DimOp::create(builder, loc, slotArg, 0);
  kb.forLoop(tid, count, kb.index(kBlockThreads), {},
             [&](Value i, ValueRange) -> SmallVector<Value> {
               Value slot = kb.toI64(kb.load(slotArg, {i}));
               Value bad =
                   kb.lor(kb.cmpi(arith::CmpIPredicate::slt, slot, kb.i64(-1)),
                          kb.cmpi(arith::CmpIPredicate::sge, slot, capacity));
               kb.ifThen(bad, [&] {
                 kb.store(kb.i32(1), flag, {kb.index(0)});
                 memref::AtomicRMWOp::create(
                     builder, loc, arith::AtomicRMWKind::ori,
                     kb.i32(kSlotOutOfRangeBit), errorWord, {kb.index(0)});
               });
               return {};
             });
  if (rotary) {
    RotaryArguments a =
        bindRotaryArguments(rotary, kernel.getArguments().drop_front(2));
    emitPositionChecks(kb, rotary, a, tid, flag, errorWord);
  }
  gpu::ReturnOp::create(builder, loc);
  return result;
}

/// True when this token is written: the slot check passed (its flag, the
/// kernel's last argument, is 0) and the token's `slot` is not -1.
static Value writesSlot(KernelBuilder &kb, gpu::GPUFuncOp kernel, Value slot) {
  // The last argument of the function type (block arguments go on with
  // the workgroup buffers).
  Value flag = kernel.getArgument(kernel.getFunctionType().getNumInputs() - 1);
  Value batchValid = kb.cmpi(arith::CmpIPredicate::eq,
                             kb.load(flag, {kb.index(0)}), kb.i32(0));
  Value zero = arith::ConstantIntOp::create(kb.b, kb.loc, slot.getType(), 0);
  return kb.land(batchValid, kb.cmpi(arith::CmpIPredicate::sge, slot, zero));
}

auto ::pattn::buildWriteCacheKernel(KernelModule &kernels, WriteCacheOp op,
                                    const CacheBuffers &cache, RotaryOp rotary)
    -> Kernel {
  OpBuilder builder(op.getContext());
  Location loc = op.getLoc();
  CacheType type = cache.type;
  Encoding encoding = type.getEncoding();
  ScaleGranularity granularity = type.getScale();
  int64_t headDim = type.getHeadDim();

  // Fused with a rotary op, the kernel reads the rotary's input instead of
  // the values (the rotary's output, which nothing else reads).
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
  unsigned rotaryFirst = operands.size();
  if (rotary)
    llvm::append_range(operands, rotaryReads(rotary));
  SmallVector<Type> shared;
  if (rotary) // the prepared row, as f32
    shared.push_back(
        MemRefType::get({headDim}, builder.getF32Type(), AffineMap(),
                        gpu::AddressSpaceAttr::get(
                            op.getContext(), gpu::AddressSpace::Workgroup)));
  Kernel result = kernels.create(builder, loc, "pattn_write_cache", operands,
                                 {flagType(op.getContext())}, shared);
  gpu::GPUFuncOp kernel = result.func;
  KernelBuilder kb(builder, loc);
  unsigned arg = 0;
  auto next = [&]() { return kernel.getArgument(arg++); };
  Value values = rotary ? Value() : next();
  Value slots = next(), storage = next();
  Value groupScales = cache.groupScales ? next() : Value();
  Value tokenScales = cache.tokenScales ? next() : Value();
  Value scale = op.getScale() ? next() : Value();

  Value token = kb.blockId(gpu::Dimension::x);
  Value kvHead = kb.blockId(gpu::Dimension::y);
  Value tid = kb.threadId();
  Value slot = kb.load(slots, {token});
  Value live = writesSlot(kb, kernel, slot);
  // The values' head: the cache's kv head, past first_head of a packed row.
  Value valueHead = kvHead;
  if (int64_t firstHead = op.getFirstHead())
    valueHead = kb.add(kvHead, kb.index(firstHead));
  Value row;
  if (rotary)
    row = kernel.getWorkgroupAttributions().front();
  auto element = [&](Value channel) -> Value {
    if (row)
      return kb.load(row, {channel});
    return kb.toF32(kb.load(values, {token, valueHead, channel}));
  };

  kb.ifThen(live, [&] {
    if (rotary) {
      // Warp 0 prepares the row as pattn.rotary stores it (rounded to the
      // values' type), then every thread quantizes it. `live` is per token,
      // the same for the whole block, so the barrier is reached by all.
      RotaryArguments a =
          bindRotaryArguments(rotary, kernel.getArguments().slice(rotaryFirst));
      Value inHead = kb.add(valueHead, kb.index(rotary.getFirstHead()));
      Value warp = kb.divs(tid, kb.index(kWarpThreads));
      Value isFirstWarp = kb.cmpi(arith::CmpIPredicate::eq, warp, kb.index(0));
      Type rounded =
          cast<MemRefType>(op.getValues().getType()).getElementType();
      kb.ifThen(isFirstWarp, [&] {
        emitRotaryRow(kb, rotary, a, token, inHead, tid, rounded,
                      [&](Value channel, Value value) {
                        kb.store(kb.toF32(value), row, {channel});
                      });
      });
      kb.barrier();
    }
    auto [page, offset] = slotAddress(kb, slot, type.getBlockSize());
    auto rowAddress = [&](Value byte) -> SmallVector<Value> {
      if (type.getLayout() == Layout::hnd)
        return {page, kvHead, offset, byte};
      return {page, offset, kvHead, byte};
    };

    // Per-token scale: amax / max code (nvfp4: the outer scale
    // amax / (6 * 448)), stored once per row.
    Value tokenScale;
    if (granularity == ScaleGranularity::token) {
      float maxCode = encoding == Encoding::i8       ? 127.0f
                      : encoding == Encoding::i4     ? 7.0f
                      : encoding == Encoding::f8e4m3 ? 448.0f
                      : encoding == Encoding::f8e5m2 ? 57344.0f
                                                     : 2688.0f;
      tokenScale = kb.fdiv(rangeAbsMax(kb, headDim, element), kb.f32(maxCode));
      kb.ifThen(kb.cmpi(arith::CmpIPredicate::eq, tid, kb.index(0)), [&] {
        kb.store(tokenScale, tokenScales, {page, offset, kvHead});
      });
    }
    auto scaleOf = [&](Value channel) -> Value {
      switch (granularity) {
      case ScaleGranularity::tensor:
        return kb.load(scale, {kb.index(0)});
      case ScaleGranularity::channel:
        return kb.load(scale, {kvHead, channel});
      case ScaleGranularity::token:
        return tokenScale;
      case ScaleGranularity::none:
        return kb.f32(1.0f);
      }
      llvm_unreachable("unknown granularity");
    };

    // One thread per pair of elements: a pair fills one byte of a 4-bit row.
    kb.forLoop(
        tid, kb.index(headDim / 2), kb.index(kBlockThreads), {},
        [&](Value pair, ValueRange) -> SmallVector<Value> {
          Value c0 = kb.mul(pair, kb.index(2));
          Value c1 = kb.add(c0, kb.index(1));
          Value x0 = element(c0), x1 = element(c1);
          switch (encoding) {
          case Encoding::f16:
          case Encoding::bf16: {
            bool isF16 = encoding == Encoding::f16;
            Value b0 = isF16 ? kb.encodeF16Bits(x0) : kb.encodeBF16Bits(x0);
            Value b1 = isF16 ? kb.encodeF16Bits(x1) : kb.encodeBF16Bits(x1);
            kb.storeU16Bytes(b0, storage, rowAddress(kb.mul(c0, kb.index(2))));
            kb.storeU16Bytes(b1, storage, rowAddress(kb.mul(c1, kb.index(2))));
            break;
          }
          case Encoding::i8:
          case Encoding::f8e4m3:
          case Encoding::f8e5m2:
            kb.storeByte(kb.quantize(encoding, x0, scaleOf(c0)), storage,
                         rowAddress(c0));
            kb.storeByte(kb.quantize(encoding, x1, scaleOf(c1)), storage,
                         rowAddress(c1));
            break;
          case Encoding::i4: {
            Value low = kb.quantize(encoding, x0, scaleOf(c0));
            Value high = kb.quantize(encoding, x1, scaleOf(c1));
            kb.storeByte(kb.ori(low, kb.shl(high, kb.i32(4))), storage,
                         rowAddress(pair));
            break;
          }
          case Encoding::nvfp4: {
            Value outer = scaleOf(c0);
            Value groupBegin = kb.mul(kb.divs(c0, kb.index(16)), kb.index(16));
            Value amax = rangeAbsMax(kb, 16, [&](Value i) {
              return element(kb.add(groupBegin, i));
            });
            Nvfp4Group group = nvfp4Group(kb, amax, outer);
            Value byte = kb.ori(group.code(kb, x0),
                                kb.shl(group.code(kb, x1), kb.i32(4)));
            kb.storeByte(byte, storage, rowAddress(pair));
            kb.ifThen(kb.cmpi(arith::CmpIPredicate::eq, c0, groupBegin), [&] {
              kb.storeByte(group.scaleCode, groupScales,
                           rowAddress(kb.divs(c0, kb.index(16))));
            });
            break;
          }
          }
          return {};
        });
  });
  gpu::ReturnOp::create(builder, loc);
  return result;
}

auto ::pattn::buildWriteRecordKernel(KernelModule &kernels, WriteRecordOp op,
                                     const RecordBuffers &cache) -> Kernel {
  OpBuilder builder(op.getContext());
  Location loc = op.getLoc();
  RecordType record = cache.type.getRecord();
  LaneAttr latent = record.getLane("latent"), rope = record.getLane("rope");
  LaneAttr latentScale = record.getLane(latent.getScaleLane());
  LaneAttr ropeScale =
      rope.isScaled() ? record.getLane(rope.getScaleLane()) : LaneAttr();
  LaneAttr tokenLane = record.getLane("token_scale");
  bool e2m1 = isa<Float4E2M1FNType>(latent.getElementType());

  SmallVector<Value> operands = {op.getLatent(), op.getRope(), op.getSlots(),
                                 cache.storage};
  if (op.getOuterScale())
    operands.push_back(op.getOuterScale());
  Kernel result = kernels.create(builder, loc, "pattn_write_record", operands,
                                 {flagType(op.getContext())}, {});
  gpu::GPUFuncOp kernel = result.func;
  KernelBuilder kb(builder, loc);
  Value latentIn = kernel.getArgument(0), ropeIn = kernel.getArgument(1);
  Value slots = kernel.getArgument(2), storage = kernel.getArgument(3);
  Value outerScale = op.getOuterScale() ? kernel.getArgument(4) : Value();

  Value token = kb.blockId(gpu::Dimension::x);
  Value tid = kb.threadId();
  Value slot = kb.load(slots, {token});
  Value live = writesSlot(kb, kernel, slot);
  auto latentAt = [&](Value i) {
    return kb.toF32(kb.load(latentIn, {token, i}));
  };
  auto ropeAt = [&](Value i) { return kb.toF32(kb.load(ropeIn, {token, i})); };

  kb.ifThen(live, [&] {
    auto [page, offset] = slotAddress(kb, slot, cache.type.getBlockSize());
    auto byteAt = [&](int64_t laneOffset, Value byte) -> SmallVector<Value> {
      return {page, offset, kb.add(kb.index(laneOffset), byte)};
    };
    Value isFirst = kb.cmpi(arith::CmpIPredicate::eq, tid, kb.index(0));

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

    // The latent's outer scale (e2m1 latents only).
    Value outer;
    if (e2m1) {
      if (record.getMode() == ScaleGranularity::token)
        outer = kb.fdiv(rangeAbsMax(kb, latent.getCount(), latentAt),
                        kb.f32(2688.0f));
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

    int64_t group = latent.getCount() / latentScale.getCount();
    kb.forLoop(tid, kb.index(latent.getCount() / 2), kb.index(kBlockThreads),
               {}, [&](Value pair, ValueRange) -> SmallVector<Value> {
                 Value c0 = kb.mul(pair, kb.index(2));
                 Value c1 = kb.add(c0, kb.index(1));
                 Value groupIndex = kb.divs(c0, kb.index(group));
                 Value groupBegin = kb.mul(groupIndex, kb.index(group));
                 Value amax = rangeAbsMax(kb, group, [&](Value i) {
                   return latentAt(kb.add(groupBegin, i));
                 });
                 Value isGroupStart =
                     kb.cmpi(arith::CmpIPredicate::eq, c0, groupBegin);
                 if (e2m1) {
                   Nvfp4Group nv = nvfp4Group(kb, amax, outer);
                   // One op-creating call per statement: the loads stay in
                   // order whichever compiler evaluates the arguments.
                   Value low = nv.code(kb, latentAt(c0));
                   Value high = nv.code(kb, latentAt(c1));
                   Value byte = kb.ori(low, kb.shl(high, kb.i32(4)));
                   kb.storeByte(byte, storage,
                                byteAt(latent.getOffset(), pair));
                   kb.ifThen(isGroupStart, [&] {
                     kb.storeByte(nv.scaleCode, storage,
                                  byteAt(latentScale.getOffset(), groupIndex));
                   });
                 } else {
                   // fp8_ds_mla: one fp32 scale amax / 448 per tile.
                   Value tileScale = kb.fdiv(amax, kb.f32(448.0f));
                   for (Value c : {c0, c1})
                     kb.storeByte(
                         kb.quantize(Encoding::f8e4m3, latentAt(c), tileScale),
                         storage, byteAt(latent.getOffset(), c));
                   kb.ifThen(isGroupStart, [&] {
                     kb.storeF32Bytes(tileScale, storage,
                                      byteAt(latentScale.getOffset(),
                                             kb.mul(groupIndex, kb.index(4))));
                   });
                 }
                 return {};
               });

    // The rope: 16-bit values, or e4m3 with one fp32 scale rope_amax / 448.
    Value ropeScaleValue;
    if (ropeScale) {
      ropeScaleValue =
          kb.fdiv(rangeAbsMax(kb, rope.getCount(), ropeAt), kb.f32(448.0f));
      kb.ifThen(isFirst, [&] {
        kb.storeF32Bytes(ropeScaleValue, storage,
                         byteAt(ropeScale.getOffset(), kb.index(0)));
      });
    }
    Type ropeType = rope.getElementType();
    kb.forLoop(
        tid, kb.index(rope.getCount()), kb.index(kBlockThreads), {},
        [&](Value c, ValueRange) -> SmallVector<Value> {
          Value x = ropeAt(c);
          if (ropeScale)
            kb.storeByte(kb.quantize(Encoding::f8e4m3, x, ropeScaleValue),
                         storage, byteAt(rope.getOffset(), c));
          else
            kb.storeU16Bytes(
                ropeType.isBF16() ? kb.encodeBF16Bits(x) : kb.encodeF16Bits(x),
                storage, byteAt(rope.getOffset(), kb.mul(c, kb.index(2))));
          return {};
        });
  });
  gpu::ReturnOp::create(builder, loc);
  return result;
}
