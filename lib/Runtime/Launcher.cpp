//===- Launcher.cpp - The mgpu* launcher ABI --------------------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the C functions that upstream MLIR's gpu-to-llvm
// lowering calls from an artifact's host code: module loading, kernel
// launch, streams, and stream-ordered memory. Each one checks what it can
// before reaching the driver, turns every failure into a specific sticky
// error, and does nothing once an error is pending, so that a failed
// allocation is never followed by a kernel writing through a null pointer.
//
//===----------------------------------------------------------------------===//

#include "CudaDriver.h"
#include "Module.h"

#include <initializer_list>
#include <mutex>
#include <unordered_set>

namespace pattn::runtime {

namespace {

/// The prologue of every entry point: refuse to run once an error is
/// pending on the thread (unless the call releases something, which must
/// happen regardless), load the driver and enter a context. Failures are
/// recorded and leave the call inactive.
class Call {
public:
  enum Kind { Regular, Release };

  explicit Call(Kind kind = Regular) {
    if (kind == Regular && hasPendingError())
      return;
    Error error;
    const Driver *driver = loadDriver(error);
    if (driver)
      entered = scope.enter(*driver, error);
    if (entered)
      cu = driver;
    recordError(error);
  }

  explicit operator bool() const { return cu != nullptr; }
  const Driver &driver() const { return *cu; }
  CUcontext context() const { return entered; }

private:
  ContextScope scope;
  CUcontext entered = nullptr;
  const Driver *cu = nullptr;
};

/// Device pointers from the cuMemAlloc fallback, which cuMemFree must
/// release: cuMemFreeAsync is only for the stream-ordered allocator.
class SyncAllocations {
public:
  void add(CUdeviceptr pointer) {
    std::lock_guard<std::mutex> lock(mutex);
    pointers.insert(pointer);
  }
  bool remove(CUdeviceptr pointer) {
    std::lock_guard<std::mutex> lock(mutex);
    return pointers.erase(pointer) != 0;
  }

private:
  std::mutex mutex;
  std::unordered_set<CUdeviceptr> pointers;
};

SyncAllocations &syncAllocations() {
  // Never destroyed: artifacts may free from their global destructors,
  // after this library's statics are gone.
  static SyncAllocations *allocations = new SyncAllocations;
  return *allocations;
}

CUdeviceptr devicePointer(const void *pointer) {
  return reinterpret_cast<CUdeviceptr>(pointer);
}

void *newModule(const void *image, size_t size,
                std::optional<int> jitOptLevel) {
  // Without memory for the handle there is nothing to remember the failure
  // in; the null handle makes pattnMgpuModuleGetFunction report an invalid
  // argument instead.
  auto *module = new (std::nothrow) Module(image, jitOptLevel);
  if (!module)
    return nullptr;
  // Load now if the process has picked its context (PyTorch made it
  // current), so PTX is JIT-compiled at load time rather than on the first
  // launch, which may be inside a CUDA graph capture, where loading is not
  // allowed; otherwise wait for a launching thread to say which context.
  // An artifact built for several chips holds a module per chip group, and
  // its host code launches from the device's only: a fatbin without code
  // for this device is left unloaded (loading it would only fail, which
  // compute-sanitizer reports), and a launch from it still reports "no
  // kernel binary for this GPU".
  Error ignored;
  if (const Driver *cu = loadDriver(ignored))
    if (CUcontext context = currentContext(*cu)) {
      std::optional<int> capability = currentCapability(*cu);
      std::optional<bool> loads;
      if (capability && !jitOptLevel)
        loads = fatbinLoadsOn(image, size, *capability);
      if (loads.value_or(true))
        module->load(*cu, context);
    }
  return module;
}

std::string launchShape(intptr_t gridX, intptr_t gridY, intptr_t gridZ,
                        intptr_t blockX, intptr_t blockY, intptr_t blockZ,
                        int32_t smem) {
  auto triple = [](intptr_t x, intptr_t y, intptr_t z) {
    return "(" + std::to_string(x) + ", " + std::to_string(y) + ", " +
           std::to_string(z) + ")";
  };
  return "grid " + triple(gridX, gridY, gridZ) + ", block " +
         triple(blockX, blockY, blockZ) + ", " + std::to_string(smem) +
         " bytes of dynamic shared memory";
}

bool isLaunchExtent(intptr_t value) {
  return value >= 0 && static_cast<uintmax_t>(value) <= UINT32_MAX;
}

/// Opts `kernel` into `smem` bytes of dynamic shared memory if it needs
/// more than it has; kernels start at the 48 KiB every device grants.
Error raiseSharedMemoryLimit(const Driver &cu, Kernel &kernel, int32_t smem) {
  if (smem <= kernel.sharedBytesLimit.load(std::memory_order_relaxed))
    return {};
  if (CUresult result = cu.cuFuncSetAttribute(
          kernel.handle, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem);
      result != CUDA_SUCCESS) {
    Error error = driverError(cu, PATTN_ERROR_LAUNCH,
                              "cuFuncSetAttribute(" + kernel.name +
                                  ", MAX_DYNAMIC_SHARED_SIZE_BYTES, " +
                                  std::to_string(smem) + ")",
                              result);
    CUdevice device = 0;
    int optIn = 0;
    if (cu.cuCtxGetDevice(&device) == CUDA_SUCCESS &&
        cu.cuDeviceGetAttribute(
            &optIn, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            device) == CUDA_SUCCESS)
      error.message += "; " + currentChip(cu) + " allows at most " +
                       std::to_string(optIn) + " bytes per block";
    return error;
  }
  // Concurrent launches may both set the attribute; setting is idempotent
  // and the limit only grows.
  int32_t limit = kernel.sharedBytesLimit.load(std::memory_order_relaxed);
  while (limit < smem && !kernel.sharedBytesLimit.compare_exchange_weak(
                             limit, smem, std::memory_order_relaxed)) {
  }
  return {};
}

} // namespace

/// Attributes `attributes` of the current context's device, in order, into
/// `values`; false (the error recorded) when the driver refuses one.
static bool currentDeviceAttributes(const Driver &cu,
                                    std::initializer_list<int> attributes,
                                    int *values) {
  CUdevice device = 0;
  CUresult result = cu.cuCtxGetDevice(&device);
  for (int attribute : attributes) {
    if (result != CUDA_SUCCESS)
      break;
    result = cu.cuDeviceGetAttribute(values++, attribute, device);
  }
  if (result == CUDA_SUCCESS)
    return true;
  recordError(
      driverError(cu, PATTN_ERROR_CUDA, "cuDeviceGetAttribute", result));
  return false;
}

} // namespace pattn::runtime

