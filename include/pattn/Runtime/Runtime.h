//===- Runtime.h - Launcher runtime of compiled pattn artifacts ---*- C -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This header declares libpattn_runtime.so, the library that a compiled
// artifact calls to load its kernels and launch them on a CUDA stream. It has
// two halves: the pattn C API (status codes and the per-thread sticky error
// that compiled entry points return) and the launcher ABI that upstream
// MLIR's gpu-to-llvm lowering and gpu.binary translation emit calls to.
// Upstream names those functions mgpu*, as MLIR's own CUDA runtime does;
// pattn's are pattnMgpu*, so that both libraries can live in one process.
// pattn::bindRuntimeSymbols (pattn/Pipelines/Pipelines.h) renames the calls
// in a translated module, and pattn-compile applies it to every artifact.
//
// The library loads the CUDA driver at run time, so it builds, links and
// fails cleanly on machines without one. No call aborts, throws or prints:
// a failure records a sticky error on the calling thread and turns the rest
// of the entry point's runtime calls into no-ops, and the entry point hands
// the status to its caller through pattnRuntimeTakeStatus.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_RUNTIME_RUNTIME_H
#define PATTN_RUNTIME_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// The library is built with hidden visibility; only this API is exported.
#define PATTN_RUNTIME_EXPORT __attribute__((visibility("default")))

