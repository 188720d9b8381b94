// Memory estimates refuse what cannot fit, with the estimate in the message;
// sizes from untrusted numbers saturate instead of wrapping to something small.
#include "runtime/ModelMemory.h"
#include "runtime/ResourceLimits.h"

#include <gtest/gtest.h>

namespace q3::runtime {
namespace {

using Json = nlohmann::json;

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

Json manifest(int64_t rowBytes) {
  return {{"config", {{"num_hidden_layers", 2}, {"num_key_value_heads", 2}, {"head_dim", 8}}},
          {"weights",
           {{{"kind", "param"}, {"shape", {16, 8}}, {"dtype", "bf16"}},
            {{"kind", "param"}, {"shape", {1000, 1000}}, {"dtype", "f32"}}}},
          {"schedule", {{{"kernel", "k"}, {"operands", {{{"kind", "weight"}, {"id", 0}}}}}}},
          {"buffers", {{"row_bytes", {rowBytes, 64}}}}};
}

TEST(ModelMemory, CountsReadWeightsBuffersAndCache) {
  std::vector<MemoryPart> parts = estimateModelMemory(manifest(256), 100, 4);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].bytes, 16u * 8 * 2);             // only the weight a dispatch reads
  EXPECT_EQ(parts[1].bytes, 2u * 100 * 2 * 8 * 4 * 2); // K and V
  EXPECT_EQ(parts[2].bytes, 100u * (256 + 64 + 4));   // buffers and token ids
}

TEST(ModelMemory, AnOverflowingContextIsRefusedNotZero) {
  // context x row_bytes overflowed to a "0-byte buffer" before.
  std::vector<MemoryPart> parts =
      estimateModelMemory(manifest(int64_t(1) << 40), int64_t(1) << 31, 4);
  EXPECT_EQ(parts[2].bytes, UINT64_MAX);
  EXPECT_THROW(requireMemory("m.q3", parts, availableMemory(), ""), ResourceError);
}

} // namespace
} // namespace q3::runtime
