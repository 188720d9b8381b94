//===- TokenizeCommand.cpp - q3run tokenize / detokenize -------------------===//
//
// The tokenizer on its own: text -> "ids: ..." and ids -> text, with the
// tokenizer.json of a model folder, a file, or an artifact that embeds it.
// `tokenize --bench` measures encoding speed.
//
//===----------------------------------------------------------------------===//
#include "tools/q3run/TextCommands.h"

#include "tools/q3run/ArgParser.h"
#include "tools/q3run/TextInput.h"

#include "runtime/TokenList.h"
#include "runtime/text/TextAssets.h"
#include "runtime/text/Tokenizer.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <ctime>
#include <cstdio>

namespace q3::q3run {
namespace {

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// CPU seconds of the calling thread: on a busy machine, wall time also
/// counts the time other processes had the core.
double threadCpuSeconds() {
  timespec now;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return double(now.tv_sec) + double(now.tv_nsec) * 1e-9;
}

/// Encodes `text` once with a cold piece cache, then again and again for at
/// least `seconds`; prints both rates, by wall and by CPU time. One core: the
/// tokenizer is serial.
void bench(const std::string &path, const std::string &text, bool parseAdded, double seconds) {
  const auto loadStart = std::chrono::steady_clock::now();
  std::unique_ptr<text::Tokenizer> tokenizer = loadTokenizer(path);
  const double loadSeconds = secondsSince(loadStart);
  const double megabytes = double(text.size()) / 1e6;

  auto start = std::chrono::steady_clock::now();
  double cpuStart = threadCpuSeconds();
  const size_t tokens = tokenizer->encode(text, parseAdded).size();
  const double firstSeconds = secondsSince(start);
  const double firstCpu = threadCpuSeconds() - cpuStart;

  int passes = 0;
  start = std::chrono::steady_clock::now();
  cpuStart = threadCpuSeconds();
  double elapsed = 0;
  do {
    tokenizer->encode(text, parseAdded);
    ++passes;
    elapsed = secondsSince(start);
  } while (elapsed < seconds);
  const double cpu = threadCpuSeconds() - cpuStart;
  fmt::print("input: {:.2f} MB, {} tokens ({:.2f} bytes/token)\n", megabytes, tokens,
             double(text.size()) / double(tokens ? tokens : 1));
  fmt::print("load tokenizer: {:.3f} s\n", loadSeconds);
  fmt::print("encode, first pass (cold piece cache): {:.2f} MB/s ({:.2f} MB/s of CPU time)\n",
             megabytes / firstSeconds, megabytes / firstCpu);
  fmt::print("encode, {} more passes (warm cache): {:.2f} MB/s ({:.2f} MB/s of CPU time)\n",
             passes, megabytes * passes / elapsed, megabytes * passes / cpu);
}

std::string idsLine(const std::vector<int32_t> &ids) {
  std::string line = "ids:";
  for (int32_t id : ids)
    line += " " + std::to_string(id);
  return line;
}

} // namespace

int tokenizeCommand(const std::vector<std::string> &args) {
  std::string tokenizerPath, textArg, fileArg;
  bool specialAsText = false, showTokens = false, runBench = false, jsonLines = false;
  int64_t benchSeconds = 2;
  ArgParser parser("q3run tokenize",
                   "q3run tokenize --tokenizer PATH (--text TEXT | --file FILE) [--show-tokens] [--jsonl] "
                   "[--special-as-text] [--bench [--bench-seconds N]]",
                   "Encodes text with the model's tokenizer and prints \"ids: a b c\". PATH is a\n"
                   "tokenizer.json, a model folder that has one, or an artifact that embeds one.\n"
                   "Text such as <|im_end|> or <think> becomes its added token unless\n"
                   "--special-as-text is given.");
  parser.addString({"--tokenizer"}, &tokenizerPath, "PATH",
                   "tokenizer.json, a model folder, or an artifact", /*required=*/true);
  parser.addString({"--text"}, &textArg, "TEXT", "the text to encode (UTF-8)");
  parser.addString({"--file"}, &fileArg, "FILE", "read the text from FILE ('-': stdin)");
  parser.addFlag({"--show-tokens"}, &showTokens,
                 "print one line per token instead: id, then the token's text as a JSON string");
  parser.addFlag({"--jsonl"}, &jsonLines,
                 "the text is JSON lines, one JSON string per line: print one \"ids:\" line for each");
  parser.addFlag({"--special-as-text"}, &specialAsText,
                 "encode added-token text (<|im_end|>, <think>) as ordinary text");
  parser.addFlag({"--bench"}, &runBench,
                 "measure encoding speed on the text (one core) instead of printing ids");
  parser.addInt({"--bench-seconds"}, &benchSeconds, "N",
                "with --bench: repeat the encoding for at least N seconds (default 2)", 1, 3600);
  if (!parser.parse(args))
    return 0;
  const std::string text = readTextArgument(parser, textArg, fileArg, "--text", "--file");
  if (runBench) {
    bench(tokenizerPath, text, !specialAsText, double(benchSeconds));
    return 0;
  }
  std::unique_ptr<text::Tokenizer> tokenizer = loadTokenizer(tokenizerPath);
  if (jsonLines) {
    size_t lineNumber = 0, start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos)
        end = text.size();
      ++lineNumber;
      const std::string_view line(text.data() + start, end - start);
      start = end + 1;
      if (line.find_first_not_of(" \t\r") == std::string_view::npos)
        continue;
      nlohmann::json value = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (!value.is_string())
        throw UsageError(fmt::format("--jsonl: line {}: expected a JSON string", lineNumber));
      std::puts(idsLine(tokenizer->encode(value.get<std::string>(), !specialAsText)).c_str());
    }
    return 0;
  }
  const std::vector<int32_t> ids = tokenizer->encode(text, !specialAsText);
  if (showTokens) {
    for (int32_t id : ids)
      fmt::print("{}\t{}\n", id, jsonString(std::string(tokenizer->tokenBytes(id))));
    return 0;
  }
  std::puts(idsLine(ids).c_str());
  return 0;
}