using namespace pattn::runtime;

extern "C" {

//===----------------------------------------------------------------------===//
// Modules and launches
//===----------------------------------------------------------------------===//

void *pattnMgpuModuleLoad(void *data, size_t gpuBlobSize) {
  // cuModuleLoadData reads the size from the cubin or fatbin header; the
  // blob's size bounds what newModule reads of a fatbin's entries.
  return newModule(data, gpuBlobSize, std::nullopt);
}

void *pattnMgpuModuleLoadJIT(void *data, int optLevel) {
  return newModule(data, 0, optLevel);
}

void pattnMgpuModuleUnload(void *module) {
  delete static_cast<Module *>(module);
}

void *pattnMgpuModuleGetFunction(void *module, const char *name) {
  Call call;
  if (!call)
    return nullptr;
  if (!module || !name) {
    recordError({PATTN_ERROR_INVALID_ARGUMENT,
                 std::string("pattnMgpuModuleGetFunction(") +
                     (name ? name : "<null name>") +
                     "): " + (module ? "null kernel name" : "null module")});
    return nullptr;
  }
  Error error;
  Kernel *kernel = static_cast<Module *>(module)->getKernel(
      call.driver(), call.context(), name, error);
  recordError(error);
  return kernel;
}

void pattnMgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                           intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                           intptr_t blockZ, int32_t smem, void *stream,
                           void **params, void **extra,
                           size_t /*paramsCount*/) {
  Call call;
  if (!call)
    return;
  const Driver &cu = call.driver();
  auto *kernel = static_cast<Kernel *>(function);
  if (!kernel) {
    recordError({PATTN_ERROR_INVALID_ARGUMENT,
                 "pattnMgpuLaunchKernel: null kernel function"});
    return;
  }
  if (!isLaunchExtent(gridX) || !isLaunchExtent(gridY) ||
      !isLaunchExtent(gridZ) || !isLaunchExtent(blockX) ||
      !isLaunchExtent(blockY) || !isLaunchExtent(blockZ) || smem < 0) {
    recordError(
        {PATTN_ERROR_INVALID_ARGUMENT,
         "pattnMgpuLaunchKernel(" + kernel->name +
             "): launch bounds out of range: " +
             launchShape(gridX, gridY, gridZ, blockX, blockY, blockZ, smem)});
    return;
  }
  // Grids scale with the batch; an empty batch has nothing to launch.
  if (gridX == 0 || gridY == 0 || gridZ == 0)
    return;

  if (Error error = raiseSharedMemoryLimit(cu, *kernel, smem)) {
    recordError(error);
    return;
  }
  if (CUresult result = cu.cuLaunchKernel(
          kernel->handle, static_cast<unsigned>(gridX),
          static_cast<unsigned>(gridY), static_cast<unsigned>(gridZ),
          static_cast<unsigned>(blockX), static_cast<unsigned>(blockY),
          static_cast<unsigned>(blockZ), static_cast<unsigned>(smem),
          static_cast<CUstream>(stream), params, extra);
      result != CUDA_SUCCESS) {
    Error error = driverError(cu, PATTN_ERROR_LAUNCH,
                              "cuLaunchKernel(" + kernel->name + ")", result);
    error.message +=
        " [" + launchShape(gridX, gridY, gridZ, blockX, blockY, blockZ, smem) +
        "]";
    recordError(error);
  }
}

