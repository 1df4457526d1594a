//===- DecodeCommon.h - What every decode kernel family shares --*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// The facts of an attention op that the decode and merge kernels read
// (DecodeParams), and the steps written once for all of them: the guard of
// a device-side fold, the online softmax's -inf conventions.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_COMMON_DECODECOMMON_H
#define PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_COMMON_DECODECOMMON_H

#include "Kernels/Common/KernelBuilder.h"
#include "pattn/Dialect/PAttn/IR/PAttnOps.h"

namespace pattn {

/// What the decode and merge kernels need to know about an attention op
/// (pattn.paged_attention or pattn.mla_decode).
struct DecodeParams {
  mlir::Location loc;
  mlir::Value query = {}, blockTable = {}, seqLens = {}, queryStart = {},
              guard = {}, queryExponents = {}, sinks = {}, outScale = {},
              out = {};
  int32_t guardValue = 0;
  int64_t numHeads = 0;
  int64_t blockSize = 0;
  float softmaxScale = 1.0f;
  float softcap = 0.0f;
  int64_t window = -1;
};

DecodeParams decodeParams(pattn::PagedAttentionOp op);
/// `keyDim` (latent + rope) sets the default softmax scale.
DecodeParams decodeParams(pattn::MlaDecodeOp op, int64_t keyDim);

/// True when the guard (if any) lets this launch run: the device-side
/// fold's flag equals `guardValue`.
mlir::Value guardAllows(KernelBuilder &kb, mlir::Value guard,
                        int32_t guardValue);

/// The online softmax's conventions: -inf is "no key yet".
mlir::Value negInf(KernelBuilder &kb);
mlir::Value isNegInf(KernelBuilder &kb, mlir::Value x);
/// exp(x - m), or 0 when x is -inf (also when m is).
mlir::Value softmaxWeight(KernelBuilder &kb, mlir::Value x, mlir::Value m);

} // namespace pattn

#endif // PATTN_LIB_CONVERSION_PATTNTOGPU_KERNELS_COMMON_DECODECOMMON_H
