//===- DecodeCommon.cpp - What every decode kernel family shares ----------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the decode families' shared layer: the op facts
// they read, the split-KV workspace contract, launch bounds, the query
// token's sequence, and the online softmax's -inf conventions.
//
//===----------------------------------------------------------------------===//

#include "Kernels/Common/DecodeCommon.h"
#include "Kernels/Kernels.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

#include <cmath>
#include <limits>
#include <optional>

using namespace mlir;
using namespace pattn;

/// The facts every decode op has.
template <typename DecodeOp> static DecodeParams commonParams(DecodeOp op) {
  DecodeParams params{op.getLoc()};
  params.query = op.getQuery();
  params.blockTable = op.getBlockTable();
  params.seqLens = op.getSeqLens();
  params.queryStart = op.getQueryStart();
  params.out = op.getOut();
  params.numHeads = static_cast<int64_t>(op.getNumHeads());
  return params;
}

DecodeParams pattn::decodeParams(PagedAttentionOp op) {
  DecodeParams params = commonParams(op);
  params.guard = op.getGuard();
  params.guardValue = op.getGuardValue().value_or(0);
  params.queryExponents = op.getQueryExponents();
  params.sinks = op.getSinks();
  params.outScale = op.getOutScale();
  params.blockSize = op.getKey().getType().getBlockSize();
  params.softmaxScale = op.getEffectiveSoftmaxScale();
  params.softcap = op.getSoftcap().convertToFloat();
  params.window = static_cast<int64_t>(op.getWindow());
  return params;
}

DecodeParams pattn::decodeParams(MlaDecodeOp op, int64_t keyDim) {
  DecodeParams params = commonParams(op);
  params.blockSize = op.getCache().getType().getBlockSize();
  std::optional<APFloat> scale = op.getSoftmaxScale();
  params.softmaxScale =
      scale ? scale->convertToFloat() : 1.0f / std::sqrt(float(keyDim));
  return params;
}

void DecodeSignature::add(DecodeArg role, Value value) {
  if (value)
    addRun(role, value);
}

void DecodeSignature::addRun(DecodeArg role, ValueRange run) {
  assert(!find(role) && "each role once");
  slots.push_back({role, unsigned(argumentTypes.size()), unsigned(run.size())});
  llvm::append_range(values, run);
  llvm::append_range(argumentTypes, run.getTypes());
}

void DecodeSignature::addSequences(Value query, Value blockTable, Value seqLens,
                                   Value queryStart) {
  add(DecodeArg::Query, query);
  add(DecodeArg::BlockTable, blockTable);
  add(DecodeArg::SeqLens, seqLens);
  add(DecodeArg::QueryStart, queryStart);
}

auto DecodeSignature::sequenceArgs() const -> SequenceArgs {
  return {arg(DecodeArg::Query),      arg(DecodeArg::BlockTable),
          arg(DecodeArg::SeqLens),    arg(DecodeArg::QueryStart),
          arg(DecodeArg::PartialOut), arg(DecodeArg::PartialStats)};
}

void DecodeSignature::addWorkspace(MLIRContext *context, int64_t valueDim) {
  slots.push_back({DecodeArg::PartialOut, unsigned(argumentTypes.size()), 1});
  argumentTypes.push_back(workspaceOutputType(context, valueDim));
  slots.push_back({DecodeArg::PartialStats, unsigned(argumentTypes.size()), 1});
  argumentTypes.push_back(workspaceStatsType(context));
}

void DecodeSignature::addSecondWorkspace(MLIRContext *context,
                                         int64_t valueDim) {
  slots.push_back(
      {DecodeArg::SecondPartialOut, unsigned(argumentTypes.size()), 1});
  argumentTypes.push_back(workspaceOutputType(context, valueDim));
  slots.push_back(
      {DecodeArg::SecondPartialStats, unsigned(argumentTypes.size()), 1});
  argumentTypes.push_back(workspaceStatsType(context));
}

auto DecodeSignature::find(DecodeArg role) const -> const Slot * {
  for (const Slot &slot : slots)
    if (slot.role == role)
      return &slot;
  return nullptr;
}

Value DecodeSignature::arg(DecodeArg role) const {
  const Slot *slot = find(role);
  assert((!slot || slot->size == 1) && "a run is read with run()");
  return slot ? kernel.getArgument(slot->begin) : Value();
}

ValueRange DecodeSignature::run(DecodeArg role) const {
  const Slot *slot = find(role);
  if (!slot)
    return {};
  return kernel.getArguments().slice(slot->begin, slot->size);
}

Value pattn::dynamicSharedBytes(OpBuilder &builder, Location loc) {
  return gpu::DynamicSharedMemoryOp::create(
      builder, loc,
      workgroupMemRefType({ShapedType::kDynamic}, builder.getIntegerType(8)));
}

Value pattn::keysPerGridSplit(KernelBuilder &kb, Value blockTable,
                              int64_t blockSize, gpu::Dimension splitsAt) {
  Value tableWidth =
      kb.toI32(memref::DimOp::create(kb.b, kb.loc, blockTable, 1));
  Value maxKeys = kb.mul(tableWidth, kb.i32(int32_t(blockSize)));
  Value splits = kb.toI32(gpu::GridDimOp::create(kb.b, kb.loc, splitsAt));
  return kb.divs(kb.add(maxKeys, kb.sub(splits, kb.i32(1))), splits);
}

