//===- GoldenParityTest.cpp - reference interpreter vs independent goldens ===//
//
// The goldens in tests/golden were computed in float64 by
// scripts/qwen3_reference.py, which shares no code with q3c. Weights of every
// dtype widen exactly to f32, so one bound serves f32, bf16 and f16 weights.
//
//===----------------------------------------------------------------------===//
#include "tests/unit/GoldenCase.h"

#include "frontend/ModelConfig.h"
#include "runtime/Checkpoint.h"
#include "runtime/Npy.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>

#include <filesystem>
#include <fstream>
#include <set>

namespace q3::testing {
namespace {

constexpr double kLogitBound = 1e-4;
constexpr double kDecodeBound = 1e-5;

class GoldenParity : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenParity, PrefillLogitsMatchReference) {
  GoldenCase golden = loadGoldenCase(GetParam());
  GoldenRunner runner(golden);
  reference::Tensor logits = runner.interpreter().run(golden.prompt);
  ASSERT_EQ(logits.shape, golden.logitsShape);
  EXPECT_LE(maxAbsDiff(logits.data, golden.logits), kLogitBound);
}

TEST_P(GoldenParity, GreedyIdsMatchReference) {
  GoldenCase golden = loadGoldenCase(GetParam());
  GoldenRunner runner(golden);
  EXPECT_EQ(
      reference::generateGreedy(runner.interpreter(), golden.prompt, int64_t(golden.greedy.size())),
      golden.greedy);
}

// Decode with the KV cache (one token per step, cached keys never rotated
// again) must give the rows of the full forward over the whole prompt.
TEST_P(GoldenParity, DecodeWithCacheEqualsFullForward) {
  GoldenCase golden = loadGoldenCase(GetParam());
  GoldenRunner runner(golden);
  reference::Tensor full = runner.interpreter().run(golden.prompt);
  runner.interpreter().reset();
  const int64_t vocab = full.shape[1];
  const size_t prefill = 2;
  std::vector<int32_t> head(golden.prompt.begin(), golden.prompt.begin() + prefill);
  reference::Tensor first = runner.interpreter().run(head);
  std::vector<float> stepwise = first.data;
  for (size_t t = prefill; t < golden.prompt.size(); ++t) {
    reference::Tensor step = runner.interpreter().run({golden.prompt[t]});
    ASSERT_EQ(step.shape, (std::vector<int64_t>{1, vocab}));
    stepwise.insert(stepwise.end(), step.data.begin(), step.data.end());
  }
  EXPECT_EQ(runner.interpreter().position(), int64_t(golden.prompt.size()));
  EXPECT_LE(maxAbsDiff(stepwise, full.data), kDecodeBound);
}

INSTANTIATE_TEST_SUITE_P(Golden, GoldenParity, ::testing::ValuesIn(goldenCaseNames()),
                         [](const auto &info) { return info.param; });

// A comparison that sees NaN or infinity fails, whichever way it is used:
// std::max(worst, NaN) kept `worst`, so NaN logits passed a parity bound.
double diffWithNaN() { return maxAbsDiff({1.0f, NAN, 3.0f}, {1.0f, 2.0f, 3.0f}); }
double diffOfInfinities() { return maxAbsDiff({INFINITY, 2.0f}, {INFINITY, 2.0f}); }
double diffOfUnequalLengths() { return maxAbsDiff({1.0f}, {1.0f, 2.0f}); }

TEST(Comparison, NonFiniteValuesAndLengthMismatchesFailEveryCheck) {
  EXPECT_EQ(maxAbsDiff({1.0f, 2.0f}, {1.0f, 2.5f}), 0.5);
  EXPECT_TRUE(std::isnan(diffWithNaN()));
  EXPECT_TRUE(std::isnan(diffOfInfinities()));
  EXPECT_TRUE(std::isnan(diffOfUnequalLengths()));
  EXPECT_NONFATAL_FAILURE(EXPECT_LE(diffWithNaN(), 1e-4), "diffWithNaN()");
  EXPECT_NONFATAL_FAILURE(EXPECT_GT(diffWithNaN(), 1e-4), "diffWithNaN()");
  EXPECT_NONFATAL_FAILURE(EXPECT_EQ(diffOfInfinities(), 0.0), "diffOfInfinities()");
  EXPECT_NONFATAL_FAILURE(EXPECT_GT(diffOfUnequalLengths(), 1e-4), "diffOfUnequalLengths()");
}

// The goldens must keep covering every shape family the compiler handles
// differently: head layouts, head_dim against hidden/heads, tied and untied
// embeddings, every weight dtype, sharded checkpoints and a tied checkpoint
// that still carries lm_head.weight.
TEST(GoldenSet, CoversTheConfigFamilies) {
  std::set<std::string> families;
  for (const std::string &name : goldenCaseNames()) {
    const std::string dir = std::string(Q3_GOLDEN_DIR) + "/" + name;
    std::vector<std::string> warnings;
    const frontend::ModelConfig c = frontend::loadModelConfig(dir, &warnings);
    families.insert(c.numKeyValueHeads == c.numAttentionHeads ? "mha"
                    : c.numKeyValueHeads == 1                 ? "mqa"
                                                              : "gqa");
    const int64_t split = c.hiddenSize / c.numAttentionHeads;
    families.insert(c.headDim > split   ? "head_dim larger than hidden/heads"
                    : c.headDim < split ? "head_dim smaller than hidden/heads"
                                        : "head_dim = hidden/heads");
    families.insert(c.tieWordEmbeddings ? "tied" : "untied");
    families.insert(frontend::dtypeName(c.dtype));
    const runtime::Checkpoint checkpoint = runtime::Checkpoint::open(dir);
    if (std::filesystem::exists(dir + "/model.safetensors.index.json"))
      families.insert("sharded");
    if (c.tieWordEmbeddings && checkpoint.find("lm_head.weight"))
      families.insert("tied with a redundant lm_head.weight");
  }
  for (const char *family :
       {"mha", "mqa", "gqa", "head_dim larger than hidden/heads",
        "head_dim smaller than hidden/heads", "tied", "untied", "bfloat16", "float16", "float32",
        "sharded", "tied with a redundant lm_head.weight"})
    EXPECT_TRUE(families.count(family)) << "no golden case covers: " << family;
  EXPECT_GE(goldenCaseNames().size(), 10u);
}

// The comparison must be able to tell a wrong model from the right one: the
// reference's deliberately wrong variants (interleaved RoPE pairing, norm after
// RoPE, a (1 + w) gain, h % kv head mapping) are all far outside the bound.
TEST(WrongVariants, AreCaughtByTheParityBound) {
  std::ifstream caseFile(std::string(Q3_GOLDEN_DIR) + "/wrong_variant/case.txt");
  std::string caseName;
  ASSERT_TRUE(caseFile >> caseName);
  GoldenCase golden = loadGoldenCase(caseName);
  GoldenRunner runner(golden);
  reference::Tensor logits = runner.interpreter().run(golden.prompt);
  ASSERT_LE(maxAbsDiff(logits.data, golden.logits), kLogitBound);
  for (const char *variant :
       {"interleaved_rope", "norm_after_rope", "one_plus_gain", "kv_head_modulo"}) {
    runtime::NpyArray wrong = runtime::readNpyF32(std::string(Q3_GOLDEN_DIR) + "/wrong_variant/" +
                                                  variant + "_logits.npy");
    EXPECT_GT(maxAbsDiff(logits.data, wrong.data), 100 * kLogitBound) << variant;
  }
}

} // namespace
} // namespace q3::testing
