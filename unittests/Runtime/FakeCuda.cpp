//===- FakeCuda.cpp - Scriptable stand-in for libcuda -----------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements libPAttnFakeCuda.so: every CUDA driver entry point
// the runtime resolves, under its exported (versioned) name, returning what
// the test scripted in fakecuda::State and logging its arguments. Contexts
// behave like the driver's: a per-thread stack over a current context.
//
//===----------------------------------------------------------------------===//

#include "FakeCuda.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

using namespace fakecuda;

namespace {

// Set when this library's statics are destroyed (at exit, or when it is
// unloaded): a call after that would use the destroyed state below, as a
// call into the real driver after its teardown would use torn-down
// contexts. Trivially destructible, so it stays readable to the end.
bool tornDown = false;

State state;
std::mutex logMutex;
thread_local std::vector<void *> pushedContexts;

// Constructed after the state, so destroyed before it.
struct TeardownSentinel {
  ~TeardownSentinel() { tornDown = true; }
} sentinel;

/// Ends the process, saying who called, if the fake is being torn down
/// (tests expect exit status 0 from processes that exit with the runtime
/// loaded).
void requireAlive(const char *name) {
  if (!tornDown)
    return;
  std::fprintf(stderr,
               "fake CUDA driver: %s called after the driver's statics were "
               "destroyed\n",
               name);
  std::fflush(stderr);
  std::_Exit(86);
}

unsigned long long bits(const void *pointer) {
  return reinterpret_cast<uintptr_t>(pointer);
}

void log(const char *name, std::vector<unsigned long long> args = {}) {
  requireAlive(name);
  std::lock_guard<std::mutex> lock(logMutex);
  state.calls.push_back({name, std::move(args)});
}

struct ErrorName {
  int result;
  const char *name;
  const char *text;
};

constexpr ErrorName kErrorNames[] = {
    {kSuccess, "CUDA_SUCCESS", "no error"},
    {kInvalidValue, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {kOutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {kNoBinaryForGpu, "CUDA_ERROR_NO_BINARY_FOR_GPU",
     "no kernel image is available for execution on the device"},
    {kInvalidPtx, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {kNotFound, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {kLaunchOutOfResources, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
     "too many resources requested for launch"},
    {kNotSupported, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
};

const ErrorName *findError(int result) {
  for (const ErrorName &entry : kErrorNames)
    if (entry.result == result)
      return &entry;
  return nullptr;
}

} // namespace

extern "C" {

State *fakeCudaState() { return &state; }

int cuGetErrorName(int result, const char **name) {
  requireAlive("cuGetErrorName");
  const ErrorName *entry = findError(result);
  if (!entry)
    return kInvalidValue;
  *name = entry->name;
  return kSuccess;
}

int cuGetErrorString(int result, const char **text) {
  requireAlive("cuGetErrorString");
  const ErrorName *entry = findError(result);
  if (!entry)
    return kInvalidValue;
  *text = entry->text;
  return kSuccess;
}

int cuInit(unsigned flags) {
  log("cuInit", {flags});
  return state.initResult;
}

int cuDeviceGet(int *device, int ordinal) {
  log("cuDeviceGet", {static_cast<unsigned long long>(ordinal)});
  *device = ordinal;
  return kSuccess;
}

int cuDeviceGetAttribute(int *value, int attribute, int /*device*/) {
  requireAlive("cuDeviceGetAttribute");
  switch (attribute) {
  case 75:
    *value = state.computeMajor;
    return kSuccess;
  case 76:
    *value = state.computeMinor;
    return kSuccess;
  case 97:
    *value = state.sharedOptInBytes;
    return kSuccess;
  case 16:
    *value = state.multiprocessors;
    return kSuccess;
  default:
    return kInvalidValue;
  }
}

int cuDevicePrimaryCtxRetain(void **context, int device) {
  log("cuDevicePrimaryCtxRetain", {static_cast<unsigned long long>(device)});
  *context = kPrimaryContext;
  return kSuccess;
}

int cuCtxGetCurrent(void **context) {
  requireAlive("cuCtxGetCurrent");
  *context =
      pushedContexts.empty() ? state.currentContext : pushedContexts.back();
  return kSuccess;
}

int cuCtxGetDevice(int *device) {
  requireAlive("cuCtxGetDevice");
  *device = 0;
  return kSuccess;
}

int cuCtxPushCurrent_v2(void *context) {
  log("cuCtxPushCurrent", {bits(context)});
  pushedContexts.push_back(context);
  return kSuccess;
}

int cuCtxPopCurrent_v2(void **context) {
  log("cuCtxPopCurrent");
  if (pushedContexts.empty())
    return kInvalidValue;
  *context = pushedContexts.back();
  pushedContexts.pop_back();
  return kSuccess;
}

int cuModuleLoadData(void **module, const void *image) {
  void *context = nullptr;
  cuCtxGetCurrent(&context);
  log("cuModuleLoadData", {bits(image), bits(context)});
  if (state.moduleLoadResult != kSuccess)
    return state.moduleLoadResult;
  *module = kModule;
  return kSuccess;
}

int cuModuleLoadDataEx(void **module, const void *image, unsigned count,
                       int *options, void **values) {
  void *context = nullptr;
  cuCtxGetCurrent(&context);
  std::vector<unsigned long long> args = {bits(image), bits(context)};
  for (unsigned i = 0; i < count; ++i) {
    args.push_back(static_cast<unsigned long long>(options[i]));
    args.push_back(bits(values[i]));
  }
  log("cuModuleLoadDataEx", std::move(args));
  // Fill the error log buffer the way the driver does.
  for (unsigned i = 0; i < count; ++i)
    if (options[i] == 5 && !state.jitErrorLog.empty())
      std::strcpy(static_cast<char *>(values[i]), state.jitErrorLog.c_str());
  if (state.moduleLoadResult != kSuccess)
    return state.moduleLoadResult;
  *module = kModule;
  return kSuccess;
}

int cuModuleUnload(void *module) {
  void *context = nullptr;
  cuCtxGetCurrent(&context);
  log("cuModuleUnload", {bits(module), bits(context)});
  return kSuccess;
}

int cuModuleGetFunction(void **function, void *module, const char *name) {
  log("cuModuleGetFunction", {bits(module)});
  if (state.getFunctionResult != kSuccess)
    return state.getFunctionResult;
  // Distinct handles per name, so tests can tell kernels apart.
  *function = static_cast<char *>(kFunction) + std::strlen(name);
  return kSuccess;
}

int cuFuncSetAttribute(void *function, int attribute, int value) {
  log("cuFuncSetAttribute",
      {bits(function), static_cast<unsigned long long>(attribute),
       static_cast<unsigned long long>(value)});
  return state.setAttributeResult;
}

int cuLaunchKernel(void *function, unsigned gridX, unsigned gridY,
                   unsigned gridZ, unsigned blockX, unsigned blockY,
                   unsigned blockZ, unsigned sharedBytes, void *stream,
                   void **params, void **extra) {
  log("cuLaunchKernel");
  state.lastLaunch = {function,
                      {gridX, gridY, gridZ},
                      {blockX, blockY, blockZ},
                      sharedBytes,
                      stream,
                      params,
                      extra};
  return state.launchResult;
}

int cuMemAllocAsync(unsigned long long *pointer, size_t bytes, void *stream) {
  log("cuMemAllocAsync", {bytes, bits(stream)});
  if (state.memAllocAsyncResult != kSuccess)
    return state.memAllocAsyncResult;
  *pointer = kDevicePointer;
  return kSuccess;
}

int cuMemFreeAsync(unsigned long long pointer, void *stream) {
  log("cuMemFreeAsync", {pointer, bits(stream)});
  return kSuccess;
}

int cuMemHostAlloc(void **pointer, size_t bytes, unsigned flags) {
  log("cuMemHostAlloc", {bytes, flags});
  // Real host memory: a test plays the device by writing to it.
  static int32_t words[64];
  if (bytes > sizeof(words))
    return kOutOfMemory;
  *pointer = words;
  return kSuccess;
}

int cuMemHostGetDevicePointer_v2(unsigned long long *device, void *host,
                                 unsigned flags) {
  log("cuMemHostGetDevicePointer", {bits(host), flags});
  *device = bits(host); // unified addressing: the same address
  return kSuccess;
}

int cuMemAlloc_v2(unsigned long long *pointer, size_t bytes) {
  log("cuMemAlloc", {bytes});
  *pointer = kDevicePointer + 0x100;
  return kSuccess;
}

int cuMemFree_v2(unsigned long long pointer) {
  log("cuMemFree", {pointer});
  return kSuccess;
}

int cuMemcpyAsync(unsigned long long dst, unsigned long long src, size_t bytes,
                  void *stream) {
  log("cuMemcpyAsync", {dst, src, bytes, bits(stream)});
  return state.memcpyResult;
}

int cuMemsetD32Async(unsigned long long dst, unsigned value, size_t count,
                     void *stream) {
  log("cuMemsetD32Async", {dst, value, count, bits(stream)});
  return kSuccess;
}

int cuStreamCreate(void **stream, unsigned flags) {
  log("cuStreamCreate", {flags});
  *stream = kStream;
  return kSuccess;
}

int cuStreamSynchronize(void *stream) {
  log("cuStreamSynchronize", {bits(stream)});
  return kSuccess;
}

int cuStreamDestroy_v2(void *stream) {
  log("cuStreamDestroy", {bits(stream)});
  return kSuccess;
}

} // extern "C"
