#include "runtime/text/TokenizerSubset.h"

#include "runtime/LoadError.h"
#include "runtime/text/ByteLevel.h"
#include "runtime/text/TokenizerJson.h"
#include "runtime/text/Utf8.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace q3::text {
namespace {

using json = nlohmann::ordered_json;

/// Renumbers the ids of a JSON id field (an integer or an array of them).
json renumber(const json &value, const std::map<int64_t, int64_t> &newIds) {
  if (value.is_array()) {
    json out = json::array();
    for (const json &item : value)
      if (!item.is_number_integer() || newIds.count(item.get<int64_t>()))
        out.push_back(renumber(item, newIds));
    return out;
  }
  if (value.is_number_integer()) {
    auto it = newIds.find(value.get<int64_t>());
    return it == newIds.end() ? json(nullptr) : json(it->second);
  }
  return value;
}

} // namespace

TextAssets fitTokenizerToVocabulary(const TextAssets &source, int64_t vocabSize) {
  if (!source.tokenizer)
    throw runtime::LoadError(source.source + ": no tokenizer.json");
  const TextFile &file = *source.tokenizer;
  // The tree of everything but vocab and merges (ordered_json would take
  // quadratic time to parse a 150k-entry vocab).
  TokenizerJson parsed = parseTokenizerJson(file.bytes, file.name);
  nlohmann::json root = std::move(parsed.rest);
  const nlohmann::json added =
      root.contains("added_tokens") ? root["added_tokens"] : nlohmann::json::array();

  int64_t largest = -1;
  for (const auto &[token, id] : parsed.vocab)
    largest = std::max(largest, id);
  for (const nlohmann::json &token : added)
    largest = std::max(largest, token.value("id", int64_t(-1)));
  if (largest < vocabSize)
    return source;

  const int64_t regular = vocabSize - int64_t(added.size());
  if (regular < 256)
    throw runtime::LoadError(fmt::format(
        "{}: a vocabulary of {} cannot hold the 256 byte tokens and the {} added tokens",
        file.name, vocabSize, added.size()));
  // Byte tokens first (they must all stay), then the others by id.
  std::vector<std::pair<std::string, int64_t>> vocab = parsed.vocab;
  auto isByte = [](const std::string &token) {
    if (token.empty())
      return false;
    const char *p = token.data();
    const char32_t cp = decodeValidUtf8(&p);
    return size_t(p - token.data()) == token.size() && byteLevelByte(cp) >= 0;
  };
  std::stable_sort(vocab.begin(), vocab.end(), [&](const auto &a, const auto &b) {
    const bool byteA = isByte(a.first), byteB = isByte(b.first);
    return byteA != byteB ? byteA : a.second < b.second;
  });
  // Keep merges in rank order while their tokens fit.
  std::unordered_set<std::string> kept;
  for (const auto &[token, id] : vocab)
    if (isByte(token))
      kept.insert(token);
  nlohmann::json merges = nlohmann::json::array();
  for (const auto &[left, right] : parsed.merges) {
    if (int64_t(kept.size()) >= regular)
      break;
    if (!kept.count(left) || !kept.count(right))
      continue;
    kept.insert(left + right);
    merges.push_back(nlohmann::json::array({left, right}));
  }
  std::map<int64_t, int64_t> newIds; // old id -> new id
  nlohmann::json newVocab = nlohmann::json::object();
  int64_t next = 0;
  for (const auto &[token, id] : vocab)
    if (kept.count(token) && !newVocab.contains(token)) {
      newVocab[token] = next;
      newIds[id] = next++;
    }
  nlohmann::json newAdded = nlohmann::json::array();
  next = regular;
  for (nlohmann::json token : added) {
    newIds[token.value("id", int64_t(-1))] = next;
    token["id"] = next++;
    newAdded.push_back(token);
  }
  root["added_tokens"] = newAdded;
  root["model"]["vocab"] = newVocab;
  root["model"]["merges"] = merges;

  TextAssets out = source;
  out.tokenizer->bytes = root.dump(1) + "\n";
  if (source.tokenizerConfig) {
    json config = json::parse(source.tokenizerConfig->bytes);
    if (config.contains("added_tokens_decoder") && config["added_tokens_decoder"].is_object()) {
      json decoder = json::object();
      for (const auto &[id, token] : config["added_tokens_decoder"].items()) {
        auto it = newIds.find(std::stoll(id));
        if (it != newIds.end())
          decoder[std::to_string(it->second)] = token;
      }
      config["added_tokens_decoder"] = decoder;
    }
    out.tokenizerConfig->bytes = config.dump(2) + "\n";
  }
  if (source.generationConfig) {
    json config = json::parse(source.generationConfig->bytes);
    for (const char *key : {"bos_token_id", "eos_token_id", "pad_token_id"})
      if (config.contains(key))
        config[key] = renumber(config[key], newIds);
    out.generationConfig->bytes = config.dump(2) + "\n";
  }
  return out;
}

void writeTextAssets(const TextAssets &assets, const std::string &folder) {
  for (const runtime::ArtifactSection &section : textSections(assets)) {
    const std::string path = (std::filesystem::path(folder) / section.name).string();
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char *>(section.bytes.data()), std::streamsize(section.bytes.size()));
    if (!out)
      throw runtime::LoadError(path + ": write failed");
  }
}

} // namespace q3::text
