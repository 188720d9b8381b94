//===- CpuDriverTest.cpp - the Driver of q3c-cpu artifacts ----------------===//
#include "TestFiles.h"

#include "runtime/Artifact.h"
#include "runtime/CpuDriver.h"
#include "runtime/Manifest.h"
#include "runtime/ThreadPool.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <map>

namespace q3::runtime {
namespace {

using testing::testKernelBytes;

const char *const kFile = "test.q3";

std::vector<uint8_t> cpuArtifact() {
  return serializeArtifact(kFile, nlohmann::json::object(),
                           {{"kernels.so", SectionKind::Executable, testKernelBytes()}});
}

/// A manifest with one kernel "scale" (the test library's).
manifest::Manifest cpuManifest() {
  manifest::Manifest m;
  manifest::Kernel scale;
  scale.name = "scale";
  m.kernels.push_back(scale);
  return m;
}

// What the scheduler does with a driver: memory in, one dispatch split over
// the threads (in 4 chunks each, as the manifest asks; a one-row dispatch in
// 16), memory out.
TEST(CpuDriver, RunsADispatchOverAllWorkgroups) {
  manifest::Manifest manifest = cpuManifest();
  manifest.kernels[0].prefillChunks = 4;
  manifest.kernels[0].decodeChunks = 16;
  std::vector<uint8_t> image = cpuArtifact();
  auto artifact = Artifact::parse(kFile, image.data(), image.size());
  ThreadPool pool(2);
  std::unique_ptr<Driver> driver = createDriver(*artifact, manifest, kFile, pool);
  const int64_t n = 1000;
  std::vector<float> input(n);
  for (int64_t i = 0; i < n; ++i)
    input[i] = float(i);
  const int64_t in = driver->wrapHost(input.data(), n * 4), out = driver->allocate(n * 4);
  for (int64_t rows : {n, int64_t(1)}) {
    driver->dispatch(driver->kernel("scale"), {{in, 0, n * 4}, {out, 0, n * 4}},
                     {rows, n, n, 3 + rows}, n);
    driver->finish();
    std::vector<float> result(n, -1.0f);
    driver->read({out, 0, n * 4}, result.data());
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(result[i], float(3 + rows) * float(i)) << rows << " rows, workgroup " << i;
  }
}

// Dispatches may queue until finish() or a read, write or move: each still
// sees the writes of the dispatches issued before it, and a write issued
// after a dispatch does not change what that dispatch read.
TEST(CpuDriver, DispatchesRunInIssueOrderAroundWrites) {
  std::vector<uint8_t> image = cpuArtifact();
  auto artifact = Artifact::parse(kFile, image.data(), image.size());
  ThreadPool pool(2);
  std::unique_ptr<Driver> driver = createDriver(*artifact, cpuManifest(), kFile, pool);
  const int64_t n = 256, bytes = n * 4;
  std::vector<float> ones(n, 1.0f), twos(n, 2.0f);
  const int64_t a = driver->allocate(bytes), b = driver->allocate(bytes),
                c = driver->allocate(bytes), d = driver->allocate(bytes);
  const int64_t scale = driver->kernel("scale");
  driver->write({a, 0, bytes}, ones.data());
  driver->dispatch(scale, {{a, 0, bytes}, {b, 0, bytes}}, {1, n, n, 3}, n); // b = 3a
  driver->dispatch(scale, {{b, 0, bytes}, {c, 0, bytes}}, {1, n, n, 5}, n); // c = 5b
  driver->write({a, 0, bytes}, twos.data());
  driver->dispatch(scale, {{a, 0, bytes}, {d, 0, bytes}}, {1, n, n, 7}, n); // d = 7a
  std::vector<float> got(n);
  driver->read({c, 0, bytes}, got.data());
  EXPECT_EQ(got, std::vector<float>(n, 15.0f));
  driver->read({d, 0, bytes}, got.data());
  EXPECT_EQ(got, std::vector<float>(n, 14.0f));
}

// Every thread gets a scratch region of its own, of the most any kernel
// takes at the planned prefill chunk, and a dispatch that would take more is
// refused rather than run past it.
TEST(CpuDriver, EachThreadRunsKernelsOnAThreadScratchOfItsOwn) {
  manifest::Manifest manifest = cpuManifest();
  manifest.prefillRows = 8;
  manifest::Kernel probe;
  probe.name = "scratch_probe";
  probe.prefillChunks = 8;
  probe.threadScratch = {100, 10}; // 180 bytes at 8 rows
  manifest.kernels.push_back(probe);
  manifest.kernels[0].threadScratch = {0, 40}; // "scale": 320, the largest
  std::vector<uint8_t> image = cpuArtifact();
  auto artifact = Artifact::parse(kFile, image.data(), image.size());
  ThreadPool pool(3);
  CpuDriver driver(*artifact, manifest, kFile, pool);
  const int64_t workgroups = 600, bytes = workgroups * 4 * 8;
  const int64_t out = driver.allocate(bytes);
  const int64_t kernel = driver.kernel("scratch_probe");
  driver.dispatch(kernel, {{out, 0, bytes}}, {8, 8, 8}, workgroups);
  std::vector<uint64_t> seen(size_t(workgroups) * 4);
  driver.read({out, 0, bytes}, seen.data());
  std::map<uint64_t, uint64_t> regionOfThread, threadOfRegion;
  for (int64_t w = 0; w < workgroups; ++w) {
    const uint64_t region = seen[size_t(4 * w)], thread = seen[size_t(4 * w + 3)];
    ASSERT_EQ(seen[size_t(4 * w + 1)], 320u) << "workgroup " << w;
    ASSERT_EQ(seen[size_t(4 * w + 2)], 1u) << "workgroup " << w << "'s scratch was shared";
    // One region per thread, and never another thread's.
    ASSERT_EQ(regionOfThread.try_emplace(thread, region).first->second, region);
    ASSERT_EQ(threadOfRegion.try_emplace(region, thread).first->second, thread);
  }
  EXPECT_LE(regionOfThread.size(), 3u);
  for (auto [a, threadA] : threadOfRegion)
    for (auto [b, threadB] : threadOfRegion)
      EXPECT_TRUE(a == b || (a > b ? a - b : b - a) >= 320) << "regions overlap";
  // The probe takes 100 + 10 x 22 = 320 at 22 rows; 23 rows take more.
  EXPECT_NO_THROW(driver.dispatch(kernel, {{out, 0, bytes}}, {22, 22, 22}, 1));
  EXPECT_THROW(driver.dispatch(kernel, {{out, 0, bytes}}, {23, 23, 23}, 1), std::logic_error);
  driver.finish();
}

TEST(CpuDriver, WritesAndReadsRangesAndRefusesRangesOutsideABuffer) {
  std::vector<uint8_t> image = cpuArtifact();
  auto artifact = Artifact::parse(kFile, image.data(), image.size());
  ThreadPool pool(1);
  CpuDriver driver(*artifact, cpuManifest(), kFile, pool);
  const int64_t buffer = driver.allocate(16);
  const int32_t values[2] = {7, 9};
  driver.write({buffer, 8, 8}, values);
  int32_t all[4] = {-1, -1, -1, -1};
  driver.read({buffer, 0, 16}, all);
  EXPECT_EQ(all[0], 0) << "allocations start zeroed";
  EXPECT_EQ(all[2], 7);
  EXPECT_EQ(all[3], 9);
  EXPECT_THROW(driver.read({buffer, 12, 8}, all), std::out_of_range);
  EXPECT_THROW(driver.write({buffer, -4, 4}, values), std::out_of_range);
  EXPECT_THROW(driver.kernel("no_such_kernel"), LoadError);
}

TEST(CpuDriver, RefusesOtherFormatsAndMissingCpuFeatures) {
  std::vector<uint8_t> image = cpuArtifact();
  auto artifact = Artifact::parse(kFile, image.data(), image.size());
  ThreadPool pool(1);
  manifest::Manifest metal = cpuManifest();
  metal.format = "q3c-metal";
  EXPECT_LOAD_ERROR(createDriver(*artifact, metal, kFile, pool),
                    "test.q3: unknown artifact format 'q3c-metal'; this runtime has drivers for "
                    "q3c-cpu and q3c-vulkan");
  // A device is a Vulkan choice.
  EXPECT_LOAD_ERROR(createDriver(*artifact, cpuManifest(), kFile, pool, DriverOptions{0}),
                    "test.q3: a CPU artifact runs on the CPU; --device selects a Vulkan device");

  manifest::Manifest future = cpuManifest();
  future.target.requiredFeatures = {"sse2", "fma4"}; // fma4: AMD Bulldozer only
  EXPECT_LOAD_ERROR(createDriver(*artifact, future, kFile, pool), "lacks: fma4");
}

} // namespace
} // namespace q3::runtime
