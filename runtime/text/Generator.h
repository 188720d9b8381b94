// Text generation on a LanguageModel: prefill the prompt (in chunks, with
// progress), then sample and decode one token at a time, streaming text as
// it becomes complete UTF-8, until an end-of-text token, a stop string, the
// token limit, a full context or an interrupt. Tokens generated but not yet
// run through the model are kept and go first on the next call, so a chat
// continues on the same KV cache without running its history again.
#pragma once

#include "runtime/text/LanguageModel.h"
#include "runtime/text/Sampler.h"
#include "runtime/text/Tokenizer.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace q3::text {

/// Generated text is either thinking (between <think> and </think>) or the answer.
enum class TextKind { Thinking, Answer };

enum class StopReason { EndOfText, StopString, TokenLimit, ContextFull, Interrupted };
const char *stopReasonName(StopReason reason);

struct GenerationOptions {
  int64_t maxNewTokens = 256;
  std::set<int32_t> stopTokens;         // end-of-text ids; never printed nor run
  std::vector<std::string> stopStrings; // matched in the answer text
  /// Route text between <think> and </think> to TextKind::Thinking (the
  /// tokens themselves are not printed). Off: everything is the answer.
  bool splitThinking = true;
  int64_t prefillChunk = 512; // tokens per forward() while prefilling
  const std::atomic<bool> *interrupt = nullptr;
  std::function<void(int64_t done, int64_t total)> prefillProgress;
};

struct GenerationStats {
  int64_t promptTokens = 0;    // run in the prefill (pending tokens included)
  int64_t generatedTokens = 0; // sampled, end-of-text excluded
  double prefillSeconds = 0;
  double firstTokenSeconds = 0; // from the call to the first sampled token
  int64_t decodeSteps = 0;      // single-token forward() calls
  double decodeSeconds = 0;
  StopReason reason = StopReason::EndOfText;
};

class Generator {
public:
  using TextSink = std::function<void(TextKind, std::string_view)>;

  Generator(LanguageModel &model, const Tokenizer &tokenizer, Sampler &sampler);

  /// Runs `prompt` after the pending tokens and generates. Throws
  /// runtime::RequestError when they do not fit in the context.
  GenerationStats generate(const std::vector<int32_t> &prompt, const GenerationOptions &options,
                           const TextSink &sink);

  /// Positions left for new tokens.
  int64_t roomLeft() const;
  /// Generated tokens not yet in the cache (they go first next time).
  const std::vector<int32_t> &pending() const { return pending_; }
  /// Empties the cache, the pending tokens and the sampler's history.
  void reset();

private:
  LanguageModel &model_;
  const Tokenizer &tokenizer_;
  Sampler &sampler_;
  std::vector<int32_t> pending_;
  int32_t thinkOpen_ = -1, thinkClose_ = -1;
};

} // namespace q3::text
