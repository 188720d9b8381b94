// Loading checks that the file describes the pipeline this implementation
// runs (Qwen2's pre-tokenizer, byte-level BPE, NFC) rather than silently
// tokenizing differently: everything else is rejected, naming the field.
#include "runtime/text/Tokenizer.h"

#include "runtime/LoadError.h"
#include "runtime/MappedFile.h"
#include "runtime/text/ByteLevel.h"
#include "runtime/text/Nfc.h"
#include "runtime/text/PreTokenizer.h"
#include "runtime/text/TextError.h"
#include "runtime/text/TokenKind.h"
#include "runtime/text/TokenizerJson.h"
#include "runtime/text/Unicode.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

namespace q3::text {

using json = nlohmann::json;
using runtime::LoadError;
using runtime::printable;

namespace {

/// The pattern of Qwen2's (and Qwen3's) Split pre-tokenizer, which
/// PreTokenizer.cpp implements.
constexpr std::string_view kQwen2Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/// A JSON value shortened to one printable line for an error message.
std::string shortJson(const json &value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 80)
    text = text.substr(0, 77) + "...";
  return printable(text);
}

class Checker {
public:
  explicit Checker(std::string displayName) : name_(std::move(displayName)) {}

  [[noreturn]] void fail(const std::string &path, const std::string &message) const {
    throw LoadError(name_ + ": " + path + ": " + message);
  }
  /// obj[key] or null when absent.
  const json &get(const json &obj, const char *key) const {
    static const json null;
    auto it = obj.find(key);
    return it == obj.end() ? null : *it;
  }
  bool boolean(const json &obj, const char *key, const std::string &path, bool fallback) const {
    const json &value = get(obj, key);
    if (value.is_null())
      return fallback;
    if (!value.is_boolean())
      fail(path + "." + key, "expected true or false, found " + shortJson(value));
    return value.get<bool>();
  }
  std::string type(const json &obj, const std::string &path) const {
    if (!obj.is_object())
      fail(path, "expected an object, found " + shortJson(obj));
    const json &value = get(obj, "type");
    if (!value.is_string())
      fail(path + ".type", "expected a string, found " + shortJson(value));
    return value.get<std::string>();
  }
  /// True or false only, where this implementation does one of them.
  void expectBool(const json &obj, const char *key, const std::string &path, bool expected,
                  bool fallback) const {
    if (boolean(obj, key, path, fallback) != expected)
      fail(path + "." + key, fmt::format("expected {} (the only setting supported), found {}",
                                         expected, !expected));
  }

private:
  std::string name_;
};

bool checkNormalizer(const Checker &check, const json &normalizer) {
  if (normalizer.is_null())
    return false;
  const std::string type = check.type(normalizer, "normalizer");
  if (type == "NFC")
    return true;
  if (type == "Sequence") {
    const json &list = check.get(normalizer, "normalizers");
    if (!list.is_array())
      check.fail("normalizer.normalizers", "expected an array, found " + shortJson(list));
    bool nfc = false;
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string path = fmt::format("normalizer.normalizers[{}]", i);
      if (check.type(list[i], path) != "NFC")
        check.fail(path, "expected NFC (the only normalizer supported), found " + shortJson(list[i]));
      nfc = true;
    }
    return nfc;
  }
  check.fail("normalizer", "expected null or NFC (the only normalizer supported), found " +
                               shortJson(normalizer));
}

void checkByteLevel(const Checker &check, const json &step, const std::string &path) {
  if (check.type(step, path) != "ByteLevel")
    check.fail(path, "expected ByteLevel, found " + shortJson(step));
  check.expectBool(step, "add_prefix_space", path, false, false);
}

void checkPreTokenizer(const Checker &check, const json &pre) {
  const char *expected = "expected Qwen2's pre-tokenizer (a Sequence of Split on its regex, then "
                         "ByteLevel with use_regex false), found ";
  if (check.type(pre, "pre_tokenizer") != "Sequence")
    check.fail("pre_tokenizer", expected + shortJson(pre));
  const json &steps = check.get(pre, "pretokenizers");
  if (!steps.is_array() || steps.size() != 2)
    check.fail("pre_tokenizer.pretokenizers", expected + shortJson(steps));
  const json &split = steps[0];
  const std::string splitPath = "pre_tokenizer.pretokenizers[0]";
  if (check.type(split, splitPath) != "Split")
    check.fail(splitPath, "expected Split, found " + shortJson(split));
  const json &pattern = check.get(split, "pattern");
  const json &regex = pattern.is_object() ? check.get(pattern, "Regex") : pattern;
  if (!regex.is_string() || regex.get<std::string>() != kQwen2Pattern)
    check.fail(splitPath + ".pattern", "expected {\"Regex\": <the Qwen2 pattern>}, found " +
                                           shortJson(pattern));
  const json &behavior = check.get(split, "behavior");
  if (behavior != "Isolated")
    check.fail(splitPath + ".behavior", "expected \"Isolated\", found " + shortJson(behavior));
  check.expectBool(split, "invert", splitPath, false, false);
  const std::string bytePath = "pre_tokenizer.pretokenizers[1]";
  checkByteLevel(check, steps[1], bytePath);
  check.expectBool(steps[1], "use_regex", bytePath, false, true);
}

