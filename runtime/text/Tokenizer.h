// A Hugging Face tokenizer.json of the Qwen2/Qwen3 kind: byte-level BPE with
// the Qwen2 pre-tokenizer split, the NFC normalizer, and added tokens
// (special ones such as <|im_start|>, and plain ones such as <think>) that
// are matched whole before anything else. Encoding gives the ids the Hugging
// Face tokenizers library gives; decoding gives valid UTF-8.
//
// What the loader accepts, and the one-line error for everything else:
// docs/text.md.
#pragma once

#include "runtime/text/Bpe.h"
#include "runtime/text/Utf8.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace q3::text {

struct AddedToken {
  int32_t id;
  std::string content;
  bool special = false;    // skipped by decode(..., skipSpecial)
  bool normalized = false; // matched in the normalized text rather than the input
  bool lstrip = false;     // swallows white space before it
  bool rstrip = false;     // swallows white space after it
};

class Tokenizer {
public:
  /// Reads tokenizer.json at `path`. Throws runtime::LoadError naming the
  /// file and the field.
  static std::unique_ptr<Tokenizer> fromFile(const std::string &path);
  /// Parses tokenizer.json text; `displayName` starts every error message.
  static std::unique_ptr<Tokenizer> fromJson(std::string_view json, const std::string &displayName);
  /// Reads the compiled form compile() writes (docs/text.md, "The compiled
  /// tokenizer"): ids, bytes and merges as arrays, checked but not parsed,
  /// so a 150k-token tokenizer loads in milliseconds instead of the ~0.3 s
  /// of its JSON. Throws runtime::LoadError naming `displayName` and what is
  /// wrong.
  static std::unique_ptr<Tokenizer> fromCompiled(std::string_view bytes,
                                                 const std::string &displayName);
  /// This tokenizer in the compiled form: what `q3c compile` embeds in an
  /// artifact. fromCompiled(compile()) encodes and decodes exactly as this.
  std::string compile() const;
  ~Tokenizer();

  /// The ids of `text`, which must be valid UTF-8 (TextError naming the
  /// byte offset otherwise). With `parseAddedTokens` false, text like
  /// "<|im_end|>" is encoded as plain text.
  std::vector<int32_t> encode(std::string_view text, bool parseAddedTokens = true) const;

  /// The text of `ids`: their bytes as UTF-8, ill-formed sequences replaced
  /// by U+FFFD. Ids that are no token (past the vocabulary, or a gap in it)
  /// give nothing.
  std::string decode(const std::vector<int32_t> &ids, bool skipSpecial = false) const;

  /// The bytes of one token (added tokens: their content); empty for an id
  /// that is no token.
  std::string_view tokenBytes(int32_t id) const;
  /// One past the largest id.
  int64_t vocabSize() const { return int64_t(tokenEnds_.size()); }
  bool isToken(int32_t id) const;
  bool isSpecial(int32_t id) const;
  /// The added token with this content, else the vocabulary token with
  /// these bytes.
  std::optional<int32_t> findToken(std::string_view content) const;
  const std::vector<AddedToken> &addedTokens() const { return added_; }
  /// Whether encode() normalizes text to NFC first (tokenizer.json's
  /// "normalizer" is NFC); without a normalizer text is encoded as given.
  bool normalizesToNfc() const { return nfc_; }
  const std::string &displayName() const { return displayName_; }

private:
  Tokenizer(); // defined where AddedMatcher is
  struct AddedMatcher;
  void packTokenBytes(const std::vector<std::string> &tokenBytes);
  void buildBpe(const int32_t (&byteTokens)[256], const std::vector<BpeMerge> &merges,
                bool ignoreMerges);
  void buildAddedMatchers();
  void encodeOrdinary(std::string_view text, std::vector<int32_t> &out) const;
  void encodePieces(std::string_view normalized, std::vector<int32_t> &out) const;

  std::string displayName_;
  // Every id's bytes (added tokens: their content) back to back: id's end at
  // tokenEnds_[id], its start at the previous id's end.
  std::string tokenText_;
  std::vector<uint32_t> tokenEnds_;
  std::vector<uint8_t> tokenFlags_; // TokenFlag bits (runtime/text/TokenKind.h); 0: no token
  std::vector<AddedToken> added_;
  std::unique_ptr<AddedMatcher> rawMatcher_;        // added tokens with normalized=false
  std::unique_ptr<AddedMatcher> normalizedMatcher_; // normalized=true
  std::unique_ptr<BpeModel> bpe_;
  bool nfc_ = false;
};

/// Decodes generated tokens one at a time without ever emitting part of a
/// character: the concatenated output equals Tokenizer::decode of all ids.
class TokenTextStream {
public:
  explicit TokenTextStream(const Tokenizer &tokenizer) : tokenizer_(tokenizer) {}
  std::string push(int32_t id);
  std::string finish();

private:
  const Tokenizer &tokenizer_;
  Utf8StreamDecoder utf8_;
};

} // namespace q3::text
