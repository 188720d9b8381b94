//===- VulkanKernelTest.cpp - generated Vulkan kernels vs the reference ---===//
//
// Like llama.cpp's test-backend-ops: each kernel is generated, lowered to
// SPIR-V, run by the Vulkan driver on the device (lavapipe in CI) on random
// inputs, and compared with the reference interpreter's arithmetic for the
// same op. Shapes are small and ragged (K not a multiple of the tiles,
// outputs that leave partial tiles and partial subgroups), weights are
// f32/f16/bf16, and a weight is split into parts with a lowered binding
// limit so the part dispatches run here too.
//
//===----------------------------------------------------------------------===//
#include "backends/reference/Kernels.h"
#include "backends/vulkan/KernelCompiler.h"
#include "backends/vulkan/SpirvLowering.h"
#include "runtime/Artifact.h"
#include "runtime/DType.h"
#include "runtime/vulkan/VulkanDriver.h"
#include "tests/common/KernelTestData.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>

namespace q3::testing {
namespace {

using vulkan::DType;
namespace rv = runtime::vulkan;

// Every case of this binary (kernels and models) runs with the kernels'
// uninitialized local variables poisoned (runtime/vulkan/SpirvPoison.h):
// lavapipe reads them as zero where a GPU reads garbage, which hid a bug
// until an H200 ran the kernels. Reverting that fix fails
// bf16_cache_prefill_mqa here. Q3_VULKAN_POISON_LOCALS=0 turns it off.
const bool kPoisonLocals = [] {
  setenv("Q3_VULKAN_POISON_LOCALS", "1", /*overwrite=*/0);
  return true;
}();

/// `values` stored as `storage` (the bytes a weight buffer holds), and the
/// f32 values they round to (what the reference computes with).
std::vector<uint8_t> stored(std::vector<float> &values, DType storage) {
  std::vector<uint8_t> bytes(values.size() * runtime::dtypeSize(storage));
  runtime::convertFromF32(storage, values.data(), bytes.data(), values.size());
  runtime::convertToF32(storage, bytes.data(), values.data(), values.size());
  return bytes;
}

float maxAbs(const std::vector<float> &v) {
  float m = 0;
  for (float x : v)
    m = std::max(m, std::fabs(x));
  return m;
}

/// One compiled kernel on the device.
class DeviceKernel {
public:
  DeviceKernel(vulkan::CompiledKernel compiled) : compiled_(std::move(compiled)) {
    rv::VulkanTarget target;
    target.minSubgroupSize = 8;
    target.kernels = {compiled_.spec};
    nlohmann::json manifest = {{"format", rv::kVulkanFormat},
                               {"format_version", manifest::kManifestVersion},
                               {"vulkan", target}};
    std::vector<runtime::ArtifactSection> sections;
    for (const auto &module : compiled_.modules) {
      std::vector<uint8_t> bytes(module.words.size() * 4);
      std::memcpy(bytes.data(), module.words.data(), bytes.size());
      sections.push_back({module.section, runtime::SectionKind::Spirv, bytes});
    }
    image_ = runtime::serializeArtifact("kernel.q3", manifest, sections);
    artifact_ = runtime::Artifact::parse("kernel.q3", image_.data(), image_.size());
    driver_ = std::make_unique<rv::VulkanDriver>(*artifact_, "kernel.q3", runtime::DriverOptions{});
  }
  rv::VulkanDriver &driver() { return *driver_; }

