//===- NoDriverTest.cpp - Runtime tests without a CUDA driver ---*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the unit tests of the launcher runtime on a machine
// without a CUDA driver, simulated by pointing PATTN_CUDA_DRIVER at a path
// that does not exist: every call is a no-op that records
// PATTN_ERROR_NO_DRIVER with a message naming the driver, module handles
// carry that failure to whichever thread uses them, and nothing crashes.
// Also the status names, which need no driver.
//
//===----------------------------------------------------------------------===//

#include "pattn/Runtime/Runtime.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <cstdlib>
#include <string>
#include <thread>

using ::testing::HasSubstr;

namespace {

// Before main, hence before the runtime's first (lazy) driver load.
const bool kEnvironmentSet = [] {
  setenv("PATTN_CUDA_DRIVER", "/nonexistent/libcuda.so", /*overwrite=*/1);
  return true;
}();

/// Expects exactly one pending PATTN_ERROR_NO_DRIVER on this thread.
void expectNoDriverOnce() {
  EXPECT_EQ(pattnRuntimeTakeStatus(), PATTN_ERROR_NO_DRIVER);
  EXPECT_THAT(pattnRuntimeLastErrorMessage(),
              HasSubstr("CUDA driver not found: "
                        "dlopen(/nonexistent/libcuda.so) failed: "));
  EXPECT_EQ(pattnRuntimeTakeStatus(), PATTN_SUCCESS);
}

class RuntimeNoDriver : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_TRUE(kEnvironmentSet);
    ASSERT_EQ(pattnRuntimeTakeStatus(), PATTN_SUCCESS)
        << "a previous test left an error pending";
  }
};

TEST_F(RuntimeNoDriver, InitializeReportsTheMissingDriver) {
  EXPECT_EQ(pattnRuntimeInitialize(), PATTN_ERROR_NO_DRIVER);
  expectNoDriverOnce();
  EXPECT_THAT(pattnRuntimeLastErrorMessage(), HasSubstr("libcuda"));
  // The outcome is fixed for the process.
  EXPECT_EQ(pattnRuntimeInitialize(), PATTN_ERROR_NO_DRIVER);
  expectNoDriverOnce();
}

TEST_F(RuntimeNoDriver, EveryCallIsANoOpReturningNull) {
  int word = 0;
  void *buffer = &word;
  void *stream = reinterpret_cast<void *>(0x5EA);

  EXPECT_EQ(pattnMgpuStreamCreate(), nullptr);
  expectNoDriverOnce();
  pattnMgpuStreamSynchronize(stream);
  expectNoDriverOnce();
  pattnMgpuStreamDestroy(stream);
  expectNoDriverOnce();
  EXPECT_EQ(pattnMgpuMemAlloc(64, stream, false), nullptr);
  expectNoDriverOnce();
  pattnMgpuMemFree(buffer, stream);
  expectNoDriverOnce();
  pattnMgpuMemcpy(buffer, buffer, sizeof(word), stream);
  expectNoDriverOnce();
  pattnMgpuMemset32(buffer, 7, 1, stream);
  expectNoDriverOnce();
  EXPECT_EQ(word, 0);
  pattnMgpuLaunchKernel(buffer, 1, 1, 1, 32, 1, 1, 0, stream, nullptr, nullptr,
                        0);
  expectNoDriverOnce();
}

TEST_F(RuntimeNoDriver, DeviceArchIsZeroWithTheError) {
  EXPECT_EQ(pattnRuntimeDeviceArch(), 0);
  expectNoDriverOnce();
}

TEST_F(RuntimeNoDriver, DeviceMultiprocessorsIsZeroWithTheError) {
  EXPECT_EQ(pattnRuntimeDeviceMultiprocessors(), 0);
  expectNoDriverOnce();
}

TEST_F(RuntimeNoDriver, DeviceErrorWordIsNullWithTheError) {
  pattnI32Buffer word{reinterpret_cast<int32_t *>(0x1), nullptr, 7, 7, 7};
  _mlir_ciface_pattnRuntimeDeviceErrorWord(&word);
  EXPECT_EQ(word.allocated, nullptr);
  EXPECT_EQ(word.aligned, nullptr);
  expectNoDriverOnce();
  EXPECT_EQ(pattnRuntimeTakeDeviceErrors(), 0);
  EXPECT_EQ(pattnRuntimeTakeStatus(), PATTN_SUCCESS);
}

TEST_F(RuntimeNoDriver, AnEntryPointReportsTheFirstErrorOnce) {
  // The calls a compiled entry point makes, in order, each after the first
  // failure.
  void *module = pattnMgpuModuleLoad(nullptr, 0);
  void *stream = pattnMgpuStreamCreate();
  void *workspace = pattnMgpuMemAlloc(1024, stream, false);
  void *function = pattnMgpuModuleGetFunction(module, "pattn_decode_portable");
  pattnMgpuLaunchKernel(function, 1, 1, 1, 128, 1, 1, 64 * 1024, stream,
                        nullptr, nullptr, 0);
  pattnMgpuStreamSynchronize(stream);
  pattnMgpuMemFree(workspace, stream);
  pattnMgpuStreamDestroy(stream);
  pattnMgpuModuleUnload(module);
  EXPECT_EQ(stream, nullptr);
  EXPECT_EQ(workspace, nullptr);
  EXPECT_EQ(function, nullptr);
  expectNoDriverOnce();
}

