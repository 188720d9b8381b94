// Memory estimates refuse what cannot fit, with the estimate in the message;
// sizes from untrusted numbers saturate instead of wrapping to something small.
#include "runtime/ModelMemory.h"
#include "runtime/ResourceLimits.h"

#include <gtest/gtest.h>

namespace q3::runtime {
namespace {

TEST(ResourceLimits, SizesSaturateInsteadOfWrapping) {
  EXPECT_EQ(saturatingMul(uint64_t(1) << 40, uint64_t(1) << 30), UINT64_MAX);
  EXPECT_EQ(saturatingAdd(UINT64_MAX - 1, 5), UINT64_MAX);
  EXPECT_EQ(saturatingMul(3, 5), 15u);
  EXPECT_EQ(formatMemory(UINT64_MAX), "more than 18 EB");
  EXPECT_EQ(formatMemory(1190000000), "1.19 GB");
}

TEST(ResourceLimits, RefusesWhatDoesNotFitWithTheEstimate) {
  const MemoryBudget budget{8'000'000'000, "ulimit -v"};
  EXPECT_NO_THROW(requireMemory("m.q3", {{"weights", 1'000'000'000}}, budget, ""));
  try {
    requireMemory("m.q3", {{"weights", 1'200'000'000}, {"KV cache", 39'900'000'000}}, budget,
                  "; use --ctx");
    FAIL() << "expected a ResourceError";
  } catch (const ResourceError &error) {
    EXPECT_STREQ(error.what(), "m.q3 needs about 41.10 GB of memory (KV cache 39.90 GB, weights "
                               "1.20 GB), more than the 8.00 GB available (ulimit -v); use --ctx");
  }
}

TEST(ResourceLimits, TheMachineHasSomeCpusAndMemory) {
  EXPECT_GE(availableCpus(), 1);
  const MemoryBudget budget = availableMemory();
  EXPECT_GT(budget.bytes, 0u);
  EXPECT_FALSE(budget.limitedBy.empty());
}

manifest::Manifest manifest(int64_t rowBytes) {
  manifest::Manifest m;
  m.config.numHiddenLayers = 2;
  m.config.numKeyValueHeads = 2;
  m.config.headDim = 8;
  m.weights = {{0, manifest::WeightKind::Param, "a", {}, {16, 8}, DType::BF16},
               {1, manifest::WeightKind::Param, "b", {}, {1000, 1000}, DType::F32}};
  m.steps = {{"k", {{manifest::BindingKind::Weight, 0}}, {}}};
  m.bufferRowBytes = {rowBytes, 64};
  return m;
}

TEST(ModelMemory, CountsReadWeightsBuffersAndCache) {
  std::vector<MemoryPart> parts = estimateModelMemory(manifest(256), 100, 2);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].bytes, 16u * 8 * 2);             // only the weight a dispatch reads
  EXPECT_EQ(parts[1].bytes, 2u * 100 * 2 * 8 * 4 * 2); // K and V
  EXPECT_EQ(parts[2].bytes, 100u * (256 + 64 + 4));   // buffers and token ids
}

TEST(ModelMemory, BuffersHoldOneChunkAndABf16CacheHalves) {
  manifest::Manifest m = manifest(256);
  m.prefillRows = 16;
  m.kvCache = DType::BF16;
  m.kernels = {manifest::Kernel{}, manifest::Kernel{}};
  m.kernels[0].workspaceBytes = 1000;
  m.kernels[1].workspaceBytes = 3000;
  std::vector<MemoryPart> parts = estimateModelMemory(m, 100, 2);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[1].bytes, 2u * 100 * 2 * 8 * 2 * 2);    // K and V of bf16
  EXPECT_EQ(parts[2].bytes, 16u * (256 + 64 + 4) + 3000); // a chunk, the largest workspace
}

TEST(ModelMemory, EachThreadHasTheLargestScratchAnyBuildTakesAtTheChunk) {
  manifest::Manifest m = manifest(256);
  m.prefillRows = 16;
  m.kernels = {manifest::Kernel{}, manifest::Kernel{}};
  m.kernels[0].threadScratch = {1000, 10}; // 1160 at 16 rows
  m.kernels[1].threadScratch = {64, 100};  // 1664
  m.kernels[1].variants = {manifest::KernelVariant{}};
  m.kernels[1].variants[0].threadScratch = {0, 200}; // 3200: the largest
  const uint64_t buffers = 16u * (256 + 64 + 4);
  EXPECT_EQ(estimateModelMemory(m, 100, 1)[2].bytes, buffers + 3200);
  EXPECT_EQ(estimateModelMemory(m, 100, 3)[2].bytes, buffers + 3 * 3200);
}

TEST(ModelMemory, AnOverflowingContextIsRefusedNotZero) {
  // context x row_bytes overflowed to a "0-byte buffer" before.
  std::vector<MemoryPart> parts =
      estimateModelMemory(manifest(int64_t(1) << 40), int64_t(1) << 31, 2);
  EXPECT_EQ(parts[2].bytes, UINT64_MAX);
  EXPECT_THROW(requireMemory("m.q3", parts, availableMemory(), ""), ResourceError);
}

} // namespace
} // namespace q3::runtime
