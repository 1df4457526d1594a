//===- ConstantTables.cpp - Scale tables known at compile time ------------===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the recognition of compile-time scale tables. Only
// immutable sources count: a mutable global could be rewritten between
// compilation and launch, so folding it would bake in stale values.
//
//===----------------------------------------------------------------------===//

#include "pattn/Dialect/PAttn/Transforms/ConstantTables.h"
#include "pattn/Dialect/PAttn/IR/PAttnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;

static std::optional<SmallVector<float>> toFloats(Attribute attr) {
  auto dense = dyn_cast_or_null<DenseFPElementsAttr>(attr);
  if (!dense || !dense.getElementType().isF32())
    return std::nullopt;
  SmallVector<float> values;
  values.reserve(dense.getNumElements());
  for (const APFloat &value : dense.getValues<APFloat>())
    values.push_back(value.convertToFloat());
  return values;
}

auto ::pattn::getConstantScaleTable(Value table)
    -> std::optional<SmallVector<float>> {
  if (auto getGlobal = table.getDefiningOp<memref::GetGlobalOp>()) {
    auto global = SymbolTable::lookupNearestSymbolFrom<memref::GlobalOp>(
        getGlobal, getGlobal.getNameAttr());
    if (!global || !global.getConstant())
      return std::nullopt;
    std::optional<Attribute> init = global.getInitialValue();
    return init ? toFloats(*init) : std::nullopt;
  }
  if (auto toBuffer = table.getDefiningOp<bufferization::ToBufferOp>())
    if (auto constant = toBuffer.getTensor().getDefiningOp<arith::ConstantOp>())
      return toFloats(constant.getValue());
  return std::nullopt;
}

auto ::pattn::verifyStaticScalesAreFinite(Operation *op) -> LogicalResult {
  using namespace pattn;
  // (operand, what the diagnostic calls it, whether it is a [kv_heads,
  // head_dim] channel table).
  SmallVector<std::tuple<Value, StringRef, bool>> scales;
  llvm::TypeSwitch<Operation *>(op)
      .Case([&](PagedAttentionOp attention) {
        bool keyChannel = attention.getKey().getType().getScale() ==
                          ScaleGranularity::channel;
        bool valueChannel = attention.getValue().getType().getScale() ==
                            ScaleGranularity::channel;
        scales.push_back({attention.getKScale(),
                          keyChannel ? "K channel scale table" : "K scale",
                          keyChannel});
        scales.push_back({attention.getVScale(),
                          valueChannel ? "V channel scale table" : "V scale",
                          valueChannel});
        scales.push_back({attention.getOutScale(), "out_scale table", true});
      })
      .Case([&](WriteCacheOp write) {
        scales.push_back({write.getScale(), "write scale", false});
      })
      .Case([&](WriteRecordOp write) {
        scales.push_back({write.getOuterScale(), "outer scale", false});
      })
      .Case([&](MlaDecodeOp mla) {
        scales.push_back({mla.getOuterScale(), "outer scale", false});
      });
  for (auto [table, what, channel] : scales) {
    if (!table)
      continue;
    std::optional<SmallVector<float>> values = getConstantScaleTable(table);
    if (!values)
      continue;
    auto bad =
        llvm::find_if(*values, [](float v) { return !std::isfinite(v); });
    if (bad == values->end())
      continue;
    size_t index = bad - values->begin();
    InFlightDiagnostic diag = op->emitOpError()
                              << what << " holds a non-finite value " << *bad
                              << " at ";
    auto type = cast<MemRefType>(table.getType());
    if (channel && type.getRank() == 2 && type.getDimSize(1) > 0)
      diag << "[kv_head " << index / type.getDimSize(1) << ", channel "
           << index % type.getDimSize(1) << "]";
    else
      diag << "[" << index << "]";
    return diag;
  }
  return success();
}
