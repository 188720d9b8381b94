//===- TuningCache.cpp ----------------------------------------------------===//
#include "backends/cpu/TuningCache.h"

#include "runtime/AtomicFile.h"

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

} // namespace q3::cpu
