//===- PassEquivalenceTest.cpp - every pass preserves the logits ----------===//
//
// The reference interpreter runs each golden model before the pipeline, after
// every prefix of the pipeline, and after all of it; the logits must agree to
// f32 rounding (max |a - b| <= 1e-5 * max |b|). The weight transforms the
// passes record (fold_gain, concat_rows) are evaluated by these runs.
//
//===----------------------------------------------------------------------===//
#include "tests/unit/GoldenCase.h"

#include "ir/Q3Ops.h"
#include "passes/Pipeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

namespace q3::testing {
namespace {

constexpr double kRelativeBound = 1e-5;

double maxAbs(const std::vector<float> &v) {
  double m = 0.0;
  for (float x : v)
    m = std::max(m, std::fabs(double(x)));
  return m;
}

/// Runs the default pipeline with only the first `count` passes enabled.
std::function<void(mlir::ModuleOp)> pipelinePrefix(size_t count) {
  return [count](mlir::ModuleOp module) {
    passes::PipelineOptions options;
    const auto &pipeline = passes::defaultPipeline();
    for (size_t i = count; i < pipeline.size(); ++i)
      options.disabledPasses.insert(pipeline[i].name);
    ASSERT_TRUE(mlir::succeeded(passes::runPipeline(module, options)));
  };
}

std::vector<float> runPromptAndDecode(GoldenRunner &runner, const GoldenCase &golden) {
  std::vector<float> logits = runner.interpreter().run(golden.prompt).data;
  // One decode step too, so the cache path of every stage is exercised.
  reference::Tensor step = runner.interpreter().run({golden.prompt.front()});
  logits.insert(logits.end(), step.data.begin(), step.data.end());
  return logits;
}

class PassEquivalence : public ::testing::TestWithParam<std::string> {};

TEST_P(PassEquivalence, EveryPipelinePrefixPreservesLogits) {
  GoldenCase golden = loadGoldenCase(GetParam());
  GoldenRunner graph(golden);
  std::vector<float> expected = runPromptAndDecode(graph, golden);
  const double bound = kRelativeBound * maxAbs(expected);
  const auto &pipeline = passes::defaultPipeline();
  for (size_t count = 1; count <= pipeline.size(); ++count) {
    GoldenRunner transformed(golden, pipelinePrefix(count));
    EXPECT_LE(maxAbsDiff(runPromptAndDecode(transformed, golden), expected), bound)
        << "after " << pipeline[count - 1].name;
  }
}

std::string printed(mlir::ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os);
  return os.str();
}

/// Runs only `enabled` of the default pipeline.
std::function<void(mlir::ModuleOp)> onlyPasses(std::set<std::string> enabled) {
  return [enabled](mlir::ModuleOp module) {
    passes::PipelineOptions options;
    for (const passes::PipelineEntry &entry : passes::defaultPipeline())
      if (!enabled.count(entry.name))
        options.disabledPasses.insert(entry.name);
    ASSERT_TRUE(mlir::succeeded(passes::runPipeline(module, options)));
  };
}

/// Passes that match only what another pass produces: fuse-qknorm-rope
/// starts from merge-sibling-matmuls' split_columns.
std::set<std::string> prerequisitesOf(const std::string &pass) {
  if (pass == "fuse-qknorm-rope")
    return {"merge-sibling-matmuls"};
  return {};
}

// Each pass alone (the others disabled, but for its prerequisites) is also an
// identity on the logits, and does something: a pass that stopped matching
// would otherwise pass this test by leaving the graph as it was. Only the
// generic cleanups may find nothing to do.
TEST_P(PassEquivalence, EachFusionPassAlonePreservesLogits) {
  GoldenCase golden = loadGoldenCase(GetParam());
  GoldenRunner graph(golden);
  std::vector<float> expected = runPromptAndDecode(graph, golden);
  const double bound = kRelativeBound * maxAbs(expected);
  for (const passes::PipelineEntry &only : passes::defaultPipeline()) {
    // Not a fusion: an f32 cache (the default) leaves the IR as it is, a
    // bf16 one rounds the logits (tools/kv-cache-bf16.test bounds that).
    if (only.name == "set-kv-cache-type")
      continue;
    std::set<std::string> enabled = prerequisitesOf(only.name);
    GoldenRunner baseline(golden, onlyPasses(enabled));
    enabled.insert(only.name);
    GoldenRunner transformed(golden, onlyPasses(enabled));
    if (only.name != "canonicalize" && only.name != "cse") {
      EXPECT_NE(printed(transformed.module()), printed(baseline.module()))
          << only.name << " changed nothing";
    }
    EXPECT_LE(maxAbsDiff(runPromptAndDecode(transformed, golden), expected), bound) << only.name;
  }
}

TEST_P(PassEquivalence, FullPipelineMatchesTheIndependentReference) {
  GoldenCase golden = loadGoldenCase(GetParam());
  GoldenRunner compiled(golden, pipelinePrefix(passes::defaultPipeline().size()));
  EXPECT_LE(maxAbsDiff(compiled.interpreter().run(golden.prompt).data, golden.logits), 1e-4);
  compiled.interpreter().reset();
  EXPECT_EQ(reference::generateGreedy(compiled.interpreter(), golden.prompt,
                                      int64_t(golden.greedy.size())),
            golden.greedy);
}

INSTANTIATE_TEST_SUITE_P(Golden, PassEquivalence, ::testing::ValuesIn(goldenCaseNames()),
                         [](const auto &info) { return info.param; });

// After the default pipeline: no standalone rms_norm feeds a matrix product, no
// standalone rope op remains, and K/V are never repeated (every attention has
// an explicit head map into the shared KV heads).
TEST(DefaultPipeline, LeavesNoUnfusedNormRopeOrRepeatedKV) {
  GoldenCase golden = loadGoldenCase("gqa4_tied_bf16");
  GoldenRunner compiled(golden, pipelinePrefix(passes::defaultPipeline().size()));
  int attentions = 0;
  compiled.module().walk([&](mlir::Operation *op) {
    EXPECT_FALSE(mlir::isa<ir::RopeOp>(op)) << "standalone q3.rope";
    EXPECT_FALSE(mlir::isa<ir::KVCacheUpdateOp>(op)) << "unfused cache update";
    if (auto norm = mlir::dyn_cast<ir::RMSNormOp>(op)) {
      for (mlir::Operation *user : norm->getUsers()) {
        EXPECT_FALSE((mlir::isa<ir::LinearOp, ir::FusedLinearOp>(user)))
            << "rms_norm feeds a matrix product";
      }
    }
    if (auto attention = mlir::dyn_cast<ir::AttentionOp>(op)) {
      ++attentions;
      ASSERT_TRUE(attention.getKvHeadMap().has_value());
      auto keys = attention.getKeys().getType().cast<mlir::RankedTensorType>();
      auto query = attention.getQuery().getType().cast<mlir::RankedTensorType>();
      EXPECT_EQ(keys.getDimSize(1), 2) << "keys carry only the KV heads";
      EXPECT_EQ(query.getDimSize(1), 8);
      // GQA ratio 4: heads 0-3 read KV head 0, heads 4-7 read KV head 1.
      EXPECT_EQ(attention.getKvHeadMap()->vec(), (std::vector<int64_t>{0, 0, 0, 0, 1, 1, 1, 1}));
    }
  });
  EXPECT_EQ(attentions, 1) << "one attention kernel shared by both layers";
}

// Where the RMSNorm gains go changes bytes, not values: folded into f32
// copies of every weight (fold-gain=always) or applied to the input in every
// product's prologue (never), the logits match the reference as the default
// (f32 weights folded, the rest as operands) does.
TEST(DefaultPipeline, EveryGainPolicyMatchesTheReference) {
  GoldenCase golden = loadGoldenCase("gqa4_tied_bf16");
  for (const char *policy : {"always", "never"}) {
    int gainOperands = 0, folds = 0;
    GoldenRunner compiled(golden, [&](mlir::ModuleOp module) {
      passes::PipelineOptions options;
      options.stage = passes::Stage::Fused;
      options.foldGain = policy;
      ASSERT_TRUE(mlir::succeeded(passes::runPipeline(module, options)));
      module.walk([&](mlir::Operation *op) {
        if (auto fused = mlir::dyn_cast<ir::FusedLinearOp>(op); fused && fused.getGain())
          ++gainOperands;
        folds += mlir::isa<ir::FoldGainOp>(op);
      });
    });
    std::vector<float> logits = compiled.interpreter().run(golden.prompt).data;
    EXPECT_LE(maxAbsDiff(logits, golden.logits) / maxAbs(golden.logits), kRelativeBound)
        << policy;
    if (std::string(policy) == "always")
      EXPECT_TRUE(gainOperands == 0 && folds > 0) << gainOperands << " gain operands";
    else
      EXPECT_TRUE(gainOperands > 0 && folds == 0) << folds << " folds";
  }
}

} // namespace
} // namespace q3::testing