void checkDecoders(const Checker &check, const json &root) {
  checkByteLevel(check, check.get(root, "decoder"), "decoder");
  const json &post = check.get(root, "post_processor");
  if (!post.is_null() && check.type(post, "post_processor") != "ByteLevel")
    check.fail("post_processor",
               "expected null or ByteLevel (no tokens added around the text), found " +
                   shortJson(post));
}

struct ModelOptions {
  bool ignoreMerges = false;
};

ModelOptions checkModel(const Checker &check, const json &model) {
  if (!model.is_object())
    check.fail("model", "expected an object, found " + shortJson(model));
  const json &type = check.get(model, "type");
  if (!type.is_null() && type != "BPE")
    check.fail("model.type", "expected \"BPE\", found " + shortJson(type));
  check.expectBool(model, "byte_fallback", "model", false, false);
  for (const char *key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json &value = check.get(model, key);
    if (!value.is_null() && value != "")
      check.fail(std::string("model.") + key,
                 "expected null or \"\" (the only setting supported), found " + shortJson(value));
  }
  const json &dropout = check.get(model, "dropout");
  if (!dropout.is_null() && !(dropout.is_number() && dropout.get<double>() == 0.0))
    check.fail("model.dropout", "expected null (dropout is for training), found " + shortJson(dropout));
  ModelOptions options;
  options.ignoreMerges = check.boolean(model, "ignore_merges", "model", false);
  return options;
}

std::vector<AddedToken> readAddedTokens(const Checker &check, const json &list) {
  std::vector<AddedToken> tokens;
  if (list.is_null())
    return tokens;
  if (!list.is_array())
    check.fail("added_tokens", "expected an array, found " + shortJson(list));
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = fmt::format("added_tokens[{}]", i);
    const json &entry = list[i];
    if (!entry.is_object())
      check.fail(path, "expected an object, found " + shortJson(entry));
    const json &id = check.get(entry, "id");
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > kMaxTokenId)
      check.fail(path + ".id", fmt::format("expected an integer in [0, {}], found {}", kMaxTokenId,
                                           shortJson(id)));
    const json &content = check.get(entry, "content");
    if (!content.is_string() || content.get<std::string>().empty())
      check.fail(path + ".content", "expected a non-empty string, found " + shortJson(content));
    AddedToken token;
    token.id = int32_t(id.get<int64_t>());
    token.content = content.get<std::string>();
    token.special = check.boolean(entry, "special", path, false);
    token.normalized = check.boolean(entry, "normalized", path, !token.special);
    token.lstrip = check.boolean(entry, "lstrip", path, false);
    token.rstrip = check.boolean(entry, "rstrip", path, false);
    check.expectBool(entry, "single_word", path, false, false);
    tokens.push_back(std::move(token));
  }
  return tokens;
}

/// Token text (as written in the file) -> id, for resolving merges while
/// loading: open addressing over views of strings that outlive the map. A
/// node-based std::unordered_map made the load twice as slow.
class TokenIdMap {
public:
  explicit TokenIdMap(const std::vector<std::pair<std::string, int64_t>> &vocab) : vocab_(vocab) {
    size_t capacity = 16;
    while (capacity < vocab.size() * 2)
      capacity *= 2;
    slots_.assign(capacity, Slot{0, -1});
    mask_ = capacity - 1;
  }
  /// Adds vocab[index]; false when its text is there already.
  bool insert(size_t index) {
    const std::string &key = vocab_[index].first;
    const uint32_t hash = hashOf(key);
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      Slot &slot = slots_[i];
      if (slot.index < 0) {
        slot = Slot{hash, int32_t(index)};
        return true;
      }
      if (slot.hash == hash && vocab_[size_t(slot.index)].first == key)
        return false;
    }
  }
  /// The id of `key`, or -1.
  int64_t find(std::string_view key) const {
    const uint32_t hash = hashOf(key);
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot &slot = slots_[i];
      if (slot.index < 0)
        return -1;
      if (slot.hash == hash && vocab_[size_t(slot.index)].first == key)
        return vocab_[size_t(slot.index)].second;
    }
  }

