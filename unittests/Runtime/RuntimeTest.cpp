//===- RuntimeTest.cpp - Runtime tests against a fake driver ----*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the unit tests of the launcher runtime against
// libPAttnFakeCuda.so: arguments reach the driver unchanged, failures become
// specific sticky errors (the chip named when no binary fits, the kernel
// named when a launch fails), nothing runs after an error, and the context
// rules hold (the caller's context, else PATTN_DEVICE's primary one).
//
// The runtime loads its driver once per process, so this whole binary runs
// against the fake; PAttnRuntimeNoDriverTests covers a missing driver.
//
//===----------------------------------------------------------------------===//

#include "pattn/Runtime/Runtime.h"
#include "FakeCuda.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

using namespace fakecuda;
using ::testing::HasSubstr;

namespace {

// Before main, hence before the runtime's first (lazy) driver load.
const bool kEnvironmentSet = [] {
  setenv("PATTN_CUDA_DRIVER", PATTN_FAKE_CUDA_PATH, /*overwrite=*/1);
  setenv("PATTN_DEVICE", "1", /*overwrite=*/1);
  return true;
}();

State &fake() {
  // The same path the runtime opens, so the same loaded library and state.
  static State *state = [] {
    void *handle = dlopen(PATTN_FAKE_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);
    auto *get = reinterpret_cast<State *(*)()>(
        handle ? dlsym(handle, "fakeCudaState") : nullptr);
    return get ? get() : nullptr;
  }();
  return *state;
}

std::vector<Call> callsNamed(const std::string &name) {
  std::vector<Call> matching;
  for (const Call &call : fake().calls)
    if (call.name == name)
      matching.push_back(call);
  return matching;
}

unsigned long long bits(const void *pointer) {
  return reinterpret_cast<uintptr_t>(pointer);
}

/// The status and message a call left on the calling thread.
struct Outcome {
  int32_t status;
  std::string message;
};

Outcome takeOutcome() {
  const int32_t status = pattnRuntimeTakeStatus();
  return {status,
          status == PATTN_SUCCESS ? "" : pattnRuntimeLastErrorMessage()};
}

// Stands in for the cubin an artifact embeds; the fake never reads it.
const char kImage[] = "fake cubin";

class RuntimeFakeDriver : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_TRUE(kEnvironmentSet);
    ASSERT_NE(&fake(), nullptr) << "cannot load " PATTN_FAKE_CUDA_PATH;
    fake() = State{};
    ASSERT_EQ(pattnRuntimeTakeStatus(), PATTN_SUCCESS)
        << "a previous test left an error pending";
  }

  void TearDown() override {
    for (void *module : modules)
      pattnMgpuModuleUnload(module);
  }

  void *loadModule() {
    void *module =
        pattnMgpuModuleLoad(const_cast<char *>(kImage), sizeof(kImage));
    modules.push_back(module);
    return module;
  }

  void *kernel(const char *name = "pattn_decode_portable") {
    return pattnMgpuModuleGetFunction(loadModule(), name);
  }

  /// Launches `function` with an unremarkable configuration and `smem`.
  static void launch(void *function, int32_t smem = 0) {
    pattnMgpuLaunchKernel(function, 1, 1, 1, 32, 1, 1, smem, nullptr, nullptr,
                          nullptr, 0);
  }

  std::vector<void *> modules;
};

//===----------------------------------------------------------------------===//
// Status API
//===----------------------------------------------------------------------===//

TEST_F(RuntimeFakeDriver, InitializeSucceedsWithTheFakeDriver) {
  EXPECT_EQ(pattnRuntimeInitialize(), PATTN_SUCCESS);
  EXPECT_EQ(pattnRuntimeInitialize(), PATTN_SUCCESS);
  EXPECT_EQ(pattnRuntimeTakeStatus(), PATTN_SUCCESS);
}

TEST_F(RuntimeFakeDriver, DeviceArchIsTheComputeCapability) {
  fake().computeMajor = 8;
  fake().computeMinor = 9;
  EXPECT_EQ(pattnRuntimeDeviceArch(), 89);
  fake().computeMajor = 12;
  fake().computeMinor = 0;
  EXPECT_EQ(pattnRuntimeDeviceArch(), 120);
  EXPECT_EQ(pattnRuntimeTakeStatus(), PATTN_SUCCESS);
}

TEST_F(RuntimeFakeDriver, DeviceMultiprocessorsIsTheSMCount) {
  fake().multiprocessors = 132;
  EXPECT_EQ(pattnRuntimeDeviceMultiprocessors(), 132);
  fake().multiprocessors = 188;
  EXPECT_EQ(pattnRuntimeDeviceMultiprocessors(), 188);
  EXPECT_EQ(pattnRuntimeTakeStatus(), PATTN_SUCCESS);
}

