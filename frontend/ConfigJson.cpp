#include "frontend/ConfigJson.h"

#include <nlohmann/json.hpp>

namespace q3::frontend {
namespace {

using json = nlohmann::json;

// HF writes a single eos id as a plain integer and several as a list.
json eosTokenIdJson(const std::vector<int64_t> &ids) {
  return ids.size() == 1 ? json(ids.front()) : json(ids);
}

} // namespace

std::string toHuggingFaceJson(const ModelConfig &config) {
  json out = {
      {"architectures", json::array({"Qwen3ForCausalLM"})},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"head_dim", config.headDim},
      {"hidden_act", "silu"},
      {"hidden_size", config.hiddenSize},
      {"initializer_range", 0.02},
      {"intermediate_size", config.intermediateSize},
      {"max_position_embeddings", config.maxPositionEmbeddings},
      {"max_window_layers", config.numHiddenLayers},
      {"model_type", "qwen3"},
      {"num_attention_heads", config.numAttentionHeads},
      {"num_hidden_layers", config.numHiddenLayers},
      {"num_key_value_heads", config.numKeyValueHeads},
      {"rms_norm_eps", config.rmsNormEps},
      {"rope_scaling", nullptr},
      {"rope_theta", config.ropeTheta},
      {"sliding_window", nullptr},
      {"tie_word_embeddings", config.tieWordEmbeddings},
      {"torch_dtype", dtypeName(config.dtype)},
      {"transformers_version", "4.51.0"},
      {"use_cache", true},
      {"use_sliding_window", false},
      {"vocab_size", config.vocabSize},
  };
  if (config.bosTokenId)
    out["bos_token_id"] = *config.bosTokenId;
  if (!config.eosTokenIds.empty())
    out["eos_token_id"] = eosTokenIdJson(config.eosTokenIds);
  return out.dump(2) + "\n";
}

} // namespace q3::frontend