//===----------------------------------------------------------------------===//
// Streams
//===----------------------------------------------------------------------===//

void *pattnMgpuStreamCreate(void) {
  Call call;
  if (!call)
    return nullptr;
  CUstream stream = nullptr;
  // Non-blocking, as upstream's wrappers create it: the legacy default
  // stream must not serialize against the artifact's own work.
  if (CUresult result =
          call.driver().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);
      result != CUDA_SUCCESS) {
    recordError(
        driverError(call.driver(), PATTN_ERROR_CUDA, "cuStreamCreate", result));
    return nullptr;
  }
  return stream;
}

void pattnMgpuStreamSynchronize(void *stream) {
  Call call;
  if (!call)
    return;
  if (CUresult result =
          call.driver().cuStreamSynchronize(static_cast<CUstream>(stream));
      result != CUDA_SUCCESS)
    recordError(driverError(call.driver(), PATTN_ERROR_CUDA,
                            "cuStreamSynchronize", result));
}

void pattnMgpuStreamDestroy(void *stream) {
  if (!stream)
    return;
  Call call(Call::Release);
  if (!call)
    return;
  if (CUresult result =
          call.driver().cuStreamDestroy(static_cast<CUstream>(stream));
      result != CUDA_SUCCESS)
    recordError(driverError(call.driver(), PATTN_ERROR_CUDA, "cuStreamDestroy",
                            result));
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

namespace {
/// The device error word: page-locked, mapped and portable host memory
/// created once (under `mutex`) and never freed.
struct DeviceErrorWord {
  std::mutex mutex;
  int32_t *host = nullptr;
  CUdeviceptr device = 0;
};
DeviceErrorWord &deviceErrorWord() {
  static DeviceErrorWord word;
  return word;
}
} // namespace

void _mlir_ciface_pattnRuntimeDeviceErrorWord(pattnI32Buffer *result) {
  if (!result)
    return;
  *result = pattnI32Buffer{nullptr, nullptr, 0, 1, 1};
  Call call;
  if (!call)
    return;
  const Driver &cu = call.driver();
  DeviceErrorWord &word = deviceErrorWord();
  std::lock_guard<std::mutex> lock(word.mutex);
  if (!word.host) {
    void *host = nullptr;
    CUresult status =
        cu.cuMemHostAlloc(&host, sizeof(int32_t),
                          CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
    if (status != CUDA_SUCCESS) {
      recordError(
          driverError(cu, PATTN_ERROR_OUT_OF_MEMORY, "cuMemHostAlloc", status));
      return;
    }
    word.host = static_cast<int32_t *>(host);
    __atomic_store_n(word.host, 0, __ATOMIC_SEQ_CST);
  }
  if (!word.device) {
    CUresult status = cu.cuMemHostGetDevicePointer(&word.device, word.host, 0);
    if (status != CUDA_SUCCESS) {
      word.device = 0;
      recordError(driverError(cu, PATTN_ERROR_CUDA, "cuMemHostGetDevicePointer",
                              status));
      return;
    }
  }
  auto *device = reinterpret_cast<int32_t *>(word.device);
  *result = pattnI32Buffer{device, device, 0, 1, 1};
}

int32_t pattnRuntimeTakeDeviceErrors(void) {
  DeviceErrorWord &word = deviceErrorWord();
  std::lock_guard<std::mutex> lock(word.mutex);
  if (!word.host)
    return 0;
  return __atomic_exchange_n(word.host, 0, __ATOMIC_SEQ_CST);
}

int32_t pattnRuntimeDeviceArch(void) {
  Call call;
  if (!call)
    return 0;
  int capability[2] = {0, 0};
  if (!currentDeviceAttributes(call.driver(),
                               {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR},
                               capability))
    return 0;
  return capability[0] * 10 + capability[1];
}

int32_t pattnRuntimeDeviceMultiprocessors(void) {
  Call call;
  if (!call)
    return 0;
  int count = 0;
  if (!currentDeviceAttributes(
          call.driver(), {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT}, &count))
    return 0;
  return count;
}

void *pattnMgpuMemAlloc(uint64_t sizeBytes, void *stream, bool isHostShared) {
  Call call;
  if (!call)
    return nullptr;
  if (isHostShared) {
    recordError(
        {PATTN_ERROR_INVALID_ARGUMENT,
         "pattnMgpuMemAlloc: host-shared allocations are not supported"});
    return nullptr;
  }
  if (sizeBytes == 0)
    return nullptr;

  const Driver &cu = call.driver();
  CUdeviceptr pointer = 0;
  const char *allocator = "cuMemAllocAsync";
  CUresult result =
      cu.cuMemAllocAsync(&pointer, sizeBytes, static_cast<CUstream>(stream));
  // Devices without memory pools (some virtualized GPUs) only have the
  // synchronous allocator, which a CUDA graph cannot capture.
  if (result == CUDA_ERROR_NOT_SUPPORTED) {
    allocator = "cuMemAlloc";
    result = cu.cuMemAlloc(&pointer, sizeBytes);
    if (result == CUDA_SUCCESS)
      syncAllocations().add(pointer);
  }
  if (result != CUDA_SUCCESS) {
    recordError(driverError(
        cu,
        result == CUDA_ERROR_OUT_OF_MEMORY ? PATTN_ERROR_OUT_OF_MEMORY
                                           : PATTN_ERROR_CUDA,
        std::string(allocator) + "(" + std::to_string(sizeBytes) + " bytes)",
        result));
    return nullptr;
  }
  return reinterpret_cast<void *>(pointer);
}

void pattnMgpuMemFree(void *ptr, void *stream) {
  if (!ptr)
    return;
  Call call(Call::Release);
  if (!call)
    return;
  const Driver &cu = call.driver();
  const CUdeviceptr pointer = devicePointer(ptr);
  const bool isSync = syncAllocations().remove(pointer);
  if (CUresult result =
          isSync ? cu.cuMemFree(pointer)
                 : cu.cuMemFreeAsync(pointer, static_cast<CUstream>(stream));
      result != CUDA_SUCCESS)
    recordError(driverError(cu, PATTN_ERROR_CUDA,
                            isSync ? "cuMemFree" : "cuMemFreeAsync", result));
}

void pattnMgpuMemcpy(void *dst, void *src, size_t sizeBytes, void *stream) {
  Call call;
  if (!call || sizeBytes == 0)
    return;
  if (!dst || !src) {
    recordError({PATTN_ERROR_INVALID_ARGUMENT,
                 std::string("pattnMgpuMemcpy: null ") +
                     (dst ? "source" : "destination") + " for " +
                     std::to_string(sizeBytes) + " bytes"});
    return;
  }
  // With unified addressing one call covers every direction.
  if (CUresult result =
          call.driver().cuMemcpyAsync(devicePointer(dst), devicePointer(src),
                                      sizeBytes, static_cast<CUstream>(stream));
      result != CUDA_SUCCESS)
    recordError(driverError(
        call.driver(), PATTN_ERROR_CUDA,
        "cuMemcpyAsync(" + std::to_string(sizeBytes) + " bytes)", result));
}

void pattnMgpuMemset32(void *dst, unsigned int value, size_t count,
                       void *stream) {
  Call call;
  if (!call || count == 0)
    return;
  if (!dst) {
    recordError({PATTN_ERROR_INVALID_ARGUMENT,
                 "pattnMgpuMemset32: null destination for " +
                     std::to_string(count) + " words"});
    return;
  }
  if (CUresult result = call.driver().cuMemsetD32Async(
          devicePointer(dst), value, count, static_cast<CUstream>(stream));
      result != CUDA_SUCCESS)
    recordError(driverError(
        call.driver(), PATTN_ERROR_CUDA,
        "cuMemsetD32Async(" + std::to_string(count) + " words)", result));
}

} // extern "C"
