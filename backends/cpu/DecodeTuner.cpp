//===- DecodeTuner.cpp - measure how finely decode splits its products ----===//
#include "backends/cpu/DecodeTuner.h"
#include "backends/cpu/TuningCache.h"
#include "backends/cpu/TuningKernel.h"
#include "backends/cpu/passes/CpuPasses.h"

#include "runtime/KernelABI.h"
#include "runtime/ThreadPool.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/xxhash.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <stdexcept>

namespace q3::cpu {
namespace {

/// Weight bytes one measurement streams: several copies of the product, so
/// they come from memory, not from a last-level cache (32 MiB here).
constexpr int64_t kStreamBytes = int64_t(160) << 20;

int roundsFor(TuneLevel level) { return level == TuneLevel::Full ? 31 : 15; }

/// The median GB/s of each candidate over interleaved rounds (the order
/// rotates each round, so none always runs first after another's streams).
std::vector<DecodeChunkRate> measureRates(const FusedLinearKernel &kernel,
                                          const CpuTarget &target,
                                          const std::vector<int64_t> &candidates, int rounds,
                                          int threads) {
  const LoadedTuningKernel loaded = loadTuningKernel(kernel, target);
  std::mt19937 rng(11);
  std::vector<float> x(static_cast<size_t>(kernel.inFeatures), 0.5f), y(kernel.outFeatures);
  const std::vector<uint8_t> packed = randomPackedWeights(kernel, rng);
  const int64_t weightBytes = int64_t(packed.size());
  const int64_t copies = std::max<int64_t>(2, (kStreamBytes + weightBytes - 1) / weightBytes);
  std::vector<uint8_t> weights(size_t(copies * weightBytes));
  for (int64_t c = 0; c < copies; ++c)
    std::memcpy(weights.data() + c * weightBytes, packed.data(), size_t(weightBytes));
  const std::vector<uint8_t> gain = randomBf16(kernel.inFeatures, rng);
  std::vector<void *> buffers = {x.data(), weights.data(), const_cast<uint8_t *>(gain.data()),
                                 y.data()};
  const std::vector<int64_t> bytes = {int64_t(x.size() * 4), weightBytes, int64_t(gain.size()),
                                      int64_t(y.size() * 4)};
  const int64_t scalars[runtime::kFixedKernelScalars] = {1, 1, 1};

  runtime::ThreadPool pool(threads);
  auto streamAll = [&](int64_t chunks) {
    const auto start = std::chrono::steady_clock::now();
    for (int64_t c = 0; c < copies; ++c) {
      buffers[1] = weights.data() + c * weightBytes;
      pool.parallelFor(
          kernel.workgroups(),
          [&](int64_t begin, int64_t end) {
            loaded.entry(buffers.data(), bytes.data(), scalars, begin, end);
          },
          int(chunks));
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return double(copies * weightBytes) / seconds / 1e9;
  };
  const size_t n = candidates.size();
  std::vector<std::vector<double>> rates(n);
  for (size_t i = 0; i < n; ++i)
    streamAll(candidates[i]); // warms pages and caches
  for (int round = 0; round < rounds; ++round)
    for (size_t j = 0; j < n; ++j) {
      const size_t i = (j + size_t(round)) % n;
      rates[i].push_back(streamAll(candidates[i]));
    }
  std::vector<DecodeChunkRate> measured;
  for (size_t i = 0; i < n; ++i) {
    std::vector<double> &r = rates[i];
    std::nth_element(r.begin(), r.begin() + long(r.size() / 2), r.end());
    measured.push_back({candidates[i], r[r.size() / 2]});
  }
  return measured;
}

/// What makes a measurement reusable: the CPU, the shape, the threads, the
/// level and the kernel source.
std::string cacheKey(const CpuTarget &target, const FusedLinearKernel &kernel, TuneLevel level,
                     int threads) {
  return fmt::format("decode {} {} {}x{} threads {} {} {:016x}", target.llvmCpu,
                     llvm::xxHash64(target.features), kernel.inFeatures, kernel.outFeatures,
                     threads, level == TuneLevel::Full ? "full" : "quick",
                     llvm::xxHash64(fusedLinearSource(kernel)));
}

std::optional<std::vector<DecodeChunkRate>> cachedRates(const nlohmann::json &entries) {
  if (!entries.is_array() || entries.empty())
    return std::nullopt;
  std::vector<DecodeChunkRate> measured;
  for (const nlohmann::json &entry : entries) {
    if (!entry.is_object() || !entry.contains("chunks") || !entry.contains("gb_s") ||
        !entry["chunks"].is_number_integer() || !entry["gb_s"].is_number() ||
        entry["chunks"].get<int64_t>() < 1)
      return std::nullopt;
    measured.push_back({entry["chunks"].get<int64_t>(), entry["gb_s"].get<double>()});
  }
  return measured;
}

} // namespace

std::vector<int64_t> decodeChunkCandidates(TuneLevel level) {
  return level == TuneLevel::Full ? std::vector<int64_t>{1, 2, 4, 8, 16}
                                  : std::vector<int64_t>{2, 4, 8};
}

int64_t chooseDecodeChunks(const std::vector<DecodeChunkRate> &measured) {
  if (measured.empty())
    return kDefaultDecodeChunks;
  const DecodeChunkRate best = *std::max_element(
      measured.begin(), measured.end(),
      [](const DecodeChunkRate &a, const DecodeChunkRate &b) { return a.gbPerSecond < b.gbPerSecond; });
  for (const DecodeChunkRate &r : measured)
    if (r.chunks == kDefaultDecodeChunks &&
        r.gbPerSecond * (1.0 + kDecodeTieFraction) >= best.gbPerSecond)
      return kDefaultDecodeChunks;
  return best.chunks;
}

DecodeTuning tuneDecode(const CpuTarget &target, int64_t hidden, int64_t intermediate,
                        TuneLevel level, int threads) {
  if (hidden % 2 != 0 || intermediate < 16 || threads < 1)
    throw std::invalid_argument("--tune: the model's products have no column-block layout");
  // The whole product, one row: its weights streamed once per call.
  const FusedLinearKernel kernel = tuningProduct("tune_decode", hidden, intermediate);
  DecodeTuning tuning;
  tuning.threads = threads;
  tuning.cachePath = tuningCachePath();
  const std::string key = cacheKey(target, kernel, level, threads);
  if (auto cached = cachedRates(readTuningCache(tuning.cachePath, key))) {
    tuning.measured = *cached;
    tuning.cached = true;
  } else {
    const auto start = std::chrono::steady_clock::now();
    tuning.measured =
        measureRates(kernel, target, decodeChunkCandidates(level), roundsFor(level), threads);
    tuning.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    nlohmann::json entries = nlohmann::json::array();
    for (const DecodeChunkRate &r : tuning.measured)
      entries.push_back({{"chunks", r.chunks}, {"gb_s", r.gbPerSecond}});
    if (!writeTuningCache(tuning.cachePath, key, entries))
      tuning.cachePath.clear();
  }
  tuning.chunks = chooseDecodeChunks(tuning.measured);
  return tuning;
}

void recordDecodeTuning(mlir::ModuleOp module, const DecodeTuning &tuning) {
  mlir::Builder b(module.getContext());
  llvm::SmallVector<mlir::NamedAttribute> entries;
  if (mlir::DictionaryAttr existing = tuningOf(module))
    entries.assign(existing.begin(), existing.end());
  llvm::SmallVector<mlir::NamedAttribute> rates;
  for (const DecodeChunkRate &r : tuning.measured)
    rates.push_back(b.getNamedAttr(fmt::format("chunks_{}", r.chunks),
                                   b.getF64FloatAttr(std::round(r.gbPerSecond * 10) / 10)));
  entries.push_back(b.getNamedAttr("decode_chunks", b.getI64IntegerAttr(tuning.chunks)));
  entries.push_back(b.getNamedAttr("decode_gb_s", b.getDictionaryAttr(rates)));
  entries.push_back(b.getNamedAttr(
      "decode_measured_on",
      b.getStringAttr(fmt::format("one-row SwiGLU product, {} threads", tuning.threads))));
  module->setAttr(kTuningAttrName, b.getDictionaryAttr(entries));
}

} // namespace q3::cpu
