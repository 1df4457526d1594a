//===- PAttnOps.h - pattn operations ----------------------------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_DIALECT_PATTN_IR_PATTNOPS_H
#define PATTN_DIALECT_PATTN_IR_PATTNOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "pattn/Dialect/PAttn/IR/BufferRules.h"
#include "pattn/Dialect/PAttn/IR/PAttnDialect.h"

#define GET_OP_CLASSES
#include "pattn/Dialect/PAttn/IR/PAttnOps.h.inc"

#endif // PATTN_DIALECT_PATTN_IR_PATTNOPS_H
