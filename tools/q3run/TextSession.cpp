#include "tools/q3run/TextSession.h"

#include "tools/q3run/TextInput.h"

#include "runtime/LoadError.h"
#include "runtime/text/Terminal.h"

#include <fmt/format.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>

namespace q3::q3run {

void addTextOptions(ArgParser &parser, TextOptions &o, bool chat) {
  addCommonOptions(parser, o.common);
  parser.addString({"--tokenizer"}, &o.tokenizer, "PATH",
                   "tokenizer.json, a model folder or an artifact to take the tokenizer, chat "
                   "template and generation defaults from (default: the ones MODEL.q3 embeds)");
  parser.addString({"--system"}, &o.system, "TEXT", "a system prompt (default: none)");
  parser.addString({"--tools"}, &o.toolsFile, "FILE",
                   "a JSON array of tool schemas for the chat template's # Tools block");
  parser.addFlag({"--no-think"}, &o.noThink,
                 "no thinking: the template opens the answer with an empty <think></think> "
                 "(enable_thinking=false)");
  parser.addFlag({"--show-think"}, &o.showThink,
                 "print the thinking too (dimmed on a terminal); default: hidden");
  parser.addInt({"-n", "--max-tokens"}, &o.maxTokens, "N",
                std::string("most new tokens per ") + (chat ? "answer" : "run") +
                    ", thinking included (default 512); generation also ends at an end-of-text "
                    "token, a --stop string or a full context",
                1, std::numeric_limits<int32_t>::max());
  parser.addStringList({"--stop"}, &o.stops, "TEXT",
                       "end the answer where TEXT appears (not printed); may be repeated");
  parser.addFlag({"--greedy"}, &o.greedy, "always take the most likely token (= --temperature 0)");
  parser.addDouble({"--temperature"}, &o.temperature, "T",
                   "sampling temperature; 0 is greedy (default: generation_config.json's, Qwen3: "
                   "0.6; without that file, greedy)",
                   0, 100);
  parser.addInt({"--top-k"}, &o.topK, "K",
                "sample among the K most likely tokens; 0: all (default: generation_config.json's, "
                "Qwen3: 20; else 50)",
                0, std::numeric_limits<int32_t>::max());
  parser.addDouble({"--top-p"}, &o.topP, "P",
                   "sample among the most likely tokens holding probability P (default: "
                   "generation_config.json's, Qwen3: 0.95; else 1)",
                   0, 1);
  parser.addDouble({"--min-p"}, &o.minP, "P",
                   "drop tokens less likely than P times the most likely one (default: "
                   "generation_config.json's, else 0: off)",
                   0, 1);
  parser.addDouble({"--repeat-penalty"}, &o.repeatPenalty, "F",
                   "divide the positive logits (multiply the negative ones) of tokens already in "
                   "the context by F (default: generation_config.json's, else 1: off)",
                   0.01, 100);
  parser.addDouble({"--presence-penalty"}, &o.presencePenalty, "F",
                   "subtract F from the logits of tokens already in the answer (default: 0, off; "
                   "Qwen suggests 0 to 2 against endless repetition)",
                   -100, 100);
  parser.addInt({"--seed"}, &o.seed, "N",
                "random seed: the same seed, artifact and flags give the same text (default: "
                "random; the stats line shows it)",
                0, std::numeric_limits<int64_t>::max());
}

namespace {

text::SamplingParams resolveSampling(const TextOptions &o,
                                     const text::GenerationConfig &config) {
  text::SamplingParams p = text::defaultSampling(config);
  if (!std::isnan(o.temperature)) {
    p.temperature = float(o.temperature);
    p.greedy = o.temperature == 0;
  }
  if (o.greedy)
    p.greedy = true;
  if (o.topK >= 0)
    p.topK = o.topK;
  if (!std::isnan(o.topP))
    p.topP = float(o.topP);
  if (!std::isnan(o.minP))
    p.minP = float(o.minP);
  if (!std::isnan(o.repeatPenalty))
    p.repetitionPenalty = float(o.repeatPenalty);
  if (!std::isnan(o.presencePenalty))
    p.presencePenalty = float(o.presencePenalty);
  p.seed = o.seed >= 0 ? uint64_t(o.seed) : (uint64_t(std::random_device()()) << 20) ^ uint64_t(std::random_device()());
  p.seed &= (uint64_t(1) << 53) - 1; // printable and re-enterable as --seed
  return p;
}

/// config.json's eos_token_id in the weights folder (none when it has none).
std::set<int32_t> checkpointEosIds(const std::string &weights) {
  const std::string path = (std::filesystem::path(weights) / "config.json").string();
  std::ifstream in(path);
  if (!in)
    return {};
  nlohmann::json config = nlohmann::json::parse(std::istreambuf_iterator<char>(in),
                                                std::istreambuf_iterator<char>(), nullptr, false);
  if (config.is_discarded() || !config.is_object() || !config.contains("eos_token_id"))
    return {};
  return text::parseEosIds(config["eos_token_id"], path + ": eos_token_id");
}

nlohmann::ordered_json readJsonFile(const std::string &path, const std::string &option) {
  std::string text;
  if (path == "-") {
    text = readStdin();
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in)
      throw UsageError(fmt::format("{} {}: cannot open: {}", option, runtime::printable(path),
                                   std::strerror(errno)));
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  checkUtf8(text, runtime::printable(path));
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception &error) {
    throw UsageError(fmt::format("{}: invalid JSON: {}", runtime::printable(path),
                                 runtime::describeJsonError(error)));
  }
}

} // namespace