int detokenizeCommand(const std::vector<std::string> &args) {
  std::string tokenizerPath, idsArg;
  bool skipSpecial = false;
  ArgParser parser("q3run detokenize",
                   "q3run detokenize --tokenizer PATH --ids 1,2,3 [--skip-special]",
                   "Prints the text of token ids and nothing else (no newline is added). Bytes\n"
                   "that do not form UTF-8 become U+FFFD.");
  parser.addString({"--tokenizer"}, &tokenizerPath, "PATH",
                   "tokenizer.json, a model folder, or an artifact", /*required=*/true);
  parser.addString({"--ids"}, &idsArg, "IDS", "token ids, as in 9707,11,220", /*required=*/true);
  parser.addFlag({"--skip-special"}, &skipSpecial,
                 "leave out special tokens (<|im_start|>, <|im_end|>, ...)");
  if (!parser.parse(args))
    return 0;
  std::vector<int32_t> ids;
  try {
    ids = runtime::parseTokenIds(idsArg);
  } catch (const std::invalid_argument &error) {
    // parseTokenIds names --tokens; this command's option is --ids.
    std::string message = error.what();
    if (message.rfind("--tokens", 0) == 0)
      message.replace(0, 8, "--ids");
    throw UsageError(message);
  }
  std::unique_ptr<text::Tokenizer> tokenizer = loadTokenizer(tokenizerPath);
  for (int32_t id : ids)
    if (!tokenizer->isToken(id))
      throw UsageError(fmt::format("--ids: {} is not a token of {} (ids 0 to {})", id,
                                   tokenizer->displayName(), tokenizer->vocabSize() - 1));
  const std::string text = tokenizer->decode(ids, skipSpecial);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

} // namespace q3::q3run
