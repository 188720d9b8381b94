// Where the text files come from: a folder, an artifact's sections (what q3c
// compile embeds), and the cut-down tokenizer of a small-vocabulary model.
#include "tests/text/TextTestData.h"

#include "runtime/LoadError.h"
#include "runtime/text/ArtifactText.h"
#include "runtime/text/ChatTemplate.h"
#include "runtime/text/GenerationConfig.h"
#include "runtime/text/TextAssets.h"
#include "runtime/text/TokenizerSubset.h"

#include <gtest/gtest.h>

namespace q3::text {
namespace {

using testing::sourcePath;

const TextAssets &qwen3Assets() {
  static TextAssets assets = readTextAssetsFromFolder(sourcePath("models/qwen3-tokenizer"));
  return assets;
}

TEST(TextAssets, ArtifactSectionsRoundTrip) {
  const std::vector<runtime::ArtifactSection> sections =
      collectTextSections(sourcePath("models/qwen3-tokenizer"), 151936);
  ASSERT_EQ(sections.size(), 3u); // no chat_template.jinja in that folder
  EXPECT_EQ(sections[0].name, "tokenizer.compiled");
  EXPECT_EQ(sections[1].name, "tokenizer_config.json");
  EXPECT_EQ(sections[2].name, "generation_config.json");
  const std::vector<uint8_t> image =
      runtime::serializeArtifact("mem.q3", nlohmann::json::object(), sections);
  const TextAssets back =
      readTextAssetsFromArtifact(runtime::Artifact::parse("mem.q3", image.data(), image.size()));
  ASSERT_TRUE(back.compiledTokenizer && back.tokenizerConfig && back.generationConfig);
  EXPECT_FALSE(back.chatTemplate);
  EXPECT_FALSE(back.tokenizer); // the compiled one replaces tokenizer.json
  EXPECT_EQ(back.compiledTokenizer->name, "mem.q3: section 'tokenizer.compiled'");
  const std::unique_ptr<Tokenizer> tokenizer = tokenizerOf(back);
  const std::string text = "<|im_start|>user\nWhy is the sky blue? 日本語 👍🏽<|im_end|>\n";
  EXPECT_EQ(tokenizer->encode(text), testing::qwen3Tokenizer().encode(text));
  EXPECT_EQ(tokenizer->vocabSize(), testing::qwen3Tokenizer().vocabSize());
  EXPECT_TRUE(isQwen3ChatTemplate(*chatTemplateSource(back)));
}

TEST(TextAssets, ArtifactsOfBeforeTheCompiledTokenizerStillLoad) {
  // Until 2026-12-03 q3c embedded tokenizer.json itself.
  const std::vector<uint8_t> image =
      runtime::serializeArtifact("old.q3", nlohmann::json::object(), textSections(qwen3Assets()));
  const TextAssets back =
      readTextAssetsFromArtifact(runtime::Artifact::parse("old.q3", image.data(), image.size()));
  ASSERT_TRUE(back.tokenizer);
  EXPECT_FALSE(back.compiledTokenizer);
  const std::string text = "Hello, 世界 <think>";
  EXPECT_EQ(tokenizerOf(back)->encode(text), testing::qwen3Tokenizer().encode(text));
}

TEST(TextAssets, CompileRefusesATokenizerLargerThanTheModel) {
  try {
    collectTextSections(sourcePath("models/qwen3-tokenizer"), 512);
    FAIL();
  } catch (const runtime::LoadError &error) {
    EXPECT_NE(std::string(error.what()).find("token ids go up to 151668, past the model's "
                                             "vocab_size of 512"),
              std::string::npos)
        << error.what();
  }
  EXPECT_TRUE(collectTextSections(sourcePath("tests/golden/gqa2_untied_f32"), 512).empty());
}

TEST(TokenizerSubset, CutsQwen3DownToASmallVocabulary) {
  const TextAssets small = fitTokenizerToVocabulary(qwen3Assets(), 512);
  std::unique_ptr<Tokenizer> tokenizer = Tokenizer::fromJson(small.tokenizer->bytes, "small");
  EXPECT_EQ(tokenizer->vocabSize(), 512);
  EXPECT_EQ(tokenizer->findToken("<|endoftext|>"), 486);
  EXPECT_EQ(tokenizer->findToken("<|im_end|>"), 488);
  EXPECT_EQ(tokenizer->findToken("</think>"), 511);
  for (int32_t id = 0; id < 512; ++id)
    EXPECT_TRUE(tokenizer->isToken(id)) << id;
  // The same rules: everything round-trips, added tokens stay whole, and
  // the pieces split where Qwen3's do (a cut tokenizer only merges less).
  const std::string text = "<|im_start|>user\nWhy is the sky blue? 日本語 👍🏽<|im_end|>\n";
  const std::vector<int32_t> ids = tokenizer->encode(text);
  EXPECT_EQ(tokenizer->decode(ids), text);
  EXPECT_EQ(ids.front(), 487);
  EXPECT_GT(ids.size(), testing::qwen3Tokenizer().encode(text).size());
  // Ids in the other files follow the tokens.
  const GenerationConfig config =
      parseGenerationConfig(small.generationConfig->bytes, "generation_config.json");
  EXPECT_EQ(config.eosTokenIds, (std::set<int32_t>{486, 488}));
  const auto tokenizerConfig = nlohmann::json::parse(small.tokenizerConfig->bytes);
  EXPECT_EQ(tokenizerConfig["added_tokens_decoder"]["488"]["content"], "<|im_end|>");
  EXPECT_TRUE(isQwen3ChatTemplate(*chatTemplateSource(small)));
}

TEST(TokenizerSubset, LeavesATokenizerThatFitsAlone) {
  const TextAssets same = fitTokenizerToVocabulary(qwen3Assets(), 151936);
  EXPECT_EQ(same.tokenizer->bytes, qwen3Assets().tokenizer->bytes);
  EXPECT_THROW(fitTokenizerToVocabulary(qwen3Assets(), 200), runtime::LoadError);
}

} // namespace
} // namespace q3::text
