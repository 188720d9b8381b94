//===- ModelTest.cpp - runtime::Model on a compiled golden ----------------===//
//
// The runtime's scheduler as q3run drives it: all-rows logits against the
// independent reference, last-row logits against the last of all rows, decode
// steps against the rows of one prefill, reset(), and the context boundary.
//
//===----------------------------------------------------------------------===//
#include "tests/unit/GoldenCase.h"

#include "backends/cpu/CompileModel.h"
#include "backends/cpu/CpuPipeline.h"
#include "frontend/ModelConfig.h"
#include "ir/BuildGraph.h"
#include "passes/Pipeline.h"
#include "runtime/Model.h"
#include "runtime/ResourceLimits.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

namespace q3::testing {
namespace {

constexpr const char *kCase = "gqa4_tied_bf16";
constexpr int64_t kChunkRows = 4;

/// A fresh temporary folder.
std::string temporaryFolder() {
  std::string dir = (std::filesystem::temp_directory_path() / "q3-model-test-XXXXXX").string();
  if (!::mkdtemp(dir.data()))
    throw std::runtime_error("cannot create a folder in " + dir);
  return dir;
}

/// Compiles `golden`'s model for this CPU with activation buffers of
/// `chunkRows` rows into `artifact`.
void compileGolden(const GoldenCase &golden, const std::string &artifact, int64_t chunkRows,
                   const cpu::CpuPipelineOptions &cpuOptions) {
  std::vector<std::string> warnings;
  frontend::ModelConfig config = frontend::loadModelConfig(golden.dir, &warnings);
  mlir::MLIRContext context;
  auto module = ir::buildQwen3Graph(context, config);
  passes::PipelineOptions options;
  options.stage = passes::Stage::Target;
  options.maxSeqLen = chunkRows;
  options.target = cpu::cpuTargetPipeline(cpuOptions);
  ASSERT_TRUE(mlir::succeeded(passes::runPipeline(*module, options)));
  cpu::writeCpuArtifact(artifact, cpu::compileForCpu(*module));
}

/// The golden compiled once for the whole suite (f32 products: the 1e-4
/// bound), with activation buffers of kChunkRows rows.
class ModelTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    golden = new GoldenCase(loadGoldenCase(kCase));
    folder = new std::string(temporaryFolder());
    artifact = new std::string(*folder + "/model.q3");
    cpu::CpuPipelineOptions cpuOptions;
    cpuOptions.matmul = "f32";
    // Buffers of 4 rows: every prompt of the suite runs in several chunks.
    compileGolden(*golden, *artifact, kChunkRows, cpuOptions);
  }
  static void TearDownTestSuite() {
    std::error_code ignored;
    std::filesystem::remove_all(*folder, ignored);
    delete golden;
    delete folder;
    delete artifact;
  }

  std::unique_ptr<runtime::Model> load(int64_t context = 0, int threads = 2,
                                       bool reserveContext = false) {
    runtime::ModelOptions options;
    options.threads = threads;
    options.contextLength = context;
    options.reserveContext = reserveContext;
    return runtime::Model::load(*artifact, golden->dir, options);
  }

  static GoldenCase *golden;
  static std::string *folder, *artifact;
};

GoldenCase *ModelTest::golden = nullptr;
std::string *ModelTest::folder = nullptr;
std::string *ModelTest::artifact = nullptr;

std::vector<float> row(const std::vector<float> &matrix, int64_t vocab, int64_t r) {
  return std::vector<float>(matrix.begin() + r * vocab, matrix.begin() + (r + 1) * vocab);
}

TEST_F(ModelTest, AllRowsMatchTheIndependentReference) {
  auto model = load();
  const std::vector<float> &logits = model->forward(golden->prompt);
  EXPECT_EQ(int64_t(logits.size()), golden->logitsShape[0] * golden->logitsShape[1]);
  EXPECT_LE(maxAbsDiff(logits, golden->logits), 1e-4);
  EXPECT_EQ(model->position(), int64_t(golden->prompt.size()));
}

