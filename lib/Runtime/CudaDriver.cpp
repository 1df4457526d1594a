//===- CudaDriver.cpp - CUDA driver loaded at run time ----------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the runtime's access to the CUDA driver: dlopen of
// libcuda and cuInit once per process, the primary context used by threads
// that have no current context, and the formatting of driver results into
// the specific messages callers see.
//
//===----------------------------------------------------------------------===//

#include "CudaDriver.h"

#include <dlfcn.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <mutex>

namespace pattn::runtime {

namespace {

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

/// The outcome of loading the driver, fixed for the life of the process.
struct DriverLoad {
  Driver driver{};
  Error error;
};

/// The status a failed cuInit or cuDeviceGet maps to: a machine without a
/// usable driver and one without a device are different fixes for the user.
int32_t statusForInitResult(CUresult result) {
  switch (result) {
  case CUDA_ERROR_NO_DEVICE:
  case CUDA_ERROR_INVALID_DEVICE:
    return PATTN_ERROR_NO_DEVICE;
  case CUDA_ERROR_INSUFFICIENT_DRIVER:
    return PATTN_ERROR_NO_DRIVER;
  default:
    return PATTN_ERROR_CUDA;
  }
}

Error missingFunction(const std::string &path, const char *symbol) {
  // cuMemAllocAsync, the newest function used, arrived in CUDA 11.2.
  return {PATTN_ERROR_NO_DRIVER, "CUDA driver " + path + " lacks " + symbol +
                                     " (a driver for CUDA 11.2 or newer is "
                                     "required)"};
}

Error openDriver(Driver &driver) {
  const char *override = std::getenv("PATTN_CUDA_DRIVER");
  const std::string path = override && *override ? override : "libcuda.so.1";

  // RTLD_LOCAL keeps the driver's symbols out of the global namespace, and
  // the handle is never closed: artifacts' global destructors may still
  // unload modules at process exit.
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *reason = dlerror();
    return {PATTN_ERROR_NO_DRIVER,
            "CUDA driver not found: dlopen(" + path +
                ") failed: " + (reason ? reason : "unknown error")};
  }

#define PATTN_RESOLVE_DRIVER_FUNCTION(member, symbol, type)                    \
  driver.member =                                                              \
      reinterpret_cast<std::add_pointer_t<type>>(dlsym(handle, symbol));       \
  if (!driver.member)                                                          \
    return missingFunction(path, symbol);
  PATTN_CUDA_DRIVER_FUNCTIONS(PATTN_RESOLVE_DRIVER_FUNCTION)
#undef PATTN_RESOLVE_DRIVER_FUNCTION

  CUresult result = driver.cuInit(0);
  // The toolkit's stub libcuda (found through a library path meant for
  // linking) cannot even name its own error.
  if (result == CUDA_ERROR_STUB_LIBRARY)
    return {PATTN_ERROR_NO_DRIVER,
            "CUDA driver " + path +
                " is the CUDA toolkit's stub library, not a driver "
                "(cuInit: CUDA_ERROR_STUB_LIBRARY); remove the stubs "
                "directory from the library path"};
  if (result != CUDA_SUCCESS)
    return driverError(driver, statusForInitResult(result), "cuInit", result);
  return {};
}

/// Set by an exit handler: from then on the driver may be torn down.
std::atomic<bool> exiting{false};

const DriverLoad &driverLoad() {
  // Never destroyed: artifacts' global destructors unload modules after
  // this library's statics are gone.
  static DriverLoad *load;
  static std::once_flag once;
  std::call_once(once, [] {
    load = new DriverLoad;
    load->error = openDriver(load->driver);
    // Registered after the driver was opened (and initialized), so it runs
    // before the driver's own exit handlers and static destructors.
    std::atexit([] { exiting.store(true); });
  });
  return *load;
}

//===----------------------------------------------------------------------===//
// Primary context
//===----------------------------------------------------------------------===//

struct PrimaryContext {
  CUcontext context = nullptr;
  Error error;
};

/// Retains the configured device's primary context. It is retained lazily,
/// only for threads without a current context, because retaining creates
/// the context (hundreds of MiB of device memory) on a device the process
/// may otherwise never use; it is held for the life of the process.
Error retainPrimaryContext(const Driver &cu, CUcontext &context) {
  int ordinal = 0;
  if (const char *text = std::getenv("PATTN_DEVICE"); text && *text) {
    char *end = nullptr;
    errno = 0;
    const long value = std::strtol(text, &end, 10);
    if (*end != '\0' || errno != 0 || value < 0 || value > INT32_MAX)
      return {PATTN_ERROR_INVALID_ARGUMENT, "PATTN_DEVICE='" +
                                                std::string(text) +
                                                "' is not a device ordinal"};
    ordinal = static_cast<int>(value);
  }

  CUdevice device = 0;
  if (CUresult result = cu.cuDeviceGet(&device, ordinal);
      result != CUDA_SUCCESS)
    return driverError(cu, statusForInitResult(result),
                       "cuDeviceGet(" + std::to_string(ordinal) + ")", result);
  if (CUresult result = cu.cuDevicePrimaryCtxRetain(&context, device);
      result != CUDA_SUCCESS)
    return driverError(cu, PATTN_ERROR_CUDA,
                       "cuDevicePrimaryCtxRetain(device " +
                           std::to_string(ordinal) + ")",
                       result);
  return {};
}

const PrimaryContext &primaryContext(const Driver &cu) {
  static PrimaryContext *primary;
  static std::once_flag once;
  std::call_once(once, [&cu] {
    primary = new PrimaryContext;
    primary->error = retainPrimaryContext(cu, primary->context);
  });
  return *primary;
}

} // namespace

