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

nlohmann::json vulkanManifestJson(const std::string &golden) {
  std::vector<std::string> warnings;
  frontend::ModelConfig config =
      frontend::resolveModelConfig(std::string(Q3_GOLDEN_DIR) + "/" + golden, &warnings);
  mlir::MLIRContext context;
  auto module = ir::buildQwen3Graph(context, config);
  passes::PipelineOptions options;
  options.maxSeqLen = 64;
  if (mlir::failed(passes::runPipeline(*module, options)))
    throw std::runtime_error("pipeline failed");
  return manifest::toJson(vulkan::compileForVulkan(*module).manifest);
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

} // namespace
} // namespace q3::testing
