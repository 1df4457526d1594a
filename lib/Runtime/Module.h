//===- Module.h - Kernel images loaded per CUDA context ---------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This header declares the objects behind the launcher ABI's opaque module
// and function handles. A Module is what pattnMgpuModuleLoad returns: the image
// embedded in the artifact, loaded into each CUDA context that launches
// from it. A Kernel is what pattnMgpuModuleGetFunction returns: the driver's
// function handle with its name (for messages) and its shared memory opt-in.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_LIB_RUNTIME_MODULE_H
#define PATTN_LIB_RUNTIME_MODULE_H

#include "CudaDriver.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace pattn::runtime {

/// Whether a fatbin image, as CUDA's `fatbinary` lays it out (pattn-compile
/// merges each kernel module's cubins into one), holds code that a device
/// of compute capability `capability` (major * 10 + minor) can load: a
/// cubin of its major and a minor no higher than its own, or PTX of at most
/// its capability. nullopt for an image this reader does not know (a bare
/// cubin, PTX text, a malformed or truncated container). `size` bounds the
/// reads when it is not zero.
std::optional<bool> fatbinLoadsOn(const void *image, size_t size,
                                  int capability);

/// What pattnMgpuModuleGetFunction returns and pattnMgpuLaunchKernel takes.
struct Kernel {
  Kernel(CUfunction handle, std::string name)
      : handle(handle), name(std::move(name)) {}

  const CUfunction handle;
  const std::string name;
  /// The dynamic shared memory the kernel is opted into so far; launches
  /// above it raise the attribute first.
  std::atomic<int32_t> sharedBytesLimit{kDefaultDynamicSharedBytes};
};

/// An image loaded lazily into every context that asks for one of its
/// kernels. Upstream's ABI loads once, from a global constructor at dlopen
/// time, but a CUmodule is only valid in the context it was loaded into and
/// at dlopen the process may not have chosen its device yet, or may later
/// launch on several. A failed load is remembered for its context and
/// reported again to every thread that asks, never retried.
class Module {
public:
  /// `jitOptLevel` is set for PTX text and empty for cubins and fatbins.
  Module(const void *image, std::optional<int> jitOptLevel)
      : image(image), jitOptLevel(jitOptLevel) {}

  /// Loads the image into `context`, the current one, unless it is there
  /// already. Failures are kept for getKernel to report.
  void load(const Driver &cu, CUcontext context);

  /// The kernel `name` in `context`, the current one, loading the image
  /// there first if needed; on failure fills `error` and returns null.
  Kernel *getKernel(const Driver &cu, CUcontext context, const char *name,
                    Error &error);

  /// Unloads the image from every context it was loaded into. Failures are
  /// ignored: this runs from global destructors, often at process exit,
  /// where nobody could take the status.
  ~Module();

private:
  struct Instance {
    CUcontext context = nullptr;
    CUmodule module = nullptr;
    Error loadError;
    std::vector<std::unique_ptr<Kernel>> kernels;
  };

  /// The instance for `context`, loading it first; requires `mutex`.
  Instance &instanceFor(const Driver &cu, CUcontext context);
  Error loadImage(const Driver &cu, CUmodule &module) const;

  const void *const image;
  const std::optional<int> jitOptLevel;
  std::mutex mutex;
  /// The driver the instances were loaded with; null while there are none,
  /// so that a module that was never used needs no driver to be destroyed.
  const Driver *loadedWith = nullptr;
  std::vector<Instance> instances;
};

} // namespace pattn::runtime

#endif // PATTN_LIB_RUNTIME_MODULE_H
