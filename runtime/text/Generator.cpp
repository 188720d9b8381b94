#include "runtime/text/Generator.h"

#include "runtime/Model.h"
#include "runtime/text/StopStrings.h"

#include <fmt/format.h>

#include <chrono>

namespace q3::text {
namespace {

using Clock = std::chrono::steady_clock;

double secondsBetween(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

/// Turns generated tokens into text events: UTF-8 completed across tokens,
/// <think>/</think> switching the kind, special tokens left out, stop
/// strings applied to the answer.
class TextRouter {
public:
  TextRouter(const Tokenizer &tokenizer, const GenerationOptions &options, int32_t thinkOpen,
             int32_t thinkClose, const Generator::TextSink &sink)
      : tokenizer_(tokenizer), options_(options), thinkOpen_(thinkOpen), thinkClose_(thinkClose),
        sink_(sink), stream_(tokenizer), stops_(options.stopStrings) {}

  /// Returns true when a stop string ended the answer.
  bool push(int32_t token) {
    if (options_.splitThinking && (token == thinkOpen_ || token == thinkClose_)) {
      flush();
      kind_ = token == thinkOpen_ ? TextKind::Thinking : TextKind::Answer;
      return false;
    }
    if (tokenizer_.isSpecial(token))
      return false;
    return emit(stream_.push(token));
  }
  void finish() {
    if (!stops_.stopped())
      emit(stream_.finish());
    flush();
  }

private:
  bool emit(const std::string &text) {
    if (text.empty())
      return false;
    if (kind_ == TextKind::Thinking) {
      sink_(kind_, text);
      return false;
    }
    StopStringFilter::Result result = stops_.push(text);
    if (!result.text.empty())
      sink_(kind_, result.text);
    return result.stopped;
  }
  void flush() {
    std::string rest = stream_.finish();
    if (kind_ == TextKind::Answer) {
      StopStringFilter::Result result = stops_.push(rest);
      rest = result.text + stops_.flush();
    }
    if (!rest.empty())
      sink_(kind_, rest);
  }

  const Tokenizer &tokenizer_;
  const GenerationOptions &options_;
  int32_t thinkOpen_, thinkClose_;
  const Generator::TextSink &sink_;
  TokenTextStream stream_;
  StopStringFilter stops_;
  TextKind kind_ = TextKind::Answer;
};

} // namespace

const char *stopReasonName(StopReason reason) {
  switch (reason) {
  case StopReason::EndOfText:
    return "end of text";
  case StopReason::StopString:
    return "stop string";
  case StopReason::TokenLimit:
    return "token limit";
  case StopReason::ContextFull:
    return "context full";
  case StopReason::Interrupted:
    return "interrupted";
  }
  return "?";
}

Generator::Generator(LanguageModel &model, const Tokenizer &tokenizer, Sampler &sampler)
    : model_(model), tokenizer_(tokenizer), sampler_(sampler) {
  if (std::optional<int32_t> id = tokenizer.findToken("<think>"))
    thinkOpen_ = *id;
  if (std::optional<int32_t> id = tokenizer.findToken("</think>"))
    thinkClose_ = *id;
}

int64_t Generator::roomLeft() const {
  return model_.contextLength() - model_.position() - int64_t(pending_.size());
}

void Generator::reset() {
  model_.reset();
  pending_.clear();
  sampler_.reset();
}

GenerationStats Generator::generate(const std::vector<int32_t> &prompt,
                                    const GenerationOptions &options, const TextSink &sink) {
  std::vector<int32_t> tokens = pending_;
  tokens.insert(tokens.end(), prompt.begin(), prompt.end());
  if (tokens.empty())
    throw runtime::RequestError("nothing to generate from: the prompt has no tokens");
  const int64_t room = model_.contextLength() - model_.position();
  if (int64_t(tokens.size()) > room)
    throw runtime::RequestError(fmt::format(
        "the prompt needs {} positions, but the context has {} left of {}", tokens.size(), room,
        model_.contextLength()));
  pending_.clear();
  GenerationStats stats;
  stats.promptTokens = int64_t(tokens.size());
  auto interrupted = [&] { return options.interrupt && options.interrupt->load(); };

  const Clock::time_point start = Clock::now();
  sampler_.observeContext(tokens);
  sampler_.beginResponse();
  const float *logits = nullptr;
  const int64_t chunk = std::max<int64_t>(1, options.prefillChunk);
  for (size_t done = 0; done < tokens.size();) {
    const size_t end = std::min(tokens.size(), done + size_t(chunk));
    logits = model_.forwardLast(std::vector<int32_t>(tokens.begin() + long(done), tokens.begin() + long(end)));
    done = end;
    if (options.prefillProgress)
      options.prefillProgress(int64_t(done), int64_t(tokens.size()));
    if (done < tokens.size() && interrupted()) {
      stats.prefillSeconds = secondsBetween(start, Clock::now());
      stats.reason = StopReason::Interrupted;
      return stats;
    }
  }
  stats.prefillSeconds = secondsBetween(start, Clock::now());

  TextRouter router(tokenizer_, options, thinkOpen_, thinkClose_, sink);
  Clock::time_point decodeStart = Clock::now();
  const int64_t vocab = model_.vocabSize();
  while (true) {
    const int32_t token = sampler_.sample(logits, vocab);
    if (stats.generatedTokens == 0 && stats.firstTokenSeconds == 0) {
      decodeStart = Clock::now();
      stats.firstTokenSeconds = secondsBetween(start, decodeStart);
    }
    if (options.stopTokens.count(token)) {
      stats.reason = StopReason::EndOfText;
      break;
    }
    ++stats.generatedTokens;
    pending_ = {token};
    if (router.push(token)) {
      stats.reason = StopReason::StopString;
      break;
    }
    if (stats.generatedTokens >= options.maxNewTokens) {
      stats.reason = StopReason::TokenLimit;
      break;
    }
    if (model_.position() >= model_.contextLength()) {
      stats.reason = StopReason::ContextFull;
      break;
    }
    if (interrupted()) {
      stats.reason = StopReason::Interrupted;
      break;
    }
    logits = model_.forwardLast(pending_);
    pending_.clear();
    ++stats.decodeSteps;
  }
  router.finish();
  stats.decodeSeconds = secondsBetween(decodeStart, Clock::now());
  return stats;
}

} // namespace q3::text
