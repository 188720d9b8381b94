// The Qwen2 pre-tokenizer: splits text into the pieces that BPE encodes one
// by one. It is the regex of Qwen's tokenizer.json,
//
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}
//   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// applied as the Hugging Face tokenizers library applies it (Oniguruma,
// leftmost alternative first, every match isolated), written out as code
// over the Unicode tables: \p{L} and \p{N} are the general categories L* and
// N*, \s is the White_Space property, and the contractions fold case as
// Unicode simple case folding does.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace q3::text {

/// Length in bytes of the regex match at the start of `text` (non-empty,
/// valid UTF-8). Every position matches, so the result is at least one
/// character.
size_t qwen2PieceLength(std::string_view text);

/// Splits `text` (valid UTF-8) into consecutive pieces whose concatenation is
/// `text`. The views point into `text`.
void splitQwen2(std::string_view text, std::vector<std::string_view> &pieces);

} // namespace q3::text
