//===- BuildGraphTest.cpp - the Qwen3 graph built from a config -----------===//
#include "ir/BuildGraph.h"
#include "frontend/Presets.h"
#include "ir/Params.h"
#include "ir/Q3Ops.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <map>

namespace q3::testing {
namespace {

struct Built {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::map<std::string, int> opCounts;
};

std::unique_ptr<Built> build(const frontend::ModelConfig &config) {
  auto built = std::make_unique<Built>();
  built->module = ir::buildQwen3Graph(built->context, config);
  built->module->walk(
      [&](mlir::Operation *op) { built->opCounts[op->getName().getStringRef().str()]++; });
  return built;
}

frontend::ModelConfig preset(const std::string &name) {
  std::vector<std::string> warnings;
  return frontend::resolveModelConfig(name, &warnings);
}

TEST(BuildGraph, Qwen3_0_6BHasOneOpPerModelStep) {
  auto built = build(preset("qwen3-0.6b"));
  const int layers = 28;
  EXPECT_EQ(built->opCounts["q3.attention"], layers);
  EXPECT_EQ(built->opCounts["q3.kv_cache_update"], layers);
  EXPECT_EQ(built->opCounts["q3.rope"], 2 * layers);         // q and k, never v
  EXPECT_EQ(built->opCounts["q3.rms_norm"], 4 * layers + 1); // 2 block norms + q/k norm, final
  EXPECT_EQ(built->opCounts["q3.linear"], 7 * layers + 1);   // q k v o gate up down, lm_head
  EXPECT_EQ(built->opCounts["q3.add"], 2 * layers);
  EXPECT_EQ(built->opCounts["q3.embedding"], 1);
}

TEST(BuildGraph, TiedModelsReuseTheEmbeddingForTheHead) {
  auto tied = ir::collectParams(*build(preset("qwen3-0.6b"))->module);
  auto untied = ir::collectParams(*build(preset("qwen3-8b"))->module);
  auto hasHead = [](const std::vector<ir::ParamInfo> &params) {
    for (const auto &p : params)
      if (p.name == "lm_head.weight")
        return true;
    return false;
  };
  EXPECT_FALSE(hasHead(tied));
  EXPECT_TRUE(hasHead(untied));
  // 28 layers x 11 tensors + embed + final norm (Qwen3-0.6B's checkpoint, less lm_head).
  EXPECT_EQ(tied.size(), 28u * 11 + 2);
  EXPECT_EQ(untied.size(), 36u * 11 + 3);
}

TEST(BuildGraph, ParamsCarryHuggingFaceShapes) {
  frontend::ModelConfig config = preset("qwen3-0.6b");
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto &p : ir::collectParams(*build(config)->module))
    shapes[p.name] = p.shape;
  EXPECT_EQ(shapes["model.embed_tokens.weight"], (std::vector<int64_t>{151936, 1024}));
  EXPECT_EQ(shapes["model.layers.3.self_attn.q_proj.weight"], (std::vector<int64_t>{2048, 1024}));
  EXPECT_EQ(shapes["model.layers.3.self_attn.k_proj.weight"], (std::vector<int64_t>{1024, 1024}));
  EXPECT_EQ(shapes["model.layers.3.self_attn.o_proj.weight"], (std::vector<int64_t>{1024, 2048}));
  EXPECT_EQ(shapes["model.layers.3.self_attn.q_norm.weight"], (std::vector<int64_t>{128}));
  EXPECT_EQ(shapes["model.layers.3.mlp.down_proj.weight"], (std::vector<int64_t>{1024, 3072}));
}

TEST(BuildGraph, AttentionUsesHeadDimScaleAndGroupedHeads) {
  frontend::ModelConfig config = preset("qwen3-0.6b");
  auto built = build(config);
  int seen = 0;
  built->module->walk([&](ir::AttentionOp op) {
    EXPECT_DOUBLE_EQ(op.getScale().convertToDouble(), 1.0 / std::sqrt(128.0));
    // 16 query heads share 8 KV heads: h reads h / 2, never h % 8.
    EXPECT_EQ(op.kvHeadFor(0), 0);
    EXPECT_EQ(op.kvHeadFor(1), 0);
    EXPECT_EQ(op.kvHeadFor(9), 4);
    EXPECT_EQ(op.kvHeadFor(15), 7);
    ++seen;
  });
  EXPECT_EQ(seen, 28);
}

TEST(BuildGraph, WeightElementTypeFollowsTorchDtype) {
  frontend::ModelConfig config = preset("tiny");
  for (auto [dtype, isType] : std::vector<std::pair<frontend::WeightDType, bool (*)(mlir::Type)>>{
           {frontend::WeightDType::BF16, [](mlir::Type t) { return t.isBF16(); }},
           {frontend::WeightDType::F16, [](mlir::Type t) { return t.isF16(); }},
           {frontend::WeightDType::F32, [](mlir::Type t) { return t.isF32(); }}}) {
    config.dtype = dtype;
    auto built = build(config);
    built->module->walk([&](ir::ParamOp op) {
      EXPECT_TRUE(isType(op.getResult().getType().cast<mlir::RankedTensorType>().getElementType()))
          << op.getName().str();
    });
  }
}

} // namespace
} // namespace q3::testing
