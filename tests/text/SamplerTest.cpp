// The sampler's filters and their statistics: top-k never leaves the k
// largest, temperature sampling follows softmax(logits / T) (chi-square),
// top-p and min-p keep the sets the definitions give, penalties change the
// logits as transformers / vLLM do, and a seed makes a run reproducible.
#include "runtime/text/Sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

namespace q3::text {
namespace {

SamplingParams sampling(float temperature, uint64_t seed = 7) {
  SamplingParams params;
  params.greedy = false;
  params.temperature = temperature;
  params.seed = seed;
  return params;
}

std::vector<float> logitsOf(const std::vector<double> &probabilities) {
  std::vector<float> logits;
  for (double p : probabilities)
    logits.push_back(float(std::log(p)));
  return logits;
}

/// Pearson's chi-square of `counts` against `expected` probabilities.
double chiSquare(const std::map<int32_t, int> &counts, const std::vector<double> &expected, int n) {
  double chi2 = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] == 0) {
      EXPECT_EQ(counts.count(int32_t(i)), 0u) << "token " << i << " has probability 0";
      continue;
    }
    const double e = expected[i] * n;
    const double o = counts.count(int32_t(i)) ? counts.at(int32_t(i)) : 0;
    chi2 += (o - e) * (o - e) / e;
  }
  return chi2;
}

std::map<int32_t, int> draw(Sampler &sampler, const std::vector<float> &logits, int n) {
  std::map<int32_t, int> counts;
  for (int i = 0; i < n; ++i) {
    ++counts[sampler.sample(logits.data(), int64_t(logits.size()))];
    sampler.beginResponse();
  }
  return counts;
}

TEST(Sampler, GreedyIsTheFirstLargest) {
  SamplingParams params;
  Sampler sampler(params);
  const std::vector<float> logits = {0.5f, 3.0f, -1.0f, 3.0f};
  EXPECT_EQ(sampler.sample(logits.data(), 4), 1);
}

TEST(Sampler, TemperatureFollowsSoftmaxChiSquare) {
  const std::vector<float> logits = {1.0f, 0.2f, -0.5f, 2.0f, 0.0f, 1.5f};
  const float temperature = 0.7f;
  std::vector<double> expected;
  double total = 0;
  for (float l : logits)
    total += std::exp(double(l) / temperature);
  for (float l : logits)
    expected.push_back(std::exp(double(l) / temperature) / total);
  Sampler sampler(sampling(temperature));
  const int n = 100000;
  // 5 degrees of freedom: P(chi2 > 25.7) = 1e-4 for a correct sampler.
  EXPECT_LT(chiSquare(draw(sampler, logits, n), expected, n), 25.7);
  // And the test can fail: the same counts against softmax at T = 1.
  std::vector<double> atOne;
  total = 0;
  for (float l : logits)
    total += std::exp(double(l));
  for (float l : logits)
    atOne.push_back(std::exp(double(l)) / total);
  Sampler again(sampling(temperature));
  EXPECT_GT(chiSquare(draw(again, logits, n), atOne, n), 1000.0);
}

TEST(Sampler, TopKNeverLeavesTheKLargest) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0, 2);
  std::vector<float> logits(1000);
  for (float &l : logits)
    l = normal(rng);
  std::vector<float> sorted = logits;
  std::sort(sorted.begin(), sorted.end(), std::greater<float>());
  SamplingParams params = sampling(1.5f);
  params.topK = 5;
  Sampler sampler(params);
  for (const auto &[token, count] : draw(sampler, logits, 10000))
    EXPECT_GE(logits[size_t(token)], sorted[4]) << token;
  // The five are drawn in softmax proportions among themselves.
  std::vector<double> expected(1000, 0.0);
  double total = 0;
  for (int i = 0; i < 1000; ++i)
    if (logits[size_t(i)] >= sorted[4])
      total += expected[size_t(i)] = std::exp(double(logits[size_t(i)]) / 1.5);
  for (double &e : expected)
    e /= total;
  Sampler again(params);
  EXPECT_LT(chiSquare(draw(again, logits, 30000), expected, 30000), 23.5); // 4 dof, p = 1e-4
}

