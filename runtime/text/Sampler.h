// Picks the next token from a row of logits: greedy, or sampling with
// temperature, top-k, top-p and min-p, after repetition and presence
// penalties. The filters run in the order Hugging Face transformers applies
// them (repetition penalty, temperature, top-k, top-p, min-p), each on what
// the previous one kept. Seeded runs are reproducible.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace q3::text {

struct SamplingParams {
  bool greedy = true;             // argmax (the first index on ties); the rest is unused
  float temperature = 1.0f;       // > 0 when sampling
  int64_t topK = 0;               // 0: off
  float topP = 1.0f;              // 1: off
  float minP = 0.0f;              // 0: off
  float repetitionPenalty = 1.0f; // 1: off; HF: logit / p if positive, logit * p if negative,
                                  // for every token in the context (prompt and output)
  float presencePenalty = 0.0f;   // 0: off; OpenAI/vLLM: logit - p for every token in the output
  uint64_t seed = 0;
};

class Sampler {
public:
  explicit Sampler(const SamplingParams &params);

  /// Tokens that went into the context without being sampled (the prompt).
  void observeContext(const std::vector<int32_t> &tokens);
  /// Starts a new response: the presence penalty counts from here.
  void beginResponse();
  /// The next token from `logits` (`vocab` values); records it as output.
  int32_t sample(const float *logits, int64_t vocab);
  /// Forgets the context and output (the RNG keeps its state).
  void reset();

  const SamplingParams &params() const { return params_; }

  /// The candidates sampling would draw from and their probabilities (sum 1),
  /// highest first, without drawing; for tests and --verbose output.
  std::vector<std::pair<int32_t, double>> distribution(const float *logits, int64_t vocab);

private:
  void applyPenalties(std::vector<float> &logits) const;
  /// Candidates after temperature, top-k, top-p and min-p, with normalized
  /// probabilities, highest first.
  void filter(const std::vector<float> &logits, std::vector<std::pair<int32_t, double>> &out) const;
  void mark(std::vector<uint8_t> &seen, std::vector<int32_t> &list, int32_t token);

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<uint8_t> inContext_, inOutput_; // by token id, grown on demand
  std::vector<int32_t> contextList_, outputList_;
  std::vector<float> work_;
};

} // namespace q3::text
