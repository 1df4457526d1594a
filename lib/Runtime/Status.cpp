//===- Status.cpp - Sticky per-thread errors of the runtime -----*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the error half of the runtime's C API. Errors are
// per thread because compiled entry points run concurrently on different
// threads (one per stream, say) and each must return its own outcome; they
// are sticky because the launcher ABI has no return channel, so the first
// failure has to survive until the entry point takes it.
//
//===----------------------------------------------------------------------===//

#include "CudaDriver.h"

namespace pattn::runtime {

namespace {

struct ThreadError {
  int32_t status = PATTN_SUCCESS;
  // Kept after the status is taken: the caller reads it after the entry
  // point has returned (and cleared) the status.
  std::string message;
};

thread_local ThreadError threadError;

} // namespace

void recordError(const Error &error) {
  // The first failure is the cause; later ones are usually its fallout.
  if (!error || threadError.status != PATTN_SUCCESS)
    return;
  threadError.status = error.status;
  threadError.message = error.message;
}

bool hasPendingError() { return threadError.status != PATTN_SUCCESS; }

} // namespace pattn::runtime

using namespace pattn::runtime;

extern "C" {

int32_t pattnRuntimeTakeStatus(void) {
  const int32_t status = threadError.status;
  threadError.status = PATTN_SUCCESS;
  return status;
}

const char *pattnRuntimeLastErrorMessage(void) {
  return threadError.message.c_str();
}

const char *pattnStatusString(int32_t status) {
  switch (status) {
  case PATTN_SUCCESS:
    return "PATTN_SUCCESS";
  case PATTN_ERROR_NO_DRIVER:
    return "PATTN_ERROR_NO_DRIVER";
  case PATTN_ERROR_NO_DEVICE:
    return "PATTN_ERROR_NO_DEVICE";
  case PATTN_ERROR_NO_BINARY_FOR_DEVICE:
    return "PATTN_ERROR_NO_BINARY_FOR_DEVICE";
  case PATTN_ERROR_LAUNCH:
    return "PATTN_ERROR_LAUNCH";
  case PATTN_ERROR_INVALID_ARGUMENT:
    return "PATTN_ERROR_INVALID_ARGUMENT";
  case PATTN_ERROR_OUT_OF_MEMORY:
    return "PATTN_ERROR_OUT_OF_MEMORY";
  case PATTN_ERROR_CUDA:
    return "PATTN_ERROR_CUDA";
  default:
    return "PATTN_ERROR_UNKNOWN";
  }
}

int32_t pattnRuntimeInitialize(void) {
  Error error;
  loadDriver(error);
  recordError(error);
  return error.status;
}

void _mlir_ciface_pattnRuntimeRejectSizes(const pattnI8Buffer *message,
                                          int64_t got, int64_t expected) {
  std::string text = "bad argument sizes";
  if (message && message->aligned && message->size > 0)
    text.assign(message->aligned + message->offset,
                static_cast<size_t>(message->size));
  recordError({PATTN_ERROR_INVALID_ARGUMENT,
               text + ", got " + std::to_string(got) + " against " +
                   std::to_string(expected) + "; nothing was launched"});
}

int32_t pattnRuntimeRecordError(int32_t status, const char *message) {
  recordError({status, message ? message : ""});
  return status;
}

} // extern "C"
