// Successful parses: defaults, accepted spellings, derived sizes, warnings, files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ConfigTestUtil.h"
#include "frontend/ModelConfig.h"

namespace q3::frontend::test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Only the required fields: everything else takes HF's defaults.
json minimalConfig() {
  return {{"hidden_size", 256},    {"intermediate_size", 512}, {"num_hidden_layers", 3},
          {"num_attention_heads", 8}, {"vocab_size", 1000},    {"max_position_embeddings", 128}};
}

TEST(ModelConfig, MinimalConfigTakesHuggingFaceDefaults) {
  std::vector<std::string> warnings;
  ModelConfig config = parseJson(minimalConfig(), &warnings);
  EXPECT_EQ(config.source, "config.json");
  EXPECT_EQ(config.hiddenSize, 256);
  EXPECT_EQ(config.intermediateSize, 512);
  EXPECT_EQ(config.numHiddenLayers, 3);
  EXPECT_EQ(config.numAttentionHeads, 8);
  EXPECT_EQ(config.numKeyValueHeads, 8);   // = num_attention_heads
  EXPECT_EQ(config.headDim, 32);           // = hidden_size / num_attention_heads
  EXPECT_EQ(config.vocabSize, 1000);
  EXPECT_EQ(config.maxPositionEmbeddings, 128);
  EXPECT_EQ(config.ropeTheta, 10000.0);
  EXPECT_EQ(config.rmsNormEps, 1e-6);
  EXPECT_FALSE(config.tieWordEmbeddings);  // PretrainedConfig's default
  EXPECT_EQ(config.dtype, WeightDType::BF16);
  EXPECT_FALSE(config.bosTokenId.has_value());
  EXPECT_THAT(config.eosTokenIds, IsEmpty());
  EXPECT_THAT(warnings, IsEmpty());
}

TEST(ModelConfig, ExplicitNullMeansDefault) {
  json config = minimalConfig();
  for (const char *field : {"num_key_value_heads", "head_dim", "rope_theta", "rms_norm_eps",
                            "tie_word_embeddings", "torch_dtype", "bos_token_id", "eos_token_id",
                            "rope_scaling", "sliding_window", "hidden_act", "model_type"})
    config[field] = nullptr;
  ModelConfig parsed = parseJson(config);
  EXPECT_EQ(parsed.numKeyValueHeads, 8);
  EXPECT_EQ(parsed.headDim, 32);
  EXPECT_EQ(parsed.ropeTheta, 10000.0);
}

TEST(ModelConfig, DerivedSizesUseHeadDimNotHiddenSize) {
  ModelConfig tiny = parseJson(tinyConfigJson());
  EXPECT_EQ(tiny.hiddenSize, 64);
  EXPECT_EQ(tiny.headDim, 32);
  EXPECT_EQ(tiny.kvGroupSize(), 2);
  EXPECT_EQ(tiny.qDim(), 128);
  EXPECT_EQ(tiny.kvDim(), 64);
}

TEST(ModelConfig, AcceptsEveryWeightDType) {
  EXPECT_EQ(parseJson(withField("torch_dtype", "bfloat16")).dtype, WeightDType::BF16);
  EXPECT_EQ(parseJson(withField("torch_dtype", "float16")).dtype, WeightDType::F16);
  EXPECT_EQ(parseJson(withField("torch_dtype", "float32")).dtype, WeightDType::F32);
  EXPECT_EQ(parseJson(withoutField("torch_dtype")).dtype, WeightDType::BF16);
}

TEST(ModelConfig, AcceptsNewerTransformersDTypeKey) {
  json config = withoutField("torch_dtype");
  config["dtype"] = "float16";
  EXPECT_EQ(parseJson(config).dtype, WeightDType::F16);
}

TEST(ModelConfig, DTypeNames) {
  EXPECT_STREQ(dtypeName(WeightDType::BF16), "bfloat16");
  EXPECT_STREQ(dtypeName(WeightDType::F16), "float16");
  EXPECT_STREQ(dtypeName(WeightDType::F32), "float32");
}

TEST(ModelConfig, RealFieldsAcceptIntegersAndFloats) {
  json config = withField("rope_theta", 500000.5);
  config["rms_norm_eps"] = 1;
  ModelConfig parsed = parseJson(config);
  EXPECT_EQ(parsed.ropeTheta, 500000.5);
  EXPECT_EQ(parsed.rmsNormEps, 1.0);
}

