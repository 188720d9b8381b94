// The checkpoint's own config.json against the config the artifact was
// compiled for. The artifact bakes every hyperparameter into its kernels and
// weight plan, so weights of a model with another rms_norm_eps or rope_theta
// bind without a shape error and silently compute other logits: q3run reads
// the checkpoint's config.json and refuses any difference in a field that
// changes the computation. (The runtime does not link the frontend; this
// reads only those fields, with Hugging Face's defaults.)
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace q3::runtime {

/// The config.json that belongs to `weightsPath`: inside it when it is a
/// folder, next to it when it is a .safetensors or .index.json file.
std::string checkpointConfigPath(const std::string &weightsPath);

/// Throws LoadError when the config.json of `weightsPath` is missing, not a
/// JSON object, or differs from `artifactConfig` (the manifest's `config`) in
/// a field that changes the computation; the message names the file, the
/// field and both values.
void checkCheckpointConfig(const std::string &weightsPath, const nlohmann::json &artifactConfig,
                           const std::string &artifactPath);

} // namespace q3::runtime
