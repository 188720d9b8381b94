#include "runtime/text/GenerationConfig.h"

#include "runtime/LoadError.h"

#include <fmt/format.h>

namespace q3::text {
namespace {

using json = nlohmann::json;

std::string shortJson(const json &value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  return runtime::printable(text.size() > 60 ? text.substr(0, 57) + "..." : text);
}

template <typename T>
std::optional<T> number(const json &root, const char *key, const std::string &name, double minimum,
                        double maximum) {
  auto it = root.find(key);
  if (it == root.end() || it->is_null())
    return std::nullopt;
  const bool ok = std::is_integral_v<T> ? it->is_number_integer() : it->is_number();
  if (!ok || it->get<double>() < minimum || it->get<double>() > maximum)
    throw runtime::LoadError(fmt::format("{}: {}: expected {} in [{}, {}], found {}", name, key,
                                         std::is_integral_v<T> ? "an integer" : "a number",
                                         minimum, maximum, shortJson(*it)));
  return it->get<T>();
}

} // namespace

std::set<int32_t> parseEosIds(const json &value, const std::string &where) {
  std::set<int32_t> ids;
  if (value.is_null())
    return ids;
  auto add = [&](const json &id) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
      throw runtime::LoadError(fmt::format("{}: expected a token id or an array of them, found {}",
                                           where, shortJson(value)));
    ids.insert(int32_t(id.get<int64_t>()));
  };
  if (value.is_array())
    for (const json &id : value)
      add(id);
  else
    add(value);
  return ids;
}

GenerationConfig parseGenerationConfig(const std::string &text, const std::string &name) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception &error) {
    throw runtime::LoadError(name + ": invalid JSON: " + runtime::describeJsonError(error));
  }
  if (!root.is_object())
    throw runtime::LoadError(name + ": expected a JSON object, found " +
                             std::string(root.type_name()));
  GenerationConfig config;
  if (auto it = root.find("do_sample"); it != root.end() && !it->is_null()) {
    if (!it->is_boolean())
      throw runtime::LoadError(name + ": do_sample: expected true or false, found " +
                               shortJson(*it));
    config.doSample = it->get<bool>();
  }
  config.temperature = number<double>(root, "temperature", name, 0, 100);
  config.topK = number<int64_t>(root, "top_k", name, 0, 1e9);
  config.topP = number<double>(root, "top_p", name, 0, 1);
  config.minP = number<double>(root, "min_p", name, 0, 1);
  config.repetitionPenalty = number<double>(root, "repetition_penalty", name, 1e-3, 100);
  config.presencePenalty = number<double>(root, "presence_penalty", name, -100, 100);
  if (auto it = root.find("eos_token_id"); it != root.end())
    config.eosTokenIds = parseEosIds(*it, name + ": eos_token_id");
  return config;
}

SamplingParams defaultSampling(const GenerationConfig &config) {
  SamplingParams params;
  params.greedy = !config.doSample.value_or(false);
  params.temperature = float(config.temperature.value_or(1.0));
  params.topK = config.topK.value_or(50);
  params.topP = float(config.topP.value_or(1.0));
  params.minP = float(config.minP.value_or(0.0));
  params.repetitionPenalty = float(config.repetitionPenalty.value_or(1.0));
  params.presencePenalty = float(config.presencePenalty.value_or(0.0));
  if (params.temperature <= 0)
    params.greedy = true;
  return params;
}

std::set<int32_t> stopTokenIds(const GenerationConfig &config, const TextAssets &assets,
                               const Tokenizer &tokenizer, const std::set<int32_t> &modelEosIds) {
  std::set<int32_t> ids = config.eosTokenIds;
  // config.json's ids count only without a generation_config.json, as in
  // transformers (GenerationConfig.from_model_config).
  if (!assets.generationConfig)
    ids.insert(modelEosIds.begin(), modelEosIds.end());
  if (assets.tokenizerConfig) {
    json root = json::parse(assets.tokenizerConfig->bytes, nullptr, /*allow_exceptions=*/false);
    if (root.is_discarded() || !root.is_object())
      throw runtime::LoadError(assets.tokenizerConfig->name + ": expected a JSON object");
    if (auto it = root.find("eos_token"); it != root.end()) {
      // A string, or an AddedToken object {"content": ...}.
      const json &eos = it->is_object() ? it->value("content", json()) : *it;
      if (eos.is_string())
        if (std::optional<int32_t> id = tokenizer.findToken(eos.get<std::string>()))
          ids.insert(*id);
    }
  }
  for (const char *content : {"<|im_end|>", "<|endoftext|>"})
    if (std::optional<int32_t> id = tokenizer.findToken(content))
      ids.insert(*id);
  return ids;
}

} // namespace q3::text