TEST_F(RuntimeFakeDriver, DeviceErrorWordIsMappedOnceAndTakenAtomically) {
  pattnI32Buffer word;
  _mlir_ciface_pattnRuntimeDeviceErrorWord(&word);
  ASSERT_EQ(pattnRuntimeTakeStatus(), PATTN_SUCCESS);
  ASSERT_NE(word.aligned, nullptr);
  EXPECT_EQ(word.allocated, word.aligned);
  EXPECT_EQ(word.offset, 0);
  EXPECT_EQ(word.size, 1);
  EXPECT_EQ(word.stride, 1);
  pattnI32Buffer again;
  _mlir_ciface_pattnRuntimeDeviceErrorWord(&again);
  EXPECT_EQ(again.aligned, word.aligned);
  // Created once: page-locked, mapped, portable (valid in every context).
  std::vector<fakecuda::Call> allocations;
  for (const fakecuda::Call &call : fake().calls)
    if (call.name == "cuMemHostAlloc" ||
        call.name == "cuMemHostGetDevicePointer")
      allocations.push_back(call);
  ASSERT_EQ(allocations.size(), 2u);
  EXPECT_EQ(allocations[0].name, "cuMemHostAlloc");
  EXPECT_EQ(allocations[0].args, (std::vector<unsigned long long>{4, 3}));
  EXPECT_EQ(allocations[1].name, "cuMemHostGetDevicePointer");

  EXPECT_EQ(pattnRuntimeTakeDeviceErrors(), 0);
  *word.aligned |= PATTN_DEVICE_ERROR_SLOT_OUT_OF_RANGE; // a kernel's store
  EXPECT_EQ(pattnRuntimeTakeDeviceErrors(),
            PATTN_DEVICE_ERROR_SLOT_OUT_OF_RANGE);
  EXPECT_EQ(pattnRuntimeTakeDeviceErrors(), 0) << "taking clears the word";
  EXPECT_EQ(pattnRuntimeTakeStatus(), PATTN_SUCCESS);
}

TEST_F(RuntimeFakeDriver, FirstRecordedErrorWinsUntilTaken) {
  EXPECT_EQ(pattnRuntimeRecordError(PATTN_ERROR_LAUNCH, "first"),
            PATTN_ERROR_LAUNCH);
  EXPECT_EQ(pattnRuntimeRecordError(PATTN_ERROR_CUDA, "second"),
            PATTN_ERROR_CUDA);
  EXPECT_STREQ(pattnRuntimeLastErrorMessage(), "first");
  EXPECT_EQ(pattnRuntimeTakeStatus(), PATTN_ERROR_LAUNCH);
  EXPECT_EQ(pattnRuntimeTakeStatus(), PATTN_SUCCESS);
  // The message outlives the status, for callers that read it after the
  // entry point returned.
  EXPECT_STREQ(pattnRuntimeLastErrorMessage(), "first");

  EXPECT_EQ(pattnRuntimeRecordError(PATTN_ERROR_CUDA, nullptr),
            PATTN_ERROR_CUDA);
  EXPECT_STREQ(pattnRuntimeLastErrorMessage(), "");
  EXPECT_EQ(pattnRuntimeTakeStatus(), PATTN_ERROR_CUDA);
  EXPECT_EQ(pattnRuntimeRecordError(PATTN_SUCCESS, "ignored"), PATTN_SUCCESS);
  EXPECT_EQ(pattnRuntimeTakeStatus(), PATTN_SUCCESS);
}

TEST_F(RuntimeFakeDriver, ErrorsArePerThread) {
  pattnRuntimeRecordError(PATTN_ERROR_OUT_OF_MEMORY, "main thread");
  int32_t otherStatus = -1;
  std::thread([&] { otherStatus = pattnRuntimeTakeStatus(); }).join();
  EXPECT_EQ(otherStatus, PATTN_SUCCESS);
  EXPECT_EQ(pattnRuntimeTakeStatus(), PATTN_ERROR_OUT_OF_MEMORY);
}

//===----------------------------------------------------------------------===//
// Modules
//===----------------------------------------------------------------------===//

TEST_F(RuntimeFakeDriver, ModuleLoadsEagerlyIntoTheCurrentContext) {
  void *module = loadModule();
  ASSERT_NE(module, nullptr);
  const std::vector<Call> loads = callsNamed("cuModuleLoadData");
  ASSERT_EQ(loads.size(), 1u);
  EXPECT_EQ(loads[0].args, (std::vector{bits(kImage), bits(kContext)}));

  // Later lookups reuse the load and the function.
  void *first = pattnMgpuModuleGetFunction(module, "pattn_decode_portable");
  void *second = pattnMgpuModuleGetFunction(module, "pattn_decode_portable");
  EXPECT_NE(first, nullptr);
  EXPECT_EQ(first, second);
  EXPECT_EQ(callsNamed("cuModuleLoadData").size(), 1u);
  EXPECT_EQ(callsNamed("cuModuleGetFunction").size(), 1u);
  EXPECT_EQ(takeOutcome().status, PATTN_SUCCESS);
}

TEST_F(RuntimeFakeDriver, NoBinaryForGpuNamesTheChipOnEveryThread) {
  fake().moduleLoadResult = kNoBinaryForGpu;
  void *module = loadModule();
  // The constructor's thread is not the one that reports.
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(takeOutcome().status, PATTN_SUCCESS);

  Outcome other;
  std::thread([&] {
    EXPECT_EQ(pattnMgpuModuleGetFunction(module, "pattn_decode_xqa"), nullptr);
    other = takeOutcome();
  }).join();
  EXPECT_EQ(other.status, PATTN_ERROR_NO_BINARY_FOR_DEVICE);
  EXPECT_THAT(other.message,
              HasSubstr("no kernel binary for this GPU (sm_75)"));
  EXPECT_THAT(other.message, HasSubstr("CUDA_ERROR_NO_BINARY_FOR_GPU"));

  // Remembered, not retried.
  EXPECT_EQ(pattnMgpuModuleGetFunction(module, "pattn_decode_xqa"), nullptr);
  EXPECT_EQ(takeOutcome().status, PATTN_ERROR_NO_BINARY_FOR_DEVICE);
  EXPECT_EQ(callsNamed("cuModuleLoadData").size(), 1u);
}

