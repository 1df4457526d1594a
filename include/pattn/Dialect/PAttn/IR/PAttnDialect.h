//===- PAttnDialect.h - pattn dialect, attributes and types -----*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// Declares the pattn dialect with its enums, attributes and types. Ops are in
// PAttnOps.h.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_DIALECT_PATTN_IR_PATTNDIALECT_H
#define PATTN_DIALECT_PATTN_IR_PATTNDIALECT_H

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"

#include "pattn/Dialect/PAttn/IR/PAttnDialect.h.inc"
#include "pattn/Dialect/PAttn/IR/PAttnEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "pattn/Dialect/PAttn/IR/PAttnAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "pattn/Dialect/PAttn/IR/PAttnTypes.h.inc"

#endif // PATTN_DIALECT_PATTN_IR_PATTNDIALECT_H
