//===- CudaDriver.h - CUDA driver loaded at run time ------------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This header declares the runtime's private view of the CUDA driver: the
// few driver API types, constants and entry points the launcher uses,
// declared here rather than taken from cuda.h so that the runtime builds
// without a CUDA toolkit; the once-per-process loader; the context that a
// call runs in; and the Error value that carries a failure to the entry
// point that reports it.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_LIB_RUNTIME_CUDADRIVER_H
#define PATTN_LIB_RUNTIME_CUDADRIVER_H

#include "pattn/Runtime/Runtime.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

namespace pattn::runtime {

//===----------------------------------------------------------------------===//
// Driver API subset
//===----------------------------------------------------------------------===//

// Values from cuda.h (CUDA 13); the driver keeps them stable across versions.
// C enums are int-sized on every ABI CUDA supports, so they are passed as int.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
using CUstream = struct CUstream_st *;

enum : CUresult {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_STUB_LIBRARY = 34,
  CUDA_ERROR_INSUFFICIENT_DRIVER = 35,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
  CUDA_ERROR_NOT_SUPPORTED = 801,
};

enum : int {
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
  CU_JIT_OPTIMIZATION_LEVEL = 7,
  CU_STREAM_NON_BLOCKING = 1,
  CU_MEMHOSTALLOC_PORTABLE = 1,
  CU_MEMHOSTALLOC_DEVICEMAP = 2,
};

/// Dynamic shared memory a kernel may use without opting in.
constexpr int32_t kDefaultDynamicSharedBytes = 48 * 1024;

// X(member, exported symbol, function type). The symbols are the versioned
// ones cuda.h maps the plain names to; the member names are the plain ones.
#define PATTN_CUDA_DRIVER_FUNCTIONS(X)                                         \
  X(cuInit, "cuInit", CUresult(unsigned))                                      \
  X(cuDeviceGet, "cuDeviceGet", CUresult(CUdevice *, int))                     \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute",                              \
    CUresult(int *, int, CUdevice))                                            \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain",                      \
    CUresult(CUcontext *, CUdevice))                                           \
  X(cuCtxGetCurrent, "cuCtxGetCurrent", CUresult(CUcontext *))                 \
  X(cuCtxGetDevice, "cuCtxGetDevice", CUresult(CUdevice *))                    \
  X(cuCtxPushCurrent, "cuCtxPushCurrent_v2", CUresult(CUcontext))              \
  X(cuCtxPopCurrent, "cuCtxPopCurrent_v2", CUresult(CUcontext *))              \
  X(cuModuleLoadData, "cuModuleLoadData", CUresult(CUmodule *, const void *))  \
  X(cuModuleLoadDataEx, "cuModuleLoadDataEx",                                  \
    CUresult(CUmodule *, const void *, unsigned, int *, void **))              \
  X(cuModuleUnload, "cuModuleUnload", CUresult(CUmodule))                      \
  X(cuModuleGetFunction, "cuModuleGetFunction",                                \
    CUresult(CUfunction *, CUmodule, const char *))                            \
  X(cuFuncSetAttribute, "cuFuncSetAttribute", CUresult(CUfunction, int, int))  \
  X(cuLaunchKernel, "cuLaunchKernel",                                          \
    CUresult(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,     \
             unsigned, unsigned, CUstream, void **, void **))                  \
  X(cuMemAllocAsync, "cuMemAllocAsync",                                        \
    CUresult(CUdeviceptr *, size_t, CUstream))                                 \
  X(cuMemFreeAsync, "cuMemFreeAsync", CUresult(CUdeviceptr, CUstream))         \
  X(cuMemAlloc, "cuMemAlloc_v2", CUresult(CUdeviceptr *, size_t))              \
  X(cuMemFree, "cuMemFree_v2", CUresult(CUdeviceptr))                          \
  X(cuMemHostAlloc, "cuMemHostAlloc", CUresult(void **, size_t, unsigned))     \
  X(cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2",                 \
    CUresult(CUdeviceptr *, void *, unsigned))                                 \
  X(cuMemcpyAsync, "cuMemcpyAsync",                                            \
    CUresult(CUdeviceptr, CUdeviceptr, size_t, CUstream))                      \
  X(cuMemsetD32Async, "cuMemsetD32Async",                                      \
    CUresult(CUdeviceptr, unsigned, size_t, CUstream))                         \
  X(cuStreamCreate, "cuStreamCreate", CUresult(CUstream *, unsigned))          \
  X(cuStreamSynchronize, "cuStreamSynchronize", CUresult(CUstream))            \
  X(cuStreamDestroy, "cuStreamDestroy_v2", CUresult(CUstream))                 \
  X(cuGetErrorName, "cuGetErrorName", CUresult(CUresult, const char **))       \
  X(cuGetErrorString, "cuGetErrorString", CUresult(CUresult, const char **))

/// The driver's entry points, resolved once from libcuda.
struct Driver {
#define PATTN_DECLARE_DRIVER_FUNCTION(member, symbol, type)                    \
  std::add_pointer_t<type> member;
  PATTN_CUDA_DRIVER_FUNCTIONS(PATTN_DECLARE_DRIVER_FUNCTION)
#undef PATTN_DECLARE_DRIVER_FUNCTION
};

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

/// A failure on its way to whoever reports it: the calling thread's sticky
/// error, or a module handle that remembers why it cannot be used.
struct Error {
  int32_t status = PATTN_SUCCESS;
  std::string message;

  explicit operator bool() const { return status != PATTN_SUCCESS; }
};

/// Records `error` as this thread's sticky error unless one is pending.
void recordError(const Error &error);

/// Whether an error is pending on this thread.
bool hasPendingError();

/// "CUDA_ERROR_INVALID_VALUE (invalid argument)".
std::string describeResult(const Driver &cu, CUresult result);

/// An Error for a failed driver call: "<call> failed: <describeResult>".
Error driverError(const Driver &cu, int32_t status, const std::string &call,
                  CUresult result);

/// The compute capability (major * 10 + minor, 90 for sm_90) of the device
/// of the current context; nullopt if the driver cannot say.
std::optional<int> currentCapability(const Driver &cu);

/// "sm_90" for the device of the current context, "an unknown chip" if the
/// driver cannot say.
std::string currentChip(const Driver &cu);

//===----------------------------------------------------------------------===//
// Driver and context
//===----------------------------------------------------------------------===//

/// Loads libcuda (PATTN_CUDA_DRIVER overrides the path), resolves every
/// entry point and runs cuInit, once per process. Returns null and fills
/// `error` with the same failure on every call if any step failed.
const Driver *loadDriver(Error &error);

/// Whether the process has begun to exit (an exit handler registered when
/// the driver was loaded has run). Artifacts' global destructors unload
/// their modules after that, when the driver's contexts and the driver
/// itself may be gone: teardown then makes no driver calls, and the
/// process's end releases the modules.
bool processIsExiting();

/// The calling thread's current context, or null if it has none. Requires a
/// loaded driver.
CUcontext currentContext(const Driver &cu);

/// Makes a context current for the scope of one runtime call: the caller's
/// own if it has one (PyTorch makes the device's primary context current),
/// otherwise the primary context of the configured device, pushed here and
/// popped on exit.
class ContextScope {
public:
  ContextScope() = default;
  ContextScope(const ContextScope &) = delete;
  ContextScope &operator=(const ContextScope &) = delete;
  ~ContextScope();

  /// Enters a context; on failure fills `error` and returns null.
  CUcontext enter(const Driver &cu, Error &error);

private:
  const Driver *pushedBy = nullptr;
};

} // namespace pattn::runtime

#endif // PATTN_LIB_RUNTIME_CUDADRIVER_H
