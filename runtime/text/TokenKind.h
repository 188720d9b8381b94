// What the tokenizer's readers (tokenizer.json, the compiled form) agree on:
// what an id is, as bit flags, and the largest id either accepts.
#pragma once

#include <cstdint>

namespace q3::text {

/// Ids above this are refused: no tokenizer has 4 million tokens, and the id
/// sizes an array.
constexpr int64_t kMaxTokenId = (int64_t(1) << 22) - 1;

/// An id's flags; 0 is no token (a gap in the ids). An added token may also
/// be in the vocabulary (with the same bytes): only vocabulary tokens take
/// part in merges.
enum TokenFlag : uint8_t {
  kInVocabulary = 1, // in model.vocab
  kAdded = 2,        // in added_tokens
  kSpecial = 4,      // an added token with "special": true
};
constexpr uint8_t kAllTokenFlags = kInVocabulary | kAdded | kSpecial;

} // namespace q3::text
