//===- DecodeTunerTest.cpp - the decode tuner's choice --------------------===//
//
// The tuner's measurements are noisy on a shared machine: the default split
// stays unless another is faster by more than kDecodeTieFraction.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/DecodeTuner.h"
#include "backends/cpu/passes/CpuPasses.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace q3::testing {
namespace {

using cpu::DecodeChunkRate;

TEST(DecodeTuner, KeepsTheDefaultWithinTheNoise) {
  const double tie = 1.0 + cpu::kDecodeTieFraction;
  EXPECT_EQ(cpu::chooseDecodeChunks({{2, 40.0 * tie * 0.999}, {4, 40.0}, {8, 39.0}}),
            cpu::kDefaultDecodeChunks);
  EXPECT_EQ(cpu::chooseDecodeChunks({{2, 40.0}, {4, 41.0}, {8, 39.0}}),
            cpu::kDefaultDecodeChunks);
}

TEST(DecodeTuner, TakesAClearlyFasterSplit) {
  EXPECT_EQ(cpu::chooseDecodeChunks({{2, 40.0}, {4, 40.0}, {8, 43.0}}), 8);
  EXPECT_EQ(cpu::chooseDecodeChunks({{1, 50.0}, {4, 40.0}}), 1);
}

TEST(DecodeTuner, WithoutTheDefaultMeasuredTakesTheFastest) {
  EXPECT_EQ(cpu::chooseDecodeChunks({{2, 40.0}, {8, 40.5}}), 8);
  EXPECT_EQ(cpu::chooseDecodeChunks({}), cpu::kDefaultDecodeChunks);
}

TEST(DecodeTuner, EveryLevelMeasuresTheDefault) {
  for (cpu::TuneLevel level : {cpu::TuneLevel::Quick, cpu::TuneLevel::Full}) {
    const std::vector<int64_t> candidates = cpu::decodeChunkCandidates(level);
    EXPECT_NE(std::find(candidates.begin(), candidates.end(), cpu::kDefaultDecodeChunks),
              candidates.end());
  }
}

} // namespace
} // namespace q3::testing
