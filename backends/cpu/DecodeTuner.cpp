//===- DecodeTuner.cpp - measure how decode best streams its products -----===//
#include "backends/cpu/DecodeTuner.h"
#include "backends/cpu/TuningCache.h"
#include "backends/cpu/TuningKernel.h"
#include "backends/cpu/TuningRecord.h"
#include "backends/cpu/passes/CpuPasses.h"

#include "runtime/HostBuffer.h"
#include "runtime/KernelABI.h"
#include "runtime/MemoryBandwidth.h"
#include "runtime/ThreadPool.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/xxhash.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <stdexcept>

namespace q3::cpu {
namespace {

/// Weight bytes one measurement streams: layers' products, far more than a
/// last-level cache (32 MiB here) and as much as a small model decodes per
/// token. The working set matters beyond the cache: on the AMD EPYC
/// family-26 VM (2026-12-03) the same layers streamed 72-77 GB/s over 160
/// MiB, 62-65 over 256 MiB and 54-56 over 512 MiB or 1.2 GB, the model's
/// products 51-57 in the same minutes; and only from 512 MiB did the stream
/// counts rank as in the model (4 > 2 > 1 by 10-20%; over 160 MiB 2 came
/// out ahead of 4).
constexpr int64_t kStreamBytes = int64_t(512) << 20;
/// At most this many layers per measurement: a tiny model's (the tests')
/// would otherwise take ten thousand dispatches each.
constexpr int64_t kMaxLayers = 1024;

/// Rounds per measurement: quick keeps a 0.6B compile's whole tuning under
/// 10 s now that each round streams 512 MiB per candidate.
int roundsFor(TuneLevel level) { return level == TuneLevel::Full ? 31 : 11; }

/// Where the measured products' weights lie: `layers` copies of each
/// product's, one after the other like a checkpoint's tensors, each start
/// moved on by a few KiB (a checkpoint's small norm tensors do that). Over
/// 160 MiB of copies a whole power of two apart, four streams measured 40%
/// under one; staggered, within 5% (AMD EPYC family 26, 2026-12-03; runs
/// meeting in the same DRAM banks would do it, not verified).
struct LayerWeights {
  runtime::HostBuffer memory;
  std::vector<std::vector<uint8_t *>> at; // [layer][product]
};

/// Each weight starts on a cache line, as the plain read beside the
/// products needs (its loads are aligned).
int64_t lineRounded(size_t bytes) { return (int64_t(bytes) + 63) / 64 * 64; }

LayerWeights layerWeights(const std::vector<std::vector<uint8_t>> &packed, int64_t layers) {
  constexpr int64_t kStagger = 2048;
  int64_t layerBytes = 0;
  for (const std::vector<uint8_t> &weight : packed)
    layerBytes += lineRounded(weight.size()) + kStagger;
  LayerWeights w;
  // On huge pages, as the model's weights are (copied at load or mapped from
  // huge page-cache folios): on small pages the same loops streamed at half
  // the rate (33 against 65-72 GB/s on an AMD EPYC family 26), so the
  // settings were chosen for a memory path decode never takes.
  w.memory = runtime::HostBuffer(size_t(layers * layerBytes), runtime::HostBuffer::Pages::Huge);
  uint8_t *cursor = w.memory.data();
  for (int64_t layer = 0; layer < layers; ++layer) {
    w.at.emplace_back();
    for (const std::vector<uint8_t> &weight : packed) {
      cursor += kStagger;
      std::memcpy(cursor, weight.data(), weight.size());
      w.at.back().push_back(cursor);
      cursor += lineRounded(weight.size());
    }
  }
  return w;
}

/// Decode's products laid out over kStreamBytes of layers, and the threads
/// that stream them: built once for both stages of a measurement (filling
/// 512 MiB of huge pages is a good part of its time).
class ProductLayers {
public:
  ProductLayers(const std::vector<FusedLinearKernel> &products, int threads)
      : products(products), pool(threads) {
    std::mt19937 rng(11);
    int64_t widest = 0, longest = 0;
    for (const FusedLinearKernel &product : products) {
      widest = std::max(widest, product.inFeatures);
      longest = std::max(longest, product.outFeatures);
      packed.push_back(randomWeights(product, rng));
      gains.push_back(randomHalves(*product.prologueGain, product.inFeatures, rng));
      layerBytes += int64_t(packed.back().size());
    }
    layers = std::clamp<int64_t>((kStreamBytes + layerBytes - 1) / layerBytes, 2, kMaxLayers);
    weights = layerWeights(packed, layers);
    x.assign(size_t(widest), 0.5f);
    y.resize(size_t(longest));
  }