  int64_t upload(const void *data, int64_t bytes) {
    int64_t id = driver_->allocate(bytes);
    driver_->write({id, 0, bytes}, data);
    return id;
  }
  int64_t upload(const std::vector<float> &v) { return upload(v.data(), int64_t(v.size() * 4)); }
  /// `count` elements of `storage` (f32 by default), widened to f32.
  std::vector<float> download(int64_t id, int64_t count, DType storage = DType::F32) {
    std::vector<uint8_t> bytes(size_t(count) * runtime::dtypeSize(storage));
    driver_->read({id, 0, int64_t(bytes.size())}, bytes.data());
    std::vector<float> out(static_cast<size_t>(count));
    runtime::convertToF32(storage, bytes.data(), out.data(), out.size());
    return out;
  }
  void run(const std::vector<runtime::BufferRange> &ranges, const std::vector<int64_t> &scalars) {
    driver_->dispatch(driver_->kernel(compiled_.spec.name), ranges, scalars, 0);
    driver_->finish();
  }

private:
  vulkan::CompiledKernel compiled_;
  std::vector<uint8_t> image_;
  std::unique_ptr<runtime::Artifact> artifact_;
  std::unique_ptr<rv::VulkanDriver> driver_;
};

class VulkanKernelTest : public ::testing::Test {
protected:
  void SetUp() override { vulkan::loadKernelDialects(context); }
  mlir::MLIRContext context;
  std::mt19937 rng{7};
};

//===- Matrix products ------------------------------------------------------===//

/// A binding limit no test weight reaches: the weight in one part.
constexpr int64_t kWhole = int64_t(1) << 27;

struct LinearCase {
  std::string label;
  int64_t in, out, rows;
  DType weight;
  bool norm, swiglu, residual;
  std::optional<DType> gain;
  int64_t maxBindingBytes = int64_t(1) << 27;
  int64_t columnSubgroups = 1;      // vulkan-matvec's decode_column_subgroups
  vulkan::MatMulTiling tiling = {}; // vulkan-tile-matmul's prefill_tile
};
void PrintTo(const LinearCase &c, std::ostream *os) { *os << c.label; }

class VulkanLinearTest : public VulkanKernelTest,
                         public ::testing::WithParamInterface<LinearCase> {};

TEST_P(VulkanLinearTest, MatchesTheReference) {
  const LinearCase &c = GetParam();
  vulkan::LinearKernel kernel{"linear", c.in, c.out, c.weight, std::nullopt, c.swiglu,
                              c.residual, c.gain};
  if (c.norm)
    kernel.normEps = 1e-6;
  vulkan::KernelCompiler compiler(context);
  const vulkan::MatMulTiling tiling = c.tiling;
  vulkan::MatVecShape matVec;
  matVec.columnSubgroups = c.columnSubgroups;
  DeviceKernel device(
      compiler.linear(kernel, tiling,
                      vulkan::KernelCompiler::rowsPerPart(c.swiglu ? c.out : kernel.weightRows(),
                                                          c.in * vulkan::dtypeBytes(c.weight),
                                                          c.maxBindingBytes, tiling.tileColumns),
                      matVec));

  std::vector<float> x = randomValues(size_t(c.rows * c.in), rng);
  std::vector<float> w = randomValues(size_t(kernel.weightRows() * c.in), rng, 0.2f);
  std::vector<uint8_t> wBytes = stored(w, c.weight);
  std::vector<float> gain = randomValues(size_t(c.in), rng, 2.0f);
  std::vector<uint8_t> gainBytes;
  if (c.gain)
    gainBytes = stored(gain, *c.gain);
  std::vector<float> residual = randomValues(size_t(c.rows * c.out), rng);

  std::vector<runtime::BufferRange> ranges;
  ranges.push_back({device.upload(x), 0, int64_t(x.size() * 4)});
  ranges.push_back({device.upload(wBytes.data(), int64_t(wBytes.size())), 0, int64_t(wBytes.size())});
  if (c.gain)
    ranges.push_back({device.upload(gainBytes.data(), int64_t(gainBytes.size())), 0,
                      int64_t(gainBytes.size())});
  if (c.residual)
    ranges.push_back({device.upload(residual), 0, int64_t(residual.size() * 4)});
  int64_t y = device.driver().allocate(c.rows * c.out * 4);
  ranges.push_back({y, 0, c.rows * c.out * 4});
  device.run(ranges, {c.rows, c.rows, c.rows});
  std::vector<float> got = device.download(y, c.rows * c.out);

  // The reference: the gain applied to x (exact algebra of the prologue).
  std::vector<float> xg = x;
  if (c.gain)
    for (int64_t t = 0; t < c.rows; ++t)
      for (int64_t k = 0; k < c.in; ++k)
        xg[size_t(t * c.in + k)] *= gain[size_t(k)];
  std::vector<float> want(size_t(c.rows * c.out));
  const double eps = 1e-6;
  // The RMSNorm statistic is of x before the gain.
  for (int64_t t = 0; t < c.rows; ++t) {
    std::vector<float> row(xg.begin() + t * c.in, xg.begin() + (t + 1) * c.in);
    std::vector<float> out(size_t(c.out));
    reference::fusedLinear(row.data(), w.data(), c.residual ? residual.data() + t * c.out : nullptr,
                           out.data(), 1, c.in, c.out, nullptr, c.swiglu);
    if (c.norm) {
      double squares = 0;
      for (int64_t k = 0; k < c.in; ++k)
        squares += double(x[size_t(t * c.in + k)]) * x[size_t(t * c.in + k)];
      // Recompute with the norm: the reference applies it to the product.
      std::vector<float> scaledRow(size_t(c.in));
      double scale = 1.0 / std::sqrt(squares / double(c.in) + eps);
      std::vector<float> product(size_t(kernel.weightRows()));
      reference::linear(row.data(), w.data(), nullptr, product.data(), 1, c.in, kernel.weightRows());
      for (int64_t n = 0; n < c.out; ++n) {
        float v = float(double(product[size_t(n)]) * scale);
        if (c.swiglu)
          v = reference::silu(v) * float(double(product[size_t(c.out + n)]) * scale);
        if (c.residual)
          v += residual[size_t(t * c.out + n)];
        out[size_t(n)] = v;
      }
    }
    std::copy(out.begin(), out.end(), want.begin() + t * c.out);
  }
  float worst = 0;
  for (size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::fabs(got[i] - want[i]));
  EXPECT_LE(worst, 2e-5f * std::max(1.0f, maxAbs(want))) << "worst |diff| " << worst;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, VulkanLinearTest,
    ::testing::Values(
        LinearCase{"decode_f32_plain", 64, 96, 1, DType::F32, false, false, false, {}},
        LinearCase{"decode_bf16_norm_swiglu", 48, 40, 1, DType::BF16, true, true, false, {}},
        LinearCase{"decode_f16_residual", 80, 33, 1, DType::F16, false, false, true, {}},
        LinearCase{"decode_bf16_gain_norm", 64, 70, 1, DType::BF16, true, false, false,
                   DType::BF16},
        LinearCase{"rows7_f32_norm", 72, 100, 7, DType::F32, true, false, false, {}},
        LinearCase{"rows2_bf16_swiglu_gain", 40, 72, 2, DType::BF16, true, true, false, DType::F16},
        LinearCase{"prefill_f32_norm", 72, 100, 19, DType::F32, true, false, false, {}},
        LinearCase{"prefill_bf16_odd_k", 42, 30, 12, DType::BF16, false, false, true, {}},
        LinearCase{"prefill_bf16_swiglu_gain", 40, 72, 37, DType::BF16, true, true, false,
                   DType::F32},
        LinearCase{"prefill_f16_residual", 96, 65, 33, DType::F16, false, false, true, {}},
        // The weight in parts of 64 rows (a binding limit of 64 rows here:
        // the prefill tile's columns).
        LinearCase{
            "decode_bf16_in_parts", 64, 200, 1, DType::BF16, true, false, false, {}, 64 * 64 * 2},
        LinearCase{
            "prefill_f32_in_parts", 32, 150, 15, DType::F32, false, false, false, {}, 64 * 32 * 4},
        LinearCase{
            "rows5_f16_in_parts", 32, 150, 5, DType::F16, false, false, true, {}, 64 * 32 * 2},
        // SwiGLU in parts: each dispatch binds a part's gate rows and the
        // same up rows.
        LinearCase{"decode_bf16_swiglu_in_parts", 48, 150, 1, DType::BF16, true, true, false,
                   DType::BF16, 64 * 48 * 2},
        LinearCase{"prefill_bf16_swiglu_in_parts",
                   48,
                   150,
                   20,
                   DType::BF16,
                   true,
                   true,
                   true,
                   {},
                   64 * 48 * 2},
        // Several subgroups per column (vulkan-matvec's decode_column_subgroups),
        // each part holding units on subgroups up to 8 wide (lavapipe's):
        // 2 (two columns a workgroup, the last one's second past the end),
        // 8 (the first parts with one unit more), 4 on the multi-row
        // variant, and on weights in parts. Then other prefill tiles
        // (--prefill-tile): taller register blocks, a K step of 8, a small
        // tile on a weight in parts of 32 rows.
        // clang-format off
        LinearCase{"decode_bf16_norm_swiglu_gain_c2", 200, 33, 1, DType::BF16, true, true, false, DType::BF16, kWhole, 2},
        LinearCase{"decode_f16_residual_c8", 600, 33, 1, DType::F16, false, false, true, {}, kWhole, 8},
        LinearCase{"decode_f32_norm_long_k_c8", 1040, 20, 1, DType::F32, true, false, true, {}, kWhole, 8},
        LinearCase{"rows7_bf16_norm_residual_c4", 264, 37, 7, DType::BF16, true, false, true, DType::BF16, kWhole, 4},
        LinearCase{"decode_bf16_in_parts_c2", 160, 200, 1, DType::BF16, true, false, false, {}, 64 * 160 * 2, 2},
        LinearCase{"rows3_bf16_swiglu_in_parts_c4", 264, 150, 3, DType::BF16, true, true, true, {}, 64 * 264 * 2, 4},
        LinearCase{"prefill_bf16_swiglu_gain_tile64x64x16_8x4", 48, 150, 70, DType::BF16, true, true, false, DType::BF16, kWhole, 1, {64, 64, 16, 8, 4}},
        LinearCase{"prefill_f16_residual_tile64x128x8_8x8", 96, 130, 33, DType::F16, false, false, true, {}, kWhole, 1, {64, 128, 8, 8, 8}},
        LinearCase{"prefill_f32_norm_in_parts_tile16x32x8_2x2", 40, 100, 21, DType::F32, true, false, false, {}, 32 * 40 * 4, 1, {16, 32, 8, 2, 2}}),
    // clang-format on
    [](const ::testing::TestParamInfo<LinearCase> &info) { return info.param.label; });

//===- Embedding ------------------------------------------------------------===//

TEST_F(VulkanKernelTest, EmbeddingGathersRowsFromEveryPart) {
  const int64_t vocab = 100, hidden = 24;
  for (DType storage : {DType::F32, DType::F16, DType::BF16}) {
    vulkan::KernelCompiler compiler(context);
    // Parts of 16 rows, so tokens come from seven dispatches.
    DeviceKernel device(compiler.embedding({"embedding", vocab, hidden, storage}, 16));
    std::vector<float> table = randomValues(size_t(vocab * hidden), rng);
    std::vector<uint8_t> bytes = stored(table, storage);
    std::vector<int32_t> tokens = {0, 99, 17, 16, 15, 64, 3};
    const int64_t rows = int64_t(tokens.size());
    int64_t tableId = device.upload(bytes.data(), int64_t(bytes.size()));
    int64_t tokenId = device.upload(tokens.data(), rows * 4);
    int64_t out = device.driver().allocate(rows * hidden * 4);
    device.run({{tableId, 0, int64_t(bytes.size())}, {tokenId, 0, rows * 4},
                {out, 0, rows * hidden * 4}},
               {rows, rows, rows});
    std::vector<float> got = device.download(out, rows * hidden);
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t c = 0; c < hidden; ++c)
        ASSERT_EQ(got[size_t(t * hidden + c)], table[size_t(tokens[size_t(t)] * hidden + c)])
            << runtime::mlirName(storage) << " row " << t << " column " << c;
  }
}

TEST_F(VulkanKernelTest, AStepWithStagedMemoryIsOneSubmission) {
  // A discrete GPU's kernel buffers are not host-visible: a decode step's
  // token write, its replayed pass and the read of its result go to the
  // device as one batch with one wait (forced here on lavapipe), and each
  // step still sees its own tokens.
  const int64_t vocab = 40, hidden = 16, rows = 2;
  ::setenv("Q3_VULKAN_FORCE_STAGING", "1", 1);
  vulkan::KernelCompiler compiler(context);
  DeviceKernel device(compiler.embedding({"embedding", vocab, hidden, DType::F32}, 64));
  ::unsetenv("Q3_VULKAN_FORCE_STAGING");
  rv::VulkanDriver &driver = device.driver();
  std::vector<float> table = randomValues(size_t(vocab * hidden), rng);
  const int64_t tableId = device.upload(table);
  const int64_t tokenId = driver.allocate(rows * 4);
  const int64_t out = driver.allocate(rows * hidden * 4);
  const int64_t kernel = driver.kernel("embedding");
  for (int32_t step = 0; step < 4; ++step) {
    const std::vector<int32_t> tokens = {step * 3, int32_t(vocab) - 1 - step};
    const int before = driver.submissions();
    driver.write({tokenId, 0, rows * 4}, tokens.data());
    if (!driver.beginPass({rows, 0}, step))
      driver.dispatch(kernel,
                      {{tableId, 0, int64_t(table.size() * 4)},
                       {tokenId, 0, rows * 4},
                       {out, 0, rows * hidden * 4}},
                      {rows, rows, rows}, 0);
    driver.endPass();
    std::vector<float> got(size_t(rows * hidden));
    driver.read({out, 0, rows * hidden * 4}, got.data());
    EXPECT_EQ(driver.submissions() - before, 1) << "step " << step;
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t c = 0; c < hidden; ++c)
        ASSERT_EQ(got[size_t(t * hidden + c)], table[size_t(tokens[size_t(t)] * hidden + c)])
            << "step " << step << " row " << t << " column " << c;
  }
}

