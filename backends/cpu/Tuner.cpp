//===- Tuner.cpp - measure the prefill kernel variants on this machine ----===//
#include "backends/cpu/Tuner.h"
#include "backends/cpu/TuningCache.h"
#include "backends/cpu/TuningKernel.h"
#include "backends/cpu/TuningRecord.h"
#include "backends/cpu/passes/CpuPasses.h"

#include "runtime/CpuFeatures.h"
#include "runtime/KernelABI.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/xxhash.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <random>
#include <stdexcept>

namespace q3::cpu {
namespace {

constexpr int64_t kPromptRows = 128; // the prefill the tuner optimizes (pp128)
constexpr int64_t kMaxMeasuredOutputs = 2048;
constexpr int kRepetitions = 3;

/// The SwiGLU product the variants are measured on, its outputs capped so a
/// run stays short (the rate per multiply-add does not depend on the output
/// count).
FusedLinearKernel measuredProduct(int64_t hidden, int64_t intermediate,
                                  const TunedWeights &weights, const PrefillVariant &variant) {
  FusedLinearKernel kernel =
      tuningProduct("tune", hidden, std::min(intermediate, kMaxMeasuredOutputs), weights);
  kernel.prefillMatmul = variant.matmul;
  kernel.prefillTileRows = variant.tileRows;
  return kernel;
}

/// GFLOP/s of each candidate on the same random inputs: the best of
/// kRepetitions single-thread runs each, the candidates taking turns
/// (bestOfInterleaved).
std::vector<double> measure(const std::vector<FusedLinearKernel> &kernels,
                            const CpuTarget &target) {
  const std::vector<LoadedTuningKernel> loaded = loadTuningKernels(kernels, target);
  // Every candidate reads the weight in the same layout (column blocks or
  // row-major, as the model's products): one set of inputs serves them all.
  const FusedLinearKernel &shape = kernels.front();
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(kPromptRows * shape.inFeatures));
  for (float &v : x)
    v = uniform(rng);
  std::vector<uint8_t> weight = randomWeights(shape, rng);
  std::vector<uint8_t> gain = randomStored(*shape.prologueGain, shape.inFeatures, rng);
  std::vector<float> y(static_cast<size_t>(kPromptRows * shape.outFeatures));
  int64_t scratchBytes = 0;
  for (const FusedLinearKernel &kernel : kernels)
    scratchBytes = std::max(scratchBytes, kernel.threadScratch().bytesFor(kPromptRows));
  std::vector<uint8_t> scratch(
      static_cast<size_t>(scratchBytes)); // the thread's, last (runtime/KernelABI.h)
  std::vector<void *> buffers = {x.data(), weight.data(), gain.data(), y.data(), scratch.data()};
  const std::vector<int64_t> bytes = {int64_t(x.size() * 4), int64_t(weight.size()),
                                      int64_t(gain.size()), int64_t(y.size() * 4), scratchBytes};
  const int64_t scalars[runtime::kFixedKernelScalars] = {kPromptRows, kPromptRows, kPromptRows};
  std::vector<std::function<double()>> runs;
  for (size_t i = 0; i < kernels.size(); ++i)
    runs.push_back([&, i] {
      const auto start = std::chrono::steady_clock::now();
      loaded[i].entry(buffers.data(), bytes.data(), scalars, 0, kernels[i].workgroups());
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    });
  const std::vector<double> best = bestOfInterleaved(runs, kRepetitions);
  const double flops =
      2.0 * double(kPromptRows) * double(shape.weightRows()) * double(shape.inFeatures);
  std::vector<double> rates;
  for (double seconds : best)
    rates.push_back(flops / seconds / 1e9);
  return rates;
}

/// What makes a measurement reusable: the CPU as LLVM sees it, the shape,
/// the level and the kernel sources measured (a new q3c with other kernels
/// measures again).
std::string cacheKey(const CpuTarget &target, int64_t hidden, int64_t intermediate,
                     const TunedWeights &weights, TuneLevel level,
                     const std::vector<PrefillVariant> &candidates) {
  std::string sources;
  for (const PrefillVariant &c : candidates)
    sources += fusedLinearSource(measuredProduct(hidden, intermediate, weights, c));
  return fmt::format("{} {} {} {}x{} {} {:016x}", target.llvmCpu,
                     llvm::xxHash64(target.features), target.requiredFeatures.size(), hidden,
                     intermediate, level == TuneLevel::Full ? "full" : "quick",
                     llvm::xxHash64(sources));
}

std::optional<TuningResult> cachedResult(const nlohmann::json &entries) {
  if (!entries.is_array() || entries.empty())
    return std::nullopt;
  TuningResult result;
  result.provenance.cached = true;
  for (const nlohmann::json &entry : entries) {
    if (!entry.is_object() || !entry.contains("matmul") || !entry.contains("rows") ||
        !entry.contains("gflops") || !entry["matmul"].is_string() ||
        !entry["rows"].is_number_integer() || !entry["gflops"].is_number())
      return std::nullopt;
    PrefillVariant v;
    const std::string matmul = entry["matmul"];
    v.matmul = matmul == "amx"          ? PrefillMatmul::Amx
               : matmul == "avx512bf16" ? PrefillMatmul::Avx512Bf16
                                        : PrefillMatmul::F32;
    v.tileRows = entry["rows"];
    v.gflops = entry["gflops"];
    result.measured.push_back(v);
  }
  return result;
}

void pickBest(TuningResult &result) {
  result.best = *std::max_element(
      result.measured.begin(), result.measured.end(),
      [](const PrefillVariant &a, const PrefillVariant &b) { return a.gflops < b.gflops; });
}

} // namespace

