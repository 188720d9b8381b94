//===- WeightPackingTunerTest.cpp - where --weight-packing=auto puts weights ===//
//
// auto packs bf16 and f16 product weights at load when the tuner measured
// that packing this model's weights into fresh memory fits the load budget
// and that the packed products decode clearly faster than per call;
// a target that may run AMX packs bf16 ones at load whatever was measured.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/WeightPackingTuner.h"
#include "backends/cpu/CpuPipeline.h"
#include "frontend/Presets.h"
#include "ir/BuildGraph.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

namespace q3::testing {
namespace {

using cpu::DType;

TEST(WeightPackingTuner, PacksAtLoadWithinTheBudget) {
  // 1.19 GB (the 0.6B shape) at 6 GB/s: 0.2 s.
  EXPECT_TRUE(cpu::packingFitsTheLoad(1'192'000'000, 6.0));
  // Exactly the budget still fits; past it, not.
  const double rate = 2.0;
  const auto atBudget = int64_t(cpu::kPackAtLoadBudgetSeconds * rate * 1e9);
  EXPECT_TRUE(cpu::packingFitsTheLoad(atBudget, rate));
  EXPECT_FALSE(cpu::packingFitsTheLoad(atBudget + 1'000'000, rate));
  // A 8B-shape model's 15 GB at the same rate does not.
  EXPECT_FALSE(cpu::packingFitsTheLoad(15'000'000'000, 6.0));
  // No rate (nothing measured, or a broken measurement): not.
  EXPECT_FALSE(cpu::packingFitsTheLoad(1000, 0.0));
}

TEST(WeightPackingTuner, PacksAtLoadOnlyWhenThePackedProductsDecodeClearlyFaster) {
  const int64_t bytes = 1'192'000'000;
  // AMD family 25: the packed products streamed ~10% faster in every round.
  const cpu::RoundRatios faster{1.10, 1.07};
  EXPECT_EQ(cpu::chooseWeightPacking(bytes, 6.0, faster), "at_load");
  // AMD family 26: alike, within the rounds' noise (the race measured
  // 0.967-1.027): the load copies nothing.
  EXPECT_EQ(cpu::chooseWeightPacking(bytes, 6.0, cpu::RoundRatios{1.01, 0.97}), "per_call");
  EXPECT_EQ(cpu::chooseWeightPacking(bytes, 6.0, cpu::RoundRatios{1.027, 1.016}), "per_call");
  EXPECT_EQ(cpu::chooseWeightPacking(bytes, 6.0, cpu::RoundRatios{0.95, 0.92}), "per_call");
  // Faster, but the packing does not fit the load; or not raced.
  EXPECT_EQ(cpu::chooseWeightPacking(15'000'000'000, 6.0, faster), "per_call");
  EXPECT_EQ(cpu::chooseWeightPacking(bytes, 6.0, std::nullopt), "per_call");
}

TEST(WeightPackingTuner, RacesTheLayoutsWhenThePackingFits) {
  // A small shape, measured for real on this host (quick), cache bypassed by
  // a fresh cache directory: the race runs, both rates are real, and the
  // choice follows from them.
  const std::string cache = ::testing::TempDir() + "q3c-weight-packing-race";
  std::filesystem::remove_all(cache);
  const char *previous = std::getenv("XDG_CACHE_HOME");
  const std::string restored = previous ? previous : "";
  setenv("XDG_CACHE_HOME", cache.c_str(), 1);
  const cpu::CpuTarget host = cpu::resolveCpuTarget("host");
  const cpu::WeightPackingTuning fits =
      cpu::tuneWeightPacking(host, 1 << 20, 256, 512, DType::BF16, cpu::TuneLevel::Quick, 1, 1.0);
  ASSERT_TRUE(fits.race.has_value());
  EXPECT_GT(fits.packGbPerSecond, 0);
  EXPECT_GT(fits.race->perCallGbPerSecond, 0);
  EXPECT_GT(fits.race->atLoadGbPerSecond, 0);
  EXPECT_EQ(fits.chosen,
            cpu::chooseWeightPacking(1 << 20, fits.packGbPerSecond, fits.race->atLoadOverPerCall));
  // A model too big to pack within the budget is not raced: per call.
  const cpu::WeightPackingTuning tooBig = cpu::tuneWeightPacking(
      host, int64_t(1) << 50, 256, 512, DType::BF16, cpu::TuneLevel::Quick, 1, 1.0);
  EXPECT_FALSE(tooBig.race.has_value());
  EXPECT_EQ(tooBig.chosen, "per_call");
  if (previous)
    setenv("XDG_CACHE_HOME", restored.c_str(), 1);
  else
    unsetenv("XDG_CACHE_HOME");
  std::filesystem::remove_all(cache);
}

TEST(WeightPackingTuner, AutoTakesTheMeasurementWhereAmxDoesNotDecide) {
  const cpu::CpuTarget zen4 = cpu::resolveCpuTarget("znver4");
  const cpu::CpuTarget spr = cpu::resolveCpuTarget("sapphirerapids");
  EXPECT_EQ(cpu::resolveWeightPacking("auto", zen4, DType::BF16), "per_call");
  EXPECT_EQ(cpu::resolveWeightPacking("auto", zen4, DType::BF16, "at_load"), "at_load");
  EXPECT_EQ(cpu::resolveWeightPacking("auto", zen4, DType::F16, "at_load"), "at_load");
  EXPECT_EQ(cpu::resolveWeightPacking("auto", spr, DType::BF16, "per_call"), "at_load");
  EXPECT_EQ(cpu::resolveWeightPacking("auto", spr, DType::F16, "per_call"), "per_call");
  // The option, when given, decides.
  EXPECT_EQ(cpu::resolveWeightPacking("per-call", zen4, DType::BF16, "at_load"), "per_call");
  EXPECT_EQ(cpu::resolveWeightPacking("at-load", zen4, DType::BF16, "per_call"), "at_load");
  EXPECT_THROW(cpu::resolveWeightPacking("auto", zen4, DType::BF16, "sometimes"),
               std::invalid_argument);
}

TEST(WeightPackingTuner, CountsEveryProductWeightOnce) {
  std::vector<std::string> warnings;
  const frontend::ModelConfig config = frontend::resolveModelConfig("qwen3-0.6b", &warnings);
  mlir::MLIRContext context;
  auto module = ir::buildQwen3Graph(context, config);
  // Per layer q, k, v, o, gate, up, down; then lm_head, which is the tied
  // embedding table (packed as a copy: the embedding reads it row-major).
  const int64_t h = config.hiddenSize, d = config.headDim, i = config.intermediateSize;
  const int64_t perLayer = h * (config.numAttentionHeads * d) * 2 + // q, o
                           h * (config.numKeyValueHeads * d) * 2 +  // k, v
                           3 * h * i;                               // gate, up, down
  const int64_t expected = 2 * (config.numHiddenLayers * perLayer + config.vocabSize * h);
  EXPECT_EQ(cpu::packableWeightBytes(*module), expected);
  EXPECT_NEAR(double(expected), 1.19e9, 0.01e9);
}

} // namespace
} // namespace q3::testing
