//===- TuningCache.cpp ----------------------------------------------------===//
#include "backends/cpu/TuningCache.h"
#include "backends/cpu/ForeignLoad.h"

#include "runtime/AtomicFile.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace q3::cpu {
namespace {

nlohmann::json readWhole(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    return nlohmann::json::object();
  nlohmann::json cache = nlohmann::json::parse(in, nullptr, false);
  return cache.is_object() ? cache : nlohmann::json::object(); // a damaged cache is rebuilt
}

} // namespace

std::string tuningCachePath() {
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/q3c/tuning.json";
  if (const char *home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/q3c/tuning.json";
  return "";
}

nlohmann::json readTuningCache(const std::string &path, const std::string &key) {
  if (path.empty())
    return nullptr;
  nlohmann::json cache = readWhole(path);
  auto it = cache.find(key);
  return it == cache.end() ? nlohmann::json(nullptr) : *it;
}

bool writeTuningCache(const std::string &path, const std::string &key,
                      const nlohmann::json &entry) {
  if (path.empty())
    return false;
  nlohmann::json cache = readWhole(path);
  cache[key] = entry;
  try {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    runtime::writeFileAtomically(path, cache.dump(1) + "\n");
  } catch (const std::exception &) {
    return false;
  }
  return true;
}

TuningProvenance measureAndCache(const std::string &key, double maxForeignShare,
                                 const std::function<nlohmann::json()> &measure) {
  TuningProvenance provenance;
  provenance.cachePath = tuningCachePath();
  const ForeignLoadMonitor monitor;
  const auto start = std::chrono::steady_clock::now();
  const nlohmann::json entry = measure();
  provenance.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  provenance.foreignShare = monitor.foreignShare();
  provenance.keptOut = provenance.foreignShare > maxForeignShare;
  if (provenance.keptOut || !writeTuningCache(provenance.cachePath, key, entry))
    provenance.cachePath.clear();
  return provenance;
}

double shareForPeople(const TuningProvenance &provenance) {
  return std::round(provenance.foreignShare * 100) / 100;
}

std::vector<double> namedRatesCachedOrMeasured(const std::string &key,
                                               const std::vector<std::string> &names,
                                               double maxForeignShare,
                                               const std::function<std::vector<double>()> &measure,
                                               TuningProvenance &provenance) {
  const std::string path = tuningCachePath();
  const nlohmann::json cached = readTuningCache(path, key);
  std::vector<double> rates;
  for (const std::string &name : names)
    if (cached.is_object() && cached.contains(name) && cached[name].is_number())
      rates.push_back(cached[name].get<double>());
  if (rates.size() == names.size()) {
    provenance = TuningProvenance();
    provenance.cached = true;
    provenance.cachePath = path;
    return rates;
  }
  provenance = measureAndCache(key, maxForeignShare, [&] {
    rates = measure();
    nlohmann::json entry = nlohmann::json::object();
    for (size_t i = 0; i < names.size(); ++i)
      entry[names[i]] = rates.at(i);
    return entry;
  });
  return rates;
}

std::string describeProvenance(const TuningProvenance &provenance) {
  if (provenance.cached)
    return "cached in " + provenance.cachePath;
  std::string text = fmt::format("{:.1f} s", provenance.seconds);
  if (provenance.keptOut)
    text += fmt::format("; others took {:.0f}% of the CPUs meanwhile, so it is not cached",
                        provenance.foreignShare * 100);
  return text;
}

} // namespace q3::cpu
