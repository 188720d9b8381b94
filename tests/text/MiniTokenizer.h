// Small tokenizer.json files for tests: the 256 byte tokens, then the given
// merges (each merge's result becomes the next id), Qwen2's pre-tokenizer,
// and optional added tokens.
#pragma once

#include "runtime/text/ByteLevel.h"
#include "runtime/text/Utf8.h"

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace q3::text::testing {

/// Byte-level spelling of raw bytes ("a b" -> "aĠb").
inline std::string bl(const std::string &bytes) { return byteLevelEncode(bytes); }

inline nlohmann::ordered_json miniTokenizerJson(
    const std::vector<std::pair<std::string, std::string>> &merges,
    const nlohmann::ordered_json &addedTokens = nlohmann::ordered_json::array()) {
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  int id = 0;
  for (int b = 0; b < 256; ++b)
    vocab[bl(std::string(1, char(b)))] = id++;
  nlohmann::ordered_json mergeList = nlohmann::ordered_json::array();
  for (const auto &[left, right] : merges) {
    mergeList.push_back(bl(left) + " " + bl(right));
    if (!vocab.contains(bl(left + right)))
      vocab[bl(left + right)] = id++;
  }
  const std::string pattern =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  nlohmann::ordered_json byteLevel = {{"type", "ByteLevel"},
                                      {"add_prefix_space", false},
                                      {"trim_offsets", false},
                                      {"use_regex", false}};
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", addedTokens},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", pattern}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          byteLevel}}}},
      {"post_processor", byteLevel},
      {"decoder", byteLevel},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", mergeList}}}};
}

inline nlohmann::ordered_json addedToken(int id, const std::string &content, bool special) {
  return {{"id", id},          {"content", content}, {"single_word", false}, {"lstrip", false},
          {"rstrip", false},   {"normalized", false}, {"special", special}};
}

} // namespace q3::text::testing
