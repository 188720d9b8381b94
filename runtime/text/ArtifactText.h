// What q3c compile embeds so that an artifact is self-contained for text:
// the model folder's tokenizer, compiled (section "tokenizer.compiled",
// Tokenizer::compile), and its tokenizer_config.json, chat_template.jinja and
// generation_config.json, each as a data section named after its file
// (docs/artifact.md, "Text sections"). They are checked
// before they are embedded, so a broken tokenizer fails the compile, not a
// later run. Reading them back: readTextAssetsFromArtifact (TextAssets.h).
#pragma once

#include "runtime/Artifact.h"

#include <cstdint>
#include <string>
#include <vector>

namespace q3::text {

/// The folder of the model `q3c compile` was given: the path itself when it
/// is a folder, the folder of a file (config.json), or nothing (a preset).
std::string modelFolderOf(const std::string &modelArgument);

/// The text sections of `folder` (none when it has no tokenizer.json),
/// after checking that the tokenizer loads and its ids fit in `vocabSize`
/// and that generation_config.json parses. Throws runtime::LoadError.
std::vector<runtime::ArtifactSection> collectTextSections(const std::string &folder,
                                                          int64_t vocabSize);

} // namespace q3::text
