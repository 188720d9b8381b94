#include "ConfigTestUtil.h"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <unistd.h>

#include "frontend/Presets.h"

namespace q3::frontend::test {

json tinyConfigJson() {
  auto text = presetJson("tiny");
  if (!text)
    throw std::logic_error("the tiny preset is not embedded");
  return json::parse(*text);
}

json withField(std::string_view field, const json &value) {
  json config = tinyConfigJson();
  config[std::string(field)] = value;
  return config;
}

json withoutField(std::string_view field) {
  json config = tinyConfigJson();
  config.erase(std::string(field));
  return config;
}

std::string errorOfText(std::string_view text) {
  try {
    parseModelConfig(text, "config.json", nullptr);
  } catch (const ConfigError &error) {
    return error.what();
  }
  return "<no error>";
}

std::string errorOf(const json &config) { return errorOfText(config.dump(2)); }

ModelConfig parseJson(const json &config, std::vector<std::string> *warnings) {
  return parseModelConfig(config.dump(2), "config.json", warnings);
}

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  auto dir = std::filesystem::temp_directory_path() /
             ("q3-frontend-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  std::filesystem::create_directories(dir);
  path_ = dir.string();
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string TempDir::write(const std::string &name, std::string_view contents) const {
  std::string file = (std::filesystem::path(path_) / name).string();
  std::ofstream(file, std::ios::binary) << contents;
  return file;
}

} // namespace q3::frontend::test
