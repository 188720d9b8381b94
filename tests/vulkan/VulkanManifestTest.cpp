//===- VulkanManifestTest.cpp - a Vulkan artifact's typed manifest --------===//
//
// The manifest q3c writes for --target vulkan is the same typed manifest as
// the CPU one (runtime/Manifest.h): for golden configs it survives JSON and
// back, passes the runtime's validation, and binds the cache kernel's layer
// in place while a read of a layer before any write is still refused.
//
//===----------------------------------------------------------------------===//
#include "backends/vulkan/CompileModel.h"
#include "frontend/Presets.h"
#include "ir/BuildGraph.h"
#include "passes/Pipeline.h"
#include "runtime/Manifest.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

namespace q3::testing {
namespace {

vulkan::CompiledVulkanModel compiledGolden(const std::string &golden,
                                           const vulkan::VulkanTargetOptions &target = {}) {
  std::vector<std::string> warnings;
  frontend::ModelConfig config =
      frontend::resolveModelConfig(std::string(Q3_GOLDEN_DIR) + "/" + golden, &warnings);
  mlir::MLIRContext context;
  auto module = ir::buildQwen3Graph(context, config);
  passes::PipelineOptions options;
  options.maxSeqLen = 64;
  if (mlir::failed(passes::runPipeline(*module, options)))
    throw std::runtime_error("pipeline failed");
  return vulkan::compileForVulkan(*module, target);
}

nlohmann::json vulkanManifestJson(const std::string &golden) {
  return manifest::toJson(compiledGolden(golden).manifest);
}

TEST(VulkanManifest, JsonAndBackIsTheSameValidManifest) {
  for (const char *golden : {"gqa4_tied_bf16", "mqa6_untied_f16", "gqa2_untied_f32"}) {
    const nlohmann::json written = vulkanManifestJson(golden);
    manifest::Manifest read = manifest::manifestFromJson(written);
    EXPECT_NO_THROW(manifest::validateManifest(read)) << golden;
    EXPECT_EQ(manifest::toJson(read), written) << golden;
    EXPECT_EQ(read.format, "q3c-vulkan");
    EXPECT_EQ(read.target.backend, "vulkan");
    EXPECT_EQ(read.prefillRows, 64);
  }
}

TEST(VulkanManifest, ACacheLayerIsReadOnlyAfterTheStepThatWritesIt) {
  nlohmann::json m = vulkanManifestJson("gqa4_tied_bf16");
  // The schedule starts: embedding, the q/k/v product, the cache kernel
  // (which binds layer 0 as operands and results), attention (reads it).
  ASSERT_EQ(m["schedule"][2]["operands"][3]["kind"], "cache_keys");
  ASSERT_EQ(m["schedule"][3]["operands"][1]["kind"], "cache_keys");
  EXPECT_NO_THROW(manifest::validateManifest(manifest::manifestFromJson(m)));
  // Layer 0's attention reading layer 1, which the second layer writes later.
  m["schedule"][3]["operands"][1]["layer"] = 1;
  try {
    manifest::validateManifest(manifest::manifestFromJson(m));
    FAIL() << "a read of cache layer 1 before its cache kernel was accepted";
  } catch (const manifest::ManifestError &error) {
    EXPECT_NE(std::string(error.what())
                  .find("schedule[3].operands[1]: reads cache layer 1 before any dispatch wrote it"),
              std::string::npos)
        << error.what();
  }
}

TEST(VulkanManifest, ASplitDecodeAttentionHasAWorkspaceAndAMergeStage) {
  // gqa4_tied_bf16: 8 query heads on 2 KV heads, head_dim 8; the default splits
  // are ceil(256 / 2) = 128 runs per KV head.
  vulkan::CompiledVulkanModel compiled = compiledGolden("gqa4_tied_bf16");
  const manifest::Kernel *attention = nullptr;
  for (const manifest::Kernel &k : compiled.manifest.kernels)
    if (k.name == "attention_0")
      attention = &k;
  ASSERT_NE(attention, nullptr);
  EXPECT_EQ(attention->workspaceBytes, 4 * 8 * 128 * (8 + 2));
  const nlohmann::json target = compiled.vulkan;
  nlohmann::json variants;
  for (const nlohmann::json &k : target["kernels"])
    if (k["name"] == "attention_0")
      variants = k["variants"];
  ASSERT_EQ(variants.size(), 3u);
  EXPECT_EQ(variants[0]["entry_point"], "attention_0_decode");
  EXPECT_EQ(variants[1]["entry_point"], "attention_0_decode_merge");
  EXPECT_EQ(variants[1]["after_previous"], true);
  EXPECT_EQ(variants[2]["after_previous"], false);
  EXPECT_EQ(nlohmann::json(target.get<runtime::vulkan::VulkanTarget>()), target);

  // A first variant cannot run after a previous one.
  nlohmann::json broken = target;
  for (nlohmann::json &k : broken["kernels"])
    if (k["name"] == "attention_0")
      k["variants"].erase(0);
  EXPECT_THROW(broken.get<runtime::vulkan::VulkanTarget>(), std::invalid_argument);

  // --decode-splits=1: no split, no workspace, no merge.
  vulkan::VulkanTargetOptions noSplit;
  noSplit.decodeSplits = 1;
  vulkan::CompiledVulkanModel unsplit = compiledGolden("gqa4_tied_bf16", noSplit);
  for (const manifest::Kernel &k : unsplit.manifest.kernels)
    EXPECT_EQ(k.workspaceBytes, 0) << k.name;
  for (const runtime::vulkan::VulkanKernel &k : unsplit.vulkan.kernels)
    for (const runtime::vulkan::KernelVariant &v : k.variants)
      EXPECT_FALSE(v.afterPrevious) << v.entryPoint;
}

} // namespace
} // namespace q3::testing