Value pattn::guardAllows(KernelBuilder &kb, Value guard, int32_t guardValue) {
  if (!guard)
    return kb.boolean(true);
  Value flag = kb.load(guard, {kb.index(0)});
  return kb.cmpi(arith::CmpIPredicate::eq, flag, kb.i32(guardValue));
}

LogitScale pattn::logitScale(KernelBuilder &kb, PagedAttentionOp op,
                             Value keyScale, Value keyScaleValue) {
  LogitScale result;
  result.softmaxScale = kb.f32(op.getEffectiveSoftmaxScale());
  if (keyScale || keyScaleValue) {
    Value scale =
        keyScaleValue ? keyScaleValue : kb.load(keyScale, {kb.index(0)});
    result.softmaxScale = kb.fmul(result.softmaxScale, scale);
  }
  // Logits are kept in base 2 (times log2 e), so that every exponential
  // is one ex2.approx; the statistics written out are natural again.
  result.log2e = kb.f32(float(M_LOG2E));
  if (op.getSoftcap().convertToFloat() <= 0.0f)
    result.softmaxScale = kb.fmul(result.softmaxScale, result.log2e);
  return result;
}

Value pattn::scaledLogit(KernelBuilder &kb, Value score, Value scale,
                         float softcap, Value log2e) {
  Value x = kb.finiteLogit(kb.fmul(score, scale));
  if (softcap > 0.0f) {
    Value cap = kb.f32(softcap);
    Value inner = kb.tanh(kb.fdiv(x, cap));
    x = kb.fmul(cap, inner);
    x = kb.fmul(x, log2e);
  }
  return x;
}

Value pattn::negInf(KernelBuilder &kb) {
  return kb.f32(-std::numeric_limits<float>::infinity());
}

Value pattn::isNegInf(KernelBuilder &kb, Value x) {
  return kb.cmpf(arith::CmpFPredicate::OEQ, x, negInf(kb));
}

Value pattn::softmaxWeight(KernelBuilder &kb, Value x, Value m) {
  Value e = kb.exp(kb.fsub(x, m));
  return kb.select(isNegInf(kb, x), kb.f32(0.0f), e);
}

UnsplitRow pattn::finishUnsplitRow(KernelBuilder &kb, Value naturalMax,
                                   Value sum, Value sinks, Value head) {
  Value globalMax = naturalMax;
  Value sink;
  if (sinks) {
    sink = kb.toF32(kb.load(sinks, {head}));
    globalMax = kb.fmax(globalMax, sink);
  }
  UnsplitRow row;
  row.weight = softmaxWeight(kb, naturalMax, globalMax);
  row.zero = kb.f32(0.0f);
  Value denominator = kb.fma(sum, row.weight, row.zero);
  Value sinkWeight = sink ? softmaxWeight(kb, sink, globalMax) : Value();
  row.inverse = outputInverse(kb, denominator, sinkWeight);
  return row;
}

Value UnsplitRow::weighted(KernelBuilder &kb, Value x) const {
  return kb.fma(x, weight, zero);
}

Value pattn::outputInverse(KernelBuilder &kb, Value denominator,
                           Value sinkWeight) {
  // A sink adds exp(sink - max) to the denominator and nothing to the sum.
  if (sinkWeight)
    denominator = kb.fadd(denominator, sinkWeight);
  Value empty = kb.cmpf(arith::CmpFPredicate::OEQ, denominator, kb.f32(0.0f));
  return kb.select(empty, kb.f32(0.0f), kb.fdiv(kb.f32(1.0f), denominator));
}

void pattn::storeOutput(KernelBuilder &kb, Value sum, Value inverse,
                        Value outScale, Value out, Value token, Value head,
                        Value kvHead, Value channel) {
  Value result = kb.fmul(sum, inverse);
  if (outScale)
    result = kb.fmul(result, kb.load(outScale, {kvHead, channel}));
  // The output's only rounding.
  Type outType = cast<MemRefType>(out.getType()).getElementType();
  Value rounded = arith::TruncFOp::create(kb.b, kb.loc, outType, result);
  kb.store(rounded, out, {token, head, channel});
}

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

auto ::pattn::buildTensorCorePagedKernels(
    KernelModule &kernels, PagedAttentionOp op, const CacheBuffers &key,
    const CacheBuffers &value, int64_t sharedBytes, SplitRows rows,
    llvm::function_ref<gpu::GPUFuncOp(llvm::SmallVectorImpl<Value> &)>
        buildDecode,
    bool withMerge) -> DecodeKernels {
  DecodeKernels result;
  result.decode = buildDecode(result.decodeOperands);
  if (withMerge)
    result.merge =
        buildPagedMergeKernel(kernels, op, result.mergeOperands, rows);
  result.numHeads = static_cast<int64_t>(op.getNumHeads());
  result.valueDim = value.type.getHeadDim();
  result.blockSize = key.type.getBlockSize();
  result.decodeBlocksPerToken = 0;
  result.sharedBytes = sharedBytes;
  return result;
}
