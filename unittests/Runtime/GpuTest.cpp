//===- GpuTest.cpp - Runtime tests on a real GPU ----------------*- C++ -*-===//
//
// Part of the pattn project.
//
//===----------------------------------------------------------------------===//
//
// This file implements the unit tests of the launcher runtime against the
// real CUDA driver: affine.ptx is JIT-compiled, launched with more than
// 48 KiB of dynamic shared memory on a runtime-created stream over
// stream-ordered allocations, and its output checked; real driver failures
// come back as the specific errors the fake-driver tests promise. Every
// test skips, printing why, where no driver or device is present.
//
//===----------------------------------------------------------------------===//

#include "pattn/Runtime/Runtime.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using ::testing::HasSubstr;

namespace {

/// The kernel of affine.ptx (its header says what it computes).
std::string readAffinePtx() {
  std::ifstream file(PATTN_AFFINE_PTX_PATH);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

constexpr unsigned kBlock = 256;

class RuntimeGpu : public ::testing::Test {
protected:
  void SetUp() override {
    if (pattnRuntimeInitialize() != PATTN_SUCCESS) {
      const std::string reason = pattnRuntimeLastErrorMessage();
      pattnRuntimeTakeStatus();
      GTEST_SKIP() << "no CUDA device: " << reason;
    }
    ptx = readAffinePtx();
    ASSERT_FALSE(ptx.empty()) << "cannot read " PATTN_AFFINE_PTX_PATH;
    module = pattnMgpuModuleLoadJIT(ptx.data(), 3);
    function = pattnMgpuModuleGetFunction(module, "pattn_test_affine");
    ASSERT_EQ(pattnRuntimeTakeStatus(), PATTN_SUCCESS)
        << pattnRuntimeLastErrorMessage();
  }

  void TearDown() override { pattnMgpuModuleUnload(module); }

  /// Runs the kernel over `n` elements with `smem` bytes of dynamic shared
  /// memory and `block` threads, the way compiled host code does, and
  /// returns the output copied back. A runtime error is left pending for
  /// the test to take.
  std::vector<float> runAffine(unsigned n, int32_t smem,
                               unsigned block = kBlock) {
    std::vector<float> x(n);
    for (unsigned i = 0; i < n; ++i)
      x[i] = static_cast<float>(i) - 100.0f;
    std::vector<float> out(n, 0.0f);

    void *stream = pattnMgpuStreamCreate();
    void *deviceX = pattnMgpuMemAlloc(n * sizeof(float), stream, false);
    void *deviceOut = pattnMgpuMemAlloc(n * sizeof(float), stream, false);
    pattnMgpuMemcpy(deviceX, x.data(), n * sizeof(float), stream);
    // NaN poison: a launch that does not write leaves it in place.
    pattnMgpuMemset32(deviceOut, 0x7FC00000u, n, stream);
    unsigned smemWords = static_cast<unsigned>(smem) / sizeof(float);
    void *params[] = {&deviceOut, &deviceX, &n, &smemWords};
    pattnMgpuLaunchKernel(function, (n + block - 1) / block, 1, 1, block, 1, 1,
                          smem, stream, params, nullptr, 4);
    pattnMgpuMemcpy(out.data(), deviceOut, n * sizeof(float), stream);
    pattnMgpuStreamSynchronize(stream);
    pattnMgpuMemFree(deviceX, stream);
    pattnMgpuMemFree(deviceOut, stream);
    pattnMgpuStreamDestroy(stream);
    return out;
  }

  // The module keeps pointing at the image, as at an artifact's constant.
  std::string ptx;
  void *module = nullptr;
  void *function = nullptr;
};

TEST_F(RuntimeGpu, JitCompiledKernelRunsWithLargeSharedMemory) {
  const unsigned n = 1000;
  const std::vector<float> out = runAffine(n, 64 * 1024);
  ASSERT_EQ(pattnRuntimeTakeStatus(), PATTN_SUCCESS)
      << pattnRuntimeLastErrorMessage();
  for (unsigned i = 0; i < n; ++i)
    ASSERT_EQ(out[i], (static_cast<float>(i) - 100.0f) * 2.0f + 1.0f)
        << "element " << i;
}

TEST_F(RuntimeGpu, LaunchErrorNamesTheKernel) {
  runAffine(16, 1024, /*block=*/4096);
  EXPECT_EQ(pattnRuntimeTakeStatus(), PATTN_ERROR_LAUNCH);
  EXPECT_THAT(pattnRuntimeLastErrorMessage(),
              HasSubstr("cuLaunchKernel(pattn_test_affine) failed: "
                        "CUDA_ERROR_INVALID_VALUE"));
}

TEST_F(RuntimeGpu, SharedMemoryBeyondTheChipSaysTheLimit) {
  runAffine(16, 4 * 1024 * 1024);
  EXPECT_EQ(pattnRuntimeTakeStatus(), PATTN_ERROR_LAUNCH);
  EXPECT_THAT(pattnRuntimeLastErrorMessage(),
              HasSubstr("MAX_DYNAMIC_SHARED_SIZE_BYTES, 4194304) failed"));
  EXPECT_THAT(pattnRuntimeLastErrorMessage(), HasSubstr("allows at most"));
}

TEST_F(RuntimeGpu, MissingKernelIsNamed) {
  EXPECT_EQ(pattnMgpuModuleGetFunction(module, "pattn_missing"), nullptr);
  EXPECT_EQ(pattnRuntimeTakeStatus(), PATTN_ERROR_CUDA);
  EXPECT_THAT(pattnRuntimeLastErrorMessage(),
              HasSubstr("cuModuleGetFunction(pattn_missing) failed: "
                        "CUDA_ERROR_NOT_FOUND"));
}

TEST_F(RuntimeGpu, InvalidPtxCarriesTheJitLog) {
  void *broken = pattnMgpuModuleLoadJIT(
      const_cast<char *>(".version 7.0\n.target sm_80\n.address_size 64\n"
                         ".visible .entry k() { bogus; }\n"),
      3);
  EXPECT_EQ(pattnMgpuModuleGetFunction(broken, "k"), nullptr);
  EXPECT_EQ(pattnRuntimeTakeStatus(), PATTN_ERROR_CUDA);
  EXPECT_THAT(pattnRuntimeLastErrorMessage(),
              HasSubstr("cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX"));
  EXPECT_THAT(pattnRuntimeLastErrorMessage(), HasSubstr("bogus"));
  pattnMgpuModuleUnload(broken);
}

} // namespace
