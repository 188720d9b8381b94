// Shared helpers for the frontend tests: a known-good config to mutate, and ways to
// capture the ConfigError a config produces.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "frontend/ModelConfig.h"

namespace q3::frontend::test {

using json = nlohmann::json;

// The "tiny" preset as a JSON object, ready to be edited by a test.
json tinyConfigJson();

// tinyConfigJson() with `field` replaced (or added) / removed.
json withField(std::string_view field, const json &value);
json withoutField(std::string_view field);

// The message of the ConfigError that parsing `text` raises (source "config.json"),
// or "<no error>" so a wrong expectation fails with a readable diff.
std::string errorOfText(std::string_view text);
std::string errorOf(const json &config);

// Parses `config` with source "config.json", collecting warnings.
ModelConfig parseJson(const json &config, std::vector<std::string> *warnings = nullptr);

// A fresh empty folder under the system temp dir, removed by the destructor.
class TempDir {
public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  const std::string &path() const { return path_; }
  std::string write(const std::string &name, std::string_view contents) const; // returns the path

private:
  std::string path_;
};

} // namespace q3::frontend::test
