#include "tests/text/TextTestData.h"

#include "runtime/LoadError.h"
#include "runtime/text/GenerationConfig.h"

#include <gtest/gtest.h>

namespace q3::text {
namespace {

using testing::qwen3Tokenizer;
using testing::readFile;
using testing::sourcePath;

TEST(GenerationConfig, Qwen3DefaultsAndStopIds) {
  const TextAssets assets = readTextAssetsFromFolder(sourcePath("models/qwen3-tokenizer"));
  ASSERT_TRUE(assets.generationConfig);
  const GenerationConfig config =
      parseGenerationConfig(assets.generationConfig->bytes, assets.generationConfig->name);
  const SamplingParams params = defaultSampling(config);
  EXPECT_FALSE(params.greedy);
  EXPECT_FLOAT_EQ(params.temperature, 0.6f);
  EXPECT_EQ(params.topK, 20);
  EXPECT_FLOAT_EQ(params.topP, 0.95f);
  EXPECT_EQ(stopTokenIds(config, assets, qwen3Tokenizer(), {7}), (std::set<int32_t>{151643, 151645}));
  // Without generation_config.json, config.json's ids count (transformers).
  TextAssets bare = assets;
  bare.generationConfig.reset();
  EXPECT_EQ(stopTokenIds(GenerationConfig{}, bare, qwen3Tokenizer(), {7}),
            (std::set<int32_t>{7, 151643, 151645}));
}

TEST(GenerationConfig, WithoutDoSampleIsGreedy) {
  EXPECT_TRUE(defaultSampling(parseGenerationConfig("{\"temperature\": 0.7}", "g.json")).greedy);
}

TEST(GenerationConfig, BadFieldsAreOneLineErrors) {
  try {
    parseGenerationConfig("{\"top_p\": \"high\"}", "g.json");
    FAIL();
  } catch (const runtime::LoadError &error) {
    EXPECT_STREQ(error.what(), "g.json: top_p: expected a number in [0, 1], found \"high\"");
  }
  EXPECT_THROW(parseGenerationConfig("{\"eos_token_id\": [1, \"x\"]}", "g.json"), runtime::LoadError);
  EXPECT_THROW(parseGenerationConfig("{", "g.json"), runtime::LoadError);
}

} // namespace
} // namespace q3::text
