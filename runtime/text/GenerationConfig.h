// A model's generation defaults: generation_config.json's sampling settings
// and the ids that end a response (generation_config.json's eos_token_id,
// tokenizer_config.json's eos_token, config.json's eos_token_id).
#pragma once

#include "runtime/text/Sampler.h"
#include "runtime/text/TextAssets.h"
#include "runtime/text/Tokenizer.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <set>
#include <string>

namespace q3::text {

/// What generation_config.json says (fields it leaves out stay empty).
struct GenerationConfig {
  std::optional<bool> doSample;
  std::optional<double> temperature;
  std::optional<int64_t> topK;
  std::optional<double> topP;
  std::optional<double> minP;
  std::optional<double> repetitionPenalty;
  std::optional<double> presencePenalty;
  std::set<int32_t> eosTokenIds;
};

/// Parses generation_config.json text. Throws runtime::LoadError naming
/// `displayName` and the field.
GenerationConfig parseGenerationConfig(const std::string &text, const std::string &displayName);

/// The sampling defaults as Hugging Face's generate() takes them: greedy
/// unless do_sample is true; then temperature (default 1), top_k (default
/// 50), top_p (1), min_p (off), repetition_penalty (1).
SamplingParams defaultSampling(const GenerationConfig &config);

/// Every id that ends a response: `config`'s eos ids, tokenizer_config.json's
/// eos_token (when `assets` has it), `modelEosIds` (config.json's, used only
/// when `assets` has no generation_config.json, as in transformers), and the
/// tokenizer's <|im_end|> and <|endoftext|> when it has them.
std::set<int32_t> stopTokenIds(const GenerationConfig &config, const TextAssets &assets,
                               const Tokenizer &tokenizer, const std::set<int32_t> &modelEosIds);

/// An eos_token_id field: an integer or an array of integers.
std::set<int32_t> parseEosIds(const nlohmann::json &value, const std::string &where);

} // namespace q3::text