private:
  struct Slot {
    uint32_t hash;
    int32_t index; // into vocab; -1: empty
  };
  static uint32_t hashOf(std::string_view key) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (char c : key)
      h = (h ^ uint8_t(c)) * 0x100000001b3ull;
    return uint32_t(h ^ (h >> 32));
  }
  const std::vector<std::pair<std::string, int64_t>> &vocab_;
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

inline bool isWhiteSpaceAt(std::string_view text, size_t i) {
  const char *p = text.data() + i;
  return charClass(decodeValidUtf8(&p)) == CharClass::Space;
}

/// Start of the character that ends at `end` (valid UTF-8).
inline size_t previousCharStart(std::string_view text, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80)
    --i;
  return i;
}

} // namespace

/// Finds added tokens in text: leftmost match first, the longest of those
/// (the Hugging Face library's Aho-Corasick "leftmost longest").
struct Tokenizer::AddedMatcher {
  struct Entry {
    std::string content;
    int32_t id;
    bool lstrip;
    bool rstrip;
  };
  std::vector<Entry> entries; // by first byte, then longest first
  uint32_t begin[256] = {};
  uint32_t end[256] = {};

  explicit AddedMatcher(std::vector<Entry> list) : entries(std::move(list)) {
    std::stable_sort(entries.begin(), entries.end(), [](const Entry &a, const Entry &b) {
      const auto fa = uint8_t(a.content[0]), fb = uint8_t(b.content[0]);
      return fa != fb ? fa < fb : a.content.size() > b.content.size();
    });
    for (size_t i = entries.size(); i-- > 0;)
      begin[uint8_t(entries[i].content[0])] = uint32_t(i);
    for (size_t i = 0; i < entries.size(); ++i)
      end[uint8_t(entries[i].content[0])] = uint32_t(i + 1);
  }
  bool empty() const { return entries.empty(); }

  struct Match {
    size_t start, stop; // the bytes the token replaces (stripped space included)
    int32_t id;
  };
  /// The first match at or after `from`; `floor` bounds the lstrip extension.
  std::optional<Match> find(std::string_view text, size_t from) const {
    for (size_t i = from; i < text.size(); ++i) {
      const auto first = uint8_t(text[i]);
      for (uint32_t e = begin[first]; e < end[first]; ++e) {
        const Entry &entry = entries[e];
        if (text.compare(i, entry.content.size(), entry.content) != 0)
          continue;
        Match match{i, i + entry.content.size(), entry.id};
        if (entry.lstrip)
          while (match.start > from && isWhiteSpaceAt(text, previousCharStart(text, match.start)))
            match.start = previousCharStart(text, match.start);
        if (entry.rstrip)
          while (match.stop < text.size() && isWhiteSpaceAt(text, match.stop)) {
            const char *p = text.data() + match.stop;
            decodeValidUtf8(&p);
            match.stop = size_t(p - text.data());
          }
        return match;
      }
    }
    return std::nullopt;
  }
};

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::fromFile(const std::string &path) {
  std::unique_ptr<runtime::MappedFile> file = runtime::MappedFile::open(path);
  return fromJson(std::string_view(reinterpret_cast<const char *>(file->data()), file->size()),
                  path);
}

