//===- CpuDriverTest.cpp - the Driver of q3c-cpu artifacts ----------------===//
#include "TestFiles.h"

#include "runtime/Artifact.h"
#include "runtime/CpuDriver.h"
#include "runtime/ThreadPool.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace q3::runtime {
namespace {

using testing::testKernelBytes;

const char *const kFile = "test.q3";

std::vector<uint8_t> cpuArtifact(const nlohmann::json &manifest) {
  return serializeArtifact(kFile, manifest,
                           {{"kernels.so", SectionKind::Executable, testKernelBytes()}});
}

nlohmann::json cpuManifest() {
  return {{"format", "q3c-cpu"},
          {"target", {{"required_features", nlohmann::json::array()}}},
          {"kernels", nlohmann::json::array()}};
}

// What the scheduler does with a driver: memory in, one dispatch split over
// the threads (in 4 chunks each, as the manifest asks; a one-row dispatch in
// 16), memory out.
TEST(CpuDriver, RunsADispatchOverAllWorkgroups) {
  nlohmann::json manifest = cpuManifest();
  manifest["kernels"] = {
      {{"name", "scale"}, {"chunks_per_thread", 4}, {"decode_chunks_per_thread", 16}}};
  std::vector<uint8_t> image = cpuArtifact(manifest);
  auto artifact = Artifact::parse(kFile, image.data(), image.size());
  ThreadPool pool(2);
  std::unique_ptr<Driver> driver = createDriver(*artifact, kFile, pool);
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

TEST(CpuDriver, WritesAndReadsRangesAndRefusesRangesOutsideABuffer) {
  std::vector<uint8_t> image = cpuArtifact(cpuManifest());
  auto artifact = Artifact::parse(kFile, image.data(), image.size());
  ThreadPool pool(1);
  CpuDriver driver(*artifact, kFile, pool);
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
  nlohmann::json metal = cpuManifest();
  metal["format"] = "q3c-metal";
  std::vector<uint8_t> image = cpuArtifact(metal);
  auto artifact = Artifact::parse(kFile, image.data(), image.size());
  ThreadPool pool(1);
  EXPECT_LOAD_ERROR(createDriver(*artifact, kFile, pool),
                    "test.q3: unknown artifact format 'q3c-metal'; this runtime has drivers for "
                    "q3c-cpu and q3c-vulkan");
  // A device is a Vulkan choice.
  image = cpuArtifact(cpuManifest());
  artifact = Artifact::parse(kFile, image.data(), image.size());
  EXPECT_LOAD_ERROR(createDriver(*artifact, kFile, pool, DriverOptions{0}),
                    "test.q3: a CPU artifact runs on the CPU; --device selects a Vulkan device");

  nlohmann::json future = cpuManifest();
  future["target"]["required_features"] = {"sse2", "fma4"}; // fma4: AMD Bulldozer only
  image = cpuArtifact(future);
  artifact = Artifact::parse(kFile, image.data(), image.size());
  EXPECT_LOAD_ERROR(createDriver(*artifact, kFile, pool), "lacks: fma4");

  nlohmann::json chunks = cpuManifest();
  chunks["kernels"] = {{{"name", "scale"}, {"chunks_per_thread", 65}}};
  image = cpuArtifact(chunks);
  artifact = Artifact::parse(kFile, image.data(), image.size());
  EXPECT_LOAD_ERROR(createDriver(*artifact, kFile, pool),
                    "test.q3: manifest: kernel scale: chunks_per_thread: expected an integer "
                    "from 1 to 64, found 65");

  nlohmann::json decodeChunks = cpuManifest();
  decodeChunks["kernels"] = {{{"name", "scale"}, {"decode_chunks_per_thread", "16"}}};
  image = cpuArtifact(decodeChunks);
  artifact = Artifact::parse(kFile, image.data(), image.size());
  EXPECT_LOAD_ERROR(createDriver(*artifact, kFile, pool),
                    "test.q3: manifest: kernel scale: decode_chunks_per_thread: expected an "
                    "integer from 1 to 64, found \"16\"");
}

} // namespace
} // namespace q3::runtime
