// Qwen3 model hyper-parameters, read from a Hugging Face config.json and validated
// up front so later stages can trust every number.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace q3::frontend {

// Every message is a single line: "<source>: field '<name>': <what was expected>".
class ConfigError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

enum class WeightDType { BF16, F16, F32 };

struct ModelConfig {
  std::string source; // file path or "preset:NAME", for messages
  int64_t hiddenSize = 0, intermediateSize = 0, numHiddenLayers = 0, numAttentionHeads = 0,
          numKeyValueHeads = 0, headDim = 0, vocabSize = 0, maxPositionEmbeddings = 0;
  double ropeTheta = 10000.0, rmsNormEps = 1e-6;
  bool tieWordEmbeddings = false;
  WeightDType dtype = WeightDType::BF16; // from torch_dtype, bfloat16 if absent
  std::optional<int64_t> bosTokenId;
  std::vector<int64_t> eosTokenIds; // HF allows an int or a list

  int64_t kvGroupSize() const { return numAttentionHeads / numKeyValueHeads; }
  int64_t qDim() const { return numAttentionHeads * headDim; }
  int64_t kvDim() const { return numKeyValueHeads * headDim; }
};

// True when every field except `source` matches (e.g. a config and its re-parsed export).
bool equivalent(const ModelConfig &a, const ModelConfig &b);

// Parses and validates. Non-fatal findings (bos/eos ids outside the vocabulary) are
// appended to `warnings` when it is non-null; unknown extra fields are silently ignored.
ModelConfig parseModelConfig(std::string_view jsonText, const std::string &source,
                             std::vector<std::string> *warnings);

// `path` is a config.json file, or a folder containing one.
ModelConfig loadModelConfig(const std::string &path, std::vector<std::string> *warnings);

const char *dtypeName(WeightDType dtype); // "bfloat16", "float16", "float32"

// Tensor-size limit enforced by validation: no single weight, and not the whole model,
// may exceed this many elements, so products of sizes never overflow int64_t downstream.
inline constexpr int64_t kMaxElements = int64_t(1) << 40;

} // namespace q3::frontend
