// Generation on a scripted fake model: it "predicts" the next token of a
// script regardless of its input, and records what it was fed. Checks stop
// conditions, what reaches the KV cache, thinking routing, stop strings and
// chunked prefill.
#include "tests/text/MiniTokenizer.h"

#include "runtime/Model.h"
#include "runtime/text/Generator.h"
#include "runtime/text/StopStrings.h"

#include <gtest/gtest.h>

namespace q3::text {
namespace {

using testing::addedToken;
using testing::miniTokenizerJson;
using Ids = std::vector<int32_t>;

constexpr int32_t kThink = 256, kEndThink = 257, kImEnd = 258;

const Tokenizer &tokenizer() {
  static std::unique_ptr<Tokenizer> t = [] {
    nlohmann::ordered_json added = nlohmann::ordered_json::array();
    added.push_back(addedToken(kThink, "<think>", false));
    added.push_back(addedToken(kEndThink, "</think>", false));
    added.push_back(addedToken(kImEnd, "<|im_end|>", true));
    return Tokenizer::fromJson(miniTokenizerJson({}, added).dump(), "mini.json");
  }();
  return *t;
}

class ScriptedModel : public LanguageModel {
public:
  ScriptedModel(Ids script, int64_t context) : script_(std::move(script)), context_(context) {}
  int64_t vocabSize() const override { return 260; }
  int64_t contextLength() const override { return context_; }
  int64_t position() const override { return int64_t(fed.size()); }
  const float *forwardLast(const std::vector<int32_t> &tokens) override {
    EXPECT_LE(position() + int64_t(tokens.size()), context_);
    fed.insert(fed.end(), tokens.begin(), tokens.end());
    calls.push_back(tokens.size());
    logits_.assign(260, 0.0f);
    logits_[size_t(script_[std::min(next_++, script_.size() - 1)])] = 10.0f;
    return logits_.data();
  }
  void reset() override { fed.clear(); }