//===- q/k-norm + RoPE + cache, then attention ------------------------------===//

struct AttentionCase {
  std::string label;
  int64_t queryHeads, kvHeads, headDim, startPos, rows;
  DType gains;
  std::vector<int64_t> map; // empty: h / (Hq / Hkv)
  DType cache = DType::F32;
  int64_t decodeSubgroups = 4; // the one-row variant's (vulkan-workgroups)
  int64_t decodeSplits = 1, splitPositions = 1; // vulkan-split-decode-attention
  int64_t rowsPerWorkgroup = 1;                 // vulkan-workgroups' prefill_rows_per_workgroup
  /// The kernel's wide path from this subgroup size: at 16, the ctest
  /// vulkan.subgroups16 (lavapipe with 16-wide subgroups) runs the path that
  /// 32-wide GPUs take, where a lane's values cover head_dim exactly.
  int64_t wideSubgroupSize = 32;
};
void PrintTo(const AttentionCase &c, std::ostream *os) { *os << c.label; }

class VulkanAttentionTest : public VulkanKernelTest,
                            public ::testing::WithParamInterface<AttentionCase> {};

TEST_P(VulkanAttentionTest, NormRopeCacheAndAttentionMatchTheReference) {
  const AttentionCase &c = GetParam();
  const int64_t D = c.headDim, Hq = c.queryHeads, Hkv = c.kvHeads;
  const int64_t capacity = c.startPos + c.rows + 3, visible = c.startPos + c.rows;
  const double eps = 1e-6, theta = 1e6, scale = 1.0 / std::sqrt(double(D));
  std::vector<int64_t> map = c.map;
  if (map.empty())
    for (int64_t h = 0; h < Hq; ++h)
      map.push_back(h / (Hq / Hkv));
  vulkan::KernelCompiler compiler(context);
  vulkan::QKNormRopeKernel ropeKernel{"qk", Hq, Hkv, D, c.gains, eps, theta};
  ropeKernel.cache = c.cache;
  vulkan::AttentionKernel attentionKernel{"attention", Hq, Hkv, D, map, scale};
  attentionKernel.cache = c.cache;
  attentionKernel.decodeSubgroups = c.decodeSubgroups;
  attentionKernel.decodeSplits = c.decodeSplits;
  attentionKernel.splitPositions = c.splitPositions;
  attentionKernel.rowsPerWorkgroup = c.rowsPerWorkgroup;
  attentionKernel.wideSubgroupSize = c.wideSubgroupSize;
  DeviceKernel rope(compiler.qkNormRope(ropeKernel));
  DeviceKernel attention(compiler.attention(attentionKernel));

  // The cache: positions before startPos hold earlier keys and values.
  const int64_t width = (Hq + 2 * Hkv) * D;
  std::vector<float> qkv = randomValues(size_t(c.rows * width), rng, 2.0f);
  std::vector<float> qGain = randomValues(size_t(D), rng, 1.5f),
                     kGain = randomValues(size_t(D), rng, 1.5f);
  std::vector<uint8_t> qGainBytes = stored(qGain, c.gains), kGainBytes = stored(kGain, c.gains);
  std::vector<float> keys = randomValues(size_t(Hkv * capacity * D), rng),
                     values = randomValues(size_t(Hkv * capacity * D), rng);
  // An f16 cache holds earlier positions as f16 (`stored` rounds them too).
  std::vector<uint8_t> keyBytes = stored(keys, c.cache), valueBytes = stored(values, c.cache);

  // Reference: norm, gain, RoPE per head; the cache rows at the positions.
  std::vector<float> query(size_t(c.rows * Hq * D));
  std::vector<float> wantKeys = keys, wantValues = values;
  for (int64_t t = 0; t < c.rows; ++t)
    for (int64_t slot = 0; slot < Hq + 2 * Hkv; ++slot) {
      const float *in = qkv.data() + t * width + slot * D;
      std::vector<float> head(in, in + D);
      if (slot < Hq + Hkv) {
        reference::rmsNorm(head.data(), slot < Hq ? qGain.data() : kGain.data(), head.data(), 1, D,
                           eps);
        reference::ropeRotateHalf(head.data(), 1, 1, D, c.startPos + t, theta);
      }
      float *to = slot < Hq ? query.data() + (t * Hq + slot) * D
                  : slot < Hq + Hkv
                      ? wantKeys.data() + ((slot - Hq) * capacity + c.startPos + t) * D
                      : wantValues.data() + ((slot - Hq - Hkv) * capacity + c.startPos + t) * D;
      std::copy(head.begin(), head.end(), to);
    }

  int64_t qkvId = rope.upload(qkv);
  int64_t qg = rope.upload(qGainBytes.data(), int64_t(qGainBytes.size()));
  int64_t kg = rope.upload(kGainBytes.data(), int64_t(kGainBytes.size()));
  int64_t keyId = rope.upload(keyBytes.data(), int64_t(keyBytes.size()));
  int64_t valueId = rope.upload(valueBytes.data(), int64_t(valueBytes.size()));
  int64_t queryId = rope.driver().allocate(int64_t(query.size() * 4));
  const int64_t cacheBytes = int64_t(keyBytes.size());
  rope.driver().beginPass({c.rows, false}, c.startPos);
  rope.driver().dispatch(rope.driver().kernel("qk"),
                         {{qkvId, 0, int64_t(qkv.size() * 4)},
                          {qg, 0, int64_t(qGainBytes.size())},
                          {kg, 0, int64_t(kGainBytes.size())},
                          {keyId, 0, cacheBytes},
                          {valueId, 0, cacheBytes},
                          {queryId, 0, int64_t(query.size() * 4)}},
                         {c.rows, visible, capacity, 0, c.startPos}, 0);
  rope.driver().endPass();
  rope.driver().finish();
  std::vector<float> gotQuery = rope.download(queryId, int64_t(query.size()));
  std::vector<float> gotKeys = rope.download(keyId, int64_t(keys.size()), c.cache);
  std::vector<float> gotValues = rope.download(valueId, int64_t(values.size()), c.cache);
  float worst = 0;
  for (size_t i = 0; i < query.size(); ++i)
    worst = std::max(worst, std::fabs(gotQuery[i] - query[i]));
  if (c.cache == DType::F32) {
    for (size_t i = 0; i < keys.size(); ++i)
      worst = std::max({worst, std::fabs(gotKeys[i] - wantKeys[i]),
                        std::fabs(gotValues[i] - wantValues[i])});
  } else {
    // The kernel's f32 key (within 2e-5 of the reference's) rounded to
    // nearest even: within one step of the rounded reference key (f16:
    // 2^-10 relative, bf16: 2^-7). Values are copied, so they round exactly
    // as the reference's.
    std::vector<float> roundedKeys = wantKeys, roundedValues = wantValues;
    stored(roundedKeys, c.cache);
    stored(roundedValues, c.cache);
    const float step = c.cache == DType::F16 ? 1.0f / 1024 : 1.0f / 128;
    for (size_t i = 0; i < keys.size(); ++i) {
      EXPECT_LE(std::fabs(gotKeys[i] - roundedKeys[i]), std::fabs(roundedKeys[i]) * step + 2e-5f)
          << "key element " << i;
      EXPECT_EQ(gotValues[i], roundedValues[i]) << "value element " << i;
    }
    wantKeys = gotKeys; // attention below reads what the cache holds
    wantValues = gotValues;
  }
  EXPECT_LE(worst, 2e-5f) << "q/k-norm + RoPE + cache: worst |diff| " << worst;

  // Attention over the cache the reference wrote ([S, Hkv, D] for it).
  std::vector<float> refKeys(size_t(visible * Hkv * D)), refValues(refKeys.size());
  for (int64_t s = 0; s < visible; ++s)
    for (int64_t g = 0; g < Hkv; ++g)
      for (int64_t d = 0; d < D; ++d) {
        refKeys[size_t((s * Hkv + g) * D + d)] = wantKeys[size_t((g * capacity + s) * D + d)];
        refValues[size_t((s * Hkv + g) * D + d)] = wantValues[size_t((g * capacity + s) * D + d)];
      }
  std::vector<float> want(size_t(c.rows * Hq * D));
  reference::causalAttention(query.data(), refKeys.data(), refValues.data(), want.data(), c.rows,
                             visible, Hq, Hkv, D, scale, map);
  std::vector<uint8_t> cachedKeys = stored(wantKeys, c.cache),
                       cachedValues = stored(wantValues, c.cache);
  int64_t aq = attention.upload(query);
  int64_t ak = attention.upload(cachedKeys.data(), int64_t(cachedKeys.size()));
  int64_t av = attention.upload(cachedValues.data(), int64_t(cachedValues.size()));
  int64_t out = attention.driver().allocate(int64_t(want.size() * 4));
  std::vector<runtime::BufferRange> ranges = {{aq, 0, int64_t(query.size() * 4)},
                                              {ak, 0, cacheBytes},
                                              {av, 0, cacheBytes},
                                              {out, 0, int64_t(want.size() * 4)}};
  // A split decode's workspace, filled with NaN: a record the merge reads
  // that no run wrote shows.
  if (const int64_t bytes = vulkan::attentionWorkspaceBytes(attentionKernel))
    ranges.push_back({attention.upload(std::vector<float>(size_t(bytes / 4), NAN)), 0, bytes});
  attention.driver().beginPass({c.rows, false}, c.startPos);
  attention.driver().dispatch(attention.driver().kernel("attention"), ranges,
                              {c.rows, visible, capacity}, 0);
  attention.driver().endPass();
  attention.driver().finish();
  std::vector<float> got = attention.download(out, int64_t(want.size()));
  worst = 0;
  for (size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::fabs(got[i] - want[i]));
  EXPECT_LE(worst, 1e-5f) << "attention: worst |diff| " << worst;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, VulkanAttentionTest,
    ::testing::Values(
        AttentionCase{"gqa2_prefill", 4, 2, 16, 0, 9, DType::BF16, {}},
        AttentionCase{"gqa2_decode_late", 4, 2, 16, 4000, 1, DType::F32, {}},
        AttentionCase{"mqa6_hd8", 6, 1, 8, 5, 3, DType::F16, {}},
        AttentionCase{"mha_hd32_long", 2, 2, 32, 70, 2, DType::F32, {}},
        AttentionCase{"gqa4_hd128", 8, 2, 128, 3, 2, DType::BF16, {}},
        AttentionCase{"uneven_map", 3, 2, 16, 2, 2, DType::F32, {1, 0, 1}},
        AttentionCase{"f16_cache_prefill", 4, 2, 16, 0, 9, DType::BF16, {}, DType::F16},
        AttentionCase{"f16_cache_decode_hd128", 8, 2, 128, 40, 1, DType::BF16, {}, DType::F16},
        // The one-row variant with 0.6B's 31 subgroups, with
        // positions past and (the first row) short of them,
        // and a two-row dispatch beside it (the other variant).
        AttentionCase{"decode_variant_hd128", 4, 2, 128, 200, 1, DType::BF16, {}, DType::F32, 31},
        AttentionCase{"decode_variant_first_row", 4, 2, 16, 0, 1, DType::F32, {}, DType::F32, 32},
        AttentionCase{"decode_variant_two_rows", 4, 2, 16, 5, 2, DType::F32, {}, DType::F32, 32},
        // Decode split over workgroups (vulkan-split-decode-attention):
        // 8 runs of 26 positions, one run (the first row), 2 of 8 runs
        // active, GQA with an uneven map, MQA, and the multi-row variant
        // of a split kernel.
        AttentionCase{
            "split_runs_hd128", 4, 2, 128, 200, 1, DType::BF16, {}, DType::F32, 31, 8, 16},
        AttentionCase{"split_first_row", 4, 2, 16, 0, 1, DType::F32, {}, DType::F32, 32, 8, 4},
        AttentionCase{"split_few_active", 4, 2, 16, 5, 1, DType::F32, {}, DType::F32, 4, 8, 4},
        AttentionCase{
            "split_uneven_map", 3, 2, 16, 90, 1, DType::F32, {1, 0, 1}, DType::F32, 4, 5, 8},
        AttentionCase{
            "split_mqa_bf16_cache", 6, 1, 8, 300, 1, DType::F16, {}, DType::BF16, 8, 64, 4},
        AttentionCase{"split_two_rows", 4, 2, 16, 50, 2, DType::F32, {}, DType::F32, 32, 8, 4},
        // Several rows per workgroup (prefill_rows_per_workgroup): a last
        // block short of rows, the first rows of a prompt (rows that see
        // fewer positions than subgroups), after a cached start, an uneven
        // head map, MQA with a bf16 cache, head_dim 128, and a decode variant
        // beside it.
        AttentionCase{
            "rows4_gqa2_prefill", 4, 2, 16, 0, 9, DType::BF16, {}, DType::F32, 4, 1, 1, 4},
        AttentionCase{"rows2_after_start", 4, 2, 16, 37, 7, DType::F32, {}, DType::F32, 4, 1, 1, 2},
        AttentionCase{"rows8_mha_hd32", 2, 2, 32, 3, 19, DType::F32, {}, DType::F32, 4, 1, 1, 8},
        AttentionCase{
            "rows4_uneven_map", 3, 2, 16, 2, 6, DType::F32, {1, 0, 1}, DType::F32, 4, 1, 1, 4},
        AttentionCase{
            "rows2_mqa_bf16_cache", 6, 1, 8, 5, 5, DType::F16, {}, DType::BF16, 4, 1, 1, 2},
        AttentionCase{
            "rows2_hd128_f16_cache", 8, 2, 128, 20, 6, DType::BF16, {}, DType::F16, 15, 8, 4, 2},
        AttentionCase{"bf16_cache_prefill_mqa", 6, 1, 8, 5, 3, DType::F16, {}, DType::BF16},
        AttentionCase{"bf16_cache_decode_hd128", 8, 2, 128, 40, 1, DType::BF16, {}, DType::BF16},
        // The wide path (lanes x values = head_dim, nothing masked) from 16
        // lanes: prefill over several rows per workgroup, the one-row
        // variant split over workgroups, an uneven map with head_dim 16.
        AttentionCase{
            "wide16_rows2_hd128", 8, 2, 128, 20, 6, DType::BF16, {}, DType::F32, 4, 1, 1, 2, 16},
        AttentionCase{
            "wide16_split_hd128", 4, 2, 128, 200, 1, DType::BF16, {}, DType::F16, 31, 8, 16, 1, 16},
        AttentionCase{"wide16_uneven_map",
                      3,
                      2,
                      16,
                      90,
                      3,
                      DType::F32,
                      {1, 0, 1},
                      DType::F32,
                      4,
                      1,
                      1,
                      1,
                      16}),
    [](const ::testing::TestParamInfo<AttentionCase> &info) { return info.param.label; });

} // namespace
} // namespace q3::testing
