// UTF-8: validation, decoding, encoding, and a decoder for byte streams that
// never emits half a character (generated tokens split characters freely).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace q3::text {

/// What the bytes at the start of a buffer are.
struct Utf8Sequence {
  enum class Kind { Valid, Incomplete, Invalid } kind;
  /// Valid: the length of the sequence (1-4). Incomplete: the bytes present,
  /// all a valid prefix of a longer sequence. Invalid: the length of the
  /// maximal subpart to replace by one U+FFFD (Unicode 15, section 3.9).
  size_t length;
  char32_t codePoint; // Valid only
};

/// Classifies the sequence starting at `data` (`size` >= 1 bytes).
Utf8Sequence readUtf8Sequence(const uint8_t *data, size_t size);

/// Byte offset of the first ill-formed sequence in `text` (a truncated one at
/// the end counts), or npos when `text` is valid UTF-8.
size_t findInvalidUtf8(std::string_view text);

/// Decodes the code point at `*p`, which must start a valid sequence before
/// `end`, and advances `*p` past it.
inline char32_t decodeValidUtf8(const char **p) {
  const auto *s = reinterpret_cast<const uint8_t *>(*p);
  if (s[0] < 0x80) {
    ++*p;
    return s[0];
  }
  if (s[0] < 0xE0) {
    *p += 2;
    return char32_t((s[0] & 0x1F) << 6 | (s[1] & 0x3F));
  }
  if (s[0] < 0xF0) {
    *p += 3;
    return char32_t((s[0] & 0x0F) << 12 | (s[1] & 0x3F) << 6 | (s[2] & 0x3F));
  }
  *p += 4;
  return char32_t((s[0] & 0x07) << 18 | (s[1] & 0x3F) << 12 | (s[2] & 0x3F) << 6 | (s[3] & 0x3F));
}

/// Appends the UTF-8 encoding of `cp` (a scalar value) to `out`.
void appendUtf8(std::string &out, char32_t cp);

/// Turns `bytes` into valid UTF-8, each maximal ill-formed subpart replaced by
/// U+FFFD (what Rust's from_utf8_lossy and Python's errors="replace" do).
std::string toValidUtf8(std::string_view bytes);

/// Decodes a stream of byte chunks to valid UTF-8 text. A character split
/// across chunks is held back until it is complete; ill-formed bytes become
/// U+FFFD as in toValidUtf8, so the concatenated output equals
/// toValidUtf8(all bytes) however the stream was chunked.
class Utf8StreamDecoder {
public:
  /// The text that is complete after `bytes`.
  std::string push(std::string_view bytes);
  /// The end of the stream: an incomplete character left over becomes U+FFFD.
  std::string finish();
  /// Bytes held back (an incomplete character).
  size_t pendingBytes() const { return pending_.size(); }

private:
  std::string pending_;
};

} // namespace q3::text