nlohmann::ordered_json readJsonArgument(const std::string &path, const std::string &option) {
  return readJsonFile(path, option);
}

TextSession openTextSide(const TextOptions &o) {
  TextSession s;
  s.assets = text::readTextAssets(o.tokenizer.empty() ? o.common.artifact : o.tokenizer);
  s.tokenizer = text::tokenizerOf(s.assets);
  if (s.assets.generationConfig)
    s.generationConfig =
        text::parseGenerationConfig(s.assets.generationConfig->bytes, s.assets.generationConfig->name);
  s.sampling = resolveSampling(o, s.generationConfig);
  s.stopIds = text::stopTokenIds(s.generationConfig, s.assets, *s.tokenizer,
                                 checkpointEosIds(o.common.weights));
  if (!o.toolsFile.empty())
    s.tools = text::parseChatTools(readJsonFile(o.toolsFile, "--tools"),
                                   runtime::printable(o.toolsFile));
  return s;
}

std::string renderFirstTurn(const TextOptions &options, const TextSession &session,
                            const std::string &message) {
  text::Conversation conversation;
  if (!options.system.empty())
    conversation.messages.push_back({"system", options.system, std::nullopt, nullptr});
  conversation.messages.push_back({"user", message, std::nullopt, nullptr});
  conversation.tools = session.tools;
  text::ChatTemplateOptions templateOptions;
  templateOptions.enableThinking = !options.noThink;
  return text::renderQwen3Chat(conversation, templateOptions);
}

void warnAboutChatTemplate(const TextSession &s) {
  std::optional<std::string> source = text::chatTemplateSource(s.assets);
  if (!source)
    std::fprintf(stderr, "q3run: warning: %s has no chat template; using Qwen3's\n",
                 runtime::printable(s.assets.source).c_str());
  else if (!text::isQwen3ChatTemplate(*source))
    std::fprintf(stderr,
                 "q3run: warning: the chat template of %s is not Qwen3's; q3run renders Qwen3's\n",
                 runtime::printable(s.assets.source).c_str());
}

void loadModelSide(const TextOptions &o, TextSession &s) {
  text::ProgressBar bar("loading weights");
  s.model = loadModel(o.common,
                      [&bar](int64_t done, int64_t total) { bar.update(done, total); });
  bar.finish();
  const int64_t modelVocab = s.model->vocabSize(), tokens = s.tokenizer->vocabSize();
  // Checkpoints pad the embedding past the tokenizer (Qwen3: 151669 tokens,
  // 151936 rows); a gap of a thousand or more means another vocabulary.
  if (tokens > modelVocab || modelVocab - tokens >= 1024)
    throw runtime::LoadError(fmt::format(
        "{}: the tokenizer has {} tokens but the model's vocabulary is {}: not this model's "
        "tokenizer",
        runtime::printable(s.tokenizer->displayName()), tokens, modelVocab));
  s.languageModel = std::make_unique<text::RuntimeLanguageModel>(*s.model);
  s.sampler = std::make_unique<text::Sampler>(s.sampling);
  s.generator = std::make_unique<text::Generator>(*s.languageModel, *s.tokenizer, *s.sampler);
}

