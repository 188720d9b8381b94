// Internal: the table that CMake generates from models/*.json (EmbeddedPresets.cpp in
// the build tree). Use Presets.h instead.
#pragma once

#include <cstddef>

namespace q3::frontend::detail {

struct EmbeddedPreset {
  const char *name; // file stem
  const char *json; // whole file contents
};

extern const EmbeddedPreset kEmbeddedPresets[];
extern const size_t kEmbeddedPresetCount;

} // namespace q3::frontend::detail