std::unique_ptr<Tokenizer> Tokenizer::fromJson(std::string_view text,
                                               const std::string &displayName) {
  TokenizerJson file = parseTokenizerJson(text, displayName);
  Checker check(displayName);
  const json &root = file.rest;
  const ModelOptions modelOptions = checkModel(check, check.get(root, "model"));
  std::unique_ptr<Tokenizer> tokenizer(new Tokenizer());
  Tokenizer &t = *tokenizer;
  t.displayName_ = displayName;
  t.nfc_ = checkNormalizer(check, check.get(root, "normalizer"));
  checkPreTokenizer(check, check.get(root, "pre_tokenizer"));
  checkDecoders(check, root);
  t.added_ = readAddedTokens(check, check.get(root, "added_tokens"));
  if (file.vocab.empty())
    check.fail("model.vocab", "expected an object of token -> id, found none");

  int64_t maxId = -1;
  for (const auto &[token, id] : file.vocab) {
    if (id < 0 || id > kMaxTokenId)
      check.fail("model.vocab", fmt::format("token '{}': expected an id in [0, {}], found {}",
                                            printable(token), kMaxTokenId, id));
    maxId = std::max(maxId, id);
  }
  for (const AddedToken &token : t.added_)
    maxId = std::max<int64_t>(maxId, token.id);
  std::vector<std::string> tokenBytes(size_t(maxId + 1));
  t.tokenFlags_.assign(size_t(maxId + 1), 0);

  // Vocabulary tokens are written in the byte-level alphabet.
  TokenIdMap idOf(file.vocab);
  for (size_t index = 0; index < file.vocab.size(); ++index) {
    const auto &[token, id] = file.vocab[index];
    std::optional<std::string> bytes = byteLevelDecode(token);
    if (!bytes || bytes->empty())
      check.fail("model.vocab", fmt::format("token '{}' (id {}): expected a non-empty string of "
                                            "byte-level characters (GPT-2's byte alphabet)",
                                            printable(token), id));
    if (t.tokenFlags_[size_t(id)] != 0)
      check.fail("model.vocab",
                 fmt::format("id {} is given to two tokens, '{}' and '{}'", id,
                             printable(byteLevelEncode(tokenBytes[size_t(id)])), printable(token)));
    if (!idOf.insert(index))
      check.fail("model.vocab", fmt::format("token '{}' appears twice", printable(token)));
    tokenBytes[size_t(id)] = std::move(*bytes);
    t.tokenFlags_[size_t(id)] = kInVocabulary;
  }

  int32_t byteTokens[256];
  for (int b = 0; b < 256; ++b) {
    std::string key;
    appendUtf8(key, byteLevelChar(uint8_t(b)));
    const int64_t id = idOf.find(key);
    if (id < 0)
      check.fail("model.vocab", fmt::format("expected a token for every byte, found none for byte "
                                            "0x{:02X} ('{}')",
                                            b, printable(key)));
    byteTokens[b] = int32_t(id);
  }

  std::vector<BpeMerge> merges;
  merges.reserve(file.merges.size());
  std::string joined;
  for (size_t rank = 0; rank < file.merges.size(); ++rank) {
    const auto &[left, right] = file.merges[rank];
    auto lookup = [&](std::string_view token) {
      const int64_t id = idOf.find(token);
      if (id < 0)
        check.fail(fmt::format("model.merges[{}]", rank),
                   fmt::format("'{}' is not in model.vocab", printable(token)));
      return int32_t(id);
    };
    joined.assign(left).append(right);
    merges.push_back({lookup(left), lookup(right), lookup(joined)});
  }
  file.merges.clear();
  file.merges.shrink_to_fit();

  for (const AddedToken &token : t.added_) {
    if (findInvalidUtf8(token.content) != std::string_view::npos)
      check.fail("added_tokens", "content is not valid UTF-8");
    // An id another token already has would decode as this one: garbage
    // text from a file that looks fine. The same content is the same token.
    const uint8_t flags = t.tokenFlags_[size_t(token.id)];
    if (flags != 0 && tokenBytes[size_t(token.id)] != token.content)
      check.fail("added_tokens",
                 fmt::format("'{}' has id {}, which {} gives to '{}'", printable(token.content),
                             token.id, (flags & kAdded) ? "another added token" : "the vocabulary",
                             printable(tokenBytes[size_t(token.id)])));
    tokenBytes[size_t(token.id)] = token.content;
    // A token listed twice takes its last entry's flags.
    t.tokenFlags_[size_t(token.id)] =
        uint8_t((flags & kInVocabulary) | kAdded | (token.special ? kSpecial : 0));
  }
  t.packTokenBytes(tokenBytes);
  t.buildBpe(byteTokens, merges, modelOptions.ignoreMerges);
  t.buildAddedMatchers();
  return tokenizer;
}

void Tokenizer::buildBpe(const int32_t (&byteTokens)[256], const std::vector<BpeMerge> &merges,
                         bool ignoreMerges) {
  // With ignore_merges a piece that is a whole vocabulary token is that token.
  std::unordered_map<std::string, int32_t> wholeTokens;
  if (ignoreMerges)
    for (size_t id = 0; id < tokenEnds_.size(); ++id)
      if (tokenFlags_[id] & kInVocabulary)
        wholeTokens.emplace(tokenBytes(int32_t(id)), int32_t(id));
  bpe_ = std::make_unique<BpeModel>(byteTokens, merges, ignoreMerges, std::move(wholeTokens));
}