text::GenerationOptions generationOptions(const TextOptions &o, const TextSession &s,
                                          const std::atomic<bool> *interrupt, bool splitThinking) {
  text::GenerationOptions options;
  options.maxNewTokens = o.maxTokens;
  options.stopTokens = s.stopIds;
  options.stopStrings = o.stops;
  options.splitThinking = splitThinking;
  options.interrupt = interrupt;
  return options;
}

void checkPromptFits(int64_t promptTokens, int64_t context) {
  if (promptTokens > context)
    throw runtime::RequestError(fmt::format(
        "the prompt is {} tokens, more than the context of {} positions (--ctx)", promptTokens,
        context));
}

TextPrinter::TextPrinter(bool showThinking, bool trimAnswerStart)
    : showThinking_(showThinking), stdoutTerminal_(text::isTerminal(stdout)),
      stderrTerminal_(text::isTerminal(stderr)), answerStarted_(!trimAnswerStart) {}

void TextPrinter::write(std::string_view text) {
  if (text.empty())
    return;
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  last_ = text.back();
  printedAny_ = true;
}

void TextPrinter::operator()(text::TextKind kind, std::string_view text) {
  if (kind == text::TextKind::Thinking) {
    if (showThinking_) {
      if (stdoutTerminal_ && !dimmed_) {
        std::fputs("\033[2m", stdout);
        dimmed_ = true;
      }
      write(text);
    } else if (stderrTerminal_ && !noteShown_) {
      std::fputs("(thinking...)", stderr);
      std::fflush(stderr);
      noteShown_ = true;
    }
    return;
  }
  if (dimmed_) {
    std::fputs("\033[0m", stdout);
    dimmed_ = false;
  }
  if (noteShown_) {
    std::fputs("\r\033[K", stderr);
    noteShown_ = false;
  }
  if (!answerStarted_) {
    // The answer after </think> starts with blank lines; a separating one
    // stays only when the thinking was printed.
    const size_t start = text.find_first_not_of('\n');
    if (start == std::string_view::npos)
      return;
    text.remove_prefix(start);
    answerStarted_ = true;
    if (printedAny_)
      write(last_ == '\n' ? "\n" : "\n\n");
  }
  write(text);
}

void TextPrinter::finish() {
  if (dimmed_)
    std::fputs("\033[0m", stdout);
  dimmed_ = false;
  if (noteShown_)
    std::fputs("\r\033[K", stderr);
  noteShown_ = false;
  if (printedAny_ && last_ != '\n')
    write("\n");
  std::fflush(stdout);
}

std::string statsLine(const text::GenerationStats &st, const TextSession &s) {
  std::string line = fmt::format("prompt {} tokens, first token after {:.2f} s", st.promptTokens,
                                 st.firstTokenSeconds);
  if (st.prefillSeconds > 0)
    line += fmt::format(" (prefill {:.1f} tokens/s)", double(st.promptTokens) / st.prefillSeconds);
  line += fmt::format("; generated {} tokens", st.generatedTokens);
  if (st.decodeSteps > 0 && st.decodeSeconds > 0)
    line += fmt::format(", decode {:.1f} tokens/s", double(st.decodeSteps) / st.decodeSeconds);
  line += fmt::format("; stopped: {}", text::stopReasonName(st.reason));
  if (!s.sampling.greedy)
    line += fmt::format("; seed {}", s.sampling.seed);
  return line;
}

namespace {
std::atomic<bool> interrupted{false};

extern "C" void onInterrupt(int) {
  if (interrupted.exchange(true)) {
    // A second Ctrl-C: stop now, the default way.
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
  }
}
} // namespace

std::atomic<bool> &interruptFlag() { return interrupted; }

void installInterruptHandler(bool interruptReads) {
  struct sigaction action = {};
  action.sa_handler = onInterrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = interruptReads ? 0 : SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
}

} // namespace q3::q3run
