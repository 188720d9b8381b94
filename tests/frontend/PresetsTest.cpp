// The built-in presets: the published Qwen3 configs and the tiny demo model.
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ConfigTestUtil.h"
#include "frontend/Presets.h"

namespace q3::frontend::test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

struct PublishedShape {
  const char *name;
  int64_t hidden, intermediate, layers, heads, kvHeads;
  bool tied;
};

// From the Hugging Face model cards / config.json of Qwen/Qwen3-*.
const PublishedShape kPublished[] = {
    {"qwen3-0.6b", 1024, 3072, 28, 16, 8, true},  {"qwen3-1.7b", 2048, 6144, 28, 16, 8, true},
    {"qwen3-4b", 2560, 9728, 36, 32, 8, true},    {"qwen3-8b", 4096, 12288, 36, 32, 8, false},
    {"qwen3-14b", 5120, 17408, 40, 40, 8, false}, {"qwen3-32b", 5120, 25600, 64, 64, 8, false},
};

void PrintTo(const PublishedShape &shape, std::ostream *out) { *out << shape.name; }

class PublishedPreset : public ::testing::TestWithParam<PublishedShape> {};

TEST_P(PublishedPreset, HasThePublishedNumbers) {
  const PublishedShape &expected = GetParam();
  std::vector<std::string> warnings;
  ModelConfig config = resolveModelConfig(expected.name, &warnings);
  EXPECT_EQ(config.source, std::string("preset:") + expected.name);
  EXPECT_EQ(config.hiddenSize, expected.hidden);
  EXPECT_EQ(config.intermediateSize, expected.intermediate);
  EXPECT_EQ(config.numHiddenLayers, expected.layers);
  EXPECT_EQ(config.numAttentionHeads, expected.heads);
  EXPECT_EQ(config.numKeyValueHeads, expected.kvHeads);
  EXPECT_EQ(config.tieWordEmbeddings, expected.tied);
  EXPECT_EQ(config.headDim, 128);
  EXPECT_EQ(config.vocabSize, 151936);
  EXPECT_EQ(config.maxPositionEmbeddings, 40960);
  EXPECT_EQ(config.ropeTheta, 1000000.0);
  EXPECT_EQ(config.rmsNormEps, 1e-6);
  EXPECT_EQ(config.dtype, WeightDType::BF16);
  EXPECT_EQ(config.bosTokenId, 151643);
  EXPECT_THAT(config.eosTokenIds, ElementsAre(151645));
  EXPECT_THAT(warnings, IsEmpty());
}

INSTANTIATE_TEST_SUITE_P(Presets, PublishedPreset, ::testing::ValuesIn(kPublished),
                         [](const auto &info) {
                           std::string name = info.param.name;
                           for (char &c : name)
                             if (!isalnum(static_cast<unsigned char>(c)))
                               c = '_';
                           return name;
                         });

TEST(Presets, TinyDemoModel) {
  std::vector<std::string> warnings;
  ModelConfig tiny = resolveModelConfig("tiny", &warnings);
  EXPECT_EQ(tiny.hiddenSize, 64);
  EXPECT_EQ(tiny.intermediateSize, 192);
  EXPECT_EQ(tiny.numHiddenLayers, 2);
  EXPECT_EQ(tiny.numAttentionHeads, 4);
  EXPECT_EQ(tiny.numKeyValueHeads, 2);
  EXPECT_EQ(tiny.headDim, 32);
  EXPECT_NE(tiny.qDim(), tiny.hiddenSize);
  EXPECT_EQ(tiny.vocabSize, 512);
  EXPECT_EQ(tiny.maxPositionEmbeddings, 512);
  EXPECT_TRUE(tiny.tieWordEmbeddings);
  EXPECT_EQ(tiny.bosTokenId, 1);
  EXPECT_THAT(tiny.eosTokenIds, ElementsAre(2));
  EXPECT_THAT(warnings, IsEmpty());
}

TEST(Presets, NamesAreTheModelFileStems) {
  EXPECT_THAT(presetNames(), ElementsAre("qwen3-0.6b", "qwen3-1.7b", "qwen3-14b", "qwen3-32b",
                                         "qwen3-4b", "qwen3-8b", "tiny"));
}

std::string readSourceFile(const std::string &relative) {
  std::ifstream in(std::string(Q3_SOURCE_DIR) + "/" + relative, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(Presets, EmbeddedTextIsTheModelFileVerbatim) {
  for (const std::string &name : presetNames()) {
    auto embedded = presetJson(name);
    ASSERT_TRUE(embedded.has_value()) << name;
    EXPECT_EQ(std::string(*embedded), readSourceFile("models/" + name + ".json")) << name;
  }
  EXPECT_FALSE(presetJson("no-such-model").has_value());
}

TEST(Presets, AnExistingPathWinsOverPresetLookup) {
  TempDir dir;
  std::string file = dir.write("config.json", withField("hidden_size", 128).dump());
  EXPECT_EQ(resolveModelConfig(file, nullptr).hiddenSize, 128);
  EXPECT_EQ(resolveModelConfig(dir.path(), nullptr).source, file);
}

TEST(Presets, UnknownNameListsThePresets) {
  try {
    resolveModelConfig("qwen3-999b", nullptr);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError &error) {
    EXPECT_EQ(std::string(error.what()),
              "unknown model 'qwen3-999b': not an existing file or folder, nor a preset (presets: "
              "qwen3-0.6b, qwen3-1.7b, qwen3-14b, qwen3-32b, qwen3-4b, qwen3-8b, tiny)");
  }
}

} // namespace
} // namespace q3::frontend::test