TuneLevel parseTuneLevel(const std::string &text) {
  if (text == "off")
    return TuneLevel::Off;
  if (text == "quick")
    return TuneLevel::Quick;
  if (text == "full")
    return TuneLevel::Full;
  throw std::invalid_argument("--tune: expected off, quick or full, got '" + text + "'");
}

const char *prefillMatmulName(PrefillMatmul matmul) {
  switch (matmul) {
  case PrefillMatmul::F32:
    return "f32";
  case PrefillMatmul::Avx512Bf16:
    return "avx512bf16";
  case PrefillMatmul::Amx:
    return "amx";
  }
  return "f32";
}

std::vector<PrefillVariant> prefillCandidates(const CpuTarget &target, int64_t in, TuneLevel level,
                                              const TunedWeights &weights) {
  // Accumulators are 2 x rows vectors of 16 floats: 32 zmm registers allow
  // up to 8 rows, 16 ymm registers (two per vector) about 3.
  const bool avx512 = targetHas(target, "avx512f");
  const std::vector<int64_t> rows =
      level == TuneLevel::Full ? (avx512 ? std::vector<int64_t>{2, 3, 4, 5, 6, 7, 8}
                                         : std::vector<int64_t>{1, 2, 3, 4})
                               : (avx512 ? std::vector<int64_t>{4, 6, 8}
                                         : std::vector<int64_t>{1, 2, 3});
  std::vector<PrefillVariant> candidates;
  for (int64_t r : rows)
    candidates.push_back({PrefillMatmul::F32, r, 0});
  // vdpbf16ps and the tile unit multiply bf16 weights only.
  if (weights.dtype != DType::BF16)
    return candidates;
  if (targetHas(target, "avx512bf16"))
    for (int64_t r : rows)
      candidates.push_back({PrefillMatmul::Avx512Bf16, r, 0});
  // Linux hands out the tile state on request only (what the runtime asks
  // for at load): without it the first tile instruction is SIGILL.
  if (!weights.packPerCall && targetHas(target, "avx512bf16") && targetHas(target, "amx-tile") &&
      targetHas(target, "amx-bf16") && in % FusedLinearKernel::kAmxDepth == 0 &&
      runtime::requestAmxState().empty())
    candidates.push_back({PrefillMatmul::Amx, avx512 ? 6 : 2, 0});
  return candidates;
}

TuningResult tunePrefill(const CpuTarget &target, int64_t hidden, int64_t intermediate,
                         const TunedWeights &weights, TuneLevel level, double maxForeignShare) {
  requireTunableShape(hidden, intermediate);
  const std::vector<PrefillVariant> candidates = prefillCandidates(target, hidden, level, weights);
  const std::string key = cacheKey(target, hidden, intermediate, weights, level, candidates);
  const std::string path = tuningCachePath();
  if (std::optional<TuningResult> cached = cachedResult(readTuningCache(path, key))) {
    cached->provenance.cachePath = path;
    pickBest(*cached);
    return *cached;
  }
  TuningResult result;
  result.provenance = measureAndCache(key, maxForeignShare, [&] {
    std::vector<FusedLinearKernel> kernels;
    for (const PrefillVariant &candidate : candidates)
      kernels.push_back(measuredProduct(hidden, intermediate, weights, candidate));
    const std::vector<double> rates = measure(kernels, target);
    for (size_t i = 0; i < candidates.size(); ++i) {
      result.measured.push_back(candidates[i]);
      result.measured.back().gflops = rates[i];
    }
    nlohmann::json entries = nlohmann::json::array();
    for (const PrefillVariant &v : result.measured)
      entries.push_back(
          {{"matmul", prefillMatmulName(v.matmul)}, {"rows", v.tileRows}, {"gflops", v.gflops}});
    return entries;
  });
  pickBest(result);
  return result;
}

void recordTuning(mlir::ModuleOp module, const TuningResult &result) {
  TuningRecord record(module);
  mlir::Builder &b = record.builder;
  llvm::SmallVector<mlir::NamedAttribute> rates;
  for (const PrefillVariant &v : result.measured)
    rates.push_back(b.getNamedAttr(
        fmt::format("{}_rows{}", prefillMatmulName(v.matmul), v.tileRows), record.rate(v.gflops)));
  record.set("matmul", b.getStringAttr(prefillMatmulName(result.best.matmul)));
  record.set("prefill_rows", b.getI64IntegerAttr(result.best.tileRows));
  record.set("prefill_gflops", b.getDictionaryAttr(rates));
  record.set("measured_on", b.getStringAttr("pp128 SwiGLU product, one thread"));
  record.setOthersShare("prefill_others_share", result.provenance);
  record.commit();
}

} // namespace q3::cpu
