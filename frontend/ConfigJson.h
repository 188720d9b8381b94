// Exports a ModelConfig as a Hugging Face config.json, so the weights q3c produces or
// consumes can also be loaded by transformers (Qwen3ForCausalLM) for cross-checking.
#pragma once

#include <string>

#include "frontend/ModelConfig.h"

namespace q3::frontend {

// Pretty-printed (2-space) JSON with the fields transformers' Qwen3Config expects;
// parseModelConfig(toHuggingFaceJson(c)) is equivalent() to c.
std::string toHuggingFaceJson(const ModelConfig &config);

} // namespace q3::frontend
