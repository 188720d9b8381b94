// The Unicode properties the tokenizer needs, from compact tables generated
// from the Unicode Character Database (Debian's unicode-data, Unicode 15.0)
// by scripts/gen_unicode_tables.py into UnicodeTables.inc.
#pragma once

#include <cstdint>
#include <string_view>

namespace q3::text {

/// How the Qwen2 pre-tokenizer's regex sees a code point: \p{L}, \p{N},
/// \s (Oniguruma's \s is the White_Space property), or anything else.
enum class CharClass : uint8_t { Other = 0, Letter = 1, Number = 2, Space = 3 };

CharClass charClass(char32_t cp);

/// Canonical_Combining_Class (0 for starters and unassigned code points).
uint8_t combiningClass(char32_t cp);

enum class NfcQuickCheck : uint8_t { Yes = 0, Maybe = 1, No = 2 };
NfcQuickCheck nfcQuickCheck(char32_t cp);

/// The full canonical decomposition of `cp` (recursively applied), or an empty
/// view when it has none. Hangul syllables are not listed (they decompose
/// algorithmically, see Nfc.cpp).
std::u32string_view canonicalDecomposition(char32_t cp);

/// The primary composite of the canonical pair (first, second), or 0 when
/// there is none (composition exclusions included). Hangul is not listed.
char32_t primaryComposite(char32_t first, char32_t second);

/// The ASCII letter `cp` folds to under simple case folding when that letter is
/// one of "strevmld" (the letters of the pre-tokenizer's contractions), else 0.
/// 'S' -> 's', U+017F LATIN SMALL LETTER LONG S -> 's', 'a' -> 0.
char contractionLetterFold(char32_t cp);

} // namespace q3::text