TEST_F(ModelTest, LastRowLogitsAreTheLastOfAllRows) {
  auto model = load();
  const int64_t vocab = model->vocabSize(), rows = int64_t(golden->prompt.size());
  const std::vector<float> all = model->forward(golden->prompt, runtime::Model::Logits::All);
  model->reset();
  const std::vector<float> last = model->forward(golden->prompt, runtime::Model::Logits::Last);
  ASSERT_EQ(int64_t(last.size()), vocab);
  // The last-row product runs the one-row (decode) kernel path: f32 rounding apart.
  EXPECT_LE(maxAbsDiff(last, row(all, vocab, rows - 1)), 1e-5);
}

TEST_F(ModelTest, DecodeStepsGiveTheRowsOfOnePrefill) {
  auto model = load();
  const int64_t vocab = model->vocabSize();
  const std::vector<float> all = model->forward(golden->prompt);
  model->reset();
  model->forward({golden->prompt[0], golden->prompt[1]});
  for (size_t t = 2; t < golden->prompt.size(); ++t) {
    const std::vector<float> step = model->forward({golden->prompt[t]});
    EXPECT_LE(maxAbsDiff(step, row(all, vocab, int64_t(t))), 1e-5) << "position " << t;
  }
}

// The KV cache goes on huge pages (resident whole from the first token,
// streamed faster) only while it is a small part of the memory this process
// may use; a long context keeps growing with use.
TEST(ModelKvCache, HugePagesOnlyForACacheOfAtMostAnEighthOfTheBudget) {
  const uint64_t gb = 1000000000;
  EXPECT_TRUE(runtime::kvCacheOnHugePagesPays(gb, 8 * gb));
  EXPECT_FALSE(runtime::kvCacheOnHugePagesPays(gb + 1, 8 * gb));
  EXPECT_FALSE(runtime::kvCacheOnHugePagesPays(gb, 0)); // no budget known to fit it
  // Keys and values each less than a huge page: HostBuffer maps small pages.
  const uint64_t hugePage = uint64_t(2) << 20;
  EXPECT_TRUE(runtime::kvCacheOnHugePagesPays(2 * hugePage, 100 * gb));
  EXPECT_FALSE(runtime::kvCacheOnHugePagesPays(2 * hugePage - 2, 100 * gb));
}

TEST_F(ModelTest, TheKvCacheHoldsKeysAndValuesForTheWholeContext) {
  auto model = load(/*context=*/64);
  const auto &c = model->config();
  EXPECT_EQ(model->kvCacheBytes(), 2 * c.numHiddenLayers * 64 * c.numKeyValueHeads * c.headDim * 4);
  // The golden's cache at 64 positions is less than a huge page: small pages.
  EXPECT_FALSE(model->kvCacheOnHugePages());
  EXPECT_EQ(model->kvCacheOnHugePages(),
            runtime::kvCacheOnHugePagesPays(uint64_t(model->kvCacheBytes()),
                                            runtime::availableMemory().bytes));
}

// The cache starts with room for 256 positions and doubles as the context
// fills (capped at the context), moving the rows it holds: every logit is the
// same as with room for the whole context from the start, whether it grows
// between prefill chunks or between decode steps.
TEST_F(ModelTest, TheKvCacheGrowsWithTheContextAndKeepsItsRows) {
  const int64_t context = 1000;
  auto growing = load(context);
  auto reserved = load(context, 2, /*reserveContext=*/true);
  EXPECT_EQ(growing->kvCachePositions(), runtime::kInitialCachePositions);
  EXPECT_EQ(reserved->kvCachePositions(), context);
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < 600; ++i)
    tokens.push_back(int32_t((i * 7919 + 13) % growing->vocabSize()));
  auto span = [&](int64_t begin, int64_t end) {
    return std::vector<int32_t>(tokens.begin() + begin, tokens.begin() + end);
  };
  const auto all = runtime::Model::Logits::All;
  EXPECT_EQ(growing->forward(span(0, 200), all), reserved->forward(span(0, 200), all));
  EXPECT_EQ(growing->kvCachePositions(), 256);
  EXPECT_EQ(growing->forward(span(200, 300), all), reserved->forward(span(200, 300), all));
  EXPECT_EQ(growing->kvCachePositions(), 512);
  for (int64_t t = 300; t < 600; ++t)
    ASSERT_EQ(growing->forward(span(t, t + 1)), reserved->forward(span(t, t + 1)))
        << "position " << t;
  EXPECT_EQ(growing->kvCachePositions(), context) << "doubling stops at the context";
  // reset() keeps the room it grew to.
  growing->reset();
  EXPECT_EQ(growing->kvCachePositions(), context);
}

