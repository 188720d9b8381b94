// A smaller tokenizer cut from a real one, for models with a small
// vocabulary (the bundled tiny demo model has 512 token ids): the 256 byte
// tokens, the first merges of the real tokenizer in rank order (and the
// tokens they make), then all of its added tokens (<|im_start|>, <think>, ...)
// at the end of the id range. Text encodes with the same rules, into fewer,
// shorter tokens; the chat template works unchanged.
#pragma once

#include "runtime/text/TextAssets.h"

#include <cstdint>
#include <string>

namespace q3::text {

/// The files of `source` for a model with `vocabSize` token ids: unchanged
/// when the tokenizer fits; otherwise tokenizer.json cut down as described
/// above, and tokenizer_config.json's added_tokens_decoder and
/// generation_config.json's token ids renumbered to match. Throws
/// runtime::LoadError when `vocabSize` cannot hold the byte and added tokens.
TextAssets fitTokenizerToVocabulary(const TextAssets &source, int64_t vocabSize);

/// Writes the assets' files into `folder` (each under its usual name).
void writeTextAssets(const TextAssets &assets, const std::string &folder);

} // namespace q3::text