/// A fatbin as CUDA's `fatbinary` lays it out: a 16-byte header (magic,
/// version, header size, entries' bytes), then per (kind, chip) a 64-byte
/// entry header (kind 2 ELF or 1 PTX at 0, header size at 4, payload size
/// at 8, chip at 28) and a 16-byte payload.
std::vector<unsigned char>
fatbin(std::initializer_list<std::pair<uint16_t, uint32_t>> entries) {
  auto put = [](std::vector<unsigned char> &bytes, size_t offset, auto value) {
    std::memcpy(bytes.data() + offset, &value, sizeof(value));
  };
  std::vector<unsigned char> bytes(16 + entries.size() * (64 + 16));
  put(bytes, 0, uint32_t{0xBA55ED50});
  put(bytes, 4, uint16_t{1});
  put(bytes, 6, uint16_t{16});
  put(bytes, 8, uint64_t{bytes.size() - 16});
  size_t entry = 16;
  for (auto [kind, chip] : entries) {
    put(bytes, entry, kind);
    put(bytes, entry + 4, uint32_t{64});
    put(bytes, entry + 8, uint64_t{16});
    put(bytes, entry + 28, chip);
    entry += 64 + 16;
  }
  return bytes;
}

// An artifact built for several chips holds a kernel module per chip group
// and launches from the device's only; the others' fatbins hold no code for
// the device, and loading them at dlopen would only fail (which
// compute-sanitizer reports as errors). They load when asked for a kernel.
TEST_F(RuntimeFakeDriver, FatbinWithoutCodeForTheDeviceLoadsOnlyWhenUsed) {
  fake().computeMajor = 9;
  fake().computeMinor = 0;
  std::vector<unsigned char> ampere = fatbin({{2, 80}, {2, 86}});
  void *module = pattnMgpuModuleLoad(ampere.data(), ampere.size());
  modules.push_back(module);
  EXPECT_TRUE(callsNamed("cuModuleLoadData").empty());
  EXPECT_EQ(takeOutcome().status, PATTN_SUCCESS);

  fake().moduleLoadResult = kNoBinaryForGpu;
  EXPECT_EQ(pattnMgpuModuleGetFunction(module, "pattn_decode_xqa"), nullptr);
  Outcome outcome = takeOutcome();
  EXPECT_EQ(outcome.status, PATTN_ERROR_NO_BINARY_FOR_DEVICE);
  EXPECT_THAT(outcome.message,
              HasSubstr("no kernel binary for this GPU (sm_90)"));
  EXPECT_EQ(callsNamed("cuModuleLoadData").size(), 1u);
}

TEST_F(RuntimeFakeDriver, FatbinWithCodeForTheDeviceLoadsEagerly) {
  struct Case {
    int major, minor;
    std::vector<unsigned char> image;
  };
  const Case cases[] = {
      {9, 0, fatbin({{2, 80}, {2, 90}})},  // the device's own cubin
      {8, 9, fatbin({{2, 80}, {2, 86}})},  // a cubin of its major, below it
      {10, 0, fatbin({{2, 90}, {1, 90}})}, // PTX below it, JIT-compiled
  };
  for (const Case &c : cases) {
    fake() = State{};
    fake().computeMajor = c.major;
    fake().computeMinor = c.minor;
    modules.push_back(pattnMgpuModuleLoad(
        const_cast<unsigned char *>(c.image.data()), c.image.size()));
    EXPECT_EQ(callsNamed("cuModuleLoadData").size(), 1u)
        << "sm_" << c.major << c.minor;
  }
  // A cubin of a higher minor does not run on the device.
  fake() = State{};
  fake().computeMajor = 8;
  fake().computeMinor = 0;
  std::vector<unsigned char> ada = fatbin({{2, 89}});
  modules.push_back(pattnMgpuModuleLoad(ada.data(), ada.size()));
  EXPECT_TRUE(callsNamed("cuModuleLoadData").empty());
  EXPECT_EQ(takeOutcome().status, PATTN_SUCCESS);
}

// An image the reader does not know is loaded as before: the driver
// decides.
TEST_F(RuntimeFakeDriver, UnknownOrMalformedFatbinLoadsEagerly) {
  fake().computeMajor = 9;
  fake().computeMinor = 0;
  std::vector<unsigned char> truncated = fatbin({{2, 80}});
  std::vector<unsigned char> shortEntry = fatbin({{2, 80}});
  std::memcpy(shortEntry.data() + 16 + 4, "\x08\0\0\0", 4);
  std::vector<unsigned char> oddKind = fatbin({{7, 80}});
  std::vector<unsigned char> empty = fatbin({});
  const std::pair<std::vector<unsigned char> *, size_t> images[] = {
      {&truncated, truncated.size() - 1},
      {&shortEntry, shortEntry.size()},
      {&oddKind, oddKind.size()},
      {&empty, empty.size()},
  };
  size_t expected = 0;
  for (auto [image, size] : images) {
    modules.push_back(pattnMgpuModuleLoad(image->data(), size));
    EXPECT_EQ(callsNamed("cuModuleLoadData").size(), ++expected);
  }
  EXPECT_EQ(takeOutcome().status, PATTN_SUCCESS);
}

TEST_F(RuntimeFakeDriver, PtxIsJitCompiledAtTheRequestedLevel) {
  static const char ptx[] = ".version 8.0\n.target sm_90a\n";
  void *module = pattnMgpuModuleLoadJIT(const_cast<char *>(ptx), 3);
  modules.push_back(module);
  const std::vector<Call> loads = callsNamed("cuModuleLoadDataEx");
  ASSERT_EQ(loads.size(), 1u);
  // image, context, then (option, value) pairs; option 7 is the level.
  const std::vector<unsigned long long> &args = loads[0].args;
  EXPECT_EQ(args[0], bits(ptx));
  ASSERT_GE(args.size(), 4u);
  EXPECT_EQ(args[2], 7u);
  EXPECT_EQ(args[3], 3u);
  EXPECT_NE(pattnMgpuModuleGetFunction(module, "k"), nullptr);
  EXPECT_EQ(takeOutcome().status, PATTN_SUCCESS);
}

