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

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/SymbolTable.h"

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

std::optional<SmallVector<float>> pattn::getConstantScaleTable(Value table) {
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