TEST_F(ModelTest, ResetForgetsTheCache) {
  auto model = load();
  const std::vector<float> first = model->forward(golden->prompt);
  const std::vector<float> continued = model->forward(golden->prompt);
  EXPECT_GT(maxAbsDiff(first, continued), 1e-3) << "a continuation sees the earlier positions";
  model->reset();
  EXPECT_EQ(model->position(), 0);
  EXPECT_EQ(model->forward(golden->prompt), first);
}

TEST_F(ModelTest, TheContextBoundary) {
  const int64_t n = int64_t(golden->prompt.size());
  auto model = load(n);
  EXPECT_EQ(model->contextLength(), n);
  model->forward(golden->prompt); // exactly fills the context
  EXPECT_EQ(model->position(), n);
  try {
    model->forward({1});
    ADD_FAILURE() << "expected a RequestError";
  } catch (const runtime::RequestError &error) {
    EXPECT_EQ(std::string(error.what()),
              "positions " + std::to_string(n) + ".." + std::to_string(n) +
                  " do not fit the context of " + std::to_string(n) + " (use --ctx)");
  }
  EXPECT_EQ(model->position(), n) << "a refused request changes nothing";
  model->reset();
  std::vector<int32_t> tooLong = golden->prompt;
  tooLong.push_back(1);
  EXPECT_THROW(model->forward(tooLong), runtime::RequestError);
  EXPECT_THROW(model->forward({}), runtime::RequestError);
  EXPECT_THROW(model->forward({int32_t(model->vocabSize())}), runtime::RequestError);
  EXPECT_THROW(model->forward({-1}), runtime::RequestError);
  EXPECT_EQ(model->position(), 0);
  EXPECT_LE(maxAbsDiff(model->forward(golden->prompt), golden->logits), 1e-4);
}

TEST_F(ModelTest, OneThreadAndTwoGiveTheSameBits) {
  auto one = load(0, 1);
  auto two = load(0, 2);
  EXPECT_EQ(one->threads(), 1);
  EXPECT_EQ(two->threads(), 2);
  EXPECT_EQ(one->forward(golden->prompt), two->forward(golden->prompt));
}

// Decode attention split over positions (cpu-split-decode-attention): on a
// context of 1,300 positions each head group's decode runs in 3 workgroups
// of 512, 512 and the rest, merged by the last to finish. MQA with 4 query
// heads (one head group) and head_dim 16; its decode steps give the rows of
// one prefill (which does not split) on 2 threads and on 1.
TEST(ModelDecodeSplits, DecodeStepsGiveTheRowsOfOnePrefill) {
  const GoldenCase golden = loadGoldenCase("mqa_hdlarger_tied_bf16");
  const std::string folder = temporaryFolder(), artifact = folder + "/split.q3";
  cpu::CpuPipelineOptions cpuOptions;
  cpuOptions.matmul = "f32";
  cpuOptions.decodeSplits = 3;
  compileGolden(golden, artifact, 64, cpuOptions);
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < 1300; ++i)
    tokens.push_back(golden.prompt[size_t(i) % golden.prompt.size()] ^ (i % 7));
  for (int threads : {2, 1}) {
    runtime::ModelOptions options;
    options.threads = threads;
    options.contextLength = 1400;
    auto model = runtime::Model::load(artifact, golden.dir, options);
    const int64_t vocab = model->vocabSize();
    const std::vector<float> all = model->forward(tokens);
    model->reset();
    const size_t prefill = tokens.size() - 12;
    model->forward(std::vector<int32_t>(tokens.begin(), tokens.begin() + prefill));
    for (size_t t = prefill; t < tokens.size(); ++t) {
      const std::vector<float> step = model->forward({tokens[t]});
      // Two f32 orders of the value sums over ~1,300 positions: prefill's
      // flash blocks, decode's decode_streams runs side by side.
      EXPECT_LE(maxAbsDiff(step, row(all, vocab, int64_t(t))), 3e-5)
          << "position " << t << ", " << threads << " threads";
    }
  }
  std::error_code ignored;
  std::filesystem::remove_all(folder, ignored);
}

} // namespace
} // namespace q3::testing
