//===- GenerateCommand.cpp - q3run MODEL.q3 --prompt TEXT ------------------===//
//
// One prompt in, streamed text out. The prompt goes through Qwen3's chat
// template (thinking on unless --no-think) or, with --raw, is continued as
// plain text. A stats line goes to stderr at the end; Ctrl-C stops the
// generation and still prints it (exit code 130).
//
//===----------------------------------------------------------------------===//
#include "tools/q3run/TextCommands.h"

#include "tools/q3run/TextInput.h"
#include "tools/q3run/TextSession.h"

#include "runtime/text/Terminal.h"

#include <cstdio>

namespace q3::q3run {

bool wantsGeneration(const std::vector<std::string> &args) {
  for (const std::string &arg : args) {
    if (arg == "--")
      return false;
    if (arg == "--prompt" || arg.rfind("--prompt=", 0) == 0)
      return true;
  }
  return false;
}

int generateCommand(const std::vector<std::string> &args) {
  TextOptions options;
  std::string prompt;
  bool raw = false;
  ArgParser parser(
      "q3run generate",
      "q3run MODEL.q3 --weights MODEL_DIR --prompt TEXT [options]\n"
      "       q3run generate MODEL.q3 --weights MODEL_DIR --prompt TEXT [options]   (the same)",
      "Answers one prompt, streaming the text to stdout, then prints a stats line to stderr.\n"
      "The prompt goes through Qwen3's chat template as a user message (thinking on unless\n"
      "--no-think; the thinking is hidden unless --show-think). With --raw the prompt is plain\n"
      "text to continue. The tokenizer, chat template and sampling defaults come from the\n"
      "artifact (q3c compile embeds them) or --tokenizer. Ctrl-C stops and prints the stats.");
  addTextOptions(parser, options, /*chat=*/false);
  parser.addString({"--prompt"}, &prompt, "TEXT", "the prompt; '-' reads it from stdin",
                   /*required=*/true);
  parser.addFlag({"--raw"}, &raw, "no chat template: the prompt is text to continue as is");
  if (!parser.parse(args))
    return 0;
  if (prompt == "-") {
    prompt = readStdin();
    checkUtf8(prompt, "--prompt - (stdin)");
  } else {
    checkUtf8(prompt, "--prompt");
  }
  if (raw && (!options.system.empty() || !options.toolsFile.empty() || options.noThink))
    throw UsageError("--system, --tools and --no-think need the chat template (leave out --raw)");

  TextSession session = openTextSide(options);
  std::string text = prompt;
  if (!raw) {
    warnAboutChatTemplate(session);
    text = renderFirstTurn(options, session, prompt);
  }
  const std::vector<int32_t> tokens = session.tokenizer->encode(text);
  if (tokens.empty())
    throw UsageError("--prompt: the prompt is empty");
  if (options.common.context > 0)
    checkPromptFits(int64_t(tokens.size()), options.common.context);
  loadModelSide(options, session);
  checkPromptFits(int64_t(tokens.size()), session.model->contextLength());

  installInterruptHandler(/*interruptReads=*/false);
  text::GenerationOptions generation =
      generationOptions(options, session, &interruptFlag(), /*splitThinking=*/!raw);
  text::ProgressBar prefillBar("prefill");
  generation.prefillProgress = [&prefillBar](int64_t done, int64_t total) {
    prefillBar.update(done, total);
    if (done == total)
      prefillBar.finish();
  };
  TextPrinter printer(options.showThink, /*trimAnswerStart=*/!raw);
  const text::GenerationStats stats = session.generator->generate(
      tokens, generation, [&printer](text::TextKind kind, std::string_view piece) {
        printer(kind, piece);
      });
  printer.finish();
  if (stats.reason == text::StopReason::ContextFull)
    std::fprintf(stderr, "q3run: the context is full (%lld positions; a larger --ctx holds more)\n",
                 (long long)session.model->contextLength());
  std::fprintf(stderr, "q3run: %s\n", statsLine(stats, session).c_str());
  return stats.reason == text::StopReason::Interrupted ? 130 : 0;
}

} // namespace q3::q3run
