#include "frontend/ModelConfig.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace q3::frontend {
namespace {

using json = nlohmann::json;

// ---------------------------------------------------------------------------
// Describing JSON values in one-line messages.

// Strings are cut short and re-escaped so a hostile value cannot make a message
// multi-line or huge. dump() with `replace` survives a cut in the middle of UTF-8.
std::string quoteForMessage(std::string_view text) {
  constexpr size_t kMaxShown = 40;
  std::string shown(text.substr(0, kMaxShown));
  std::string out = json(shown).dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > kMaxShown)
    out.insert(out.size() - 1, "...");
  return out;
}

// The escaped, shortened text without the surrounding quotes, for use inside '...'.
std::string escapeForMessage(std::string_view text) {
  std::string out = quoteForMessage(text);
  return out.substr(1, out.size() - 2);
}

std::string describeNumber(const json &value) {
  if (value.is_number_float() && !std::isfinite(value.get<double>()))
    return value.get<double>() > 0 ? "inf" : (value.get<double>() < 0 ? "-inf" : "nan");
  return value.dump(); // keeps "1024.0" distinguishable from "1024"
}

// Never recurses into arrays/objects: their contents may be arbitrarily large or deep.
std::string describe(const json &value) {
  switch (value.type()) {
  case json::value_t::string:
    return "string " + quoteForMessage(value.get_ref<const std::string &>());
  case json::value_t::number_integer:
  case json::value_t::number_unsigned:
  case json::value_t::number_float:
    return describeNumber(value);
  case json::value_t::boolean:
    return value.get<bool>() ? "true" : "false";
  case json::value_t::null:
    return "null";
  case json::value_t::array:
    return fmt::format("an array of {} elements", value.size());
  case json::value_t::object:
    return "an object";
  default:
    return "an unsupported JSON value";
  }
}

// ---------------------------------------------------------------------------
// Malformed JSON: nlohmann reports a byte count; users want line:column.

struct LineColumn {
  size_t line, column; // both 1-based
};

// `bytesRead` counts the offending character itself (nlohmann counts end-of-input
// as a read character too, hence the clamp).
LineColumn lineColumnOf(std::string_view text, size_t bytesRead) {
  size_t offset = std::min(bytesRead > 0 ? bytesRead - 1 : 0, text.size());
  std::string_view before = text.substr(0, offset);
  size_t line = 1 + static_cast<size_t>(std::count(before.begin(), before.end(), '\n'));
  size_t lastNewline = before.rfind('\n');
  size_t column = lastNewline == std::string_view::npos ? offset + 1 : offset - lastNewline;
  return {line, column};
}

// nlohmann's what() is "[json.exception.parse_error.101] parse error at line 1,
// column 2: <reason>" or "[json.exception.out_of_range.406] <reason>"; keep only the
// reason, since we compute the position ourselves.
std::string parseErrorReason(const json::exception &error) {
  std::string_view what = error.what();
  if (size_t idEnd = what.find("] "); what.rfind("[json.exception.", 0) == 0 && idEnd != what.npos)
    what.remove_prefix(idEnd + 2);
  if (what.rfind("parse error", 0) == 0) {
    if (size_t colon = what.find(": "); colon != what.npos)
      what.remove_prefix(colon + 2);
  }
  return std::string(what);
}

// A SAX pass that only remembers where parsing failed. nlohmann reports some errors
// (e.g. "number overflow parsing '1e999'") as out_of_range without a position; its SAX
// interface still receives one.
class ErrorPositionFinder : public nlohmann::json_sax<json> {
public:
  size_t position = 0;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t &) override { return true; }
  bool string(string_t &) override { return true; }
  bool binary(binary_t &) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t &) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t bytesRead, const std::string &, const nlohmann::detail::exception &) override {
    position = bytesRead;
    return false;
  }
};

size_t errorPosition(std::string_view text) {
  ErrorPositionFinder finder;
  json::sax_parse(text.begin(), text.end(), &finder);
  return finder.position;
}