  /// The median GB/s of each candidate over interleaved rounds (the order
  /// rotates each round, so none always runs first after another's
  /// streams), its ratios to `baseline`'s in the same rounds, and its ratio
  /// to a plain read of the same weights cut as the baseline's (one more
  /// run in every round; its median GB/s goes to `plainRead`). A
  /// measurement streams the products in turn, layer after layer, as a
  /// decode step does.
  std::vector<DecodeRate> measure(const CpuTarget &target,
                                  const std::vector<DecodeSetting> &candidates,
                                  const DecodeSetting &baseline, int rounds, double &plainRead) {
    compileMissing(target, candidates);
    std::vector<std::function<double()>> runs;
    for (const DecodeSetting &candidate : candidates)
      runs.push_back(
          [&, candidate] { return streamAll(loaded.at(keyOf(candidate)), int(candidate.chunks)); });
    runs.push_back([&] { return readAll(int(baseline.chunks)); });
    const std::vector<std::vector<double>> seconds = timesInterleaved(runs, rounds);
    const size_t plainAt = candidates.size();
    const auto baselineAt = std::find(candidates.begin(), candidates.end(), baseline);
    std::vector<RoundRatios> ratios(runs.size());
    if (baselineAt != candidates.end())
      ratios = ratiosToBaseline(seconds, size_t(baselineAt - candidates.begin()));
    const std::vector<RoundRatios> ofPlainRead = ratiosToBaseline(seconds, plainAt);
    const double bytes = double(layers * layerBytes);
    std::vector<DecodeRate> measured;
    for (size_t i = 0; i < candidates.size(); ++i)
      measured.push_back({candidates[i], bytes / quantile(seconds[i], 0.5) / 1e9, ratios[i].median,
                          ratios[i].lowerQuartile, ofPlainRead[i].median});
    plainRead = bytes / quantile(seconds[plainAt], 0.5) / 1e9;
    return measured;
  }

private:
  // One compiled kernel per product, prefetch distance and stream count.
  using KernelKey = std::pair<int64_t, int64_t>;
  using KernelsBySetting = std::map<KernelKey, std::vector<LoadedTuningKernel>>;
  static KernelKey keyOf(const DecodeSetting &s) { return {s.prefetchBytes, s.streams}; }

  /// Compiles the kernels of the candidates' settings that an earlier stage
  /// did not (the second stage's baseline is one of the first's settings).
  void compileMissing(const CpuTarget &target, const std::vector<DecodeSetting> &candidates) {
    std::vector<FusedLinearKernel> kernels;
    std::vector<KernelKey> keys;
    for (const DecodeSetting &c : candidates)
      if (!loaded.count(keyOf(c)) && std::find(keys.begin(), keys.end(), keyOf(c)) == keys.end()) {
        keys.push_back(keyOf(c));
        for (const FusedLinearKernel &product : products) {
          kernels.push_back(product);
          kernels.back().prefetchBytes = c.prefetchBytes;
          kernels.back().decodeStreams = c.streams;
        }
      }
    if (kernels.empty())
      return;
    std::vector<LoadedTuningKernel> compiled = loadTuningKernels(kernels, target);
    for (size_t i = 0; i < compiled.size(); ++i)
      loaded[keys[i / products.size()]].push_back(std::move(compiled[i]));
  }