void Tokenizer::packTokenBytes(const std::vector<std::string> &tokenBytes) {
  tokenEnds_.resize(tokenBytes.size());
  uint64_t total = 0;
  for (size_t id = 0; id < tokenBytes.size(); ++id) {
    total += tokenBytes[id].size();
    if (total > UINT32_MAX)
      throw LoadError(displayName_ + ": model.vocab: expected under 4 GiB of token text");
    tokenEnds_[id] = uint32_t(total);
  }
  tokenText_.reserve(total);
  for (const std::string &bytes : tokenBytes)
    tokenText_ += bytes;
}

void Tokenizer::buildAddedMatchers() {
  std::vector<AddedMatcher::Entry> raw, normalized;
  for (const AddedToken &token : added_) {
    AddedMatcher::Entry entry{token.content, token.id, token.lstrip, token.rstrip};
    (token.normalized ? normalized : raw).push_back(std::move(entry));
  }
  rawMatcher_ = std::make_unique<AddedMatcher>(std::move(raw));
  normalizedMatcher_ = std::make_unique<AddedMatcher>(std::move(normalized));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parseAddedTokens) const {
  if (size_t bad = findInvalidUtf8(text); bad != std::string_view::npos)
    throw TextError(fmt::format("invalid UTF-8 at byte {} of the text (0x{:02X})", bad,
                                static_cast<unsigned char>(text[bad])));
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 1);
  if (!parseAddedTokens) {
    std::string normalized = nfc_ ? toNfc(text) : std::string(text);
    encodePieces(normalized, out);
    return out;
  }
  size_t position = 0;
  while (position < text.size()) {
    std::optional<AddedMatcher::Match> match = rawMatcher_->find(text, position);
    const size_t gapEnd = match ? match->start : text.size();
    encodeOrdinary(text.substr(position, gapEnd - position), out);
    if (!match)
      break;
    out.push_back(match->id);
    position = match->stop;
  }
  return out;
}

void Tokenizer::encodeOrdinary(std::string_view text, std::vector<int32_t> &out) const {
  if (text.empty())
    return;
  if (!nfc_ || isNfcQuick(text)) {
    if (normalizedMatcher_->empty()) {
      encodePieces(text, out);
      return;
    }
  }
  const std::string normalized = nfc_ ? toNfc(text) : std::string(text);
  std::string_view rest = normalized;
  size_t position = 0;
  while (position < rest.size()) {
    std::optional<AddedMatcher::Match> match = normalizedMatcher_->find(rest, position);
    const size_t gapEnd = match ? match->start : rest.size();
    encodePieces(rest.substr(position, gapEnd - position), out);
    if (!match)
      break;
    out.push_back(match->id);
    position = match->stop;
  }
}

void Tokenizer::encodePieces(std::string_view text, std::vector<int32_t> &out) const {
  bpe_->encode(text, qwen2PieceLength, out);
}

std::string_view Tokenizer::tokenBytes(int32_t id) const {
  if (id < 0 || size_t(id) >= tokenEnds_.size())
    return {};
  const size_t begin = id == 0 ? 0 : tokenEnds_[size_t(id) - 1];
  return std::string_view(tokenText_).substr(begin, tokenEnds_[size_t(id)] - begin);
}

bool Tokenizer::isToken(int32_t id) const {
  return id >= 0 && size_t(id) < tokenFlags_.size() && tokenFlags_[size_t(id)] != 0;
}

bool Tokenizer::isSpecial(int32_t id) const {
  return id >= 0 && size_t(id) < tokenFlags_.size() && (tokenFlags_[size_t(id)] & kSpecial);
}

std::optional<int32_t> Tokenizer::findToken(std::string_view content) const {
  for (const AddedToken &token : added_)
    if (token.content == content)
      return token.id;
  for (size_t id = 0; id < tokenEnds_.size(); ++id)
    if ((tokenFlags_[id] & kInVocabulary) && tokenBytes(int32_t(id)) == content)
      return int32_t(id);
  return std::nullopt;
}

std::string Tokenizer::decode(const std::vector<int32_t> &ids, bool skipSpecial) const {
  std::string bytes;
  for (int32_t id : ids)
    if (!(skipSpecial && isSpecial(id)))
      bytes += tokenBytes(id);
  return toValidUtf8(bytes);
}

std::string TokenTextStream::push(int32_t id) { return utf8_.push(tokenizer_.tokenBytes(id)); }

std::string TokenTextStream::finish() { return utf8_.finish(); }

} // namespace q3::text