#ifdef __cplusplus
extern "C" {
#endif

//===----------------------------------------------------------------------===//
// Status and errors
//===----------------------------------------------------------------------===//

/// What a compiled entry point returns. Values are part of the ABI: Python
/// and other callers switch on them.
typedef enum pattnStatus {
  PATTN_SUCCESS = 0,
  /// libcuda could not be loaded, lacks a needed function, or is a stub.
  PATTN_ERROR_NO_DRIVER = 1,
  /// The driver found no usable device (or not the one PATTN_DEVICE names).
  PATTN_ERROR_NO_DEVICE = 2,
  /// The artifact holds no binary the current GPU can run.
  PATTN_ERROR_NO_BINARY_FOR_DEVICE = 3,
  /// A kernel could not be configured or launched.
  PATTN_ERROR_LAUNCH = 4,
  /// A caller passed something unusable (null buffer, bad launch bounds).
  PATTN_ERROR_INVALID_ARGUMENT = 5,
  /// A device allocation failed.
  PATTN_ERROR_OUT_OF_MEMORY = 6,
  /// Any other CUDA driver failure; the message names the call.
  PATTN_ERROR_CUDA = 7
} pattnStatus;

/// Returns this thread's sticky status and clears it. Compiled entry points
/// return this value, so each invocation starts from PATTN_SUCCESS. The
/// message stays readable after the status is taken.
PATTN_RUNTIME_EXPORT int32_t pattnRuntimeTakeStatus(void);

/// The message of the last error recorded on this thread, "" if none. The
/// pointer stays valid until the next error is recorded on this thread.
PATTN_RUNTIME_EXPORT const char *pattnRuntimeLastErrorMessage(void);

/// The enumerator's name ("PATTN_ERROR_NO_DRIVER"), or
/// "PATTN_ERROR_UNKNOWN" for a value outside pattnStatus.
PATTN_RUNTIME_EXPORT const char *pattnStatusString(int32_t status);

/// Loads the CUDA driver and runs cuInit once per process; later calls
/// return the first outcome. A failure is also recorded like any other, so
/// its message is available from pattnRuntimeLastErrorMessage.
PATTN_RUNTIME_EXPORT int32_t pattnRuntimeInitialize(void);

/// The compute capability (major * 10 + minor, e.g. 90) of the device the
/// calling thread's runtime calls use, or 0 with a recorded error when there
/// is none. Compiled code dispatches on it to the kernels built for the
/// device's chip class.
PATTN_RUNTIME_EXPORT int32_t pattnRuntimeDeviceArch(void);

/// The streaming multiprocessors of that device, or 0 with a recorded error
/// when there is none. The tensor-core decode sizes its split count by it
/// (a host-known, per-device constant: the launch stays graph-capturable).
PATTN_RUNTIME_EXPORT int32_t pattnRuntimeDeviceMultiprocessors(void);

//===----------------------------------------------------------------------===//
// Device errors
//===----------------------------------------------------------------------===//
//
// Some bad input is only visible on the device (a cache slot past the
// cache's pages). Kernels reject it there (a cache write with such a slot
// writes nothing) and raise a bit in a process-wide error word in mapped
// host memory, so no call has to synchronize to report it: the caller reads
// the word after synchronizing the stream, as it would read any result.

/// A cache write rejected its whole batch: a slot was below -1 or past the
/// cache's pages.
#define PATTN_DEVICE_ERROR_SLOT_OUT_OF_RANGE 1

/// A rotary op found a token whose position lies outside its cos/sin
/// tables (below 0 or at max_position and beyond) and wrote nothing.
#define PATTN_DEVICE_ERROR_POSITION_OUT_OF_RANGE 2

/// The bits kernels raised since the last call, cleared atomically. Call it
/// after synchronizing the streams of the writes it should cover. 0 when
/// none (also when the word was never created or no driver is present).
PATTN_RUNTIME_EXPORT int32_t pattnRuntimeTakeDeviceErrors(void);

/// A rank-1 memref descriptor of i32, as MLIR's C interface passes it.
typedef struct pattnI32Buffer {
  int32_t *allocated;
  int32_t *aligned;
  int64_t offset;
  int64_t size;
  int64_t stride;
} pattnI32Buffer;

/// The device error word as a memref<1xi32> (MLIR C interface of
/// pattnRuntimeDeviceErrorWord: compiled code passes it to the kernels that
/// raise bits). Created on first use in page-locked, device-mapped, portable
/// host memory, valid in every context for the life of the process. On
/// failure the buffer is null and the error is recorded.
PATTN_RUNTIME_EXPORT void
_mlir_ciface_pattnRuntimeDeviceErrorWord(pattnI32Buffer *result);

/// A rank-1 memref descriptor of bytes, as MLIR's C interface passes it.
typedef struct pattnI8Buffer {
  const char *allocated;
  const char *aligned;
  int64_t offset;
  int64_t size;
  int64_t stride;
} pattnI8Buffer;

/// A compiled entry point found two sizes of its arguments that disagree
/// (SPEC §7): records PATTN_ERROR_INVALID_ARGUMENT with `message` (which
/// names the function, the op and the operands) and both sizes. The entry
/// calls it before launching anything; as every error is sticky, nothing
/// of the call runs and the entry returns the status.
PATTN_RUNTIME_EXPORT void
_mlir_ciface_pattnRuntimeRejectSizes(const pattnI8Buffer *message, int64_t got,
                                     int64_t expected);

/// Records `status` with `message` on this thread unless an error is already
/// pending there (the first error of an invocation is the one reported).
/// PATTN_SUCCESS records nothing. Returns `status`.
PATTN_RUNTIME_EXPORT int32_t pattnRuntimeRecordError(int32_t status,
                                                     const char *message);

//===----------------------------------------------------------------------===//
// Launcher ABI (upstream's mgpu* calls, renamed by bindRuntimeSymbols)
//===----------------------------------------------------------------------===//
//
// Every call below runs in the calling thread's current CUDA context, or, if
// it has none, in the primary context of device 0 (PATTN_DEVICE overrides),
// pushed for the duration of the call. Once an error is pending on the
// thread, calls are no-ops returning null, except the releasing ones
// (pattnMgpuMemFree, pattnMgpuStreamDestroy, pattnMgpuModuleUnload), which
// still release.

/// Registers a cubin or fatbin image. Called from the artifact's global
/// constructor, so it never records an error on the calling thread: the
/// returned handle is never null and remembers why its kernels cannot be
/// used, and pattnMgpuModuleGetFunction reports that on whichever thread asks.
/// The image must outlive the handle (it lives in the artifact).
PATTN_RUNTIME_EXPORT void *pattnMgpuModuleLoad(void *data, size_t gpuBlobSize);

/// As pattnMgpuModuleLoad for NUL-terminated PTX, JIT-compiled at `optLevel`.
PATTN_RUNTIME_EXPORT void *pattnMgpuModuleLoadJIT(void *data, int optLevel);

/// Unloads the module from every context it was loaded into.
PATTN_RUNTIME_EXPORT void pattnMgpuModuleUnload(void *module);

/// The kernel `name` of `module` in the current context, loading the module
/// there on first use. The handle is only meaningful to pattnMgpuLaunchKernel.
PATTN_RUNTIME_EXPORT void *pattnMgpuModuleGetFunction(void *module,
                                                      const char *name);

/// Launches `function`; raises the kernel's dynamic shared memory limit
/// first when `smem` exceeds the default 48 KiB. A grid with a zero extent
/// launches nothing and succeeds (an empty batch).
PATTN_RUNTIME_EXPORT void
pattnMgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                      intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t smem, void *stream,
                      void **params, void **extra, size_t paramsCount);

PATTN_RUNTIME_EXPORT void *pattnMgpuStreamCreate(void);
PATTN_RUNTIME_EXPORT void pattnMgpuStreamSynchronize(void *stream);
PATTN_RUNTIME_EXPORT void pattnMgpuStreamDestroy(void *stream);

/// Stream-ordered device allocation (capturable in a CUDA graph). Zero bytes
/// gives null without an error; host-shared memory is not supported.
PATTN_RUNTIME_EXPORT void *pattnMgpuMemAlloc(uint64_t sizeBytes, void *stream,
                                             bool isHostShared);
/// Stream-ordered free; null is ignored.
PATTN_RUNTIME_EXPORT void pattnMgpuMemFree(void *ptr, void *stream);

PATTN_RUNTIME_EXPORT void pattnMgpuMemcpy(void *dst, void *src,
                                          size_t sizeBytes, void *stream);
/// Fills `count` 32-bit words at `dst` (4-byte aligned) with `value`.
PATTN_RUNTIME_EXPORT void pattnMgpuMemset32(void *dst, unsigned int value,
                                            size_t count, void *stream);

#ifdef __cplusplus
} // extern "C"
#endif

#endif // PATTN_RUNTIME_RUNTIME_H
