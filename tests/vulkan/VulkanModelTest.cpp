//===- VulkanModelTest.cpp - whole models on the Vulkan driver ------------===//
//
// Golden checkpoints compiled for Vulkan in-process and run through Model
// (the scheduler both backends share) on lavapipe: decode with the KV cache
// against the full forward pass row by row, the last-row logits product,
// replayed passes, the staging-ring path a discrete GPU takes, and the
// per-dispatch timestamps of --profile.
//
//===----------------------------------------------------------------------===//
#include "backends/vulkan/CompileModel.h"
#include "frontend/Presets.h"
#include "ir/BuildGraph.h"
#include "passes/Pipeline.h"
#include "runtime/Model.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

namespace q3::testing {
namespace {

const std::string kGoldenDir = Q3_GOLDEN_DIR;

/// `golden` compiled for Vulkan into a temporary artifact (removed with it).
class CompiledGolden {
public:
  /// `ubatch`: the rows a prefill chunk runs (longer prompts run in chunks).
  explicit CompiledGolden(const std::string &golden, int64_t ubatch = 4096)
      : weights_(kGoldenDir + "/" + golden) {
    std::vector<std::string> warnings;
    frontend::ModelConfig config = frontend::resolveModelConfig(weights_, &warnings);
    mlir::MLIRContext context;
    auto module = ir::buildQwen3Graph(context, config);
    passes::PipelineOptions options;
    options.maxSeqLen = ubatch;
    if (mlir::failed(passes::runPipeline(*module, options)))
      throw std::runtime_error("pipeline failed");
    path_ = (std::filesystem::temp_directory_path() /
             ("q3-vulkan-" + golden + "-" + std::to_string(::getpid()) + ".q3"))
                .string();
    vulkan::writeVulkanArtifact(path_, vulkan::compileForVulkan(*module));
  }
  ~CompiledGolden() { std::filesystem::remove(path_); }
  std::unique_ptr<runtime::Model> load(int64_t context = 32) const {
    runtime::ModelOptions options;
    options.contextLength = context;
    return runtime::Model::load(path_, weights_, options);
  }

private:
  std::string weights_, path_;
};

float maxDiff(const float *a, const float *b, size_t n) {
  float worst = 0;
  for (size_t i = 0; i < n; ++i)
    worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

const std::vector<int32_t> kPrompt = {9, 1, 2, 3, 40, 50, 60, 7, 8, 9, 10, 11};

TEST(VulkanModel, DecodeEqualsTheFullForwardPass) {
  for (const char *golden : {"gqa4_tied_bf16", "mqa6_untied_f16"}) {
    CompiledGolden compiled(golden);
    auto model = compiled.load();
    const int64_t vocab = model->vocabSize();
    // 12 rows: the tiled GEMM products; one at a time: the matrix-vector
    // ones, attention over the cache at growing positions, each step a
    // replay of the same recorded pass.
    std::vector<float> full = model->forward(kPrompt);
    model->reset();
    for (size_t t = 0; t < kPrompt.size(); ++t) {
      const std::vector<float> &row = model->forward({kPrompt[t]}, runtime::Model::Logits::Last);
      ASSERT_EQ(int64_t(row.size()), vocab);
      EXPECT_LE(maxDiff(row.data(), full.data() + t * vocab, size_t(vocab)), 5e-5f)
          << golden << " position " << t;
    }
  }
}

TEST(VulkanModel, SplitDecodeAttentionEqualsTheFullForwardPass) {
  // Past 300 positions a decode step's attention runs in 5 runs of 64
  // positions per KV head (vulkan-split-decode-attention), which a second
  // dispatch merges; the prompt's prefill does not split.
  CompiledGolden compiled("gqa4_tied_bf16");
  auto model = compiled.load(320);
  const int64_t vocab = model->vocabSize();
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < 304; ++i)
    tokens.push_back(int32_t((i * 37 + 5) % vocab));
  std::vector<float> full = model->forward(tokens);
  model->reset();
  model->forward(std::vector<int32_t>(tokens.begin(), tokens.begin() + 300),
                 runtime::Model::Logits::Last);
  for (size_t t = 300; t < tokens.size(); ++t) {
    const std::vector<float> &row = model->forward({tokens[t]}, runtime::Model::Logits::Last);
    ASSERT_EQ(int64_t(row.size()), vocab);
    EXPECT_LE(maxDiff(row.data(), full.data() + t * vocab, size_t(vocab)), 5e-5f)
        << "position " << t;
  }
}

TEST(VulkanModel, LastRowLogitsEqualTheLastRowOfAll) {
  CompiledGolden compiled("gqa2_hdsmaller_tied_f16");
  auto model = compiled.load();
  const int64_t vocab = model->vocabSize();
  for (size_t rows : {size_t(3), size_t(12)}) { // the 8-row and the GEMM variants
    std::vector<int32_t> tokens(kPrompt.begin(), kPrompt.begin() + rows);
    model->reset();
    std::vector<float> all = model->forward(tokens);
    model->reset();
    std::vector<float> last = model->forward(tokens, runtime::Model::Logits::Last);
    ASSERT_EQ(int64_t(last.size()), vocab);
    // 3 rows: the same matrix-vector loop, bit for bit; 12: the GEMM sums
    // in another order than the one-row product of the last row.
    EXPECT_LE(maxDiff(last.data(), all.data() + (rows - 1) * vocab, size_t(vocab)),
              rows <= 8 ? 0.0f : 1e-5f)
        << rows << " rows";
  }
}

TEST(VulkanModel, StagingRingGivesTheSameBits) {
  // lavapipe's memory is host-visible, so the driver maps it; a discrete
  // GPU's is not: token writes ride in the next submission and logits come
  // back through the read-back buffer, batched with the pass that wrote
  // them; a GPU's waits poll the fence. A prompt in chunks of 5 rows, then
  // decode steps.
  CompiledGolden compiled("sharded_gqa2_bf16", 5);
  auto run = [&] {
    auto model = compiled.load();
    std::vector<float> logits = model->forward(kPrompt);
    for (int32_t token : {4, 5, 6}) {
      const std::vector<float> &row = model->forward({token}, runtime::Model::Logits::Last);
      logits.insert(logits.end(), row.begin(), row.end());
    }
    const std::vector<float> &last =
        model->forward({7, 8, 9, 10, 11, 12, 13}, runtime::Model::Logits::Last);
    logits.insert(logits.end(), last.begin(), last.end());
    return logits;
  };
  std::vector<float> mapped = run();
  ::setenv("Q3_VULKAN_FORCE_STAGING", "1", 1);
  std::vector<float> staged = run();
  ::setenv("Q3_VULKAN_FENCE_POLL", "1", 1); // as on a GPU
  std::vector<float> polled = run();
  ::unsetenv("Q3_VULKAN_FENCE_POLL");
  ::unsetenv("Q3_VULKAN_FORCE_STAGING");
  ASSERT_EQ(mapped.size(), staged.size());
  EXPECT_EQ(maxDiff(mapped.data(), staged.data(), mapped.size()), 0.0f);
  ASSERT_EQ(mapped.size(), polled.size());
  EXPECT_EQ(maxDiff(mapped.data(), polled.data(), mapped.size()), 0.0f);
}

TEST(VulkanModel, ProfileTimesEveryKernelOnTheDevice) {
  CompiledGolden compiled("gqa2_untied_f32");
  auto model = compiled.load();
  model->setProfiling(true);
  model->forward(kPrompt);
  model->forward({5}, runtime::Model::Logits::Last);
  model->forward({6}, runtime::Model::Logits::Last); // a replay
  std::vector<runtime::KernelProfile> profile = model->profile();
  ASSERT_EQ(profile.size(), 8u);
  for (const runtime::KernelProfile &kernel : profile) {
    EXPECT_GT(kernel.seconds, 0.0) << kernel.kernel;
    EXPECT_EQ(kernel.calls % 3, 0) << kernel.kernel; // once per pass (or per layer)
  }
}

} // namespace
} // namespace q3::testing