  Ids fed;
  std::vector<size_t> calls;

private:
  Ids script_;
  int64_t context_;
  size_t next_ = 0;
  std::vector<float> logits_;
};

struct Output {
  std::string thinking, answer;
};

Generator::TextSink collect(Output &out) {
  return [&out](TextKind kind, std::string_view text) {
    (kind == TextKind::Thinking ? out.thinking : out.answer) += text;
  };
}

Ids bytes(const std::string &text) { return Ids(text.begin(), text.end()); }

TEST(Generator, StopsAtEndOfTextWithoutRunningIt) {
  ScriptedModel model(Ids{'H', 'i', kImEnd, 'x'}, 64);
  Sampler sampler(SamplingParams{});
  Generator generator(model, tokenizer(), sampler);
  GenerationOptions options;
  options.stopTokens = {kImEnd};
  Output out;
  GenerationStats stats = generator.generate(bytes("ab"), options, collect(out));
  EXPECT_EQ(out.answer, "Hi");
  EXPECT_EQ(stats.reason, StopReason::EndOfText);
  EXPECT_EQ(stats.generatedTokens, 2);
  EXPECT_EQ(stats.promptTokens, 2);
  EXPECT_EQ(model.fed, (Ids{'a', 'b', 'H', 'i'}));
  EXPECT_TRUE(generator.pending().empty());
}

TEST(Generator, TheLastTokenOfACutResponseGoesFirstNextTime) {
  ScriptedModel model(Ids{'1', '2', '3', '4', '5', '6'}, 64);
  Sampler sampler(SamplingParams{});
  Generator generator(model, tokenizer(), sampler);
  GenerationOptions options;
  options.maxNewTokens = 2;
  Output out;
  GenerationStats stats = generator.generate(bytes("p"), options, collect(out));
  EXPECT_EQ(stats.reason, StopReason::TokenLimit);
  EXPECT_EQ(out.answer, "12");
  EXPECT_EQ(model.fed, (Ids{'p', '1'}));
  EXPECT_EQ(generator.pending(), (Ids{'2'}));
  generator.generate(bytes("q"), options, collect(out));
  EXPECT_EQ(model.fed, (Ids{'p', '1', '2', 'q', '3'}));
}

TEST(Generator, RoutesThinkingAndHidesTheTags) {
  ScriptedModel model(Ids{kThink, 'h', 'm', kEndThink, '\n', 'O', 'K', kImEnd}, 64);
  Sampler sampler(SamplingParams{});
  Generator generator(model, tokenizer(), sampler);
  GenerationOptions options;
  options.stopTokens = {kImEnd};
  Output out;
  generator.generate(bytes("q"), options, collect(out));
  EXPECT_EQ(out.thinking, "hm");
  EXPECT_EQ(out.answer, "\nOK");
  // Without the split, the tags are text.
  ScriptedModel again(Ids{kThink, 'h', kEndThink, 'O', kImEnd}, 64);
  Generator plain(again, tokenizer(), sampler);
  options.splitThinking = false;
  Output raw;
  plain.generate(bytes("q"), options, collect(raw));
  EXPECT_EQ(raw.answer, "<think>h</think>O");
}

TEST(Generator, StopStringsAreNeverPrinted) {
  ScriptedModel model(bytes("one END two"), 64);
  Sampler sampler(SamplingParams{});
  Generator generator(model, tokenizer(), sampler);
  GenerationOptions options;
  options.stopStrings = {"END", "xyz"};
  Output out;
  GenerationStats stats = generator.generate(bytes("p"), options, collect(out));
  EXPECT_EQ(stats.reason, StopReason::StopString);
  EXPECT_EQ(out.answer, "one ");
}

TEST(Generator, MultiByteCharactersAreNeverSplit) {
  ScriptedModel model(Ids{0xE4, 0xBD, 0xA0, '!', kImEnd}, 64);
  Sampler sampler(SamplingParams{});
  Generator generator(model, tokenizer(), sampler);
  GenerationOptions options;
  options.stopTokens = {kImEnd};
  std::vector<std::string> pieces;
  generator.generate(bytes("p"), options,
                     [&](TextKind, std::string_view text) { pieces.emplace_back(text); });
  EXPECT_EQ(pieces, (std::vector<std::string>{"\xE4\xBD\xA0", "!"}));
}

TEST(Generator, ContextFullAndTooLongPrompts) {
  ScriptedModel model(bytes("abcdefgh"), 5);
  Sampler sampler(SamplingParams{});
  Generator generator(model, tokenizer(), sampler);
  GenerationOptions options;
  Output out;
  GenerationStats stats = generator.generate(bytes("pq"), options, collect(out));
  EXPECT_EQ(stats.reason, StopReason::ContextFull);
  EXPECT_EQ(model.position(), 5);
  EXPECT_EQ(out.answer, "abcd");
  EXPECT_EQ(generator.roomLeft(), -1); // the last token is still pending
  EXPECT_THROW(generator.generate(bytes("r"), options, collect(out)), runtime::RequestError);
  generator.reset();
  EXPECT_EQ(generator.roomLeft(), 5);
  EXPECT_THROW(generator.generate(bytes("123456"), options, collect(out)), runtime::RequestError);
}

TEST(Generator, PrefillsInChunksAndStopsWhenInterrupted) {
  ScriptedModel model(bytes("xyz"), 64);
  Sampler sampler(SamplingParams{});
  Generator generator(model, tokenizer(), sampler);
  GenerationOptions options;
  options.prefillChunk = 4;
  options.maxNewTokens = 2;
  std::vector<int64_t> progress;
  options.prefillProgress = [&](int64_t done, int64_t) { progress.push_back(done); };
  Output out;
  generator.generate(bytes("0123456789"), options, collect(out));
  EXPECT_EQ(progress, (std::vector<int64_t>{4, 8, 10}));
  EXPECT_EQ(model.calls, (std::vector<size_t>{4, 4, 2, 1}));
  std::atomic<bool> stop{true};
  options.interrupt = &stop;
  generator.reset();
  GenerationStats stats = generator.generate(bytes("0123456789"), options, collect(out));
  EXPECT_EQ(stats.reason, StopReason::Interrupted);
}

TEST(StopStrings, HoldsBackPossibleStarts) {
  StopStringFilter filter({"</answer>"});
  EXPECT_EQ(filter.push("text </ans").text, "text ");
  EXPECT_EQ(filter.push("wer> more").text, ""); // "</answer>" matched
  EXPECT_TRUE(filter.stopped());
  StopStringFilter other({"ab"});
  EXPECT_EQ(other.push("xa").text, "x");
  EXPECT_EQ(other.push("c").text, "ac");
  EXPECT_EQ(other.push("a").text, "");
  EXPECT_EQ(other.flush(), "a");
}

} // namespace
} // namespace q3::text
