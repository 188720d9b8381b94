//===- TextSession.h - what generate and chat share ------------------------===//
//
// The options of text generation, and everything they set up: the text
// assets (from --tokenizer or the artifact), the tokenizer, the chat
// template check, sampling defaults and overrides, stop ids, the model, and
// how generated text is printed (thinking hidden or dimmed, the stats line).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tools/q3run/ArgParser.h"
#include "tools/q3run/Commands.h"

#include "runtime/Model.h"
#include "runtime/text/ChatTemplate.h"
#include "runtime/text/GenerationConfig.h"
#include "runtime/text/Generator.h"
#include "runtime/text/TextAssets.h"
#include "runtime/text/Tokenizer.h"

#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

namespace q3::q3run {

struct TextOptions {
  CommonOptions common;
  std::string tokenizer; // --tokenizer; empty: the artifact's
  std::string system;
  std::string toolsFile;
  bool noThink = false;
  bool showThink = false;
  int64_t maxTokens = 512;
  std::vector<std::string> stops;
  // Sampling overrides; NaN / -1: not given.
  bool greedy = false;
  double temperature = NAN, topP = NAN, minP = NAN, repeatPenalty = NAN, presencePenalty = NAN;
  int64_t topK = -1;
  int64_t seed = -1;
};

/// Adds MODEL.q3, --weights, --threads, --ctx and the text options.
void addTextOptions(ArgParser &parser, TextOptions &options, bool chat);

/// The loaded text side and model.
struct TextSession {
  text::TextAssets assets;
  std::unique_ptr<text::Tokenizer> tokenizer;
  text::GenerationConfig generationConfig;
  text::SamplingParams sampling;
  std::set<int32_t> stopIds;
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  std::unique_ptr<runtime::Model> model;
  std::unique_ptr<text::RuntimeLanguageModel> languageModel;
  std::unique_ptr<text::Sampler> sampler;
  std::unique_ptr<text::Generator> generator;
};

/// Reads the text assets, the tokenizer, the tools file and the sampling
/// settings (no model yet: a prompt can be checked before the slow load).
TextSession openTextSide(const TextOptions &options);

/// Warns on stderr when the assets' chat template is missing or not Qwen3's
/// (q3run renders Qwen3's natively).
void warnAboutChatTemplate(const TextSession &session);

/// The prompt text of a conversation's first turn: the system prompt (if
/// any), the user's `message`, the tools, thinking on or off, rendered by
/// the Qwen3 chat template up to the assistant's turn.
std::string renderFirstTurn(const TextOptions &options, const TextSession &session,
                            const std::string &message);

/// A JSON file ('-': stdin); UsageError naming `option` and the file.
nlohmann::ordered_json readJsonArgument(const std::string &path, const std::string &option);

/// Loads the model (with a progress bar on a terminal), checks that the
/// tokenizer belongs to it, and sets up the sampler and generator.
void loadModelSide(const TextOptions &options, TextSession &session);

/// Generation options from the flags.
text::GenerationOptions generationOptions(const TextOptions &options, const TextSession &session,
                                          const std::atomic<bool> *interrupt, bool splitThinking);

/// "the prompt needs N positions, more than the context of C (--ctx)"
void checkPromptFits(int64_t promptTokens, int64_t context);

/// Prints generated text to stdout as it comes: the answer as is (with
/// `trimAnswerStart`, its leading newlines dropped: what follows </think>);
/// thinking only with --show-think (dimmed on a terminal), else a
/// "thinking..." note on a terminal's stderr.
class TextPrinter {
public:
  TextPrinter(bool showThinking, bool trimAnswerStart);
  void operator()(text::TextKind kind, std::string_view text);
  /// Ends the output with a newline (if anything was printed).
  void finish();

private:
  void write(std::string_view text);
  bool showThinking_;
  bool stdoutTerminal_, stderrTerminal_;
  bool dimmed_ = false, noteShown_ = false;
  bool answerStarted_;
  char last_ = '\n';
  bool printedAny_ = false;
};

/// The stats line for stderr: prompt tokens, time to first token, prefill
/// and decode speed, why it stopped.
std::string statsLine(const text::GenerationStats &stats, const TextSession &session);

/// Ctrl-C sets `interruptFlag()`; a second one ends the process at once.
/// With `interruptReads`, a Ctrl-C also makes a blocked read fail (chat).
void installInterruptHandler(bool interruptReads);
std::atomic<bool> &interruptFlag();

} // namespace q3::q3run