//===----------------------------------------------------------------------===//
// Public to the runtime
//===----------------------------------------------------------------------===//

bool processIsExiting() { return exiting.load(); }

const Driver *loadDriver(Error &error) {
  const DriverLoad &load = driverLoad();
  if (load.error) {
    error = load.error;
    return nullptr;
  }
  return &load.driver;
}

std::string describeResult(const Driver &cu, CUresult result) {
  const char *name = nullptr;
  const char *text = nullptr;
  if (cu.cuGetErrorName(result, &name) != CUDA_SUCCESS || !name)
    return "CUDA error " + std::to_string(result);
  if (cu.cuGetErrorString(result, &text) != CUDA_SUCCESS || !text)
    return name;
  return std::string(name) + " (" + text + ")";
}

Error driverError(const Driver &cu, int32_t status, const std::string &call,
                  CUresult result) {
  return {status, call + " failed: " + describeResult(cu, result)};
}

std::optional<int> currentCapability(const Driver &cu) {
  CUdevice device = 0;
  int major = 0;
  int minor = 0;
  if (cu.cuCtxGetDevice(&device) != CUDA_SUCCESS ||
      cu.cuDeviceGetAttribute(&major,
                              CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                              device) != CUDA_SUCCESS ||
      cu.cuDeviceGetAttribute(&minor,
                              CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                              device) != CUDA_SUCCESS)
    return std::nullopt;
  return major * 10 + minor;
}

std::string currentChip(const Driver &cu) {
  std::optional<int> capability = currentCapability(cu);
  if (!capability)
    return "an unknown chip";
  return "sm_" + std::to_string(*capability);
}

CUcontext currentContext(const Driver &cu) {
  CUcontext context = nullptr;
  if (cu.cuCtxGetCurrent(&context) != CUDA_SUCCESS)
    return nullptr;
  return context;
}

CUcontext ContextScope::enter(const Driver &cu, Error &error) {
  CUcontext context = nullptr;
  if (CUresult result = cu.cuCtxGetCurrent(&context); result != CUDA_SUCCESS) {
    error = driverError(cu, PATTN_ERROR_CUDA, "cuCtxGetCurrent", result);
    return nullptr;
  }
  if (context)
    return context;

  const PrimaryContext &primary = primaryContext(cu);
  if (primary.error) {
    error = primary.error;
    return nullptr;
  }
  if (CUresult result = cu.cuCtxPushCurrent(primary.context);
      result != CUDA_SUCCESS) {
    error = driverError(cu, PATTN_ERROR_CUDA, "cuCtxPushCurrent", result);
    return nullptr;
  }
  pushedBy = &cu;
  return primary.context;
}

ContextScope::~ContextScope() {
  if (!pushedBy)
    return;
  CUcontext popped = nullptr;
  pushedBy->cuCtxPopCurrent(&popped);
}

} // namespace pattn::runtime
