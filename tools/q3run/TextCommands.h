//===- TextCommands.h - q3run's text commands ------------------------------===//
//
// Text in, text out: generation from a prompt, interactive chat, and the
// tokenizer and chat template on their own. docs/q3run.md.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

namespace q3::q3run {

/// `q3run MODEL.q3 --weights DIR --prompt TEXT ...` (also `q3run generate ...`).
int generateCommand(const std::vector<std::string> &args);
/// `q3run chat MODEL.q3 --weights DIR ...`
int chatCommand(const std::vector<std::string> &args);
/// `q3run tokenize --tokenizer PATH --text TEXT`
int tokenizeCommand(const std::vector<std::string> &args);
/// `q3run detokenize --tokenizer PATH --ids 1,2,3`
int detokenizeCommand(const std::vector<std::string> &args);
/// `q3run template --model PATH --messages FILE`
int templateCommand(const std::vector<std::string> &args);

/// True when `args` asks for text generation (has --prompt).
bool wantsGeneration(const std::vector<std::string> &args);

} // namespace q3::q3run
