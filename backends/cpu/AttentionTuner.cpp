//===- AttentionTuner.cpp - measure the prefill attention's instructions --===//
#include "backends/cpu/AttentionTuner.h"
#include "backends/cpu/TuningKernel.h"
#include "backends/cpu/TuningRecord.h"
#include "backends/cpu/passes/CpuPasses.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/xxhash.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

namespace q3::cpu {
namespace {

constexpr int64_t kPromptRows = 512; // a prefill chunk (the default ubatch)
constexpr int kRepetitions = 4;
// f32 replaces the default (vdpbf16ps, as the products) only when it measured
// this much faster: single-thread rates on a loaded VM swing by tens of
// percent, and two compiles of one model should agree.
constexpr double kF32Margin = 1.10;

AttentionKernel measuredKernel(const AttentionKernel &shape, bool bf16) {
  AttentionKernel kernel = shape;
  kernel.name = "tune_attention";
  kernel.cache = WeightStorage::F32;
  kernel.bf16Prefill = bf16;
  kernel.prefillRowSets = bf16 ? AttentionKernel::kBf16PrefillRowSets : 1;
  return kernel;
}

std::vector<float> randomFloats(size_t count, std::mt19937 &rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float &v : values)
    v = uniform(rng);
  return values;
}

/// One layer's causal prefill of kPromptRows rows, the same random inputs
/// for every kernel measured.
struct PrefillInputs {
  std::vector<float> q, keys, values, out;

  explicit PrefillInputs(const AttentionKernel &shape) {
    std::mt19937 rng(7);
    const size_t rowValues = size_t(shape.headDim);
    q = randomFloats(kPromptRows * shape.queryHeads * rowValues, rng);
    keys = randomFloats(shape.kvHeads * kPromptRows * rowValues, rng);
    values = randomFloats(keys.size(), rng);
    out.resize(q.size());
  }

  /// Seconds of one single-thread run of `loaded` (a kernel of `shape`).
  double time(const LoadedTuningKernel &loaded, const AttentionKernel &shape) {
    void *buffers[] = {q.data(), keys.data(), values.data(), out.data()};
    const int64_t bytes[] = {int64_t(q.size() * 4), int64_t(keys.size() * 4),
                             int64_t(values.size() * 4), int64_t(out.size() * 4)};
    const int64_t scalars[] = {kPromptRows, kPromptRows, kPromptRows}; // rows, visible, capacity
    const auto start = std::chrono::steady_clock::now();
    loaded.entry(buffers, bytes, scalars, 0, kPromptRows * shape.workgroupsPerRow());
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
};

/// GFLOP/s of the f32 and the bf16 kernel of `shape`: the best of
/// kRepetitions runs each, the two alternating (bestOfInterleaved).
std::vector<AttentionRate> measure(const AttentionKernel &shape, const CpuTarget &target) {
  const AttentionKernel kernels[2] = {measuredKernel(shape, false), measuredKernel(shape, true)};
  const LoadedTuningKernel loaded[2] = {
      loadTuningSource(attentionSource(kernels[0]), kernels[0].name, target),
      loadTuningSource(attentionSource(kernels[1]), kernels[1].name, target)};
  PrefillInputs inputs(shape);
  const std::vector<double> best =
      bestOfInterleaved({[&] { return inputs.time(loaded[0], kernels[0]); },
                         [&] { return inputs.time(loaded[1], kernels[1]); }},
                        kRepetitions);
  // Row t scores and sums t + 1 positions per query head: two products of
  // head_dim multiply-adds each.
  const double positions = double(kPromptRows) * double(kPromptRows + 1) / 2;
  const double flops = 2.0 * 2.0 * double(shape.headDim) * double(shape.queryHeads) * positions;
  return {{false, flops / best[0] / 1e9}, {true, flops / best[1] / 1e9}};
}

std::string cacheKey(const CpuTarget &target, const AttentionKernel &shape) {
  const std::string sources =
      attentionSource(measuredKernel(shape, false)) + attentionSource(measuredKernel(shape, true));
  return fmt::format("attention {} {:016x} {} {}x{}x{} [{}] {:016x}", target.llvmCpu,
                     llvm::xxHash64(target.features), target.requiredFeatures.size(),
                     shape.queryHeads, shape.kvHeads, shape.headDim,
                     fmt::join(shape.kvHeadMap, ","), llvm::xxHash64(sources));
}

std::optional<std::vector<AttentionRate>> cachedRates(const nlohmann::json &entry) {
  if (!entry.is_object() || !entry.contains("f32") || !entry.contains("avx512bf16") ||
      !entry["f32"].is_number() || !entry["avx512bf16"].is_number())
    return std::nullopt;
  return std::vector<AttentionRate>{{false, entry["f32"].get<double>()},
                                    {true, entry["avx512bf16"].get<double>()}};
}

} // namespace

bool attentionTunable(const CpuTarget &target, const AttentionKernel &shape) {
  return shape.bf16Flashable() && targetHas(target, "avx512bf16");
}

AttentionTuning tuneAttention(const CpuTarget &target, const AttentionKernel &shape,
                              double maxForeignShare) {
  if (!attentionTunable(target, shape))
    throw std::invalid_argument("--tune: attention of this shape has no choice on this CPU");
  const std::string key = cacheKey(target, shape);
  const std::string path = tuningCachePath();
  AttentionTuning tuning;
  if (std::optional<std::vector<AttentionRate>> cached = cachedRates(readTuningCache(path, key))) {
    tuning.measured = *cached;
    tuning.provenance.cached = true;
    tuning.provenance.cachePath = path;
  } else {
    tuning.provenance = measureAndCache(key, maxForeignShare, [&] {
      tuning.measured = measure(shape, target);
      return nlohmann::json{{"f32", tuning.measured[0].gflops},
                            {"avx512bf16", tuning.measured[1].gflops}};
    });
  }
  tuning.bf16 = tuning.measured[0].gflops <= kF32Margin * tuning.measured[1].gflops;
  return tuning;
}

void recordAttentionTuning(mlir::ModuleOp module, const AttentionTuning &tuning) {
  TuningRecord record(module);
  mlir::Builder &b = record.builder;
  llvm::SmallVector<mlir::NamedAttribute> rates;
  for (const AttentionRate &r : tuning.measured)
    rates.push_back(b.getNamedAttr(r.bf16 ? "avx512bf16" : "f32", record.rate(r.gflops)));
  record.set("attention_matmul", b.getStringAttr(tuning.bf16 ? "avx512bf16" : "f32"));
  record.set("attention_gflops", b.getDictionaryAttr(rates));
  record.setOthersShare("attention_others_share", tuning.provenance);
  record.set(
      "attention_measured_on",
      b.getStringAttr(fmt::format("{}-row causal prefill of one layer, one thread", kPromptRows)));
  record.commit();
}

} // namespace q3::cpu
