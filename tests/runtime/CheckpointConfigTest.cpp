// q3run refuses weights whose config.json differs from the artifact's config
// in anything that changes the computation, naming the field and both values.
#include "TestFiles.h"

#include "runtime/CheckpointConfig.h"

#include <gtest/gtest.h>

namespace q3::runtime {
namespace {

using Json = nlohmann::json;
using testing::TempDir;

// The manifest's config as q3c compile writes it.
const Json kCompiled = {{"hidden_size", 64},          {"intermediate_size", 192},
                        {"num_hidden_layers", 2},     {"num_attention_heads", 4},
                        {"num_key_value_heads", 2},   {"head_dim", 16},
                        {"vocab_size", 256},          {"max_position_embeddings", 512},
                        {"rope_theta", 1000000.0},    {"rms_norm_eps", 1e-6},
                        {"tie_word_embeddings", true}, {"torch_dtype", "bfloat16"}};

Json huggingFaceConfig() {
  Json config = kCompiled;
  config["model_type"] = "qwen3";
  config["hidden_act"] = "silu";
  config["rope_scaling"] = nullptr;
  config["rope_theta"] = 1000000; // an integer in the file, a double in the manifest
  return config;
}

std::string errorFor(const Json &config) {
  TempDir dir;
  testing::writeText(dir.file("config.json"), config.dump());
  try {
    checkCheckpointConfig(dir.path(), kCompiled, "m.q3");
  } catch (const LoadError &error) {
    std::string message = error.what();
    EXPECT_EQ(message.rfind(dir.file("config.json") + ": ", 0), 0u) << message;
    return message.substr(dir.file("config.json").size() + 2);
  }
  return "";
}

TEST(CheckpointConfig, TheSameModelPasses) {
  EXPECT_EQ(errorFor(huggingFaceConfig()), "");
  // Defaults: head_dim = hidden / heads, num_key_value_heads = heads.
  Json config = huggingFaceConfig();
  config.erase("head_dim");
  config["hidden_size"] = 64;
  config["num_attention_heads"] = 4;
  EXPECT_EQ(errorFor(config), "");
}

TEST(CheckpointConfig, EveryFieldThatChangesTheComputationIsCompared) {
  const std::vector<std::pair<std::string, Json>> changes = {
      {"hidden_size", 128},         {"intermediate_size", 96},   {"num_hidden_layers", 3},
      {"num_attention_heads", 8},   {"num_key_value_heads", 1},  {"head_dim", 32},
      {"vocab_size", 100},          {"rope_theta", 10000.0},     {"rms_norm_eps", 1e-5},
      {"tie_word_embeddings", false}};
  for (const auto &[field, value] : changes) {
    Json config = huggingFaceConfig();
    config[field] = value;
    EXPECT_EQ(errorFor(config), field + " is " + value.dump() + ", but m.q3 was compiled for " +
                                    kCompiled.at(field).dump() +
                                    ": recompile it from this checkpoint (q3c compile)");
  }
}

TEST(CheckpointConfig, DefaultsStandInForAbsentFields) {
  Json config = huggingFaceConfig();
  config.erase("rms_norm_eps"); // default 1e-6, as compiled
  EXPECT_EQ(errorFor(config), "");
  config.erase("rope_theta"); // default 10000, not the compiled 1e6
  EXPECT_EQ(errorFor(config),
            "rope_theta is 10000.0, but m.q3 was compiled for 1000000.0: recompile it from this "
            "checkpoint (q3c compile)");
  config = huggingFaceConfig();
  config.erase("hidden_size");
  EXPECT_EQ(errorFor(config), "hidden_size is missing, but m.q3 was compiled for 64: recompile "
                              "it from this checkpoint (q3c compile)");
}

TEST(CheckpointConfig, FeaturesTheKernelsLackAreRefused) {
  Json config = huggingFaceConfig();
  config["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_EQ(errorFor(config).substr(0, 40), "rope_scaling is {\"factor\":4.0,\"rope_type");
  config = huggingFaceConfig();
  config["hidden_act"] = "gelu";
  EXPECT_EQ(errorFor(config), "hidden_act is \"gelu\", but m.q3 was compiled for \"silu\": "
                              "recompile it from this checkpoint");
  config = huggingFaceConfig();
  config["use_sliding_window"] = true;
  EXPECT_NE(errorFor(config).find("use_sliding_window is true"), std::string::npos);
}

TEST(CheckpointConfig, AMissingOrInvalidConfigNamesTheFile) {
  TempDir dir;
  auto check = [&] { checkCheckpointConfig(dir.path(), kCompiled, "m.q3"); };
  EXPECT_EQ(testing::expectOneLineLoadError(dir.file("config.json"), check),
            dir.file("config.json") + ": cannot open the checkpoint's config: No such file or "
                                      "directory (q3run compares it with the artifact's)");
  testing::writeText(dir.file("config.json"), "{\"hidden_size\": ");
  EXPECT_NE(testing::expectOneLineLoadError(dir.file("config.json"), check).find("invalid JSON"),
            std::string::npos);
  testing::writeText(dir.file("config.json"), "[1, 2]");
  EXPECT_EQ(testing::expectOneLineLoadError(dir.file("config.json"), check),
            dir.file("config.json") + ": expected a JSON object, found array");
  // Next to a .safetensors file or an index, not inside it.
  EXPECT_EQ(checkpointConfigPath(dir.file("model.safetensors")), dir.file("config.json"));
  EXPECT_EQ(checkpointConfigPath(dir.path()), dir.file("config.json"));
}

} // namespace
} // namespace q3::runtime
