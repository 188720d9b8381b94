//===- DecodeTuner.cpp - measure how decode best streams its products -----===//
#include "backends/cpu/DecodeTuner.h"
#include "backends/cpu/TuningCache.h"
#include "backends/cpu/TuningKernel.h"
#include "backends/cpu/TuningRecord.h"
#include "backends/cpu/passes/CpuPasses.h"

#include "runtime/HostBuffer.h"
#include "runtime/KernelABI.h"
#include "runtime/ThreadPool.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/xxhash.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <stdexcept>

namespace q3::cpu {
namespace {

/// Weight bytes one measurement streams: several copies of the product, so
/// they come from memory, not from a last-level cache (32 MiB here).
constexpr int64_t kStreamBytes = int64_t(160) << 20;

int roundsFor(TuneLevel level) { return level == TuneLevel::Full ? 31 : 15; }

/// The median GB/s of each candidate over interleaved rounds (the order
/// rotates each round, so none always runs first after another's streams),
/// and its ratios to `baseline`'s in the same rounds.
std::vector<DecodeRate> measureRates(const FusedLinearKernel &product, const CpuTarget &target,
                                     const std::vector<DecodeSetting> &candidates,
                                     const DecodeSetting &baseline, int rounds, int threads) {
  // One compiled kernel per prefetch distance.
  std::vector<FusedLinearKernel> kernels;
  std::vector<int64_t> distances;
  for (const DecodeSetting &c : candidates)
    if (std::find(distances.begin(), distances.end(), c.prefetchBytes) == distances.end()) {
      distances.push_back(c.prefetchBytes);
      kernels.push_back(product);
      kernels.back().prefetchBytes = c.prefetchBytes;
    }
  std::vector<LoadedTuningKernel> compiled = loadTuningKernels(kernels, target);
  std::map<int64_t, LoadedTuningKernel> loaded;
  for (size_t i = 0; i < distances.size(); ++i)
    loaded.emplace(distances[i], std::move(compiled[i]));
  std::mt19937 rng(11);
  std::vector<float> x(static_cast<size_t>(product.inFeatures), 0.5f), y(product.outFeatures);
  const std::vector<uint8_t> packed = randomWeights(product, rng);
  const int64_t weightBytes = int64_t(packed.size());
  const int64_t copies = std::max<int64_t>(2, (kStreamBytes + weightBytes - 1) / weightBytes);
  // On huge pages, as the model's weights are (copied at load or mapped from
  // huge page-cache folios): on small pages the same loops streamed at half
  // the rate (33 against 65-72 GB/s on an AMD EPYC family 26), so the
  // settings were chosen for a memory path decode never takes.
  runtime::HostBuffer weights(size_t(copies * weightBytes), runtime::HostBuffer::Pages::Huge);
  for (int64_t c = 0; c < copies; ++c)
    std::memcpy(weights.data() + c * weightBytes, packed.data(), size_t(weightBytes));
  const std::vector<uint8_t> gain = randomHalves(*product.prologueGain, product.inFeatures, rng);
  std::vector<void *> buffers = {x.data(), weights.data(), const_cast<uint8_t *>(gain.data()),
                                 y.data()};
  const std::vector<int64_t> bytes = {int64_t(x.size() * 4), weightBytes, int64_t(gain.size()),
                                      int64_t(y.size() * 4)};
  const int64_t scalars[runtime::kFixedKernelScalars] = {1, 1, 1};

  runtime::ThreadPool pool(threads);
  auto streamAll = [&](const DecodeSetting &setting) {
    const runtime::KernelEntry entry = loaded.at(setting.prefetchBytes).entry;
    const auto start = std::chrono::steady_clock::now();
    for (int64_t c = 0; c < copies; ++c) {
      buffers[1] = weights.data() + c * weightBytes;
      pool.parallelFor(
          product.workgroups(),
          [&](int64_t begin, int64_t end) {
            entry(buffers.data(), bytes.data(), scalars, begin, end);
          },
          int(setting.chunks));
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
  // The value `fraction` of the way up the sorted values.
  auto quantile = [](std::vector<double> values, double fraction) {
    const auto at = values.begin() + long(double(values.size() - 1) * fraction + 0.5);
    std::nth_element(values.begin(), at, values.end());
    return *at;
  };
  auto median = [&](const std::vector<double> &values) { return quantile(values, 0.5); };
  const auto isDefault = [&](const DecodeSetting &s) {
    return s.chunks == baseline.chunks && s.prefetchBytes == baseline.prefetchBytes;
  };
  const auto defaultAt = std::find_if(candidates.begin(), candidates.end(), isDefault);
  std::vector<DecodeRate> measured;
  for (size_t i = 0; i < n; ++i) {
    DecodeRate rate{candidates[i], median(rates[i])};
    if (defaultAt != candidates.end()) {
      const std::vector<double> &base = rates[size_t(defaultAt - candidates.begin())];
      std::vector<double> ratios;
      for (int round = 0; round < rounds; ++round)
        ratios.push_back(rates[i][size_t(round)] / base[size_t(round)]);
      rate.relative = median(ratios);
      rate.relativeLow = quantile(ratios, 0.25);
    }
    measured.push_back(rate);
  }
  return measured;
}

/// What makes a measurement reusable: the CPU, the shape, the threads, the
/// level and the kernel source ("huge-pages": entries measured on small
/// pages, before the weights moved, are not reused).
std::string cacheKey(const CpuTarget &target, const FusedLinearKernel &kernel, TuneLevel level,
                     int threads) {
  return fmt::format("decode huge-pages {} {} {}x{} threads {} {} {:016x}", target.llvmCpu,
                     llvm::xxHash64(target.features), kernel.inFeatures, kernel.outFeatures,
                     threads, level == TuneLevel::Full ? "full" : "quick",
                     llvm::xxHash64(fusedLinearSource(kernel)));
}

std::optional<std::vector<DecodeRate>> cachedRates(const nlohmann::json &entries) {
  if (!entries.is_array() || entries.empty())
    return std::nullopt;
  std::vector<DecodeRate> measured;
  for (const nlohmann::json &entry : entries) {
    if (!entry.is_object())
      return std::nullopt;
    for (const char *key : {"chunks", "prefetch_bytes"})
      if (!entry.contains(key) || !entry[key].is_number_integer() || entry[key].get<int64_t>() < 1)
        return std::nullopt;
    for (const char *key : {"gb_s", "relative", "relative_low"})
      if (!entry.contains(key) || !entry[key].is_number() || !(entry[key].get<double>() > 0))
        return std::nullopt;
    measured.push_back({{entry["chunks"].get<int64_t>(), entry["prefetch_bytes"].get<int64_t>()},
                        entry["gb_s"].get<double>(),
                        entry["relative"].get<double>(),
                        entry["relative_low"].get<double>()});
  }
  return measured;
}

/// Among the rates whose other field is at its default: the value of
/// `field` fastest relative to the default setting among those that beat it
/// clearly (median ratio above 1 + kDecodeTieFraction, lower quartile above
/// 1), else `fallback`; the fastest by rate when `fallback` was not measured.
template <typename Field, typename Other>
int64_t chooseWithTie(const std::vector<DecodeRate> &measured, Field field, Other other,
                      int64_t otherDefault, int64_t fallback) {
  std::optional<DecodeRate> fastest, clearWinner;
  bool defaultMeasured = false;
  for (const DecodeRate &r : measured) {
    if (other(r.setting) != otherDefault)
      continue;
    if (!fastest || r.gbPerSecond > fastest->gbPerSecond)
      fastest = r;
    const bool clear = r.relative > 1.0 + kDecodeTieFraction && r.relativeLow > 1.0;
    if (clear && (!clearWinner || r.relative > clearWinner->relative))
      clearWinner = r;
    defaultMeasured |= field(r.setting) == fallback;
  }
  if (!fastest)
    return fallback;
  if (!defaultMeasured)
    return field(fastest->setting);
  return clearWinner ? field(clearWinner->setting) : fallback;
}

int64_t chunksOf(const DecodeSetting &s) { return s.chunks; }
int64_t prefetchOf(const DecodeSetting &s) { return s.prefetchBytes; }

} // namespace

std::vector<DecodeSetting> decodeCandidates(TuneLevel level, int64_t fixedChunks) {
  const bool full = level == TuneLevel::Full;
  std::vector<DecodeSetting> candidates;
  if (fixedChunks > 0)
    candidates.push_back({fixedChunks, kDefaultPrefetchBytes});
  else
    for (int64_t chunks :
         full ? std::vector<int64_t>{1, 2, 4, 8, 16} : std::vector<int64_t>{2, 4, 8})
      candidates.push_back({chunks, kDefaultPrefetchBytes});
  const int64_t split = fixedChunks > 0 ? fixedChunks : kDefaultDecodeChunks;
  for (int64_t bytes :
       full ? std::vector<int64_t>{2048, 4096, 16384, 32768} : std::vector<int64_t>{4096, 16384})
    candidates.push_back({split, bytes});
  return candidates;
}

int64_t chooseDecodeChunks(const std::vector<DecodeRate> &measured) {
  return chooseWithTie(measured, chunksOf, prefetchOf, kDefaultPrefetchBytes, kDefaultDecodeChunks);
}

int64_t chooseDecodePrefetch(const std::vector<DecodeRate> &measured, int64_t chunks) {
  return chooseWithTie(measured, prefetchOf, chunksOf, chunks > 0 ? chunks : kDefaultDecodeChunks,
                       kDefaultPrefetchBytes);
}

DecodeTuning tuneDecode(const CpuTarget &target, int64_t hidden, int64_t intermediate,
                        const TunedWeights &weights, TuneLevel level, int threads,
                        double maxForeignShare, int64_t fixedChunks) {
  requireTunableShape(hidden, intermediate);
  if (threads < 1)
    throw std::invalid_argument("--tune: the decode measurement needs at least one thread");
  // The whole product, one row: its weights streamed once per call.
  const FusedLinearKernel kernel = tuningProduct("tune_decode", hidden, intermediate, weights);
  DecodeTuning tuning;
  tuning.threads = threads;
  // The split the distances are measured at (and the ratios' baseline).
  tuning.distanceChunks = fixedChunks > 0 ? fixedChunks : kDefaultDecodeChunks;
  std::string key = cacheKey(target, kernel, level, threads);
  if (fixedChunks > 0)
    key += fmt::format(" split {}", fixedChunks);
  const std::string path = tuningCachePath();
  if (auto cached = cachedRates(readTuningCache(path, key))) {
    tuning.measured = *cached;
    tuning.provenance.cached = true;
    tuning.provenance.cachePath = path;
  } else {
    tuning.provenance = measureAndCache(key, maxForeignShare, [&] {
      tuning.measured = measureRates(kernel, target, decodeCandidates(level, fixedChunks),
                                     {tuning.distanceChunks, kDefaultPrefetchBytes},
                                     roundsFor(level), threads);
      nlohmann::json entries = nlohmann::json::array();
      for (const DecodeRate &r : tuning.measured)
        entries.push_back({{"chunks", r.setting.chunks},
                           {"prefetch_bytes", r.setting.prefetchBytes},
                           {"gb_s", r.gbPerSecond},
                           {"relative", r.relative},
                           {"relative_low", r.relativeLow}});
      return entries;
    });
  }
  tuning.chosen = {fixedChunks > 0 ? fixedChunks : chooseDecodeChunks(tuning.measured),
                   chooseDecodePrefetch(tuning.measured, tuning.distanceChunks)};
  return tuning;
}

void recordDecodeTuning(mlir::ModuleOp module, const DecodeTuning &tuning) {
  TuningRecord record(module);
  mlir::Builder &b = record.builder;
  // The splits at the default distance, the distances at the split they
  // were measured at (the default, or the one --decode-chunks gave).
  llvm::SmallVector<mlir::NamedAttribute> splitRates, prefetchRates;
  for (const DecodeRate &r : tuning.measured) {
    if (r.setting.prefetchBytes == kDefaultPrefetchBytes)
      splitRates.push_back(
          b.getNamedAttr(fmt::format("chunks_{}", r.setting.chunks), record.rate(r.gbPerSecond)));
    if (r.setting.chunks == tuning.distanceChunks)
      prefetchRates.push_back(b.getNamedAttr(fmt::format("bytes_{}", r.setting.prefetchBytes),
                                             record.rate(r.gbPerSecond)));
  }
  record.set("decode_chunks", b.getI64IntegerAttr(tuning.chosen.chunks));
  record.set("decode_gb_s", b.getDictionaryAttr(splitRates));
  record.set("decode_prefetch_bytes", b.getI64IntegerAttr(tuning.chosen.prefetchBytes));
  record.set("decode_prefetch_gb_s", b.getDictionaryAttr(prefetchRates));
  record.setOthersShare("decode_others_share", tuning.provenance);
  record.set("decode_measured_on",
             b.getStringAttr(fmt::format("one-row SwiGLU product, {} threads", tuning.threads)));
  record.commit();
}

} // namespace q3::cpu