[[noreturn]] void throwMalformed(std::string_view text, const std::string &source, size_t bytesRead,
                                 const std::string &reason) {
  LineColumn at = lineColumnOf(text, bytesRead);
  throw ConfigError(fmt::format("{}:{}:{}: malformed JSON: {}", source, at.line, at.column, reason));
}

json parseJson(std::string_view text, const std::string &source) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error &error) {
    throwMalformed(text, source, error.byte, parseErrorReason(error));
  } catch (const json::exception &error) {
    throwMalformed(text, source, errorPosition(text), parseErrorReason(error));
  }
}

// ---------------------------------------------------------------------------
// Typed access to the fields of the top-level object, with uniform messages.

class FieldReader {
public:
  FieldReader(const json &object, const std::string &source) : object_(object), source_(source) {}

  [[noreturn]] void fail(std::string_view field, const std::string &what) const {
    throw ConfigError(fmt::format("{}: field '{}': {}", source_, field, what));
  }

  void warn(std::vector<std::string> *warnings, std::string_view field,
            const std::string &what) const {
    if (warnings)
      warnings->push_back(fmt::format("{}: field '{}': {}", source_, field, what));
  }

  // HF treats an explicit null like an absent field (e.g. head_dim: null), so do we.
  const json *find(std::string_view field) const {
    auto it = object_.find(field);
    if (it == object_.end() || it->is_null())
      return nullptr;
    return &*it;
  }

  const json &require(std::string_view field) const {
    auto it = object_.find(field);
    if (it == object_.end())
      throw ConfigError(fmt::format("{}: missing required field '{}'", source_, field));
    return *it;
  }

