//===- TextInput.h - reading text and tokenizers for q3run's text commands -===//
#pragma once

#include "tools/q3run/ArgParser.h"

#include "runtime/text/TextAssets.h"
#include "runtime/text/Tokenizer.h"

#include <memory>
#include <string>

namespace q3::q3run {

/// Exactly one of the options `textName` (the text itself) or `fileName` (a
/// file, "-" for stdin) must be given in `parser`; returns the text, checked
/// to be UTF-8 (UsageError naming the option and the byte offset otherwise).
std::string readTextArgument(const ArgParser &parser, const std::string &text,
                             const std::string &file, const std::string &textName,
                             const std::string &fileName);

/// All of stdin.
std::string readStdin();

/// Throws UsageError "<what>: invalid UTF-8 at byte N (0xXX)" unless `text`
/// is valid UTF-8.
void checkUtf8(const std::string &text, const std::string &what);

/// The tokenizer of `path`: a tokenizer.json, a model folder, or an artifact.
std::unique_ptr<text::Tokenizer> loadTokenizer(const std::string &path);

/// `text` as a JSON string literal (escapes, UTF-8 kept).
std::string jsonString(const std::string &text);

} // namespace q3::q3run
