// toHuggingFaceJson: what transformers needs, and a lossless round trip.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ConfigTestUtil.h"
#include "frontend/ConfigJson.h"
#include "frontend/Presets.h"

namespace q3::frontend::test {
namespace {

ModelConfig roundTrip(const ModelConfig &config) {
  std::vector<std::string> warnings;
  ModelConfig back = parseModelConfig(toHuggingFaceJson(config), "exported", &warnings);
  EXPECT_THAT(warnings, ::testing::IsEmpty());
  return back;
}

TEST(ConfigJson, EveryPresetRoundTrips) {
  for (const std::string &name : presetNames()) {
    ModelConfig preset = resolveModelConfig(name, nullptr);
    EXPECT_TRUE(equivalent(roundTrip(preset), preset)) << name;
  }
}

TEST(ConfigJson, ExportMatchesThePublishedFileFieldForField) {
  // Same keys and values as Qwen/Qwen3-8B's config.json (which we ship as a preset).
  json published = json::parse(*presetJson("qwen3-8b"));
  json exported = json::parse(toHuggingFaceJson(resolveModelConfig("qwen3-8b", nullptr)));
  EXPECT_EQ(exported, published) << exported.dump(2);
}

TEST(ConfigJson, HasTheKeysTransformersNeeds) {
  json exported = json::parse(toHuggingFaceJson(resolveModelConfig("tiny", nullptr)));
  EXPECT_EQ(exported["architectures"], json::array({"Qwen3ForCausalLM"}));
  EXPECT_EQ(exported["model_type"], "qwen3");
  EXPECT_EQ(exported["hidden_act"], "silu");
  EXPECT_EQ(exported["attention_bias"], false);
  EXPECT_EQ(exported["head_dim"], 32);
  EXPECT_TRUE(exported["rope_scaling"].is_null());
  EXPECT_EQ(exported["use_sliding_window"], false);
}

TEST(ConfigJson, NonDefaultValuesRoundTrip) {
  ModelConfig config = resolveModelConfig("tiny", nullptr);
  config.dtype = WeightDType::F32;
  config.tieWordEmbeddings = false;
  config.ropeTheta = 12345.678;
  config.rmsNormEps = 1.234e-5;
  config.bosTokenId.reset();
  config.eosTokenIds = {2, 3};
  ModelConfig back = roundTrip(config);
  EXPECT_TRUE(equivalent(back, config));
  EXPECT_EQ(back.ropeTheta, 12345.678);
  EXPECT_EQ(back.dtype, WeightDType::F32);

  config.eosTokenIds.clear();
  EXPECT_TRUE(equivalent(roundTrip(config), config));
  config.dtype = WeightDType::F16;
  EXPECT_TRUE(equivalent(roundTrip(config), config));
}

} // namespace
} // namespace q3::frontend::test
