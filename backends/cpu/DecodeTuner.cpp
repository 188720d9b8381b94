//===- DecodeTuner.cpp - measure how decode best streams its products -----===//
#include "backends/cpu/DecodeTuner.h"
#include "backends/cpu/DecodeProductLayers.h"
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

/// What makes a measurement reusable: the CPU, the shapes, the threads, the
/// level, the kernels' source and the bytes streamed ("layers": entries of
/// one product measured alone, or on small pages before that, are not
/// reused).
std::string cacheKey(const CpuTarget &target, const std::vector<FusedLinearKernel> &products,
                     TuneLevel level, int threads) {
  return fmt::format(
      "decode layers {} MiB in one run of halving-piece loops, ratios to no "
      "prefetch, streams at the chosen distance and one other, beside a plain read, {} "
      "{:016x}{} threads {} {}",
      kDecodeStreamBytes >> 20, target.llvmCpu, llvm::xxHash64(target.features),
      productsCacheKey(products, target), threads, level == TuneLevel::Full ? "full" : "quick");
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

int64_t alternateDecodePrefetch(const std::vector<DecodeRate> &measured, int64_t chosenPrefetch,
                                int64_t chunks, int64_t streams) {
  if (chosenPrefetch != kNoPrefetch)
    return kNoPrefetch;
  const DecodeSetting axis = baselineSetting(chunks, streams);
  std::optional<DecodeRate> fastest;
  for (const DecodeRate &r : measured)
    if (r.setting.prefetchBytes != kNoPrefetch &&
        sameExcept(r.setting, axis, &DecodeSetting::prefetchBytes) &&
        (!fastest || r.relative > fastest->relative))
      fastest = r;
  return fastest ? fastest->setting.prefetchBytes : kNoPrefetch;
}

std::vector<DecodeSetting> decodeStreamCandidates(const DecodeSetting &at,
                                                  int64_t alternatePrefetch) {
  std::vector<DecodeSetting> candidates = {at};
  for (int64_t count : {1, 2, 4})
    if (count != at.streams)
      candidates.push_back({at.chunks, at.prefetchBytes, count});
  if (alternatePrefetch != at.prefetchBytes)
    for (int64_t count : {1, 2, 4})
      candidates.push_back({at.chunks, alternatePrefetch, count});
  return candidates;
}

int64_t chooseDecodeChunks(const std::vector<DecodeRate> &measured, int64_t streams) {
  return chooseWithTie(measured, &DecodeSetting::chunks, baselineSetting(0, streams));
}

int64_t chooseDecodePrefetch(const std::vector<DecodeRate> &measured, int64_t chunks,
                             int64_t streams) {
  return chooseWithTie(measured, &DecodeSetting::prefetchBytes, baselineSetting(chunks, streams));
}

DecodeSetting chooseDecodeStreams(const std::vector<DecodeRate> &measured,
                                  const DecodeSetting &at) {
  std::optional<DecodeRate> clearWinner;
  for (const DecodeRate &r : measured)
    if (r.setting.chunks == at.chunks &&
        clearlyFaster({r.relative, r.relativeLow}, kDecodeTieFraction) &&
        (!clearWinner || r.relative > clearWinner->relative))
      clearWinner = r;
  return clearWinner ? clearWinner->setting : at;
}

DecodeTuning tuneDecode(const CpuTarget &target, int64_t hidden, int64_t intermediate,
                        const TunedWeights &weights, TuneLevel level, int threads,
                        double maxForeignShare, int64_t fixedChunks, int64_t fixedStreams) {
  requireTunableShape(hidden, intermediate);
  if (threads < 1)
    throw std::invalid_argument("--tune: the decode measurement needs at least one thread");
  const std::vector<FusedLinearKernel> products =
      decodeTuningProducts(hidden, intermediate, weights);
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
  // The second stage's settings, from the first stage's rates.
  auto streamCandidates = [&] {
    const DecodeSetting &at = tuning.streamsMeasuredAt;
    return decodeStreamCandidates(at, alternateDecodePrefetch(tuning.measured, at.prefetchBytes,
                                                              tuning.distanceChunks,
                                                              tuning.baseStreams));
  };
  // A cached second stage must be the one the first stage's rates choose now.
  auto cachedStagesAgree = [&] {
    chooseSplitAndDistance();
    if (fixedStreams > 0)
      return tuning.streamRates.empty();
    const std::vector<DecodeSetting> expected = streamCandidates();
    return tuning.streamRates.size() == expected.size() &&
           std::equal(expected.begin(), expected.end(), tuning.streamRates.begin(),
                      [](const DecodeSetting &s, const DecodeRate &r) { return s == r.setting; });
  };
  const std::string path = tuningCachePath();
  if (readCachedStages(readTuningCache(path, key), tuning) && cachedStagesAgree()) {
    tuning.provenance.cached = true;
    tuning.provenance.cachePath = path;
  } else {
    tuning.provenance = measureAndCache(key, maxForeignShare, [&] {
      runtime::ThreadPool pool(threads, runtime::kKernelStackBytes);
      ProductLayers layers(products, pool);
      tuning.measured =
          layers.measure(target, decodeCandidates(level, fixedChunks, fixedStreams), baseline,
                         decodeMeasurementRounds(level), tuning.plainReadGbPerSecond);
      chooseSplitAndDistance();
      // The plain read of the stage that measures the chosen setting: the
      // second, when there is one.
      if (fixedStreams == 0)
        tuning.streamRates =
            layers.measure(target, streamCandidates(), tuning.streamsMeasuredAt,
                           decodeMeasurementRounds(level), tuning.plainReadGbPerSecond);
      return nlohmann::json{{"splits_and_distances", ratesJson(tuning.measured)},
                            {"streams", ratesJson(tuning.streamRates)},
                            {"plain_read_gb_s", tuning.plainReadGbPerSecond}};
    });
  }
  if (fixedStreams == 0)
    tuning.chosen = chooseDecodeStreams(tuning.streamRates, tuning.streamsMeasuredAt);
  return tuning;
}

std::string streamRateKey(const DecodeTuning &tuning, const DecodeSetting &setting) {
  std::string key = fmt::format("streams_{}", setting.streams);
  if (setting.prefetchBytes != tuning.streamsMeasuredAt.prefetchBytes)
    key += setting.prefetchBytes == kNoPrefetch
               ? "_prefetch_none"
               : fmt::format("_prefetch_{}", setting.prefetchBytes);
  return key;
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
        b.getNamedAttr(streamRateKey(tuning, r.setting), record.rate(r.gbPerSecond)));
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
    measuredOn += fmt::format("; the stream counts at {} pieces per thread, prefetch {} (and as "
                              "their keys say)",
                              tuning.streamsMeasuredAt.chunks,
                              describePrefetch(tuning.streamsMeasuredAt.prefetchBytes));
  record.set("decode_measured_on", b.getStringAttr(measuredOn));
  record.commit();
}

} // namespace q3::cpu
