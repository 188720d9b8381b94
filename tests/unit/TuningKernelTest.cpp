//===- TuningKernelTest.cpp - the kernels the tuners build ----------------===//
//
// The tuners compile thirty-odd candidate kernels in a fresh 0.6B compile,
// inside a bounded tuning time: a batch is linked once, and a kernel this
// process built before (the weight-packing race's are the decode tuner's
// baseline) is not built again.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/TuningKernel.h"
#include "backends/cpu/CpuTarget.h"

#include "runtime/KernelABI.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <random>
#include <set>
#include <stdexcept>

namespace q3::testing {
namespace {

/// A one-row product of 64 inputs and 32 outputs, per-call weights, with
/// `prefetchBytes`: variants of one kernel under one name.
cpu::FusedLinearKernel variant(int64_t prefetchBytes) {
  cpu::FusedLinearKernel kernel =
      cpu::tuningProduct("tune_test", 64, 32, {cpu::DType::BF16, /*packPerCall=*/true},
                         /*swiglu=*/false);
  kernel.prefetchBytes = prefetchBytes;
  return kernel;
}

/// `kernel`'s outputs on `weight`, `gain` and an input of ones.
std::vector<float> run(const cpu::LoadedTuningKernel &loaded, const cpu::FusedLinearKernel &kernel,
                       std::vector<uint8_t> &weight, std::vector<uint8_t> &gain) {
  std::vector<float> x(size_t(kernel.inFeatures), 1.0f), y(size_t(kernel.outFeatures), 0.0f);
  std::vector<uint8_t> scratch(size_t(kernel.threadScratch().bytesFor(1)));
  void *pointers[5] = {x.data(), weight.data(), gain.data(), y.data(), scratch.data()};
  const std::array<int64_t, 5> bytes = {int64_t(x.size() * 4), int64_t(weight.size()),
                                        int64_t(gain.size()), int64_t(y.size() * 4),
                                        int64_t(scratch.size())};
  const int64_t scalars[runtime::kFixedKernelScalars] = {1, 1, 1};
  loaded.entry(pointers, bytes.data(), scalars, 0, kernel.workgroups());
  return y;
}

TEST(TuningKernel, VariantsOfOneKernelLoadFromOneLibraryAndComputeAlike) {
  const cpu::CpuTarget host = cpu::resolveCpuTarget("host");
  const std::vector<cpu::FusedLinearKernel> kernels = {variant(cpu::kNoPrefetch), variant(4096)};
  const std::vector<cpu::LoadedTuningKernel> loaded = cpu::loadTuningKernels(kernels, host);
  ASSERT_EQ(loaded.size(), 2u);
  EXPECT_NE(loaded[0].entry, loaded[1].entry);
  EXPECT_EQ(loaded[0].library, loaded[1].library) << "one link for the batch";
  std::mt19937 rng(3);
  std::vector<uint8_t> weight = cpu::randomWeights(kernels[0], rng);
  std::vector<uint8_t> gain = cpu::randomStored(cpu::DType::BF16, 64, rng);
  const std::vector<float> first = run(loaded[0], kernels[0], weight, gain);
  EXPECT_EQ(first, run(loaded[1], kernels[1], weight, gain));
  EXPECT_TRUE(std::any_of(first.begin(), first.end(), [](float v) { return v != 0.0f; }));
}

TEST(TuningKernel, AKernelBuiltBeforeIsNotBuiltAgain) {
  const cpu::CpuTarget host = cpu::resolveCpuTarget("host");
  const cpu::LoadedTuningKernel before = cpu::loadTuningKernels({variant(8192)}, host).at(0);
  const std::vector<cpu::LoadedTuningKernel> again =
      cpu::loadTuningKernels({variant(16384), variant(8192)}, host);
  EXPECT_EQ(again.at(1).entry, before.entry);
  EXPECT_EQ(again.at(1).library, before.library);
  EXPECT_NE(again.at(0).library, before.library) << "the new variant was compiled now";
}

// Two tuner settings may build one kernel (the 1.7B shape's down product
// under two decode settings did, and `q3c compile` of that model failed):
// the batch compiles it once and hands it to both.
TEST(TuningKernel, OneKernelAskedForTwiceInABatchIsBuiltOnce) {
  const std::vector<cpu::LoadedTuningKernel> loaded = cpu::loadTuningKernels(
      {variant(2048), variant(4096), variant(2048)}, cpu::resolveCpuTarget("host"));
  ASSERT_EQ(loaded.size(), 3u);
  EXPECT_EQ(loaded[0].entry, loaded[2].entry);
  EXPECT_NE(loaded[0].entry, loaded[1].entry);
}

TEST(TuningKernel, SourcesOfOneBatchNeedTheirOwnNames) {
  const std::string source = cpu::fusedLinearSource(variant(cpu::kNoPrefetch));
  const std::string name = variant(cpu::kNoPrefetch).name;
  EXPECT_THROW(
      cpu::loadTuningSources({source, source}, {name, name}, cpu::resolveCpuTarget("host")),
      std::invalid_argument);
}

TEST(TuningKernel, RandomHalvesSpreadOverMinusOneToOne) {
  std::mt19937 rng(5), same(5);
  const std::vector<uint8_t> stored = cpu::randomStored(cpu::DType::BF16, 4096, rng);
  EXPECT_EQ(stored, cpu::randomStored(cpu::DType::BF16, 4096, same)) << "seeded by the rng";
  std::set<uint16_t> distinct;
  int negative = 0;
  for (size_t i = 0; i < stored.size(); i += 2) {
    const uint16_t bits = uint16_t(stored[i] | (stored[i + 1] << 8));
    distinct.insert(bits);
    negative += bits >> 15;
    const uint16_t magnitude = bits & 0x7fff;
    EXPECT_LE(magnitude, 0x3f80) << "within [-1, 1]"; // bf16 1.0
  }
  EXPECT_GT(distinct.size(), 1000u);
  EXPECT_GT(negative, 1800);
  EXPECT_LT(negative, 2300);
}

} // namespace
} // namespace q3::testing
