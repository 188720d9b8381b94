// Byte-level BPE: a piece of text (one pre-tokenizer match) starts as one
// token per byte; then, as long as some adjacent pair has a merge, the pair
// with the lowest merge rank is merged (the leftmost of equal pairs first),
// exactly as the Hugging Face tokenizers library's BPE model does.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace q3::text {

/// A merge rule: the tokens `left` and `right` merge into `result`.
struct BpeMerge {
  int32_t left;
  int32_t right;
  int32_t result;
};

class BpeModel {
public:
  /// `byteTokens[b]`: the token of the single byte b. `merges` in rank order
  /// (rank = index). With `ignoreMerges`, a piece that is a token as a whole
  /// is that token (tokenizer.json's model.ignore_merges); `wholeTokens` maps
  /// raw bytes to ids for that (unused otherwise).
  BpeModel(const int32_t (&byteTokens)[256], const std::vector<BpeMerge> &merges,
           bool ignoreMerges, std::unordered_map<std::string, int32_t> wholeTokens);
  ~BpeModel();

  /// Splits `text` into pieces with `pieceLength` (the length of the piece
  /// at the start of a non-empty text) and appends the tokens of each piece to
  /// `out`. Thread-safe; the tokens of short pieces are cached.
  void encode(std::string_view text, size_t (*pieceLength)(std::string_view),
              std::vector<int32_t> &out) const;

  /// What the model was built from, for writing it out again: the byte
  /// tokens, and the merges in rank order (a pair listed twice keeps only
  /// its last rank, which is all a lookup ever sees).
  const int32_t (&byteTokens() const)[256] { return byteTokens_; }
  bool ignoresMerges() const { return ignoreMerges_; }
  std::vector<BpeMerge> mergesInRankOrder() const;

private:
  void encodePiece(std::string_view piece, std::vector<int32_t> &out) const;
  void merge(std::string_view piece, std::vector<int32_t> &out) const;

  struct MergeTable;
  struct Cache;
  int32_t byteTokens_[256];
  std::unique_ptr<MergeTable> merges_;
  bool ignoreMerges_;
  std::unordered_map<std::string, int32_t> wholeTokens_;
  mutable std::mutex cacheMutex_;
  std::unique_ptr<Cache> cache_;
};

} // namespace q3::text