TEST_F(RuntimeNoDriver, ModuleHandleCarriesTheFailureToOtherThreads) {
  static const char image[] = "fake cubin";
  void *module = pattnMgpuModuleLoad(const_cast<char *>(image), sizeof(image));
  // A sentinel, so that the failure has somewhere to live; the loading
  // thread (a global constructor in real artifacts) gets no status.
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(pattnRuntimeTakeStatus(), PATTN_SUCCESS);

  void *function = reinterpret_cast<void *>(1);
  int32_t status = PATTN_SUCCESS;
  std::string message;
  std::thread([&] {
    function = pattnMgpuModuleGetFunction(module, "pattn_decode_portable");
    status = pattnRuntimeTakeStatus();
    message = pattnRuntimeLastErrorMessage();
  }).join();
  EXPECT_EQ(function, nullptr);
  EXPECT_EQ(status, PATTN_ERROR_NO_DRIVER);
  EXPECT_THAT(message, HasSubstr("libcuda"));
  EXPECT_EQ(pattnRuntimeTakeStatus(), PATTN_SUCCESS);

  void *jitModule =
      pattnMgpuModuleLoadJIT(const_cast<char *>(".version 8.0"), 3);
  ASSERT_NE(jitModule, nullptr);
  EXPECT_EQ(pattnMgpuModuleGetFunction(jitModule, "k"), nullptr);
  expectNoDriverOnce();

  pattnMgpuModuleUnload(module);
  pattnMgpuModuleUnload(jitModule);
  EXPECT_EQ(pattnRuntimeTakeStatus(), PATTN_SUCCESS);
}

TEST_F(RuntimeNoDriver, NullPointersNeverCrash) {
  pattnMgpuModuleUnload(nullptr);
  pattnMgpuMemFree(nullptr, nullptr);
  pattnMgpuStreamDestroy(nullptr);
  // Releasing nothing needs no driver.
  EXPECT_EQ(pattnRuntimeTakeStatus(), PATTN_SUCCESS);

  EXPECT_EQ(pattnMgpuModuleGetFunction(nullptr, nullptr), nullptr);
  pattnMgpuLaunchKernel(nullptr, 0, 0, 0, 0, 0, 0, 0, nullptr, nullptr, nullptr,
                        0);
  pattnMgpuMemcpy(nullptr, nullptr, 16, nullptr);
  pattnMgpuMemset32(nullptr, 0, 16, nullptr);
  pattnMgpuStreamSynchronize(nullptr);
  expectNoDriverOnce();
}

TEST_F(RuntimeNoDriver, StatusStringNamesEveryCode) {
  EXPECT_STREQ(pattnStatusString(PATTN_SUCCESS), "PATTN_SUCCESS");
  EXPECT_STREQ(pattnStatusString(PATTN_ERROR_NO_DRIVER),
               "PATTN_ERROR_NO_DRIVER");
  EXPECT_STREQ(pattnStatusString(PATTN_ERROR_NO_DEVICE),
               "PATTN_ERROR_NO_DEVICE");
  EXPECT_STREQ(pattnStatusString(PATTN_ERROR_NO_BINARY_FOR_DEVICE),
               "PATTN_ERROR_NO_BINARY_FOR_DEVICE");
  EXPECT_STREQ(pattnStatusString(PATTN_ERROR_LAUNCH), "PATTN_ERROR_LAUNCH");
  EXPECT_STREQ(pattnStatusString(PATTN_ERROR_INVALID_ARGUMENT),
               "PATTN_ERROR_INVALID_ARGUMENT");
  EXPECT_STREQ(pattnStatusString(PATTN_ERROR_OUT_OF_MEMORY),
               "PATTN_ERROR_OUT_OF_MEMORY");
  EXPECT_STREQ(pattnStatusString(PATTN_ERROR_CUDA), "PATTN_ERROR_CUDA");
  EXPECT_STREQ(pattnStatusString(8), "PATTN_ERROR_UNKNOWN");
  EXPECT_STREQ(pattnStatusString(-1), "PATTN_ERROR_UNKNOWN");
}

TEST_F(RuntimeNoDriver, RecordedErrorsWorkWithoutADriver) {
  EXPECT_EQ(
      pattnRuntimeRecordError(PATTN_ERROR_INVALID_ARGUMENT, "seq_lens is null"),
      PATTN_ERROR_INVALID_ARGUMENT);
  // The pending error turns later calls into no-ops that keep it.
  EXPECT_EQ(pattnMgpuMemAlloc(64, nullptr, false), nullptr);
  EXPECT_EQ(pattnRuntimeTakeStatus(), PATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(pattnRuntimeLastErrorMessage(), "seq_lens is null");
}

} // namespace