TEST_F(RuntimeFakeDriver, JitFailureCarriesTheJitLog) {
  fake().moduleLoadResult = kInvalidPtx;
  fake().jitErrorLog = "ptxas fatal   : Unresolved extern function 'f'";
  void *module = pattnMgpuModuleLoadJIT(const_cast<char *>("bad ptx"), 2);
  modules.push_back(module);
  EXPECT_EQ(pattnMgpuModuleGetFunction(module, "k"), nullptr);
  const Outcome outcome = takeOutcome();
  EXPECT_EQ(outcome.status, PATTN_ERROR_CUDA);
  EXPECT_THAT(outcome.message,
              HasSubstr("cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX"));
  EXPECT_THAT(outcome.message, HasSubstr("Unresolved extern function 'f'"));
}

TEST_F(RuntimeFakeDriver, MissingKernelIsNamed) {
  fake().getFunctionResult = kNotFound;
  EXPECT_EQ(kernel("pattn_missing"), nullptr);
  const Outcome outcome = takeOutcome();
  EXPECT_EQ(outcome.status, PATTN_ERROR_CUDA);
  EXPECT_THAT(outcome.message,
              HasSubstr("cuModuleGetFunction(pattn_missing) failed: "
                        "CUDA_ERROR_NOT_FOUND (named symbol not found)"));
}

