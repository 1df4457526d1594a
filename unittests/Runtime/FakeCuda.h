//===- FakeCuda.h - Scriptable stand-in for libcuda -------------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This header declares the control block of libPAttnFakeCuda.so, a shared
// library exporting the CUDA driver entry points the runtime resolves. Tests
// point PATTN_CUDA_DRIVER at it, set the results its functions return, and
// read back the arguments the runtime passed, which is how launch plumbing
// is tested on machines without a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef PATTN_UNITTESTS_RUNTIME_FAKECUDA_H
#define PATTN_UNITTESTS_RUNTIME_FAKECUDA_H

#include <cstddef>
#include <string>
#include <vector>

namespace fakecuda {

// Result codes the fake knows names for (values from cuda.h).
enum : int {
  kSuccess = 0,
  kInvalidValue = 1,
  kOutOfMemory = 2,
  kNoBinaryForGpu = 209,
  kInvalidPtx = 218,
  kNotFound = 500,
  kLaunchOutOfResources = 701,
  kNotSupported = 801,
};

// Handles the fake hands out; tests compare against them.
inline void *const kContext = reinterpret_cast<void *>(0xC0);
inline void *const kPrimaryContext = reinterpret_cast<void *>(0xC1);
inline void *const kModule = reinterpret_cast<void *>(0xB0);
inline void *const kFunction = reinterpret_cast<void *>(0xF0);
inline void *const kStream = reinterpret_cast<void *>(0x50);
constexpr unsigned long long kDevicePointer = 0xD000;

struct Launch {
  void *function = nullptr;
  unsigned grid[3] = {};
  unsigned block[3] = {};
  unsigned sharedBytes = 0;
  void *stream = nullptr;
  void **params = nullptr;
  void **extra = nullptr;
};

struct Call {
  std::string name;
  // The pointer and integer arguments, in order.
  std::vector<unsigned long long> args;
};

/// Everything the fake returns and records. Reset by tests before use.
struct State {
  // What the next calls return.
  int initResult = kSuccess;
  int moduleLoadResult = kSuccess;
  std::string jitErrorLog;
  int getFunctionResult = kSuccess;
  int setAttributeResult = kSuccess;
  int launchResult = kSuccess;
  int memAllocAsyncResult = kSuccess;
  int memcpyResult = kSuccess;
  int computeMajor = 7;
  int computeMinor = 5;
  int sharedOptInBytes = 99 * 1024;
  int multiprocessors = 132;
  /// What cuCtxGetCurrent reports on threads that pushed nothing; null
  /// plays a thread on which no library has made a context current.
  void *currentContext = kContext;

  // What was called, in order, excluding the context queries every runtime
  // call makes (cuCtxGetCurrent, cuGetError*).
  std::vector<Call> calls;
  Launch lastLaunch;
};

} // namespace fakecuda

/// The fake's state, shared by every user of the loaded library.
extern "C" fakecuda::State *fakeCudaState();

#endif // PATTN_UNITTESTS_RUNTIME_FAKECUDA_H
