//===- PAttn.td - pattn dialect umbrella -------------------*- tablegen -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// The umbrella file of the pattn dialect: every generated header and doc is
// produced from here so that attributes, types and ops see each other.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_DIALECT_PATTN_IR_PATTN_TD
#define PATTN_DIALECT_PATTN_IR_PATTN_TD

include "pattn/Dialect/PAttn/IR/PAttnDialect.td"
include "pattn/Dialect/PAttn/IR/PAttnAttrs.td"
include "pattn/Dialect/PAttn/IR/PAttnTypes.td"
include "pattn/Dialect/PAttn/IR/PAttnOps.td"

#endif // PATTN_DIALECT_PATTN_IR_PATTN_TD
