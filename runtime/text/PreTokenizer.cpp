// Each alternative of the regex, in order, as a scan from the current
// position. Where the regex would backtrack (\s*[\r\n]+ and \s+(?!\S)), the
// outcome is computed directly from the extent of the white-space run.
#include "runtime/text/PreTokenizer.h"

#include "runtime/text/Unicode.h"
#include "runtime/text/Utf8.h"

#include <cstdint>

namespace q3::text {
namespace {

// Classes of ASCII, so English text never touches the tables.
struct AsciiClasses {
  CharClass table[128];
  constexpr AsciiClasses() : table() {
    for (int c = 0; c < 128; ++c) {
      CharClass cls = CharClass::Other;
      if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        cls = CharClass::Letter;
      else if (c >= '0' && c <= '9')
        cls = CharClass::Number;
      else if (c == ' ' || (c >= '\t' && c <= '\r'))
        cls = CharClass::Space;
      table[c] = cls;
    }
  }
};
constexpr AsciiClasses kAscii;

struct Char {
  char32_t cp;
  size_t length; // bytes
  CharClass cls;
};

/// The character at byte offset `i` of `text` (i < text.size()).
inline Char charAt(std::string_view text, size_t i) {
  const auto byte = static_cast<unsigned char>(text[i]);
  if (byte < 0x80)
    return {byte, 1, kAscii.table[byte]};
  const char *p = text.data() + i;
  const char32_t cp = decodeValidUtf8(&p);
  return {cp, size_t(p - (text.data() + i)), charClass(cp)};
}

/// End of the run of characters of class `cls` that starts at `i`.
inline size_t runEnd(std::string_view text, size_t i, CharClass cls) {
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x80) {
      if (kAscii.table[byte] != cls)
        break;
      ++i;
      continue;
    }
    Char c = charAt(text, i);
    if (c.cls != cls)
      break;
    i += c.length;
  }
  return i;
}

inline bool isLineBreak(char32_t cp) { return cp == '\r' || cp == '\n'; }

/// (?i:'s|'t|'re|'ve|'m|'ll|'d) at `i` (where text[i] == '\''): the match
/// length, or 0.
size_t contractionLength(std::string_view text, size_t i) {
  static constexpr std::string_view kSuffixes[] = {"s", "t", "re", "ve", "m", "ll", "d"};
  for (std::string_view suffix : kSuffixes) {
    size_t j = i + 1;
    bool matched = true;
    for (char letter : suffix) {
      if (j >= text.size()) {
        matched = false;
        break;
      }
      Char c = charAt(text, j);
      if (contractionLetterFold(c.cp) != letter) {
        matched = false;
        break;
      }
      j += c.length;
    }
    if (matched)
      return j - i;
  }
  return 0;
}

/// The white-space alternatives, \s*[\r\n]+ | \s+(?!\S) | \s+, at `i` where
/// a white-space character starts.
size_t whiteSpaceLength(std::string_view text, size_t i) {
  size_t end = i;
  size_t lastBreakEnd = 0; // end of the last \r or \n in the run
  size_t lastCharStart = i;
  while (end < text.size()) {
    Char c = charAt(text, end);
    if (c.cls != CharClass::Space)
      break;
    lastCharStart = end;
    end += c.length;
    if (isLineBreak(c.cp))
      lastBreakEnd = end;
  }
  // \s*[\r\n]+: \s* gives back characters until a line break follows it, so
  // the match ends right after the run's last line break.
  if (lastBreakEnd != 0)
    return lastBreakEnd - i;
  // \s+(?!\S): the whole run at the end of the text; before a non-space, all
  // but the run's last character (which then is the space the lookahead sees).
  if (end == text.size())
    return end - i;
  if (lastCharStart > i)
    return lastCharStart - i;
  // \s+
  return end - i;
}

} // namespace

size_t qwen2PieceLength(std::string_view text) {
  const Char first = charAt(text, 0);
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)
  if (first.cp == '\'')
    if (size_t length = contractionLength(text, 0))
      return length;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (first.cls == CharClass::Letter)
    return runEnd(text, first.length, CharClass::Letter);
  if (first.cls != CharClass::Number && !isLineBreak(first.cp) && first.length < text.size() &&
      charAt(text, first.length).cls == CharClass::Letter)
    return runEnd(text, first.length, CharClass::Letter);
  // \p{N}
  if (first.cls == CharClass::Number)
    return first.length;
  // ' '?[^\s\p{L}\p{N}]+[\r\n]*
  size_t otherStart = std::string_view::npos;
  if (first.cls == CharClass::Other)
    otherStart = 0;
  else if (first.cp == ' ' && first.length < text.size() &&
           charAt(text, first.length).cls == CharClass::Other)
    otherStart = first.length;
  if (otherStart != std::string_view::npos) {
    size_t end = runEnd(text, otherStart, CharClass::Other);
    while (end < text.size() && (text[end] == '\r' || text[end] == '\n'))
      ++end;
    return end;
  }
  return whiteSpaceLength(text, 0);
}

void splitQwen2(std::string_view text, std::vector<std::string_view> &pieces) {
  while (!text.empty()) {
    const size_t length = qwen2PieceLength(text);
    pieces.push_back(text.substr(0, length));
    text.remove_prefix(length);
  }
}

} // namespace q3::text
