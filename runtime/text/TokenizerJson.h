// Reads a Hugging Face tokenizer.json. The file of a 150k-token BPE model is
// ~11 MB of JSON, mostly model.vocab and model.merges; those two are streamed
// straight into arrays (nlohmann's SAX interface) and the rest is kept as a
// small JSON tree. About 3x faster than building the whole tree.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace q3::text {

struct TokenizerJson {
  /// model.vocab in file order: (token as written, id).
  std::vector<std::pair<std::string, int64_t>> vocab;
  /// model.merges in rank order: "a b" strings and ["a", "b"] pairs both
  /// become (a, b).
  std::vector<std::pair<std::string, std::string>> merges;
  /// The whole file except model.vocab and model.merges (an object).
  nlohmann::json rest;
};

/// Parses `json`. Throws runtime::LoadError "<displayName>: <what>" when it is
/// not JSON, not an object, or model.vocab / model.merges are malformed.
TokenizerJson parseTokenizerJson(std::string_view json, const std::string &displayName);

} // namespace q3::text
