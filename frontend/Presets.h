// Model configs built into the binary (models/*.json, embedded at build time), so
// `q3c qwen3-0.6b` works from any directory without the source tree.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/ModelConfig.h"

namespace q3::frontend {

// Preset names (the file stems of models/*.json), sorted.
std::vector<std::string> presetNames();

// The embedded config.json text of a preset, or nullopt for an unknown name.
std::optional<std::string_view> presetJson(std::string_view name);

// A path (a config.json or a folder containing one) if it exists, else a preset name.
// Anything else is a ConfigError listing the presets. Presets get source "preset:NAME".
ModelConfig resolveModelConfig(const std::string &pathOrPreset, std::vector<std::string> *warnings);

} // namespace q3::frontend
