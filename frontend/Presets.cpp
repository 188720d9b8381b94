#include "frontend/Presets.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "frontend/EmbeddedPresets.h"

namespace q3::frontend {

std::vector<std::string> presetNames() {
  std::vector<std::string> names;
  for (size_t i = 0; i < detail::kEmbeddedPresetCount; ++i)
    names.emplace_back(detail::kEmbeddedPresets[i].name);
  std::sort(names.begin(), names.end());
  return names;
}

std::optional<std::string_view> presetJson(std::string_view name) {
  for (size_t i = 0; i < detail::kEmbeddedPresetCount; ++i)
    if (name == detail::kEmbeddedPresets[i].name)
      return std::string_view(detail::kEmbeddedPresets[i].json);
  return std::nullopt;
}

ModelConfig resolveModelConfig(const std::string &pathOrPreset, std::vector<std::string> *warnings) {
  // A file on disk wins over a preset of the same name: the user pointed at it explicitly.
  std::error_code ignored;
  if (std::filesystem::exists(pathOrPreset, ignored))
    return loadModelConfig(pathOrPreset, warnings);
  if (std::optional<std::string_view> text = presetJson(pathOrPreset))
    return parseModelConfig(*text, "preset:" + pathOrPreset, warnings);
  throw ConfigError(fmt::format("unknown model '{}': not an existing file or folder, nor a preset (presets: {})",
                                pathOrPreset, fmt::join(presetNames(), ", ")));
}

} // namespace q3::frontend
