#include "TestFiles.h"

#include "runtime/WeightBinder.h"

#include <gtest/gtest.h>

namespace q3::runtime {
namespace {

using testing::f32Tensor;
using testing::TempDir;

std::string bindError(const Checkpoint &checkpoint, const std::vector<ParamSpec> &params) {
  try {
    bindWeights(checkpoint, params, /*tiedEmbeddings=*/true, nullptr);
  } catch (const LoadError &error) {
    return error.what();
  }
  ADD_FAILURE() << "expected LoadError";
  return "";
}

class WeightBinder : public ::testing::Test {
protected:
  void SetUp() override {
    writeSafeTensors(dir.file("model.safetensors"),
                     {f32Tensor("model.embed_tokens.weight", {8, 4}),
                      f32Tensor("model.norm.weight", {4}),
                      f32Tensor("model.layers.0.mlp.up_proj.weight", {2048, 1024}),
                      f32Tensor("lm_head.weight", {8, 4})});
  }
  TempDir dir;
};

TEST_F(WeightBinder, BindsEveryRequestedTensor) {
  Checkpoint checkpoint = Checkpoint::open(dir.path());
  std::vector<std::string> warnings;
  BoundWeights bound = bindWeights(checkpoint,
                                   {{"model.embed_tokens.weight", {8, 4}},
                                    {"model.norm.weight", {4}},
                                    {"model.layers.0.mlp.up_proj.weight", {2048, 1024}}},
                                   /*tiedEmbeddings=*/true, &warnings);
  EXPECT_EQ(bound.byName.size(), 3u);
  EXPECT_EQ(bound.byName.at("model.norm.weight"), checkpoint.find("model.norm.weight"));
  EXPECT_TRUE(warnings.empty()) << warnings.front(); // tied lm_head is accepted silently
}

TEST_F(WeightBinder, UntiedModelWarnsAboutUnusedHead) {
  Checkpoint checkpoint = Checkpoint::open(dir.path());
  std::vector<std::string> warnings;
  bindWeights(checkpoint, {{"model.norm.weight", {4}}}, /*tiedEmbeddings=*/false, &warnings);
  ASSERT_EQ(warnings.size(), 3u);
  EXPECT_EQ(warnings[0],
            dir.file("model.safetensors") + ": tensor 'lm_head.weight' is not used by the model");
}

TEST_F(WeightBinder, MissingTensorSuggestsSimilarNames) {
  Checkpoint checkpoint = Checkpoint::open(dir.path());
  std::string message = bindError(checkpoint, {{"model.norm.weights", {4}}});
  EXPECT_EQ(message,
            dir.path() + ": tensor 'model.norm.weights' is missing (similar: 'model.norm.weight')");
  EXPECT_EQ(bindError(checkpoint, {{"something.else.entirely.xyz", {4}}}),
            dir.path() + ": tensor 'something.else.entirely.xyz' is missing");
}

TEST_F(WeightBinder, WrongShapeNamesExpectedAndFound) {
  Checkpoint checkpoint = Checkpoint::open(dir.path());
  std::string message =
      bindError(checkpoint, {{"model.layers.0.mlp.up_proj.weight", {1024, 2048}}});
  EXPECT_EQ(message,
            dir.file("model.safetensors") +
                ": tensor 'model.layers.0.mlp.up_proj.weight': expected shape [1024, 2048], found "
                "[2048, 1024]");
  EXPECT_NE(bindError(checkpoint, {{"model.norm.weight", {4, 1}}})
                .find("expected shape [4, 1], found [4]"),
            std::string::npos);
}

TEST(WeightBinderWarnings, ListsAtMostFiveUnusedTensors) {
  TempDir dir;
  std::vector<TensorToWrite> tensors = {f32Tensor("used", {1})};
  for (int i = 0; i < 8; ++i)
    tensors.push_back(f32Tensor("extra." + std::to_string(i), {1}));
  writeSafeTensors(dir.file("model.safetensors"), tensors);
  Checkpoint checkpoint = Checkpoint::open(dir.path());
  std::vector<std::string> warnings;
  bindWeights(checkpoint, {{"used", {1}}}, /*tiedEmbeddings=*/true, &warnings);
  ASSERT_EQ(warnings.size(), 6u);
  EXPECT_NE(warnings[0].find("tensor 'extra.0' is not used by the model"), std::string::npos);
  EXPECT_EQ(warnings[5], "... and 3 more unused tensors");
}

} // namespace
} // namespace q3::runtime
