//===- Module.cpp - Kernel images loaded per CUDA context -------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the loading of an artifact's kernel image into CUDA
// contexts: cubins and fatbins through cuModuleLoadData, PTX through the
// driver's JIT with its error log kept for the message, and the translation
// of "no binary for this GPU" into a message that names the chip.
//
//===----------------------------------------------------------------------===//

#include "Module.h"

#include <cstring>

namespace pattn::runtime {

namespace {

int32_t statusForLoadResult(CUresult result) {
  switch (result) {
  case CUDA_ERROR_NO_BINARY_FOR_GPU:
    return PATTN_ERROR_NO_BINARY_FOR_DEVICE;
  case CUDA_ERROR_OUT_OF_MEMORY:
    return PATTN_ERROR_OUT_OF_MEMORY;
  default:
    return PATTN_ERROR_CUDA;
  }
}

/// A little-endian field of a fatbin, copied out of an unaligned image.
template <typename T> T field(const unsigned char *bytes, uint64_t offset) {
  T value;
  std::memcpy(&value, bytes + offset, sizeof(T));
  return value;
}

} // namespace

std::optional<bool> fatbinLoadsOn(const void *image, size_t size,
                                  int capability) {
  // The container: magic, version, header size, then the entries' bytes;
  // each entry: kind (1 PTX, 2 ELF) at 0, its header size at 4, its
  // payload size at 8 and the chip (major * 10 + minor) at 28.
  constexpr uint32_t kFatbinMagic = 0xBA55ED50;
  constexpr uint64_t kHeaderBytes = 16, kEntryHeaderBytes = 32;
  const auto *bytes = static_cast<const unsigned char *>(image);
  if (!bytes || (size != 0 && size < kHeaderBytes) ||
      field<uint32_t>(bytes, 0) != kFatbinMagic)
    return std::nullopt;
  uint64_t begin = field<uint16_t>(bytes, 6);
  uint64_t payload = field<uint64_t>(bytes, 8);
  if (begin < kHeaderBytes || payload > (uint64_t(1) << 40))
    return std::nullopt;
  uint64_t end = begin + payload;
  if (size != 0 && end > size)
    return std::nullopt;
  bool loads = false, entries = false;
  for (uint64_t entry = begin; entry < end;) {
    if (end - entry < kEntryHeaderBytes)
      return std::nullopt;
    uint16_t kind = field<uint16_t>(bytes, entry);
    uint64_t headerBytes = field<uint32_t>(bytes, entry + 4);
    uint64_t entryBytes = field<uint64_t>(bytes, entry + 8);
    int chip = static_cast<int>(field<uint32_t>(bytes, entry + 28));
    if (headerBytes < kEntryHeaderBytes || headerBytes > end - entry ||
        entryBytes > end - entry - headerBytes)
      return std::nullopt;
    if (kind == 2)
      loads |= chip / 10 == capability / 10 && chip % 10 <= capability % 10;
    else if (kind == 1)
      loads |= chip <= capability;
    else
      return std::nullopt;
    entries = true;
    entry += headerBytes + entryBytes;
  }
  if (!entries)
    return std::nullopt;
  return loads;
}

Error Module::loadImage(const Driver &cu, CUmodule &module) const {
  if (!image)
    return {PATTN_ERROR_INVALID_ARGUMENT, "pattnMgpuModuleLoad: null image"};

  const char *call = jitOptLevel ? "cuModuleLoadDataEx" : "cuModuleLoadData";
  // The JIT's own diagnostics ("ptxas fatal: ...") are the useful part of
  // a PTX failure; the result code alone says only "invalid PTX".
  char jitLog[4096] = {};
  CUresult result;
  if (jitOptLevel) {
    int options[] = {CU_JIT_OPTIMIZATION_LEVEL, CU_JIT_ERROR_LOG_BUFFER,
                     CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    // Integer option values travel in the pointer slots themselves.
    void *values[] = {reinterpret_cast<void *>(intptr_t{*jitOptLevel}), jitLog,
                      reinterpret_cast<void *>(sizeof(jitLog))};
    result = cu.cuModuleLoadDataEx(&module, image, 3, options, values);
  } else {
    result = cu.cuModuleLoadData(&module, image);
  }
  if (result == CUDA_SUCCESS)
    return {};

  Error error = driverError(cu, statusForLoadResult(result), call, result);
  if (result == CUDA_ERROR_NO_BINARY_FOR_GPU)
    error.message = "no kernel binary for this GPU (" + currentChip(cu) +
                    "); the artifact was built for other chips (" +
                    error.message + ")";
  jitLog[sizeof(jitLog) - 1] = '\0';
  if (jitLog[0] != '\0')
    error.message += std::string(": ") + jitLog;
  return error;
}

Module::Instance &Module::instanceFor(const Driver &cu, CUcontext context) {
  for (Instance &instance : instances)
    if (instance.context == context)
      return instance;
  loadedWith = &cu;
  Instance &instance = instances.emplace_back();
  instance.context = context;
  instance.loadError = loadImage(cu, instance.module);
  return instance;
}

void Module::load(const Driver &cu, CUcontext context) {
  std::lock_guard<std::mutex> lock(mutex);
  instanceFor(cu, context);
}

Kernel *Module::getKernel(const Driver &cu, CUcontext context, const char *name,
                          Error &error) {
  std::lock_guard<std::mutex> lock(mutex);
  Instance &instance = instanceFor(cu, context);
  if (instance.loadError) {
    error = instance.loadError;
    return nullptr;
  }
  // Compiled code asks for the function before every launch: look it up
  // in the driver only the first time.
  for (const std::unique_ptr<Kernel> &kernel : instance.kernels)
    if (kernel->name == name)
      return kernel.get();

  CUfunction handle = nullptr;
  if (CUresult result = cu.cuModuleGetFunction(&handle, instance.module, name);
      result != CUDA_SUCCESS) {
    error =
        driverError(cu, PATTN_ERROR_CUDA,
                    "cuModuleGetFunction(" + std::string(name) + ")", result);
    return nullptr;
  }
  return instance.kernels.emplace_back(std::make_unique<Kernel>(handle, name))
      .get();
}

Module::~Module() {
  // At exit (an artifact's global destructor) the driver may already have
  // destroyed its contexts, or be unloaded; the process's end frees the
  // modules anyway.
  if (processIsExiting())
    return;
  for (const Instance &instance : instances) {
    if (!instance.module)
      continue;
    // cuModuleUnload acts in the current context, which at exit may be
    // none or another device's.
    if (loadedWith->cuCtxPushCurrent(instance.context) != CUDA_SUCCESS)
      continue;
    loadedWith->cuModuleUnload(instance.module);
    CUcontext popped = nullptr;
    loadedWith->cuCtxPopCurrent(&popped);
  }
}

} // namespace pattn::runtime
