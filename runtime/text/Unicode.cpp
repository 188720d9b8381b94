// Lookups in the generated two-stage tables: the high bits of a code point
// pick a block, the block's entry holds the value. Blocks that are identical
// (most of the code space) are stored once.
#include "runtime/text/Unicode.h"

#include <algorithm>
#include <cstdint>

namespace q3::text {
namespace {
#include "runtime/text/UnicodeTables.inc"

constexpr char32_t kMaxCodePoint = 0x10FFFF;
} // namespace

CharClass charClass(char32_t cp) {
  if (cp > kMaxCodePoint)
    return CharClass::Other;
  const uint32_t block = kCharClassStage1[cp >> kCharClassBlockShift];
  const uint32_t inBlock = cp & ((1u << kCharClassBlockShift) - 1);
  const uint8_t packed = kCharClassStage2[block * 64 + inBlock / 4];
  return CharClass((packed >> (2 * (inBlock % 4))) & 3);
}

static uint16_t normEntry(char32_t cp) {
  if (cp > kMaxCodePoint)
    return 0;
  const uint32_t block = kNormStage1[cp >> kNormBlockShift];
  return kNormStage2[(block << kNormBlockShift) | (cp & ((1u << kNormBlockShift) - 1))];
}

uint8_t combiningClass(char32_t cp) { return uint8_t(normEntry(cp) & 0xFF); }

NfcQuickCheck nfcQuickCheck(char32_t cp) { return NfcQuickCheck((normEntry(cp) >> 8) & 3); }

std::u32string_view canonicalDecomposition(char32_t cp) {
  const uint32_t *keys = kDecompositionKeys;
  const uint32_t *end = keys + std::size(kDecompositionKeys);
  const uint32_t *found = std::lower_bound(keys, end, uint32_t(cp));
  if (found == end || *found != cp)
    return {};
  const size_t index = size_t(found - keys);
  const uint16_t begin = kDecompositionOffsets[index];
  const uint16_t stop = kDecompositionOffsets[index + 1];
  return std::u32string_view(kDecompositionData + begin,
                             size_t(stop - begin));
}

char32_t primaryComposite(char32_t first, char32_t second) {
  const uint64_t key = (uint64_t(first) << 21) | second;
  const uint64_t *keys = kCompositionKeys;
  const uint64_t *end = keys + std::size(kCompositionKeys);
  const uint64_t *found = std::lower_bound(keys, end, key);
  if (found == end || *found != key)
    return 0;
  return kCompositionValues[found - keys];
}

char contractionLetterFold(char32_t cp) {
  if (cp >= 'a' && cp <= 'z') {
    const char c = char(cp);
    return std::string_view("strevmld").find(c) != std::string_view::npos ? c : 0;
  }
  const uint32_t *sources = kCaseFoldSources;
  const uint32_t *end = sources + std::size(kCaseFoldSources);
  const uint32_t *found = std::lower_bound(sources, end, uint32_t(cp));
  if (found == end || *found != cp)
    return 0;
  return char(kCaseFoldTargets[found - sources]);
}

} // namespace q3::text