TEST_F(RuntimeFakeDriver, NullModuleOrNameIsAnInvalidArgument) {
  EXPECT_EQ(pattnMgpuModuleGetFunction(nullptr, "k"), nullptr);
  Outcome outcome = takeOutcome();
  EXPECT_EQ(outcome.status, PATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(outcome.message, HasSubstr("null module"));

  EXPECT_EQ(pattnMgpuModuleGetFunction(loadModule(), nullptr), nullptr);
  outcome = takeOutcome();
  EXPECT_EQ(outcome.status, PATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(outcome.message, HasSubstr("null kernel name"));

  pattnMgpuModuleUnload(nullptr);
  EXPECT_EQ(takeOutcome().status, PATTN_SUCCESS);
}

TEST_F(RuntimeFakeDriver, ModuleIsLoadedPerContextAndUnloadedFromEach) {
  void *module = loadModule();
  modules.pop_back(); // unloaded by hand below
  ASSERT_NE(pattnMgpuModuleGetFunction(module, "k"), nullptr);

  void *const otherContext = reinterpret_cast<void *>(0xC2);
  fake().currentContext = otherContext;
  ASSERT_NE(pattnMgpuModuleGetFunction(module, "k"), nullptr);
  const std::vector<Call> loads = callsNamed("cuModuleLoadData");
  ASSERT_EQ(loads.size(), 2u);
  EXPECT_EQ(loads[1].args[1], bits(otherContext));

  fake().calls.clear();
  pattnMgpuModuleUnload(module);
  const std::vector<Call> unloads = callsNamed("cuModuleUnload");
  ASSERT_EQ(unloads.size(), 2u);
  // Each unloaded in its own context.
  EXPECT_EQ(unloads[0].args[1], bits(kContext));
  EXPECT_EQ(unloads[1].args[1], bits(otherContext));
  EXPECT_EQ(callsNamed("cuCtxPushCurrent").size(),
            callsNamed("cuCtxPopCurrent").size());
  EXPECT_EQ(takeOutcome().status, PATTN_SUCCESS);
}

//===----------------------------------------------------------------------===//
// Contexts
//===----------------------------------------------------------------------===//

TEST_F(RuntimeFakeDriver, ThreadWithoutContextUsesPrimaryContextOfPattnDevice) {
  fake().currentContext = nullptr;
  // Nothing to load into yet: the load waits for a launching thread.
  void *module = loadModule();
  EXPECT_TRUE(callsNamed("cuModuleLoadData").empty());

  EXPECT_NE(pattnMgpuModuleGetFunction(module, "k"), nullptr);
  const std::vector<Call> loads = callsNamed("cuModuleLoadData");
  ASSERT_EQ(loads.size(), 1u);
  EXPECT_EQ(loads[0].args[1], bits(kPrimaryContext));
  EXPECT_EQ(callsNamed("cuCtxPushCurrent").size(), 1u);
  EXPECT_EQ(callsNamed("cuCtxPopCurrent").size(), 1u);

  // The primary context is retained once per process, for PATTN_DEVICE=1;
  // an earlier test may already have retained it.
  for (const Call &retain : callsNamed("cuDevicePrimaryCtxRetain"))
    EXPECT_EQ(retain.args, std::vector<unsigned long long>{1});
  EXPECT_EQ(takeOutcome().status, PATTN_SUCCESS);
}

TEST_F(RuntimeFakeDriver, CurrentContextIsUsedWithoutPushing) {
  void *function = kernel();
  launch(function);
  EXPECT_TRUE(callsNamed("cuCtxPushCurrent").empty());
  EXPECT_EQ(takeOutcome().status, PATTN_SUCCESS);
}

//===----------------------------------------------------------------------===//
// Launches
//===----------------------------------------------------------------------===//

TEST_F(RuntimeFakeDriver, LaunchPassesItsParametersThrough) {
  void *function = kernel();
  const std::vector<Call> lookups = callsNamed("cuModuleGetFunction");
  ASSERT_EQ(lookups.size(), 1u);

  int a = 1;
  float b = 2;
  void *params[] = {&a, &b};
  void *stream = reinterpret_cast<void *>(0x5EA);
  pattnMgpuLaunchKernel(function, 3, 2, 4, 128, 2, 1, 1024, stream, params,
                        nullptr, 2);
  ASSERT_EQ(takeOutcome().status, PATTN_SUCCESS);
  const Launch &launched = fake().lastLaunch;
  EXPECT_EQ(launched.function, static_cast<char *>(kFunction) +
                                   std::strlen("pattn_decode_portable"));
  EXPECT_EQ(std::vector(launched.grid, launched.grid + 3),
            (std::vector<unsigned>{3, 2, 4}));
  EXPECT_EQ(std::vector(launched.block, launched.block + 3),
            (std::vector<unsigned>{128, 2, 1}));
  EXPECT_EQ(launched.sharedBytes, 1024u);
  EXPECT_EQ(launched.stream, stream);
  EXPECT_EQ(launched.params, params);
  EXPECT_EQ(launched.extra, nullptr);
  // Default shared memory needs no opt-in.
  EXPECT_TRUE(callsNamed("cuFuncSetAttribute").empty());
}

TEST_F(RuntimeFakeDriver, LaunchErrorNamesTheKernel) {
  fake().launchResult = kInvalidValue;
  launch(kernel());
  const Outcome outcome = takeOutcome();
  EXPECT_EQ(outcome.status, PATTN_ERROR_LAUNCH);
  EXPECT_THAT(outcome.message,
              HasSubstr("cuLaunchKernel(pattn_decode_portable) failed: "
                        "CUDA_ERROR_INVALID_VALUE (invalid argument)"));
  EXPECT_THAT(outcome.message, HasSubstr("grid (1, 1, 1), block (32, 1, 1)"));
}

TEST_F(RuntimeFakeDriver, LargeSharedMemoryOptsInOncePerKernel) {
  void *big = kernel("pattn_decode_xqa");
  launch(big, 64 * 1024);
  launch(big, 64 * 1024);
  launch(big, 60 * 1024);
  ASSERT_EQ(takeOutcome().status, PATTN_SUCCESS);
  std::vector<Call> raises = callsNamed("cuFuncSetAttribute");
  ASSERT_EQ(raises.size(), 1u);
  EXPECT_EQ(raises[0].args,
            (std::vector<unsigned long long>{bits(fake().lastLaunch.function),
                                             8, 64 * 1024}));
  EXPECT_EQ(fake().lastLaunch.sharedBytes, 60u * 1024);

  launch(big, 96 * 1024);
  EXPECT_EQ(callsNamed("cuFuncSetAttribute").size(), 2u);

  // Exactly 48 KiB is the default and needs nothing.
  launch(kernel("other"), 48 * 1024);
  EXPECT_EQ(callsNamed("cuFuncSetAttribute").size(), 2u);
  EXPECT_EQ(takeOutcome().status, PATTN_SUCCESS);
}

TEST_F(RuntimeFakeDriver, SharedMemoryOptInFailureSaysTheLimit) {
  fake().setAttributeResult = kInvalidValue;
  launch(kernel(), 200 * 1024);
  const Outcome outcome = takeOutcome();
  EXPECT_EQ(outcome.status, PATTN_ERROR_LAUNCH);
  EXPECT_THAT(outcome.message,
              HasSubstr("cuFuncSetAttribute(pattn_decode_portable, "
                        "MAX_DYNAMIC_SHARED_SIZE_BYTES, 204800) failed"));
  EXPECT_THAT(outcome.message, HasSubstr("sm_75 allows at most 101376 bytes"));
  EXPECT_TRUE(callsNamed("cuLaunchKernel").empty());
}

TEST_F(RuntimeFakeDriver, EmptyGridLaunchesNothing) {
  pattnMgpuLaunchKernel(kernel(), 0, 1, 1, 32, 1, 1, 0, nullptr, nullptr,
                        nullptr, 0);
  EXPECT_EQ(takeOutcome().status, PATTN_SUCCESS);
  EXPECT_TRUE(callsNamed("cuLaunchKernel").empty());
}

TEST_F(RuntimeFakeDriver, OutOfRangeLaunchBoundsAreRejected) {
  void *function = kernel();
  pattnMgpuLaunchKernel(function, -1, 1, 1, 32, 1, 1, 0, nullptr, nullptr,
                        nullptr, 0);
  Outcome outcome = takeOutcome();
  EXPECT_EQ(outcome.status, PATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(outcome.message, HasSubstr("launch bounds out of range: "
                                         "grid (-1, 1, 1)"));

  pattnMgpuLaunchKernel(function, intptr_t{1} << 33, 1, 1, 32, 1, 1, 0, nullptr,
                        nullptr, nullptr, 0);
  EXPECT_EQ(takeOutcome().status, PATTN_ERROR_INVALID_ARGUMENT);
  pattnMgpuLaunchKernel(function, 1, 1, 1, 32, 1, 1, -4, nullptr, nullptr,
                        nullptr, 0);
  EXPECT_EQ(takeOutcome().status, PATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(callsNamed("cuLaunchKernel").empty());
}

TEST_F(RuntimeFakeDriver, NullFunctionIsAnInvalidArgument) {
  launch(nullptr);
  const Outcome outcome = takeOutcome();
  EXPECT_EQ(outcome.status, PATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(outcome.message, HasSubstr("null kernel function"));
}

TEST_F(RuntimeFakeDriver, NothingRunsAfterAnErrorButReleasesStill) {
  void *function = kernel();
  void *workspace = pattnMgpuMemAlloc(64, nullptr, false);
  ASSERT_EQ(takeOutcome().status, PATTN_SUCCESS);

  fake().memAllocAsyncResult = kOutOfMemory;
  EXPECT_EQ(pattnMgpuMemAlloc(1 << 20, nullptr, false), nullptr);
  fake().calls.clear();
  // What an entry point does next: the rest of its body.
  launch(function);
  EXPECT_EQ(pattnMgpuModuleGetFunction(loadModule(), "k"), nullptr);
  pattnMgpuMemset32(workspace, 0, 16, nullptr);
  pattnMgpuMemcpy(workspace, workspace, 64, nullptr);
  EXPECT_EQ(pattnMgpuStreamCreate(), nullptr);
  pattnMgpuStreamSynchronize(nullptr);
  pattnMgpuMemFree(workspace, nullptr);
  pattnMgpuStreamDestroy(kStream);

  std::vector<std::string> called;
  for (const Call &call : fake().calls)
    if (call.name.rfind("cuCtx", 0) != 0)
      called.push_back(call.name);
  // The module load belongs to the module (a global constructor in real
  // artifacts), not to the failed invocation.
  EXPECT_EQ(called,
            (std::vector<std::string>{"cuModuleLoadData", "cuMemFreeAsync",
                                      "cuStreamDestroy"}));
  const Outcome outcome = takeOutcome();
  EXPECT_EQ(outcome.status, PATTN_ERROR_OUT_OF_MEMORY);
  EXPECT_THAT(outcome.message,
              HasSubstr("cuMemAllocAsync(1048576 bytes) failed: "
                        "CUDA_ERROR_OUT_OF_MEMORY (out of memory)"));

  // Once the status is taken, calls run again.
  launch(function);
  EXPECT_EQ(callsNamed("cuLaunchKernel").size(), 1u);
}

//===----------------------------------------------------------------------===//
// Memory and streams
//===----------------------------------------------------------------------===//

TEST_F(RuntimeFakeDriver, MemAllocUsesTheStreamOrderedAllocator) {
  void *stream = reinterpret_cast<void *>(0x5EA);
  void *pointer = pattnMgpuMemAlloc(4096, stream, false);
  EXPECT_EQ(pointer, reinterpret_cast<void *>(kDevicePointer));
  pattnMgpuMemFree(pointer, stream);
  ASSERT_EQ(takeOutcome().status, PATTN_SUCCESS);
  const std::vector<Call> allocs = callsNamed("cuMemAllocAsync");
  ASSERT_EQ(allocs.size(), 1u);
  EXPECT_EQ(allocs[0].args, (std::vector{4096ull, bits(stream)}));
  const std::vector<Call> frees = callsNamed("cuMemFreeAsync");
  ASSERT_EQ(frees.size(), 1u);
  EXPECT_EQ(frees[0].args, (std::vector{kDevicePointer, bits(stream)}));
  EXPECT_TRUE(callsNamed("cuMemAlloc").empty());
}

TEST_F(RuntimeFakeDriver, MemAllocFallsBackWithoutMemoryPools) {
  fake().memAllocAsyncResult = kNotSupported;
  void *pointer = pattnMgpuMemAlloc(4096, nullptr, false);
  ASSERT_NE(pointer, nullptr);
  pattnMgpuMemFree(pointer, nullptr);
  ASSERT_EQ(takeOutcome().status, PATTN_SUCCESS);
  ASSERT_EQ(callsNamed("cuMemAlloc").size(), 1u);
  const std::vector<Call> frees = callsNamed("cuMemFree");
  ASSERT_EQ(frees.size(), 1u);
  EXPECT_EQ(frees[0].args, std::vector{bits(pointer)});
  EXPECT_TRUE(callsNamed("cuMemFreeAsync").empty());
}

TEST_F(RuntimeFakeDriver, MemAllocEdgeCases) {
  EXPECT_EQ(pattnMgpuMemAlloc(0, nullptr, false), nullptr);
  EXPECT_EQ(takeOutcome().status, PATTN_SUCCESS);
  pattnMgpuMemFree(nullptr, nullptr);
  EXPECT_EQ(takeOutcome().status, PATTN_SUCCESS);

  EXPECT_EQ(pattnMgpuMemAlloc(64, nullptr, true), nullptr);
  const Outcome outcome = takeOutcome();
  EXPECT_EQ(outcome.status, PATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(outcome.message, HasSubstr("host-shared"));
  EXPECT_TRUE(callsNamed("cuMemAllocAsync").empty());
}

TEST_F(RuntimeFakeDriver, MemcpyAndMemsetPassThrough) {
  void *stream = reinterpret_cast<void *>(0x5EA);
  void *dst = reinterpret_cast<void *>(0xD100);
  void *src = reinterpret_cast<void *>(0xD200);
  pattnMgpuMemcpy(dst, src, 48, stream);
  pattnMgpuMemset32(dst, 0xDEADBEEF, 12, stream);
  ASSERT_EQ(takeOutcome().status, PATTN_SUCCESS);
  EXPECT_EQ(callsNamed("cuMemcpyAsync").at(0).args,
            (std::vector{bits(dst), bits(src), 48ull, bits(stream)}));
  EXPECT_EQ(callsNamed("cuMemsetD32Async").at(0).args,
            (std::vector{bits(dst), 0xDEADBEEFull, 12ull, bits(stream)}));

  // Nothing to do is no error, even with null pointers.
  pattnMgpuMemcpy(nullptr, nullptr, 0, stream);
  pattnMgpuMemset32(nullptr, 0, 0, stream);
  EXPECT_EQ(takeOutcome().status, PATTN_SUCCESS);
}

TEST_F(RuntimeFakeDriver, NullBuffersAreInvalidArguments) {
  pattnMgpuMemcpy(nullptr, reinterpret_cast<void *>(0xD200), 8, nullptr);
  Outcome outcome = takeOutcome();
  EXPECT_EQ(outcome.status, PATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(outcome.message, HasSubstr("null destination for 8 bytes"));

  pattnMgpuMemcpy(reinterpret_cast<void *>(0xD200), nullptr, 8, nullptr);
  outcome = takeOutcome();
  EXPECT_EQ(outcome.status, PATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(outcome.message, HasSubstr("null source"));

  pattnMgpuMemset32(nullptr, 0, 4, nullptr);
  EXPECT_EQ(takeOutcome().status, PATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(callsNamed("cuMemcpyAsync").empty());
  EXPECT_TRUE(callsNamed("cuMemsetD32Async").empty());
}

TEST_F(RuntimeFakeDriver, DriverFailureOfACopyIsACudaError) {
  fake().memcpyResult = kInvalidValue;
  pattnMgpuMemcpy(reinterpret_cast<void *>(0xD100),
                  reinterpret_cast<void *>(0xD200), 8, nullptr);
  const Outcome outcome = takeOutcome();
  EXPECT_EQ(outcome.status, PATTN_ERROR_CUDA);
  EXPECT_THAT(outcome.message,
              HasSubstr("cuMemcpyAsync(8 bytes) failed: "
                        "CUDA_ERROR_INVALID_VALUE (invalid argument)"));
}

TEST_F(RuntimeFakeDriver, StreamsPassThrough) {
  void *stream = pattnMgpuStreamCreate();
  EXPECT_EQ(stream, kStream);
  pattnMgpuStreamSynchronize(stream);
  pattnMgpuStreamDestroy(stream);
  pattnMgpuStreamDestroy(nullptr);
  ASSERT_EQ(takeOutcome().status, PATTN_SUCCESS);
  // Non-blocking, like upstream's wrappers.
  EXPECT_EQ(callsNamed("cuStreamCreate").at(0).args,
            std::vector<unsigned long long>{1});
  EXPECT_EQ(callsNamed("cuStreamSynchronize").at(0).args,
            std::vector{bits(kStream)});
  EXPECT_EQ(callsNamed("cuStreamDestroy").size(), 1u);
}

//===----------------------------------------------------------------------===//
// Host-side size checks of compiled entry points (SPEC §7)
//===----------------------------------------------------------------------===//

/// An entry point's expanded arguments: per memref (allocated, aligned,
/// offset, sizes, strides), then the stream. Pointers and 64-bit integers
/// travel alike in the C calling convention, so all are intptr_t here.
class EntryArguments {
public:
  EntryArguments &memref(std::vector<int64_t> sizes) {
    // Never dereferenced on the host; distinct, non-null, fake.
    intptr_t pointer = 0x10000 * intptr_t(++count);
    args.push_back(pointer);
    args.push_back(pointer);
    args.push_back(0);
    for (int64_t size : sizes)
      args.push_back(size);
    int64_t stride = 1;
    std::vector<intptr_t> strides(sizes.size());
    for (size_t i = sizes.size(); i-- > 0;) {
      strides[i] = stride;
      stride *= sizes[i];
    }
    args.insert(args.end(), strides.begin(), strides.end());
    return *this;
  }

  /// Calls `entry` with these arguments and a null stream.
  template <size_t N> int32_t call(void *entry) {
    args.push_back(0);
    EXPECT_EQ(args.size(), N)
        << "the entry point takes " << N << " expanded arguments";
    args.resize(N);
    return callWith(entry, std::make_index_sequence<N>{});
  }

private:
  template <size_t... I>
  int32_t callWith(void *entry, std::index_sequence<I...>) {
    using Entry = int32_t (*)(decltype((void)I, intptr_t())...);
    return reinterpret_cast<Entry>(entry)(args[I]...);
  }

  std::vector<intptr_t> args;
  int count = 0;
};

class HostSizeChecks : public RuntimeFakeDriver {
protected:
  void SetUp() override {
    RuntimeFakeDriver::SetUp();
    if (std::strlen(PATTN_HOST_CHECKS_ARTIFACT) == 0)
      GTEST_SKIP() << "no ptxas at configure time, so no compiled entry "
                      "points to call";
    fake().computeMajor = 8;
    fake().computeMinor = 0;
    library = dlopen(PATTN_HOST_CHECKS_ARTIFACT, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(library, nullptr) << dlerror();
  }

  // Closed by each test, so that each test sees its own module unload
  // (at exit the runtime skips the unload: ExitingWithAnArtifactLoaded...).
  void TearDown() override {
    if (library)
      dlclose(library);
    RuntimeFakeDriver::TearDown();
  }

  void *entry(const char *name) {
    void *symbol = dlsym(library, name);
    EXPECT_NE(symbol, nullptr) << name;
    return symbol;
  }

  void *library = nullptr;
};

// append(pages [P,16,2,64] i8, values [N,2,64] f16, slots [N] i64, scale [1])
EntryArguments appendArguments(int64_t tokens, int64_t slots) {
  EntryArguments args;
  args.memref({8, 16, 2, 64})
      .memref({tokens, 2, 64})
      .memref({slots})
      .memref({1});
  return args;
}

TEST_F(HostSizeChecks, ConsistentSizesLaunch) {
  int32_t status = appendArguments(4, 4).call<31>(entry("append"));
  EXPECT_EQ(status, PATTN_SUCCESS) << pattnRuntimeLastErrorMessage();
  EXPECT_FALSE(callsNamed("cuLaunchKernel").empty());
}

TEST_F(HostSizeChecks, SlotsAgainstValuesLaunchNothing) {
  int32_t status = appendArguments(4, 2).call<31>(entry("append"));
  EXPECT_EQ(status, PATTN_ERROR_INVALID_ARGUMENT);
  const std::string message = pattnRuntimeLastErrorMessage();
  EXPECT_THAT(message, HasSubstr("append: 'pattn.write_cache' at "));
  EXPECT_THAT(message, HasSubstr("host-checks.mlir:"));
  EXPECT_THAT(message,
              HasSubstr("slots dim 0 must equal values dim 0 (tokens), got 2 "
                        "against 4; nothing was launched"));
  EXPECT_TRUE(callsNamed("cuLaunchKernel").empty());
  EXPECT_TRUE(callsNamed("cuMemAllocAsync").empty());
}

TEST_F(HostSizeChecks, GroupScalePagesAgainstStoragePages) {
  EntryArguments args;
  args.memref({10, 16, 2, 32})
      .memref({5, 16, 2, 4})
      .memref({4, 2, 64})
      .memref({4})
      .memref({1});
  EXPECT_EQ(args.call<42>(entry("append_nvfp4")), PATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(std::string(pattnRuntimeLastErrorMessage()),
              HasSubstr("group_scales dim 0 must equal storage dim 0 (pages), "
                        "got 5 against 10"));
  EXPECT_TRUE(callsNamed("cuLaunchKernel").empty());
}

// decode(k pages, v pages, query [T,4,64], block_table [B,W], seq_lens [B],
//        k_scale, v_scale, outs [T,4,64])
EntryArguments decodeArguments(int64_t tokens, int64_t outTokens, int64_t batch,
                               int64_t lengths) {
  EntryArguments args;
  args.memref({8, 16, 2, 64})
      .memref({8, 16, 2, 64})
      .memref({tokens, 4, 64})
      .memref({batch, 4})
      .memref({lengths})
      .memref({1})
      .memref({1})
      .memref({outTokens, 4, 64});
  return args;
}

// decode_folded: decode's arguments with query_exponents [E,4] before outs.
EntryArguments foldedDecodeArguments(int64_t tokens, int64_t rows) {
  EntryArguments args;
  args.memref({8, 16, 2, 64})
      .memref({8, 16, 2, 64})
      .memref({tokens, 4, 64})
      .memref({tokens, 4})
      .memref({tokens})
      .memref({1})
      .memref({1})
      .memref({rows, 4})
      .memref({tokens, 4, 64});
  return args;
}

TEST_F(HostSizeChecks, FoldedDecodeWithConsistentRowExponentsLaunches) {
  EXPECT_EQ(foldedDecodeArguments(4, 4).call<70>(entry("decode_folded")),
            PATTN_SUCCESS)
      << pattnRuntimeLastErrorMessage();
  EXPECT_FALSE(callsNamed("cuLaunchKernel").empty());
}

TEST_F(HostSizeChecks, RowExponentsAgainstQueryTokens) {
  EXPECT_EQ(foldedDecodeArguments(4, 2).call<70>(entry("decode_folded")),
            PATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(std::string(pattnRuntimeLastErrorMessage()),
              HasSubstr("query_exponents dim 0 must equal query dim 0 "
                        "(tokens), got 2 against 4"));
  EXPECT_TRUE(callsNamed("cuLaunchKernel").empty());
}

TEST_F(HostSizeChecks, DecodeWithConsistentSizesLaunches) {
  EXPECT_EQ(decodeArguments(4, 4, 4, 4).call<63>(entry("decode")),
            PATTN_SUCCESS)
      << pattnRuntimeLastErrorMessage();
  EXPECT_FALSE(callsNamed("cuLaunchKernel").empty());
}

TEST_F(HostSizeChecks, OutputTokensAgainstQueryTokens) {
  EXPECT_EQ(decodeArguments(4, 2, 4, 4).call<63>(entry("decode")),
            PATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(std::string(pattnRuntimeLastErrorMessage()),
              HasSubstr("outs dim 0 must equal query dim 0, got 2 against 4"));
  EXPECT_TRUE(callsNamed("cuLaunchKernel").empty());
}

TEST_F(HostSizeChecks, LengthsAgainstTheBlockTable) {
  EXPECT_EQ(decodeArguments(4, 4, 4, 2).call<63>(entry("decode")),
            PATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(std::string(pattnRuntimeLastErrorMessage()),
              HasSubstr("seq_lens dim 0 must equal block_table dim 0 "
                        "(sequences), got 2 against 4"));
  EXPECT_TRUE(callsNamed("cuLaunchKernel").empty());
}

TEST_F(HostSizeChecks, QueryTokensAgainstSequences) {
  EXPECT_EQ(decodeArguments(3, 3, 4, 4).call<63>(entry("decode")),
            PATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(std::string(pattnRuntimeLastErrorMessage()),
              HasSubstr("query dim 0 must equal block_table dim 0 (one query "
                        "token per sequence), got 3 against 4"));
  EXPECT_TRUE(callsNamed("cuLaunchKernel").empty());
}

//===----------------------------------------------------------------------===//
// Exit
//===----------------------------------------------------------------------===//

// An artifact left loaded at exit is unloaded by its global destructor,
// which runs after the driver's exit handlers and statics (the fake's state
// here, the contexts with the real driver): that teardown must make no
// driver call. The fake ends a process that calls it then with status 86.
TEST_F(HostSizeChecks, ExitingWithAnArtifactLoadedCallsNoDriver) {
  EXPECT_EXIT(
      {
        // First a launch that went through, then a call the host checks
        // refuse (2^40 pages, which no buffer of this test has).
        appendArguments(4, 4).call<31>(entry("append"));
        EntryArguments huge;
        huge.memref({int64_t(1) << 40, 16, 2, 64})
            .memref({4, 2, 64})
            .memref({4})
            .memref({1});
        huge.call<31>(entry("append"));
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

} // namespace