  /// Seconds to run `perProduct(layer, p)` over every layer's products in
  /// turn, as decode meets them.
  /// Seconds to run every layer's products in order, each one pool loop
  /// of bodyOf(layer, product) = {workgroups, body} cut into `chunks` pieces
  /// per thread, all in one ThreadPool::runLoops as a decode pass runs.
  template <typename BodyOf> double timeEveryProduct(int chunks, BodyOf bodyOf) {
    std::vector<runtime::ThreadPool::Body> bodies;
    std::vector<runtime::ThreadPool::Loop> loops;
    bodies.reserve(size_t(layers) * products.size()); // the loops point into it
    for (int64_t layer = 0; layer < layers; ++layer)
      for (size_t p = 0; p < products.size(); ++p) {
        auto [count, body] = bodyOf(size_t(layer), p);
        bodies.push_back(std::move(body));
        loops.push_back({count, &bodies.back(), chunks});
      }
    const auto start = std::chrono::steady_clock::now();
    pool.runLoops(loops);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  /// Seconds to stream every layer's products once with `entries`.
  double streamAll(const std::vector<LoadedTuningKernel> &entries, int chunks) {
    return timeEveryProduct(chunks, [&](size_t layer, size_t p) {
      const FusedLinearKernel &product = products[p];
      const std::array<void *, 4> buffers = {x.data(), weights.at[layer][p], gains[p].data(),
                                             y.data()};
      const std::array<int64_t, 4> bytes = {product.inFeatures * 4, int64_t(packed[p].size()),
                                            int64_t(gains[p].size()), product.outFeatures * 4};
      const runtime::KernelEntry entry = entries[p].entry;
      runtime::ThreadPool::Body body = [entry, buffers, bytes](int64_t begin, int64_t end) {
        const int64_t scalars[runtime::kFixedKernelScalars] = {1, 1, 1};
        void *pointers[4] = {buffers[0], buffers[1], buffers[2], buffers[3]};
        entry(pointers, bytes.data(), scalars, begin, end);
      };
      return std::make_pair(product.workgroups(), std::move(body));
    });
  }

  /// Seconds to read every layer's product weights once with the bandwidth
  /// probe's loop (four runs side by side per piece), cut into `chunks`
  /// pieces per thread as the products are: what the products would take
  /// if streaming cost nothing but the reads.
  double readAll(int chunks) {
    constexpr int64_t kLine = 64;
    std::atomic<uint64_t> sum{0};
    const double seconds = timeEveryProduct(chunks, [&](size_t layer, size_t p) {
      const uint8_t *data = weights.at[layer][p];
      runtime::ThreadPool::Body body = [data, &sum](int64_t begin, int64_t end) {
        sum.fetch_add(runtime::readLines(data + begin * kLine, (end - begin) * kLine,
                                         runtime::kProbeReadStreams),
                      std::memory_order_relaxed);
      };
      return std::make_pair(int64_t(packed[p].size()) / kLine, std::move(body));
    });
    const uint64_t total = sum.load(); // consumed, so the reads cannot be dropped
    asm volatile("" : : "r"(total) : "memory");
    return seconds;
  }

  const std::vector<FusedLinearKernel> &products;
  runtime::ThreadPool pool;
  std::vector<std::vector<uint8_t>> packed, gains;
  int64_t layerBytes = 0, layers = 0;
  LayerWeights weights;
  std::vector<float> x, y;
  KernelsBySetting loaded;
};

/// What makes a measurement reusable: the CPU, the shapes, the threads, the
/// level, the kernels' source and the bytes streamed ("layers": entries of
/// one product measured alone, or on small pages before that, are not
/// reused).
std::string cacheKey(const CpuTarget &target, const std::vector<FusedLinearKernel> &products,
                     TuneLevel level, int threads) {
  std::string shapes, sources;
  for (const FusedLinearKernel &product : products) {
    shapes += fmt::format(" {}x{}", product.inFeatures, product.outFeatures);
    sources += fusedLinearSource(product);
  }
  return fmt::format(
      "decode layers {} MiB in one run of halving-piece loops, ratios to no prefetch, "
      "streams at the chosen distance, "
      "beside a plain read, {} "
      "{}{} threads {} {} {:016x}",
      kStreamBytes >> 20, target.llvmCpu, llvm::xxHash64(target.features), shapes, threads,
      level == TuneLevel::Full ? "full" : "quick", llvm::xxHash64(sources));
}

std::optional<std::vector<DecodeRate>> cachedRates(const nlohmann::json &entries,
                                                   bool mayBeEmpty = false) {
  if (!entries.is_array() || (entries.empty() && !mayBeEmpty))
    return std::nullopt;
  std::vector<DecodeRate> measured;
  for (const nlohmann::json &entry : entries) {
    if (!entry.is_object())
      return std::nullopt;
    for (const char *key : {"chunks", "prefetch_bytes", "streams"})
      if (!entry.contains(key) || !entry[key].is_number_integer())
        return std::nullopt;
    const int64_t prefetchBytes = entry["prefetch_bytes"].get<int64_t>();
    if (entry["chunks"].get<int64_t>() < 1 || entry["streams"].get<int64_t>() < 1 ||
        (prefetchBytes < 1 && prefetchBytes != kNoPrefetch))
      return std::nullopt;
    for (const char *key : {"gb_s", "relative", "relative_low", "of_plain_read"})
      if (!entry.contains(key) || !entry[key].is_number() || !(entry[key].get<double>() > 0))
        return std::nullopt;
    measured.push_back({{entry["chunks"].get<int64_t>(), entry["prefetch_bytes"].get<int64_t>(),
                         entry["streams"].get<int64_t>()},
                        entry["gb_s"].get<double>(),
                        entry["relative"].get<double>(),
                        entry["relative_low"].get<double>(),
                        entry["of_plain_read"].get<double>()});
  }
  return measured;
}

nlohmann::json ratesJson(const std::vector<DecodeRate> &measured) {
  nlohmann::json entries = nlohmann::json::array();
  for (const DecodeRate &r : measured)
    entries.push_back({{"chunks", r.setting.chunks},
                       {"prefetch_bytes", r.setting.prefetchBytes},
                       {"streams", r.setting.streams},
                       {"gb_s", r.gbPerSecond},
                       {"relative", r.relative},
                       {"relative_low", r.relativeLow},
                       {"of_plain_read", r.ofPlainRead}});
  return entries;
}

/// Both stages from the cache; false when an entry is malformed. (Whether
/// the second stage was measured where the first stage's rates choose is
/// checked by the caller.)
bool readCachedStages(const nlohmann::json &cached, DecodeTuning &tuning) {
  if (!cached.is_object() || !cached.contains("splits_and_distances") ||
      !cached.contains("streams") || !cached.contains("plain_read_gb_s") ||
      !cached["plain_read_gb_s"].is_number() || !(cached["plain_read_gb_s"].get<double>() > 0))
    return false;
  tuning.plainReadGbPerSecond = cached["plain_read_gb_s"].get<double>();
  auto first = cachedRates(cached["splits_and_distances"]);
  auto second = cachedRates(cached["streams"], /*mayBeEmpty=*/true);
  if (!first || !second)
    return false;
  tuning.measured = std::move(*first);
  tuning.streamRates = std::move(*second);
  return true;
}

/// The setting the ratios are taken against: `chunks` pieces per thread
/// and `streams` (0: the defaults), without software prefetch
/// (kBaselineDecodePrefetchBytes).
DecodeSetting baselineSetting(int64_t chunks, int64_t streams) {
  return {chunks > 0 ? chunks : kDefaultDecodeChunks, kBaselineDecodePrefetchBytes,
          streams > 0 ? streams : kDefaultDecodeStreams};
}

/// Whether `a` and `b` agree in every field but `field`.
bool sameExcept(DecodeSetting a, DecodeSetting b, int64_t DecodeSetting::*field) {
  a.*field = b.*field = 0;
  return a == b;
}

/// Among the rates whose other fields are those of `axis`: the value of
/// `field` fastest relative to the default setting among those that beat it
/// clearly (clearlyFaster with kDecodeTieFraction), else axis.*field (the
/// default); the fastest by rate when the default was not measured.
int64_t chooseWithTie(const std::vector<DecodeRate> &measured, int64_t DecodeSetting::*field,
                      const DecodeSetting &axis) {
  const int64_t fallback = axis.*field;
  std::optional<DecodeRate> fastest, clearWinner;
  bool defaultMeasured = false;
  for (const DecodeRate &r : measured) {
    if (!sameExcept(r.setting, axis, field))
      continue;
    if (!fastest || r.gbPerSecond > fastest->gbPerSecond)
      fastest = r;
    const bool clear = clearlyFaster({r.relative, r.relativeLow}, kDecodeTieFraction);
    if (clear && (!clearWinner || r.relative > clearWinner->relative))
      clearWinner = r;
    defaultMeasured |= r.setting.*field == fallback;
  }
  if (!fastest)
    return fallback;
  if (!defaultMeasured)
    return fastest->setting.*field;
  return clearWinner ? clearWinner->setting.*field : fallback;
}

} // namespace

std::string describePrefetch(int64_t prefetchBytes) {
  return prefetchBytes == kNoPrefetch ? std::string(kNoPrefetchSpelling)
                                      : fmt::format("{} bytes", prefetchBytes);
}

bool onAxis(const DecodeTuning &tuning, const DecodeSetting &setting,
            int64_t DecodeSetting::*field) {
  return sameExcept(setting, baselineSetting(tuning.distanceChunks, tuning.baseStreams), field);
}

std::vector<DecodeSetting> decodeCandidates(TuneLevel level, int64_t fixedChunks,
                                            int64_t fixedStreams) {
  const bool full = level == TuneLevel::Full;
  const int64_t streams = fixedStreams > 0 ? fixedStreams : kDefaultDecodeStreams;
  std::vector<DecodeSetting> candidates;
  if (fixedChunks > 0)
    candidates.push_back(baselineSetting(fixedChunks, streams));
  else
    for (int64_t chunks :
         full ? std::vector<int64_t>{1, 2, 4, 8, 16} : std::vector<int64_t>{2, 4, 8})
      candidates.push_back(baselineSetting(chunks, streams));
  const int64_t split = fixedChunks > 0 ? fixedChunks : kDefaultDecodeChunks;
  // Against the baseline, no software prefetch (kBaselineDecodePrefetchBytes
  // says why), the distances.
  for (int64_t bytes : full ? std::vector<int64_t>{2048, 4096, 8192, 16384, 32768}
                            : std::vector<int64_t>{4096, 8192, 16384})
    candidates.push_back({split, bytes, streams});
  return candidates;
}

std::vector<DecodeSetting> decodeStreamCandidates(const DecodeSetting &at) {
  std::vector<DecodeSetting> candidates = {at};
  for (int64_t count : {1, 2, 4})
    if (count != at.streams)
      candidates.push_back({at.chunks, at.prefetchBytes, count});
  return candidates;
}

int64_t chooseDecodeChunks(const std::vector<DecodeRate> &measured, int64_t streams) {
  return chooseWithTie(measured, &DecodeSetting::chunks, baselineSetting(0, streams));
}

int64_t chooseDecodePrefetch(const std::vector<DecodeRate> &measured, int64_t chunks,
                             int64_t streams) {
  return chooseWithTie(measured, &DecodeSetting::prefetchBytes, baselineSetting(chunks, streams));
}

int64_t chooseDecodeStreams(const std::vector<DecodeRate> &measured, const DecodeSetting &at) {
  return chooseWithTie(measured, &DecodeSetting::streams, at);
}

DecodeTuning tuneDecode(const CpuTarget &target, int64_t hidden, int64_t intermediate,
                        const TunedWeights &weights, TuneLevel level, int threads,
                        double maxForeignShare, int64_t fixedChunks, int64_t fixedStreams) {
  requireTunableShape(hidden, intermediate);
  if (threads < 1)
    throw std::invalid_argument("--tune: the decode measurement needs at least one thread");
  // A layer's products as decode streams them, one row each: the gate and
  // up weight, then the down weight, both as plain products (lm_head, q/k/v,
  // o and down, 70% of a 0.6B token's weights, are), so one stream is told
  // apart from two (a SwiGLU product reads its gate and up rows side by
  // side). One product measured alone over 160 MiB ranked the stream counts
  // the other way round from the model (four streams 20-40% under one, where
  // the model decoded 8-20% faster with four).
  const std::vector<FusedLinearKernel> products = {
      tuningProduct("tune_decode_up", hidden, 2 * intermediate, weights, /*swiglu=*/false),
      tuningProduct("tune_decode_down", intermediate, hidden, weights, /*swiglu=*/false)};
  DecodeTuning tuning;
  tuning.threads = threads;
  // The split at which the distances and stream counts are measured, and the
  // stream count at which the splits and distances are: together with the
  // default distance, the ratios' baseline.
  tuning.distanceChunks = fixedChunks > 0 ? fixedChunks : kDefaultDecodeChunks;
  tuning.baseStreams = fixedStreams > 0 ? fixedStreams : kDefaultDecodeStreams;
  std::string key = cacheKey(target, products, level, threads);
  if (fixedChunks > 0)
    key += fmt::format(" split {}", fixedChunks);
  if (fixedStreams > 0)
    key += fmt::format(" streams {}", fixedStreams);
  const DecodeSetting baseline = baselineSetting(tuning.distanceChunks, tuning.baseStreams);
  // The first stage's choices, which the second stage measures at.
  auto chooseSplitAndDistance = [&] {
    tuning.chosen = {
        fixedChunks > 0 ? fixedChunks : chooseDecodeChunks(tuning.measured, tuning.baseStreams),
        chooseDecodePrefetch(tuning.measured, tuning.distanceChunks, tuning.baseStreams),
        tuning.baseStreams};
    tuning.streamsMeasuredAt = tuning.chosen;
  };
  // A cached second stage must have been measured where the first stage's
  // rates choose now.
  auto cachedStagesAgree = [&] {
    chooseSplitAndDistance();
    const DecodeSetting &at = tuning.streamsMeasuredAt;
    return std::all_of(
        tuning.streamRates.begin(), tuning.streamRates.end(), [&](const DecodeRate &r) {
          return r.setting.chunks == at.chunks && r.setting.prefetchBytes == at.prefetchBytes;
        });
  };
  const std::string path = tuningCachePath();
  if (readCachedStages(readTuningCache(path, key), tuning) && cachedStagesAgree()) {
    tuning.provenance.cached = true;
    tuning.provenance.cachePath = path;
  } else {
    tuning.provenance = measureAndCache(key, maxForeignShare, [&] {
      ProductLayers layers(products, threads);
      tuning.measured = layers.measure(target, decodeCandidates(level, fixedChunks, fixedStreams),
                                       baseline, roundsFor(level), tuning.plainReadGbPerSecond);
      chooseSplitAndDistance();
      // The plain read of the stage that measures the chosen setting: the
      // second, when there is one.
      if (fixedStreams == 0)
        tuning.streamRates =
            layers.measure(target, decodeStreamCandidates(tuning.streamsMeasuredAt),
                           tuning.streamsMeasuredAt, roundsFor(level), tuning.plainReadGbPerSecond);
      return nlohmann::json{{"splits_and_distances", ratesJson(tuning.measured)},
                            {"streams", ratesJson(tuning.streamRates)},
                            {"plain_read_gb_s", tuning.plainReadGbPerSecond}};
    });
  }
  if (fixedStreams == 0)
    tuning.chosen.streams = chooseDecodeStreams(tuning.streamRates, tuning.streamsMeasuredAt);
  return tuning;
}

const DecodeRate *chosenRate(const DecodeTuning &tuning) {
  const std::vector<DecodeRate> &stage =
      tuning.streamRates.empty() ? tuning.measured : tuning.streamRates;
  for (const DecodeRate &r : stage)
    if (r.setting == tuning.chosen)
      return &r;
  return nullptr;
}

void recordDecodeTuning(mlir::ModuleOp module, const DecodeTuning &tuning) {
  TuningRecord record(module);
  mlir::Builder &b = record.builder;
  // Each axis at the others' values it was measured at: the splits at the
  // default distance, the distances at the split (the default, or the one
  // --decode-chunks gave), the stream counts at the split and distance chosen.
  llvm::SmallVector<mlir::NamedAttribute> splitRates, prefetchRates, streamRates;
  for (const DecodeRate &r : tuning.measured) {
    const DecodeSetting &s = r.setting;
    if (onAxis(tuning, s, &DecodeSetting::chunks))
      splitRates.push_back(
          b.getNamedAttr(fmt::format("chunks_{}", s.chunks), record.rate(r.gbPerSecond)));
    if (onAxis(tuning, s, &DecodeSetting::prefetchBytes))
      prefetchRates.push_back(b.getNamedAttr(s.prefetchBytes == kNoPrefetch
                                                 ? std::string(kNoPrefetchSpelling)
                                                 : fmt::format("bytes_{}", s.prefetchBytes),
                                             record.rate(r.gbPerSecond)));
  }
  for (const DecodeRate &r : tuning.streamRates)
    streamRates.push_back(
        b.getNamedAttr(fmt::format("streams_{}", r.setting.streams), record.rate(r.gbPerSecond)));
  if (tuning.streamRates.empty()) // --decode-streams: the given count's rate at the defaults
    for (const DecodeRate &r : tuning.measured)
      if (onAxis(tuning, r.setting, &DecodeSetting::chunks) &&
          onAxis(tuning, r.setting, &DecodeSetting::prefetchBytes))
        streamRates.push_back(b.getNamedAttr(fmt::format("streams_{}", r.setting.streams),
                                             record.rate(r.gbPerSecond)));
  record.set("decode_chunks", b.getI64IntegerAttr(tuning.chosen.chunks));
  record.set("decode_gb_s", b.getDictionaryAttr(splitRates));
  record.set(kMeasuredPrefetchKey, measuredPrefetchAttr(b, tuning.chosen.prefetchBytes));
  record.set("decode_prefetch_gb_s", b.getDictionaryAttr(prefetchRates));
  record.set("decode_streams", b.getI64IntegerAttr(tuning.chosen.streams));
  record.set("decode_streams_gb_s", b.getDictionaryAttr(streamRates));
  record.set("decode_plain_read_gb_s", record.rate(tuning.plainReadGbPerSecond));
  if (const DecodeRate *chosen = chosenRate(tuning))
    record.set("decode_chosen_of_plain_read",
               b.getF64FloatAttr(std::round(chosen->ofPlainRead * 1000) / 1000));
  record.setOthersShare("decode_others_share", tuning.provenance);
  std::string measuredOn = fmt::format("one-row products of the gate and up, then the down "
                                       "weight, layer after layer, {} threads",
                                       tuning.threads);
  if (!tuning.streamRates.empty())
    measuredOn += fmt::format("; the stream counts at {} pieces per thread, prefetch {}",
                              tuning.streamsMeasuredAt.chunks,
                              describePrefetch(tuning.streamsMeasuredAt.prefetchBytes));
  record.set("decode_measured_on", b.getStringAttr(measuredOn));
  record.commit();
}

} // namespace q3::cpu
