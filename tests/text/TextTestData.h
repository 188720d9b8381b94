// Paths and readers shared by the text tests.
#pragma once

#include "runtime/text/Tokenizer.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>

namespace q3::text::testing {

inline std::string sourcePath(const std::string &relative) {
  return std::string(Q3_SOURCE_DIR) + "/" + relative;
}

inline std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error("cannot open " + path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline nlohmann::ordered_json readJson(const std::string &path) {
  return nlohmann::ordered_json::parse(readFile(path));
}

/// The real Qwen3 tokenizer (models/qwen3-tokenizer), loaded once.
inline const Tokenizer &qwen3Tokenizer() {
  static std::unique_ptr<Tokenizer> tokenizer =
      Tokenizer::fromFile(sourcePath("models/qwen3-tokenizer/tokenizer.json"));
  return *tokenizer;
}

} // namespace q3::text::testing
