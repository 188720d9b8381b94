//===- WeightPackingTunerTest.cpp - where --weight-packing=auto puts weights ===//
//
// auto packs bf16 and f16 product weights at load when the tuner measured
// that packing this model's weights into fresh memory fits the load budget;
// a target that may run AMX packs bf16 ones at load whatever was measured.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/WeightPackingTuner.h"
#include "backends/cpu/CpuPipeline.h"
#include "frontend/Presets.h"
#include "ir/BuildGraph.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

namespace q3::testing {
namespace {

using cpu::DType;

TEST(WeightPackingTuner, PacksAtLoadWithinTheBudget) {
  // 1.19 GB (the 0.6B shape) at 6 GB/s: 0.2 s.
  EXPECT_EQ(cpu::chooseWeightPacking(1'192'000'000, 6.0), "at_load");
  // Exactly the budget still packs; past it, per call.
  const double rate = 2.0;
  const auto atBudget = int64_t(cpu::kPackAtLoadBudgetSeconds * rate * 1e9);
  EXPECT_EQ(cpu::chooseWeightPacking(atBudget, rate), "at_load");
  EXPECT_EQ(cpu::chooseWeightPacking(atBudget + 1'000'000, rate), "per_call");
  // A 8B-shape model's 15 GB at the same rate: per call.
  EXPECT_EQ(cpu::chooseWeightPacking(15'000'000'000, 6.0), "per_call");
  // No rate (nothing measured, or a broken measurement): per call.
  EXPECT_EQ(cpu::chooseWeightPacking(1000, 0.0), "per_call");
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