  int64_t integer(std::string_view field, const json &value) const {
    if (!value.is_number_integer())
      fail(field, "expected an integer, found " + describe(value));
    if (value.is_number_unsigned() &&
        value.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      fail(field, "expected an integer that fits in 64 bits, found " + describe(value));
    return value.get<int64_t>();
  }

  int64_t positiveInteger(std::string_view field, const json &value) const {
    int64_t result = integer(field, value);
    if (result <= 0)
      fail(field, fmt::format("expected a positive integer, found {}", result));
    return result;
  }

  int64_t requiredPositiveInteger(std::string_view field) const {
    return positiveInteger(field, require(field));
  }

  std::optional<int64_t> optionalPositiveInteger(std::string_view field) const {
    const json *value = find(field);
    return value ? std::optional<int64_t>(positiveInteger(field, *value)) : std::nullopt;
  }

  // rope_theta and rms_norm_eps: Python writes 1000000 or 1e-06; both are fine.
  double positiveReal(std::string_view field, double fallback) const {
    const json *value = find(field);
    if (!value)
      return fallback;
    if (!value->is_number())
      fail(field, "expected a number, found " + describe(*value));
    double result = value->get<double>();
    if (!std::isfinite(result) || result <= 0)
      fail(field, "expected a positive finite number, found " + describe(*value));
    return result;
  }

  bool boolean(std::string_view field, bool fallback) const {
    const json *value = find(field);
    if (!value)
      return fallback;
    if (!value->is_boolean())
      fail(field, "expected true or false, found " + describe(*value));
    return value->get<bool>();
  }

  std::optional<std::string> string(std::string_view field) const {
    const json *value = find(field);
    if (!value)
      return std::nullopt;
    if (!value->is_string())
      fail(field, "expected a string, found " + describe(*value));
    return value->get<std::string>();
  }

  bool has(std::string_view field) const { return find(field) != nullptr; }

private:
  const json &object_;
  const std::string &source_;
};

// ---------------------------------------------------------------------------
// Features this compiler does not implement: refuse them instead of miscompiling.

void checkModelFamily(const FieldReader &fields) {
  if (auto modelType = fields.string("model_type"); modelType && *modelType != "qwen3")
    fields.fail("model_type", "expected \"qwen3\", found " + quoteForMessage(*modelType));

  const json *architectures = fields.find("architectures");
  if (!architectures)
    return;
  if (!architectures->is_array())
    fields.fail("architectures", "expected a list of strings, found " + describe(*architectures));
  std::string names;
  for (const json &name : *architectures) {
    if (!name.is_string())
      fields.fail("architectures", "expected a list of strings, found an element " + describe(name));
    if (name.get_ref<const std::string &>() == "Qwen3ForCausalLM")
      return;
    if (names.size() < 200) // enough to recognise the model, bounded for hostile input
      names += (names.empty() ? "" : ", ") + quoteForMessage(name.get_ref<const std::string &>());
  }
  fields.fail("architectures", "expected a list containing \"Qwen3ForCausalLM\", found [" + names + "]");
}

std::string ropeScalingType(const json &ropeScaling) {
  for (const char *key : {"rope_type", "type"}) {
    auto it = ropeScaling.find(key);
    if (it != ropeScaling.end() && it->is_string())
      return it->get<std::string>();
  }
  return "unspecified";
}

void checkUnsupportedFeatures(const FieldReader &fields) {
  if (auto act = fields.string("hidden_act"); act && *act != "silu")
    fields.fail("hidden_act", "activation " + quoteForMessage(*act) + " is not supported (expected \"silu\")");
  if (fields.boolean("attention_bias", false))
    fields.fail("attention_bias", "attention_bias true is not supported (Qwen3 has no q/k/v/o biases)");
  if (const json *ropeScaling = fields.find("rope_scaling")) {
    if (!ropeScaling->is_object())
      fields.fail("rope_scaling", "rope scaling is not supported (expected null, found " +
                                      describe(*ropeScaling) + ")");
    fields.fail("rope_scaling", fmt::format("rope_scaling type '{}' is not supported (expected null)",
                                            escapeForMessage(ropeScalingType(*ropeScaling))));
  }
  if (fields.boolean("use_sliding_window", false))
    fields.fail("use_sliding_window", "sliding-window attention is not supported (expected false)");
  // sliding_window itself only matters when use_sliding_window is true (Qwen3 ships 4096 or null).
  if (const json *window = fields.find("sliding_window"))
    fields.integer("sliding_window", *window);
}

WeightDType parseDType(const FieldReader &fields) {
  // transformers >= 4.56 writes "dtype"; older files say "torch_dtype".
  const char *field = fields.has("torch_dtype") || !fields.has("dtype") ? "torch_dtype" : "dtype";
  std::optional<std::string> name = fields.string(field);
  if (!name || *name == "bfloat16")
    return WeightDType::BF16;
  if (*name == "float16")
    return WeightDType::F16;
  if (*name == "float32")
    return WeightDType::F32;
  fields.fail(field, "dtype " + quoteForMessage(*name) + " is not supported (expected \"bfloat16\", \"float16\" or \"float32\")");
}

// ---------------------------------------------------------------------------
// Shapes.

void readSizes(const FieldReader &fields, ModelConfig &config) {
  config.hiddenSize = fields.requiredPositiveInteger("hidden_size");
  config.intermediateSize = fields.requiredPositiveInteger("intermediate_size");
  config.numHiddenLayers = fields.requiredPositiveInteger("num_hidden_layers");
  config.numAttentionHeads = fields.requiredPositiveInteger("num_attention_heads");
  config.numKeyValueHeads =
      fields.optionalPositiveInteger("num_key_value_heads").value_or(config.numAttentionHeads);
  config.vocabSize = fields.requiredPositiveInteger("vocab_size");
  config.maxPositionEmbeddings = fields.requiredPositiveInteger("max_position_embeddings");
  if (auto headDim = fields.optionalPositiveInteger("head_dim")) {
    config.headDim = *headDim;
  } else if (config.hiddenSize % config.numAttentionHeads != 0) {
    fields.fail("head_dim", fmt::format("head_dim is absent and hidden_size ({}) is not divisible "
                                        "by num_attention_heads ({})",
                                        config.hiddenSize, config.numAttentionHeads));
  } else {
    config.headDim = config.hiddenSize / config.numAttentionHeads;
  }
}

void checkHeadLayout(const FieldReader &fields, const ModelConfig &config) {
  if (config.numAttentionHeads % config.numKeyValueHeads != 0)
    fields.fail("num_key_value_heads",
                fmt::format("num_attention_heads ({}) must be divisible by num_key_value_heads ({})",
                            config.numAttentionHeads, config.numKeyValueHeads));
  // RoPE rotates the first half of each head against the second half.
  if (config.headDim % 2 != 0)
    fields.fail("head_dim", fmt::format("expected an even number (RoPE rotates pairs), found {}",
                                        config.headDim));
}

// Multiplies named sizes, failing on `field` once the product passes kMaxElements;
// since every factor is positive and the bound is far below INT64_MAX, nothing overflows.
int64_t boundedProduct(const FieldReader &fields, std::string_view field, std::string_view what,
                       std::initializer_list<std::pair<const char *, int64_t>> factors) {
  int64_t product = 1;
  bool tooLarge = false;
  for (const auto &factor : factors) {
    if (tooLarge || factor.second > kMaxElements / product)
      tooLarge = true;
    else
      product *= factor.second;
  }
  if (!tooLarge)
    return product;
  std::string names, values;
  for (const auto &factor : factors) {
    names += (names.empty() ? "" : " * ") + std::string(factor.first);
    values += (values.empty() ? "" : " * ") + std::to_string(factor.second);
  }
  fields.fail(field, fmt::format("{} ({}) exceeds the limit of 2^40 elements for {}", names, values,
                                 what));
}

int64_t boundedSum(const FieldReader &fields, std::initializer_list<int64_t> terms) {
  int64_t sum = 0;
  for (int64_t term : terms) {
    sum += term; // each term <= 2^40, so a handful cannot overflow
    if (sum > kMaxElements)
      fields.fail("num_hidden_layers", "the model has more than 2^40 parameters in total");
  }
  return sum;
}

// Rejects shapes whose element counts would overflow (or exhaust any real machine).
void checkTensorSizes(const FieldReader &fields, const ModelConfig &c) {
  const char *weight = "one weight tensor";
  int64_t embedding = boundedProduct(fields, "vocab_size", weight,
                                     {{"vocab_size", c.vocabSize}, {"hidden_size", c.hiddenSize}});
  int64_t qProj = boundedProduct(fields, "num_attention_heads", weight,
                                 {{"num_attention_heads", c.numAttentionHeads},
                                  {"head_dim", c.headDim},
                                  {"hidden_size", c.hiddenSize}});
  int64_t kvProj = boundedProduct(fields, "num_key_value_heads", weight,
                                  {{"num_key_value_heads", c.numKeyValueHeads},
                                   {"head_dim", c.headDim},
                                   {"hidden_size", c.hiddenSize}});
  int64_t mlpProj = boundedProduct(fields, "intermediate_size", weight,
                                   {{"intermediate_size", c.intermediateSize},
                                    {"hidden_size", c.hiddenSize}});
  boundedProduct(fields, "max_position_embeddings", "the RoPE table",
                 {{"max_position_embeddings", c.maxPositionEmbeddings}, {"head_dim", c.headDim}});
  // q, o; k, v; gate, up, down; two RMSNorms; q_norm, k_norm.
  int64_t perLayer = boundedSum(fields, {qProj, qProj, kvProj, kvProj, mlpProj, mlpProj, mlpProj,
                                         c.hiddenSize, c.hiddenSize, c.headDim, c.headDim});
  int64_t allLayers = boundedProduct(fields, "num_hidden_layers", "all layers together",
                                     {{"num_hidden_layers", c.numHiddenLayers},
                                      {"parameters per layer", perLayer}});
  boundedSum(fields, {allLayers, embedding, c.tieWordEmbeddings ? 0 : embedding, c.hiddenSize});
}

// ---------------------------------------------------------------------------
// Special tokens: wrong types are errors, ids outside the vocabulary only warnings
// (some checkpoints pad the vocabulary differently from the tokenizer).

void warnIfOutsideVocabulary(const FieldReader &fields, std::vector<std::string> *warnings,
                             std::string_view field, int64_t id, int64_t vocabSize) {
  if (id < 0 || id >= vocabSize)
    fields.warn(warnings, field,
                fmt::format("token id {} is outside the vocabulary [0, {})", id, vocabSize));
}

void readSpecialTokens(const FieldReader &fields, ModelConfig &config,
                       std::vector<std::string> *warnings) {
  if (const json *bos = fields.find("bos_token_id")) {
    config.bosTokenId = fields.integer("bos_token_id", *bos);
    warnIfOutsideVocabulary(fields, warnings, "bos_token_id", *config.bosTokenId, config.vocabSize);
  }
  const json *eos = fields.find("eos_token_id");
  if (!eos)
    return;
  if (eos->is_array()) {
    for (const json &id : *eos)
      config.eosTokenIds.push_back(fields.integer("eos_token_id", id));
  } else {
    config.eosTokenIds.push_back(fields.integer("eos_token_id", *eos));
  }
  for (int64_t id : config.eosTokenIds)
    warnIfOutsideVocabulary(fields, warnings, "eos_token_id", id, config.vocabSize);
}

// Real configs are a few kilobytes; the bound keeps /dev/zero or a
// mistaken multi-gigabyte file from exhausting memory before parsing starts.
constexpr uintmax_t kMaxConfigBytes = 16u << 20;

std::string readFile(const std::string &path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error))
    throw ConfigError(fmt::format("{}: is a folder, expected a config.json file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw ConfigError(fmt::format("{}: cannot open for reading: {}", path, std::strerror(errno)));
  // Bounded: a pipe or device (/dev/zero) may never end.
  std::string contents(kMaxConfigBytes + 1, '\0');
  in.read(contents.data(), std::streamsize(contents.size()));
  if (in.bad())
    throw ConfigError(fmt::format("{}: read error", path));
  if (size_t(in.gcount()) > kMaxConfigBytes)
    throw ConfigError(fmt::format("{}: more than the {} bytes a config.json may have", path,
                                  kMaxConfigBytes));
  contents.resize(size_t(in.gcount()));
  return contents;
}

} // namespace

