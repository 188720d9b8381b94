//===- TuningCache.h - the tuners' measurements, kept between compiles ----===//
//
// One JSON object in $XDG_CACHE_HOME/q3c/tuning.json (else ~/.cache/q3c),
// an entry per key: a tuner's key names what makes its measurement reusable
// (CPU, shape, level, kernel source). The cache is a convenience: a damaged
// file is rebuilt and a read-only home does not fail a compile.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace q3::cpu {

/// The cache file's path, or "" when neither XDG_CACHE_HOME nor HOME is set.
std::string tuningCachePath();

/// The entry under `key`, or null when there is none (or no readable cache).
nlohmann::json readTuningCache(const std::string &path, const std::string &key);

/// Stores `entry` under `key` (atomically replacing the file); false when the
/// cache cannot be written.
bool writeTuningCache(const std::string &path, const std::string &key,
                      const nlohmann::json &entry);

} // namespace q3::cpu
