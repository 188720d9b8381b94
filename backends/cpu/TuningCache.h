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

#include <functional>
#include <string>
#include <vector>

namespace q3::cpu {

/// The cache file's path, or "" when neither XDG_CACHE_HOME nor HOME is set.
std::string tuningCachePath();

/// The entry under `key`, or null when there is none (or no readable cache).
nlohmann::json readTuningCache(const std::string &path, const std::string &key);

/// Stores `entry` under `key` (atomically replacing the file); false when the
/// cache cannot be written.
bool writeTuningCache(const std::string &path, const std::string &key,
                      const nlohmann::json &entry);

/// Where a tuner's result came from.
struct TuningProvenance {
  double seconds = 0;      // spent measuring (0 when cached)
  bool cached = false;     // read from the cache
  std::string cachePath;   // where the result is (or would be) kept; "" if none
  double foreignShare = 0; // others' share of the machine while measuring
  bool keptOut = false;    // measured while others loaded the machine: not cached
};

/// Runs `measure` (which returns the entry to cache) while watching the
/// machine, and caches the entry under `key` unless others took more than
/// `maxForeignShare` of the machine meanwhile (ForeignLoad.h).
TuningProvenance measureAndCache(const std::string &key, double maxForeignShare,
                                 const std::function<nlohmann::json()> &measure);

/// Rates of the candidates `names` (one number each, in that order): the
/// cached entry under `key` when it has a rate for every name, else what
/// `measure` returns, cached as {name: rate} (measureAndCache). `provenance`
/// says which.
std::vector<double> namedRatesCachedOrMeasured(const std::string &key,
                                               const std::vector<std::string> &names,
                                               double maxForeignShare,
                                               const std::function<std::vector<double>()> &measure,
                                               TuningProvenance &provenance);

/// One line for people: "0.8 s", "cached in PATH", or "0.8 s; others took
/// 35% of the CPUs, so it is not cached".
std::string describeProvenance(const TuningProvenance &provenance);

/// The share of the machine others took, rounded to hundredths: what
/// q3.tuning records (as `prefill_others_share`, `decode_others_share`) for
/// a measurement that was kept out of the cache.
double shareForPeople(const TuningProvenance &provenance);

} // namespace q3::cpu