bool equivalent(const ModelConfig &a, const ModelConfig &b) {
  auto fieldsOf = [](const ModelConfig &c) {
    return std::tie(c.hiddenSize, c.intermediateSize, c.numHiddenLayers, c.numAttentionHeads,
                    c.numKeyValueHeads, c.headDim, c.vocabSize, c.maxPositionEmbeddings,
                    c.ropeTheta, c.rmsNormEps, c.tieWordEmbeddings, c.dtype, c.bosTokenId,
                    c.eosTokenIds);
  };
  return fieldsOf(a) == fieldsOf(b);
}

ModelConfig parseModelConfig(std::string_view jsonText, const std::string &source,
                             std::vector<std::string> *warnings) {
  json document = parseJson(jsonText, source);
  if (!document.is_object())
    throw ConfigError(fmt::format("{}: expected a JSON object at the top level, found {}", source,
                                  describe(document)));
  FieldReader fields(document, source);
  checkModelFamily(fields);
  checkUnsupportedFeatures(fields);

  ModelConfig config;
  config.source = source;
  config.dtype = parseDType(fields);
  readSizes(fields, config);
  checkHeadLayout(fields, config);
  config.ropeTheta = fields.positiveReal("rope_theta", 10000.0);
  config.rmsNormEps = fields.positiveReal("rms_norm_eps", 1e-6);
  config.tieWordEmbeddings = fields.boolean("tie_word_embeddings", false);
  checkTensorSizes(fields, config);
  readSpecialTokens(fields, config, warnings);
  return config;
}

ModelConfig loadModelConfig(const std::string &path, std::vector<std::string> *warnings) {
  std::error_code ignored;
  std::string file = std::filesystem::is_directory(path, ignored)
                         ? (std::filesystem::path(path) / "config.json").string()
                         : path;
  return parseModelConfig(readFile(file), file, warnings);
}

const char *dtypeName(WeightDType dtype) {
  switch (dtype) {
  case WeightDType::BF16:
    return "bfloat16";
  case WeightDType::F16:
    return "float16";
  case WeightDType::F32:
    return "float32";
  }
  return "unknown";
}

} // namespace q3::frontend
