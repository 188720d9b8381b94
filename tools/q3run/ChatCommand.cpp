//===- ChatCommand.cpp - q3run chat MODEL.q3 -------------------------------===//
//
// An interactive conversation on one KV cache. The first message goes
// through Qwen3's chat template (with the system prompt and tools); each
// later one is appended as the template renders a user turn, after closing
// the previous answer with <|im_end|>, so the history is never run again.
// (The template would drop earlier answers' thinking; the cache keeps it:
// that is the price of not running the history again.)
//
// Lines starting with '/' are commands: /reset, /exit. Ctrl-C stops an
// answer; at the prompt, Ctrl-C or Ctrl-D ends the chat.
//
//===----------------------------------------------------------------------===//
#include "tools/q3run/TextCommands.h"

#include "tools/q3run/TextInput.h"
#include "tools/q3run/TextSession.h"

#include "runtime/text/Terminal.h"

#include <fmt/format.h>

#include <cstdio>
#include <iostream>

namespace q3::q3run {
namespace {

std::string laterTurn(const TextOptions &options, const std::string &message) {
  return "<|im_end|>\n<|im_start|>user\n" + message + "<|im_end|>\n<|im_start|>assistant\n" +
         (options.noThink ? "<think>\n\n</think>\n\n" : "");
}

} // namespace

int chatCommand(const std::vector<std::string> &args) {
  TextOptions options;
  ArgParser parser(
      "q3run chat", "q3run chat MODEL.q3 --weights MODEL_DIR [--system TEXT] [options]",
      "An interactive chat: type a message and press Enter; the answer streams back. The\n"
      "KV cache is kept across turns, so earlier turns are never run again. Commands:\n"
      "/reset starts a new conversation, /exit (or Ctrl-D) ends. Ctrl-C stops an answer.\n"
      "When the context is full, the chat says so; /reset (or a larger --ctx) makes room.");
  addTextOptions(parser, options, /*chat=*/true);
  if (!parser.parse(args))
    return 0;
  TextSession session = openTextSide(options);
  warnAboutChatTemplate(session);
  loadModelSide(options, session);
  installInterruptHandler(/*interruptReads=*/true);
  const bool interactive = text::isTerminal(stdin);
  if (interactive)
    std::fprintf(stderr, "q3run chat: context %lld positions. /reset starts over, /exit ends, "
                         "Ctrl-C stops an answer.\n",
                 (long long)session.model->contextLength());
  bool first = true;
  std::string line;
  while (true) {
    if (interactive) {
      std::fputs("> ", stdout);
      std::fflush(stdout);
    }
    interruptFlag() = false;
    if (!std::getline(std::cin, line)) {
      if (interactive)
        std::fputs("\n", stdout);
      break;
    }
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line == "/exit" || line == "/quit")
      break;
    if (line == "/reset") {
      session.generator->reset();
      first = true;
      std::fputs("(new conversation)\n", stderr);
      continue;
    }
    if (line.empty())
      continue;
    if (line[0] == '/') {
      std::fprintf(stderr, "q3run: unknown command %s (/reset, /exit)\n", line.c_str());
      continue;
    }
    checkUtf8(line, "stdin");
    const std::string text = first ? renderFirstTurn(options, session, line) : laterTurn(options, line);
    const std::vector<int32_t> tokens = session.tokenizer->encode(text);
    const int64_t room = session.generator->roomLeft();
    if (int64_t(tokens.size()) > room) {
      std::fprintf(stderr,
                   "q3run: the context is full: this message needs %zu positions and %lld of %lld "
                   "are left; /reset starts a new conversation\n",
                   tokens.size(), (long long)std::max<int64_t>(room, 0),
                   (long long)session.model->contextLength());
      continue;
    }
    TextPrinter printer(options.showThink, /*trimAnswerStart=*/true);
    const text::GenerationStats stats = session.generator->generate(
        tokens, generationOptions(options, session, &interruptFlag(), /*splitThinking=*/true),
        [&printer](text::TextKind kind, std::string_view piece) { printer(kind, piece); });
    printer.finish();
    first = false;
    if (stats.reason == text::StopReason::Interrupted && stats.generatedTokens == 0) {
      // Stopped inside the prompt: the cache holds half a turn.
      session.generator->reset();
      first = true;
      std::fputs("(interrupted before the answer; the conversation starts over)\n", stderr);
    }
    if (stats.reason == text::StopReason::ContextFull)
      std::fprintf(stderr, "q3run: the context is full (%lld positions); /reset starts a new "
                           "conversation\n",
                   (long long)session.model->contextLength());
    std::fprintf(stderr, "q3run: %s\n", statsLine(stats, session).c_str());
  }
  return 0;
}

} // namespace q3::q3run
