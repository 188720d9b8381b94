//===- ManifestTest.cpp - the manifest is the target IR, serialized -------===//
//
// For every golden model: the manifest written from the CPU target stage
// survives JSON and back unchanged, passes the runtime's validation, and each
// damaged field is refused with its path named.
//
//===----------------------------------------------------------------------===//
#include "tests/unit/GoldenCase.h"

#include "backends/common/ManifestWriter.h"
#include "backends/cpu/CpuPipeline.h"
#include "backends/cpu/KernelSource.h"
#include "passes/Pipeline.h"
#include "runtime/Manifest.h"

#include <gtest/gtest.h>

#include <functional>
#include <set>

namespace q3::testing {
namespace {

nlohmann::json compiledManifestJson(const std::string &golden, const std::string &kvCache) {
  nlohmann::json json;
  GoldenRunner runner(loadGoldenCase(golden), [&](mlir::ModuleOp module) {
    passes::PipelineOptions options;
    options.stage = passes::Stage::Target;
    options.kvCache = kvCache;
    cpu::CpuPipelineOptions cpuOptions;
    cpuOptions.cpu = "x86-64-v3";
    options.target = cpu::cpuTargetPipeline(cpuOptions);
    ASSERT_TRUE(mlir::succeeded(passes::runPipeline(module, options)));
    json = manifest::toJson(backends::manifestOf(module));
  });
  return json;
}

TEST(Manifest, StreamingKernelsCarryTheirPrefetchDistance) {
  // head_dim 32: attention takes the vector template, which prefetches.
  const nlohmann::json written = compiledManifestJson("sharded_gqa2_bf16", "f32");
  int streaming = 0;
  for (const nlohmann::json &kernel : written["kernels"]) {
    const std::string name = kernel["name"];
    const bool streams = name.rfind("fused_linear", 0) == 0 || name.rfind("attention", 0) == 0;
    EXPECT_EQ(kernel.contains("prefetch_bytes"), streams) << name;
    EXPECT_EQ(kernel.contains("decode_streams"), streams) << name;
    if (streams) {
      EXPECT_EQ(kernel["prefetch_bytes"], cpu::kDefaultPrefetchBytes) << name;
      EXPECT_EQ(kernel["decode_streams"], cpu::kDefaultDecodeStreams) << name;
      ++streaming;
    }
    // x86-64-v3 (AVX2, 16 ymm registers, two per accumulator): four weight
    // rows read side by side fit one accumulator each in half of them;
    // attention's two heads per workgroup both value columns of head_dim 32.
    EXPECT_EQ(kernel.contains("decode_accumulators"), streams) << name;
    if (streams) {
      EXPECT_EQ(kernel["decode_accumulators"], name.rfind("attention", 0) == 0 ? 2 : 1) << name;
    }
  }
  EXPECT_GE(streaming, 3);
}

// prefetch_bytes = none is "none" in the JSON and reads back as none.
TEST(Manifest, ANoPrefetchKernelRoundTrips) {
  nlohmann::json written = compiledManifestJson("sharded_gqa2_bf16", "f32");
  for (nlohmann::json &kernel : written["kernels"])
    if (kernel.contains("prefetch_bytes"))
      kernel["prefetch_bytes"] = "none";
  const manifest::Manifest read = manifest::manifestFromJson(written);
  int none = 0;
  for (const manifest::Kernel &kernel : read.kernels)
    none += kernel.prefetchBytes == manifest::kNoPrefetch;
  EXPECT_GE(none, 3);
  EXPECT_EQ(manifest::toJson(read), written);
}

TEST(Manifest, SplitDecodeAttentionCarriesItsWorkspace) {
  // x86-64-v3 is portable: decode attention is split for 16 threads, here
  // 2 head groups x 8 splits, and the manifest carries the IR's workspace.
  const nlohmann::json written = compiledManifestJson("sharded_gqa2_bf16", "f32");
  int attention = 0;
  for (const nlohmann::json &kernel : written["kernels"]) {
    const std::string name = kernel["name"];
    if (name.rfind("attention", 0) != 0) {
      EXPECT_FALSE(kernel.contains("workspace_bytes")) << name;
      continue;
    }
    ++attention;
    EXPECT_EQ(kernel["tile"], nlohmann::json({2, 8, 1, 8}));
    EXPECT_EQ(kernel["grid"]["count"], 16);
    EXPECT_EQ(kernel["workspace_bytes"], 2 * 64 + 2 * 8 * 2 * (16 + 32) * 4);
  }
  EXPECT_EQ(attention, 1);
}

TEST(Manifest, ProductsSayWhereTheirWeightIsPacked) {
  // x86-64-v3 packs per call: each product's weights are row-major operands
  // (q/k/v and gate/up as their parts), and the manifest says so.
  const nlohmann::json written = compiledManifestJson("gqa4_tied_bf16", "f32");
  int products = 0;
  for (const nlohmann::json &kernel : written["kernels"]) {
    const std::string name = kernel["name"];
    if (name.rfind("fused_linear", 0) != 0)
      continue;
    ++products;
    EXPECT_EQ(kernel.value("weight_packing", ""), "per_call") << name;
    for (const nlohmann::json &operand : kernel["operands"])
      if (operand["kind"] == "weight" && operand["shape"].size() == 2) {
        EXPECT_EQ(operand["layout"], "row_major") << name;
      }
  }
  EXPECT_GE(products, 4);
}

class ManifestRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(ManifestRoundTrip, JsonAndBackIsTheSameManifest) {
  for (const char *cache : {"f32", "bf16"}) {
    const nlohmann::json written = compiledManifestJson(GetParam(), cache);
    ASSERT_FALSE(written.is_null());
    manifest::Manifest read = manifest::manifestFromJson(written);
    EXPECT_NO_THROW(manifest::validateManifest(read));
    EXPECT_EQ(manifest::toJson(read), written) << cache;
    EXPECT_EQ(written["kv_cache"]["element"], cache);
  }
}

INSTANTIATE_TEST_SUITE_P(Golden, ManifestRoundTrip, ::testing::ValuesIn(goldenCaseNames()),
                         [](const auto &info) { return info.param; });

/// The error the runtime gives for `written` after `damage`, or "" if none.
std::string errorAfter(nlohmann::json written,
                       const std::function<void(nlohmann::json &)> &damage) {
  damage(written);
  try {
    manifest::validateManifest(manifest::manifestFromJson(written));
  } catch (const manifest::ManifestError &error) {
    return error.what();
  }
  return "";
}

TEST(Manifest, EachDamagedFieldIsNamed) {
  const nlohmann::json good = compiledManifestJson("gqa4_tied_bf16", "f32");
  struct Case {
    const char *expected;
    std::function<void(nlohmann::json &)> damage;
  };
  const std::vector<Case> cases = {
      {"format_version: manifest version 9", [](nlohmann::json &m) { m["format_version"] = 9; }},
      {"config.hidden_size", [](nlohmann::json &m) { m["config"].erase("hidden_size"); }},
      {"config.num_attention_heads",
       [](nlohmann::json &m) { m["config"]["num_attention_heads"] = 3; }},
      {"kernels[0].grid.kind", [](nlohmann::json &m) { m["kernels"][0]["grid"]["kind"] = "x"; }},
      {"kernels[1].tile", [](nlohmann::json &m) { m["kernels"][1]["tile"] = "wide"; }},
      {"kernels[1].matmul", [](nlohmann::json &m) { m["kernels"][1]["matmul"] = "avx10"; }},
      {"kernels[1].weight_packing: expected \"at_load\" or \"per_call\", found \"sometimes\"",
       [](nlohmann::json &m) { m["kernels"][1]["weight_packing"] = "sometimes"; }},
      {"kernels[1].prefetch_bytes",
       [](nlohmann::json &m) { m["kernels"][1]["prefetch_bytes"] = 8; }},
      {"kernels[1].prefetch_bytes: expected \"none\" or an integer from 64 to 1048576, found "
       "\"sometimes\"",
       [](nlohmann::json &m) { m["kernels"][1]["prefetch_bytes"] = "sometimes"; }},
      {"kernels[1].decode_streams",
       [](nlohmann::json &m) { m["kernels"][1]["decode_streams"] = 9; }},
      {"kernels[1].decode_accumulators",
       [](nlohmann::json &m) { m["kernels"][1]["decode_accumulators"] = 17; }},
      {"kernels[1].workspace_bytes",
       [](nlohmann::json &m) { m["kernels"][1]["workspace_bytes"] = -64; }},
      {"weights[0].shape",
       [](nlohmann::json &m) {
         m["weights"][0]["shape"] = {-1, 64};
       }},
      {"weights[0].id", [](nlohmann::json &m) { m["weights"][0]["id"] = 3; }},
      {"schedule[1].kernel", [](nlohmann::json &m) { m["schedule"][1]["kernel"] = "nope"; }},
      {"schedule[0].operands[0]: reads buffer 0 before any dispatch wrote it",
       [](nlohmann::json &m) { std::swap(m["schedule"][0], m["schedule"][1]); }},
      {"output.row_bytes", [](nlohmann::json &m) { m["output"]["row_bytes"] = 8; }},
      {"kv_cache.element", [](nlohmann::json &m) { m["kv_cache"]["element"] = "f8"; }},
      {"buffers.row_bytes", [](nlohmann::json &m) { m["buffers"]["row_bytes"] = "many"; }},
  };
  for (const Case &c : cases) {
    const std::string error = errorAfter(good, c.damage);
    EXPECT_NE(error.find(c.expected), std::string::npos)
        << "expected an error naming '" << c.expected << "', got '" << error << "'";
  }
  EXPECT_EQ(errorAfter(good, [](nlohmann::json &) {}), "");
}

/// `good` with every weight its schedule reads listed as embedded, each at
/// its own 4 KiB page.
nlohmann::json withEmbeddedWeights(const nlohmann::json &good) {
  manifest::Manifest m = manifest::manifestFromJson(good);
  std::set<int64_t> read;
  for (const manifest::Step &step : m.steps)
    for (const manifest::Binding &b : step.operands)
      if (b.kind == manifest::BindingKind::Weight)
        read.insert(b.id);
  m.embedded.section = "weights";
  int64_t offset = 0;
  for (int64_t id : read) {
    int64_t bytes = int64_t(runtime::dtypeSize(m.weights[size_t(id)].dtype));
    for (int64_t extent : m.weights[size_t(id)].shape)
      bytes *= extent;
    m.embedded.entries.push_back({id, offset, bytes});
    offset += (bytes + 4095) / 4096 * 4096;
  }
  return manifest::toJson(m);
}

TEST(Manifest, EmbeddedWeightsRoundTripAndEachDamageIsNamed) {
  const nlohmann::json good = withEmbeddedWeights(compiledManifestJson("gqa4_tied_bf16", "f32"));
  ASSERT_TRUE(good.contains("embedded_weights"));
  manifest::Manifest read = manifest::manifestFromJson(good);
  EXPECT_NO_THROW(manifest::validateManifest(read));
  EXPECT_EQ(manifest::toJson(read), good);
  EXPECT_EQ(read.embedded.section, "weights");
  EXPECT_EQ(errorAfter(good, [](nlohmann::json &) {}), "");
  struct Case {
    const char *expected;
    std::function<void(nlohmann::json &)> damage;
  };
  const std::vector<Case> cases = {
      {"embedded_weights.entries[0].bytes: expected",
       [](nlohmann::json &m) { m["embedded_weights"]["entries"][0]["bytes"] = 6; }},
      {"embedded_weights.entries[1].offset: expected a multiple of 64",
       [](nlohmann::json &m) { m["embedded_weights"]["entries"][1]["offset"] = 4100; }},
      {"embedded_weights.entries: expected no overlap",
       [](nlohmann::json &m) {
         m["embedded_weights"]["entries"][1]["offset"] =
             m["embedded_weights"]["entries"][0]["offset"];
       }},
      {"embedded_weights.entries[1].id: expected each weight once",
       [](nlohmann::json &m) {
         m["embedded_weights"]["entries"][1]["id"] = m["embedded_weights"]["entries"][0]["id"];
       }},
      {"embedded_weights.entries[0].id: expected a weight id below",
       [](nlohmann::json &m) { m["embedded_weights"]["entries"][0]["id"] = 100000; }},
      {"which embedded_weights does not hold",
       [](nlohmann::json &m) { m["embedded_weights"]["entries"].erase(0); }},
      {"embedded_weights.section", [](nlohmann::json &m) { m["embedded_weights"]["section"] = 5; }},
  };
  for (const Case &c : cases) {
    const std::string error = errorAfter(good, c.damage);
    EXPECT_NE(error.find(c.expected), std::string::npos)
        << "expected an error naming '" << c.expected << "', got '" << error << "'";
  }
}

TEST(Manifest, KernelVariantsRoundTripAndEachDamageIsNamed) {
  nlohmann::json good = compiledManifestJson("gqa4_tied_bf16", "f32");
  ASSERT_EQ(good["kernels"][1]["matmul"], "f32");
  good["kernels"][1]["variants"] = {
      {{"name", "avx512bf16_8"}, {"matmul", "avx512bf16"}, {"tile", {8, 2}},
       {"requires", {"avx512bf16"}}},
      {{"name", "amx_6"}, {"matmul", "amx"}, {"tile", {6, 2}},
       {"requires", {"amx-tile", "amx-bf16", "avx512bf16"}}}};
  manifest::Manifest read = manifest::manifestFromJson(good);
  EXPECT_NO_THROW(manifest::validateManifest(read));
  EXPECT_EQ(manifest::toJson(read), good);
  ASSERT_EQ(read.kernels[1].variants.size(), 2u);
  EXPECT_EQ(read.kernels[1].variants[1].requiredFeatures, manifest::matmulRequiredFeatures("amx"));
  EXPECT_EQ(read.kernels[1].variantChoice, manifest::VariantChoice::Timed);
  nlohmann::json following = good;
  following["kernels"][1]["variant_choice"] = "like_products";
  EXPECT_EQ(manifest::manifestFromJson(following).kernels[1].variantChoice,
            manifest::VariantChoice::LikeProducts);
  EXPECT_EQ(manifest::toJson(manifest::manifestFromJson(following)), following);
  struct Case {
    const char *expected;
    std::function<void(nlohmann::json &)> damage;
  };
  const std::vector<Case> cases = {
      {"kernels[1].variants[0].requires: expected [avx512bf16] for matmul \"avx512bf16\"",
       [](nlohmann::json &m) { m["kernels"][1]["variants"][0]["requires"] = {"avx2"}; }},
      {"kernels[1].variants[1].name: expected a unique name",
       [](nlohmann::json &m) { m["kernels"][1]["variants"][1]["name"] = "avx512bf16_8"; }},
      {"kernels[1].variants[0].matmul",
       [](nlohmann::json &m) { m["kernels"][1]["variants"][0]["matmul"] = "avx10"; }},
      {"kernels[0].variants[0]: expected variants only on a kernel with a matmul",
       [](nlohmann::json &m) { m["kernels"][0]["variants"] = m["kernels"][1]["variants"]; }},
      {"kernels[0].variant_choice: expected variants to choose among",
       [](nlohmann::json &m) { m["kernels"][0]["variant_choice"] = "like_products"; }},
      {"kernels[1].variant_choice",
       [](nlohmann::json &m) { m["kernels"][1]["variant_choice"] = "fastest"; }},
  };
  for (const Case &c : cases) {
    const std::string error = errorAfter(good, c.damage);
    EXPECT_NE(error.find(c.expected), std::string::npos)
        << "expected an error naming '" << c.expected << "', got '" << error << "'";
  }
}

} // namespace
} // namespace q3::testing