TEST(Sampler, TopPKeepsTheSmallestSetHoldingP) {
  const std::vector<float> logits = logitsOf({0.5, 0.3, 0.15, 0.05});
  SamplingParams params = sampling(1.0f);
  params.topP = 0.75f;
  Sampler sampler(params);
  auto candidates = sampler.distribution(logits.data(), 4);
  ASSERT_EQ(candidates.size(), 2u);
  EXPECT_EQ(candidates[0].first, 0);
  EXPECT_NEAR(candidates[0].second, 0.5 / 0.8, 1e-6);
  params.topP = 0.85f;
  EXPECT_EQ(Sampler(params).distribution(logits.data(), 4).size(), 3u);
  const int n = 50000;
  Sampler drawing(SamplingParams{params});
  EXPECT_LT(chiSquare(draw(drawing, logits, n), {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0}, n),
            18.4); // 2 dof, p = 1e-4
}

TEST(Sampler, TopPWithoutTopKOnALargeVocabulary) {
  // The head-growing path: the kept set equals the brute-force one.
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> logits(50000);
  for (float &l : logits)
    l = normal(rng);
  SamplingParams params = sampling(0.8f);
  params.topK = 0;
  params.topP = 0.9f;
  auto candidates = Sampler(params).distribution(logits.data(), int64_t(logits.size()));
  std::vector<std::pair<double, int32_t>> all;
  double total = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double w = std::exp(double(logits[i]) / 0.8);
    all.emplace_back(w, int32_t(i));
    total += w;
  }
  std::sort(all.begin(), all.end(), [](const auto &a, const auto &b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second; // ties: lower id first
  });
  size_t keep = 0;
  double before = 0;
  while (keep < all.size() && (keep == 0 || before < 0.9 * total))
    before += all[keep++].first;
  ASSERT_EQ(candidates.size(), keep);
  for (size_t i = 0; i < keep; ++i)
    EXPECT_EQ(candidates[i].first, all[i].second);
}

TEST(Sampler, MinPKeepsTokensNearTheBest) {
  const std::vector<float> logits = logitsOf({0.5, 0.3, 0.15, 0.05});
  SamplingParams params = sampling(1.0f);
  params.minP = 0.25f; // threshold 0.125
  auto candidates = Sampler(params).distribution(logits.data(), 4);
  ASSERT_EQ(candidates.size(), 3u);
  EXPECT_NEAR(candidates[2].second, 0.15 / 0.95, 1e-6);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  SamplingParams params;
  params.repetitionPenalty = 2.0f;
  Sampler sampler(params);
  sampler.observeContext({0, 2});
  // {2, 1.2, -1} becomes {1, 1.2, -2}: token 1 is now the largest.
  const std::vector<float> logits = {2.0f, 1.2f, -1.0f};
  EXPECT_EQ(sampler.sample(logits.data(), 3), 1);
  params.repetitionPenalty = 1.0f;
  Sampler plain(params);
  plain.observeContext({0, 2});
  EXPECT_EQ(plain.sample(logits.data(), 3), 0);
}

TEST(Sampler, PresencePenaltyCountsOnlyTheResponse) {
  SamplingParams params;
  params.presencePenalty = 1.0f;
  Sampler sampler(params);
  sampler.observeContext({0}); // the prompt is not penalized
  const std::vector<float> logits = {2.0f, 1.5f};
  EXPECT_EQ(sampler.sample(logits.data(), 2), 0);
  EXPECT_EQ(sampler.sample(logits.data(), 2), 1); // 0 was output: 2 - 1 < 1.5
  sampler.beginResponse();
  EXPECT_EQ(sampler.sample(logits.data(), 2), 0);
}

TEST(Sampler, ASeedMakesARunReproducible) {
  std::vector<float> logits(100);
  for (size_t i = 0; i < logits.size(); ++i)
    logits[i] = float(std::sin(double(i)));
  auto run = [&](uint64_t seed) {
    SamplingParams params = sampling(1.0f, seed);
    params.topK = 40;
    params.topP = 0.95f;
    Sampler sampler(params);
    std::vector<int32_t> tokens;
    for (int i = 0; i < 200; ++i)
      tokens.push_back(sampler.sample(logits.data(), 100));
    return tokens;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

} // namespace
} // namespace q3::text
