// NFC = canonical decomposition, canonical ordering, canonical composition.
// The decomposition tables are fully recursive already; Hangul syllables are
// decomposed and composed arithmetically (Unicode 15, section 3.12).
#include "runtime/text/Nfc.h"

#include "runtime/text/Unicode.h"
#include "runtime/text/Utf8.h"

#include <algorithm>
#include <vector>

namespace q3::text {
namespace {

constexpr char32_t kHangulSBase = 0xAC00, kHangulLBase = 0x1100, kHangulVBase = 0x1161,
                   kHangulTBase = 0x11A7;
constexpr char32_t kHangulLCount = 19, kHangulVCount = 21, kHangulTCount = 28;
constexpr char32_t kHangulNCount = kHangulVCount * kHangulTCount;
constexpr char32_t kHangulSCount = kHangulLCount * kHangulNCount;

void decompose(char32_t cp, std::u32string &out) {
  if (cp >= kHangulSBase && cp < kHangulSBase + kHangulSCount) {
    const char32_t index = cp - kHangulSBase;
    out += kHangulLBase + index / kHangulNCount;
    out += kHangulVBase + (index % kHangulNCount) / kHangulTCount;
    if (index % kHangulTCount != 0)
      out += kHangulTBase + index % kHangulTCount;
    return;
  }
  std::u32string_view parts = canonicalDecomposition(cp);
  if (parts.empty())
    out += cp;
  else
    out += parts;
}

/// Stable sort of every run of non-starters by combining class.
void canonicalOrder(std::u32string &text) {
  size_t i = 0;
  while (i < text.size()) {
    if (combiningClass(text[i]) == 0) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && combiningClass(text[end]) != 0)
      ++end;
    std::stable_sort(text.begin() + long(i), text.begin() + long(end),
                     [](char32_t a, char32_t b) { return combiningClass(a) < combiningClass(b); });
    i = end;
  }
}

char32_t compose(char32_t first, char32_t second) {
  if (first >= kHangulLBase && first < kHangulLBase + kHangulLCount && second >= kHangulVBase &&
      second < kHangulVBase + kHangulVCount)
    return kHangulSBase +
           ((first - kHangulLBase) * kHangulVCount + (second - kHangulVBase)) * kHangulTCount;
  if (first >= kHangulSBase && first < kHangulSBase + kHangulSCount &&
      (first - kHangulSBase) % kHangulTCount == 0 && second > kHangulTBase &&
      second < kHangulTBase + kHangulTCount)
    return first + (second - kHangulTBase);
  return primaryComposite(first, second);
}

/// The canonical composition algorithm: each character is combined with the
/// last starter unless a character between them blocks it (has a combining
/// class of 0 or one not lower than its own).
void canonicalCompose(std::u32string &text) {
  size_t starter = std::u32string::npos; // output index of the last starter
  uint8_t lastClass = 0;                 // class of the last character output
  size_t out = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char32_t cp = text[i];
    const uint8_t cls = combiningClass(cp);
    if (starter != std::u32string::npos) {
      const bool adjacent = out == starter + 1;
      // The text is canonically ordered, so the last character since the
      // starter has the highest class of them.
      const bool unblocked = adjacent || (lastClass != 0 && lastClass < cls);
      if (unblocked) {
        if (char32_t composite = compose(text[starter], cp)) {
          text[starter] = composite;
          continue;
        }
      }
    }
    if (cls == 0)
      starter = out;
    lastClass = cls;
    text[out++] = cp;
  }
  text.resize(out);
}

} // namespace

bool isNfcQuick(std::string_view utf8) {
  const char *p = utf8.data();
  const char *end = p + utf8.size();
  uint8_t lastClass = 0;
  while (p < end) {
    if (static_cast<unsigned char>(*p) < 0x80) {
      ++p;
      lastClass = 0;
      continue;
    }
    const char32_t cp = decodeValidUtf8(&p);
    // Below U+0300 every code point is a starter with NFC_Quick_Check=Yes.
    if (cp < 0x300) {
      lastClass = 0;
      continue;
    }
    const uint8_t cls = combiningClass(cp);
    if (cls != 0 && lastClass > cls)
      return false;
    if (nfcQuickCheck(cp) != NfcQuickCheck::Yes)
      return false;
    lastClass = cls;
  }
  return true;
}

namespace {

/// A starter with NFC_Quick_Check=Yes: nothing before it can reorder or
/// compose with anything from it on, so normalization can restart there.
bool isBoundary(char32_t cp) {
  return cp < 0x300 || (combiningClass(cp) == 0 && nfcQuickCheck(cp) == NfcQuickCheck::Yes);
}

std::string normalizeSegment(std::string_view utf8) {
  std::u32string decomposed;
  decomposed.reserve(utf8.size());
  const char *p = utf8.data();
  const char *end = p + utf8.size();
  while (p < end)
    decompose(decodeValidUtf8(&p), decomposed);
  canonicalOrder(decomposed);
  canonicalCompose(decomposed);
  std::string out;
  out.reserve(utf8.size());
  for (char32_t cp : decomposed)
    appendUtf8(out, cp);
  return out;
}

} // namespace

std::string toNfc(std::string_view utf8) {
  // Text is copied as is up to a character that fails the quick check; the
  // segment from the boundary before it to the next boundary after it is
  // normalized; and so on. Most text is copied.
  std::string out;
  out.reserve(utf8.size());
  const char *const begin = utf8.data();
  const char *const end = begin + utf8.size();
  const char *copied = begin;   // everything before is in `out`
  const char *boundary = begin; // start of the last boundary character
  uint8_t lastClass = 0;
  const char *p = begin;
  while (p < end) {
    const char *start = p;
    if (static_cast<unsigned char>(*p) < 0x80) {
      ++p;
      boundary = start;
      lastClass = 0;
      continue;
    }
    const char32_t cp = decodeValidUtf8(&p);
    const uint8_t cls = combiningClass(cp);
    const bool ok = cp < 0x300 || ((cls == 0 || lastClass <= cls) &&
                                   nfcQuickCheck(cp) == NfcQuickCheck::Yes);
    if (ok) {
      if (cls == 0)
        boundary = start;
      lastClass = cls;
      continue;
    }
    const char *segmentEnd = p;
    while (segmentEnd < end) {
      const char *next = segmentEnd;
      if (isBoundary(decodeValidUtf8(&next)))
        break;
      segmentEnd = next;
    }
    out.append(copied, boundary);
    out += normalizeSegment(std::string_view(boundary, size_t(segmentEnd - boundary)));
    copied = boundary = p = segmentEnd;
    lastClass = 0;
  }
  out.append(copied, end);
  return out;
}

} // namespace q3::text
