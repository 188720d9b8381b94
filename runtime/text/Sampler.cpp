#include "runtime/text/Sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace q3::text {

Sampler::Sampler(const SamplingParams &params) : params_(params), rng_(params.seed) {}

void Sampler::mark(std::vector<uint8_t> &seen, std::vector<int32_t> &list, int32_t token) {
  if (token < 0)
    return;
  if (size_t(token) >= seen.size())
    seen.resize(size_t(token) + 1, 0);
  if (!seen[size_t(token)]) {
    seen[size_t(token)] = 1;
    list.push_back(token);
  }
}

void Sampler::observeContext(const std::vector<int32_t> &tokens) {
  for (int32_t token : tokens)
    mark(inContext_, contextList_, token);
}

void Sampler::beginResponse() {
  for (int32_t token : outputList_)
    inOutput_[size_t(token)] = 0;
  outputList_.clear();
}

void Sampler::reset() {
  beginResponse();
  for (int32_t token : contextList_)
    inContext_[size_t(token)] = 0;
  contextList_.clear();
}

void Sampler::applyPenalties(std::vector<float> &logits) const {
  const int64_t vocab = int64_t(logits.size());
  if (params_.repetitionPenalty != 1.0f)
    for (int32_t token : contextList_)
      if (token < vocab) {
        float &l = logits[size_t(token)];
        l = l > 0 ? l / params_.repetitionPenalty : l * params_.repetitionPenalty;
      }
  if (params_.presencePenalty != 0.0f)
    for (int32_t token : outputList_)
      if (token < vocab)
        logits[size_t(token)] -= params_.presencePenalty;
}

void Sampler::filter(const std::vector<float> &logits,
                     std::vector<std::pair<int32_t, double>> &out) const {
  const int64_t vocab = int64_t(logits.size());
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  auto higher = [&](int32_t a, int32_t b) {
    return logits[size_t(a)] != logits[size_t(b)] ? logits[size_t(a)] > logits[size_t(b)] : a < b;
  };
  // Candidates, highest first. Top-k bounds them; without it, top-p needs the
  // head of the order only, so sort a growing head until it holds the mass.
  int64_t count = params_.topK > 0 ? std::min(params_.topK, vocab) : vocab;
  const double invTemperature = 1.0 / double(params_.temperature);
  const float maxLogit = *std::max_element(logits.begin(), logits.end());
  auto weight = [&](int32_t token) {
    return std::exp(double(logits[size_t(token)] - maxLogit) * invTemperature);
  };
  int64_t sorted = 0;
  auto sortHead = [&](int64_t n) {
    n = std::min(n, count);
    if (n <= sorted)
      return;
    std::partial_sort(order.begin() + sorted, order.begin() + n, order.end(), higher);
    sorted = n;
  };
  // The normalizer of the softmax: over the top-k, or over everything.
  double normalizer = 0;
  if (params_.topK > 0 || params_.topP >= 1.0f) {
    sortHead(count);
    for (int64_t i = 0; i < count; ++i)
      normalizer += weight(order[size_t(i)]);
  } else {
    for (int32_t token = 0; token < vocab; ++token)
      normalizer += weight(token);
    // Sort a head big enough to hold the top-p mass: the cut lies inside it.
    for (int64_t head = 64;; head *= 8) {
      sortHead(head);
      double mass = 0;
      for (int64_t i = 0; i < sorted; ++i)
        mass += weight(order[size_t(i)]);
      if (sorted == count || mass >= double(params_.topP) * normalizer * (1 + 1e-9))
        break;
    }
    count = sorted;
  }
  out.clear();
  for (int64_t i = 0; i < count; ++i)
    out.emplace_back(order[size_t(i)], weight(order[size_t(i)]) / normalizer);
  // Top-p: keep each candidate while the mass before it is below p.
  if (params_.topP < 1.0f) {
    double before = 0;
    size_t keep = 0;
    while (keep < out.size() && (keep == 0 || before < double(params_.topP))) {
      before += out[keep].second;
      ++keep;
    }
    out.resize(keep);
  }
  // Min-p: keep candidates at least min_p times as likely as the best.
  if (params_.minP > 0.0f) {
    const double threshold = double(params_.minP) * out.front().second;
    size_t keep = 1;
    while (keep < out.size() && out[keep].second >= threshold)
      ++keep;
    out.resize(keep);
  }
  double kept = 0;
  for (const auto &candidate : out)
    kept += candidate.second;
  for (auto &candidate : out)
    candidate.second /= kept;
}

std::vector<std::pair<int32_t, double>> Sampler::distribution(const float *logits, int64_t vocab) {
  work_.assign(logits, logits + vocab);
  applyPenalties(work_);
  std::vector<std::pair<int32_t, double>> candidates;
  if (params_.greedy) {
    candidates.emplace_back(int32_t(std::max_element(work_.begin(), work_.end()) - work_.begin()), 1.0);
    return candidates;
  }
  filter(work_, candidates);
  return candidates;
}

int32_t Sampler::sample(const float *logits, int64_t vocab) {
  std::vector<std::pair<int32_t, double>> candidates = distribution(logits, vocab);
  int32_t token = candidates.front().first;
  if (candidates.size() > 1) {
    // 53 random bits: a uniform double in [0, 1), the same on every platform
    // (std::uniform_real_distribution's algorithm is unspecified).
    const double u = double(rng_() >> 11) * 0x1.0p-53;
    double cumulative = 0;
    token = candidates.back().first;
    for (const auto &[candidate, probability] : candidates) {
      cumulative += probability;
      if (u < cumulative) {
        token = candidate;
        break;
      }
    }
  }
  mark(inOutput_, outputList_, token);
  mark(inContext_, contextList_, token);
  return token;
}

} // namespace q3::text