TEST(ModelConfig, EosMayBeAnIntegerOrAList) {
  EXPECT_THAT(parseJson(withField("eos_token_id", 7)).eosTokenIds, ElementsAre(7));
  EXPECT_THAT(parseJson(withField("eos_token_id", {2, 3, 5})).eosTokenIds, ElementsAre(2, 3, 5));
  EXPECT_THAT(parseJson(withField("eos_token_id", json::array())).eosTokenIds, IsEmpty());
}

TEST(ModelConfig, UnknownFieldsAreIgnoredSilently) {
  json config = withField("some_future_field", {{"nested", {1, 2, 3}}});
  config["sliding_window"] = 4096; // only meaningful with use_sliding_window true
  config["max_window_layers"] = 7;
  std::vector<std::string> warnings;
  parseJson(config, &warnings);
  EXPECT_THAT(warnings, IsEmpty());
}

TEST(ModelConfig, ArchitecturesMayListOthersToo) {
  EXPECT_EQ(parseJson(withField("architectures", {"Other", "Qwen3ForCausalLM"})).hiddenSize, 64);
}

TEST(ModelConfig, TokenIdsOutsideTheVocabularyAreWarnings) {
  json config = withField("bos_token_id", 512); // vocab_size is 512
  config["eos_token_id"] = {2, -1, 151645};
  std::vector<std::string> warnings;
  ModelConfig parsed = parseJson(config, &warnings);
  EXPECT_EQ(parsed.bosTokenId, 512);
  EXPECT_THAT(parsed.eosTokenIds, ElementsAre(2, -1, 151645));
  EXPECT_THAT(warnings,
              ElementsAre("config.json: field 'bos_token_id': token id 512 is outside the vocabulary [0, 512)",
                          "config.json: field 'eos_token_id': token id -1 is outside the vocabulary [0, 512)",
                          "config.json: field 'eos_token_id': token id 151645 is outside the vocabulary [0, 512)"));
}

TEST(ModelConfig, WarningsMayBeDiscarded) {
  EXPECT_EQ(parseModelConfig(withField("bos_token_id", 9999).dump(), "x", nullptr).bosTokenId, 9999);
}

TEST(ModelConfig, LargestAllowedTensorIsAccepted) {
  // A 2^39-element embedding (half the limit) with a tiny everything else.
  json config = minimalConfig();
  config["vocab_size"] = int64_t(1) << 29;
  config["hidden_size"] = 1024;
  config["num_attention_heads"] = 1;
  config["head_dim"] = 2;
  config["intermediate_size"] = 1;
  config["num_hidden_layers"] = 1;
  config["tie_word_embeddings"] = true;
  EXPECT_EQ(parseJson(config).vocabSize, int64_t(1) << 29);
}

TEST(ModelConfig, LoadsAFileOrAFolderContainingConfigJson) {
  TempDir dir;
  std::string file = dir.write("config.json", tinyConfigJson().dump());
  ModelConfig fromFile = loadModelConfig(file, nullptr);
  ModelConfig fromFolder = loadModelConfig(dir.path(), nullptr);
  EXPECT_EQ(fromFile.source, file);
  EXPECT_EQ(fromFolder.source, file);
  EXPECT_TRUE(equivalent(fromFile, fromFolder));
}

TEST(ModelConfig, MissingFileNamesThePath) {
  TempDir dir;
  try {
    loadModelConfig(dir.path() + "/nope.json", nullptr);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError &error) {
    EXPECT_THAT(error.what(), HasSubstr(dir.path() + "/nope.json: cannot open for reading"));
  }
}

TEST(ModelConfig, ErrorsInAFileNameThatFile) {
  TempDir dir;
  std::string file = dir.write("config.json", withField("num_key_value_heads", 3).dump());
  EXPECT_THROW(
      {
        try {
          loadModelConfig(dir.path(), nullptr);
        } catch (const ConfigError &error) {
          EXPECT_EQ(std::string(error.what()),
                    file + ": field 'num_key_value_heads': num_attention_heads (4) must be "
                           "divisible by num_key_value_heads (3)");
          throw;
        }
      },
      ConfigError);
}

TEST(ModelConfig, EquivalentIgnoresOnlySource) {
  ModelConfig a = parseJson(tinyConfigJson());
  ModelConfig b = a;
  b.source = "elsewhere";
  EXPECT_TRUE(equivalent(a, b));
  b.eosTokenIds.push_back(9);
  EXPECT_FALSE(equivalent(a, b));
  b = a;
  b.bosTokenId.reset();
  EXPECT_FALSE(equivalent(a, b));
}

} // namespace
} // namespace q3::frontend::test
