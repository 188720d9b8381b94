//===- WeightPackingTuner.cpp - whether packing the weights at load pays --===//
#include "backends/cpu/WeightPackingTuner.h"
#include "backends/cpu/DecodeProductLayers.h"
#include "backends/cpu/DecodeTuner.h"
#include "backends/cpu/TuningKernel.h"
#include "backends/cpu/TuningRecord.h"
#include "backends/cpu/passes/CpuPasses.h"

#include "runtime/HostBuffer.h"
#include "runtime/KernelABI.h"
#include "runtime/ThreadPool.h"
#include "runtime/WeightLayout.h"

#include "llvm/Support/xxhash.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <vector>

namespace q3::cpu {
namespace {

/// The measured weight: rows of a 0.6B product's K, 128 MiB of them (a
/// measurement must be long next to a page fault's cost, and a few of them
/// short next to a compile).
constexpr int64_t kColumns = 1024;
constexpr int64_t kProbeBytes = int64_t(128) << 20;

/// Rounds, each into fresh memory: the median is taken.
int roundsFor(TuneLevel level) { return level == TuneLevel::Full ? 7 : 3; }

std::string cacheKey(const CpuTarget &target, TuneLevel level, int threads) {
  return fmt::format(
      "weight packing into huge pages new to the process, {} MiB of {}-column rows, {} "
      "{:016x} threads {} {}",
      kProbeBytes >> 20, kColumns, target.llvmCpu, llvm::xxHash64(target.features), threads,
      level == TuneLevel::Full ? "full" : "quick");
}

/// Seconds the load's packing takes to write the row-major `source` (warm,
/// as a checkpoint in the page cache is) into memory this process has not
/// touched, on `pool`'s threads, as runtime/WeightPlan.cpp packs a weight.
/// The memory written is kept in `written`: freed, the next round would get
/// the same pages back, warm, where a load's are new to it. (On the family
/// 26 VM, 2026-12-05, memory freed a few seconds before is handed back to
/// the host: a first touch ran 0.6-2.2 GB/s there against 12.6 GB/s into
/// pages freed just before, and the median of rounds that reused them
/// estimated 0.1 s for a 0.6B packing whose loads then took 0.4-2.5 s.)
double packIntoFreshMemory(runtime::ThreadPool &pool, const uint16_t *source,
                           std::vector<runtime::HostBuffer> &written) {
  const int64_t blocks = kProbeBytes / 2 / kColumns / runtime::kColumnBlockRows;
  const auto start = std::chrono::steady_clock::now();
  runtime::HostBuffer &fresh =
      written.emplace_back(size_t(kProbeBytes), runtime::HostBuffer::Pages::Huge);
  auto *to = reinterpret_cast<uint16_t *>(fresh.data());
  pool.parallelFor(
      blocks,
      [&](int64_t begin, int64_t end) {
        runtime::packColumnBlocks(source, to, kColumns, begin, end);
      },
      16);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// The median GB/s of the packing over `rounds` fresh buffers.
double measurePackRate(int threads, int rounds) {
  runtime::ThreadPool pool(threads);
  // On huge pages, as a checkpoint the page cache holds in huge folios is
  // mapped (q3run reads it back that way when it is not): the packing reads
  // 16 rows side by side, and on small pages its TLB misses made the rate a
  // quarter of a load's (1.5 against ~6 GB/s on an AMD EPYC family 25 VM).
  runtime::HostBuffer sourceMemory(size_t(kProbeBytes), runtime::HostBuffer::Pages::Huge);
  auto *source = reinterpret_cast<uint16_t *>(sourceMemory.data());
  pool.parallelFor(kProbeBytes / 2, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) // touched, so only the destination is fresh
      source[i] = uint16_t(0x3f80 + (i & 0x7f));
  });
  std::vector<double> seconds;
  std::vector<runtime::HostBuffer> written;
  written.reserve(size_t(rounds));
  for (int round = 0; round < rounds; ++round)
    seconds.push_back(packIntoFreshMemory(pool, source, written));
  return double(kProbeBytes) / quantile(seconds, 0.5) / 1e9;
}

std::string raceCacheKey(const CpuTarget &target, const std::vector<FusedLinearKernel> &perCall,
                         const std::vector<FusedLinearKernel> &atLoad, TuneLevel level,
                         int threads) {
  return fmt::format("weight layouts raced in decode, {} MiB of layers, {} {:016x} per call{} "
                     "packed{} threads {} {}",
                     kDecodeStreamBytes >> 20, target.llvmCpu, llvm::xxHash64(target.features),
                     productsCacheKey(perCall, target), productsCacheKey(atLoad, target), threads,
                     level == TuneLevel::Full ? "full" : "quick");
}

/// Streams decode's products per call and packed in interleaved rounds at
/// the default decode setting (the decode tuner then tunes the chosen
/// layout): {per-call GB/s, packed GB/s, the packed one's median ratio to
/// per call in the same rounds, its lower quartile}.
std::vector<double> raceLayouts(const CpuTarget &target,
                                const std::vector<FusedLinearKernel> &perCall,
                                const std::vector<FusedLinearKernel> &atLoad, int threads,
                                int rounds) {
  // One pool: an idle second one would spin beside the first.
  runtime::ThreadPool pool(threads, runtime::kKernelStackBytes);
  ProductLayers perCallLayers(perCall, pool), atLoadLayers(atLoad, pool);
  const DecodeSetting setting{kDefaultDecodeChunks, kBaselineDecodePrefetchBytes,
                              kDefaultDecodeStreams};
  const std::vector<std::vector<double>> seconds = timesInterleaved(
      {perCallLayers.streamRun(target, setting), atLoadLayers.streamRun(target, setting)}, rounds);
  const RoundRatios packed = ratiosToBaseline(seconds, 0).at(1);
  return {double(perCallLayers.streamedBytes()) / quantile(seconds[0], 0.5) / 1e9,
          double(atLoadLayers.streamedBytes()) / quantile(seconds[1], 0.5) / 1e9, packed.median,
          packed.lowerQuartile};
}

} // namespace

bool packingFitsTheLoad(int64_t packedBytes, double packGbPerSecond) {
  return packGbPerSecond > 0 &&
         double(packedBytes) / (packGbPerSecond * 1e9) <= kPackAtLoadBudgetSeconds;
}

std::string chooseWeightPacking(int64_t packedBytes, double packGbPerSecond,
                                const std::optional<RoundRatios> &atLoadOverPerCall) {
  return packingFitsTheLoad(packedBytes, packGbPerSecond) && atLoadOverPerCall &&
                 clearlyFaster(*atLoadOverPerCall, kPackAtLoadDecodeTie)
             ? "at_load"
             : "per_call";
}

WeightPackingTuning tuneWeightPacking(const CpuTarget &target, int64_t packedBytes, int64_t hidden,
                                      int64_t intermediate, DType dtype, TuneLevel level,
                                      int threads, double maxForeignShare) {
  if (threads < 1)
    throw std::invalid_argument("--tune: the weight-packing measurement needs at least one thread");
  WeightPackingTuning tuning;
  tuning.threads = threads;
  tuning.packedBytes = packedBytes;
  const std::vector<double> rates = namedRatesCachedOrMeasured(
      cacheKey(target, level, threads), {"pack_gb_s"}, maxForeignShare,
      [&] { return std::vector<double>{measurePackRate(threads, roundsFor(level))}; },
      tuning.provenance);
  tuning.packGbPerSecond = rates.at(0);
  tuning.estimatedSeconds = double(packedBytes) / (tuning.packGbPerSecond * 1e9);
  std::optional<RoundRatios> atLoadOverPerCall;
  if (packingFitsTheLoad(packedBytes, tuning.packGbPerSecond)) {
    const auto perCall = decodeTuningProducts(hidden, intermediate, {dtype, /*packPerCall=*/true});
    const auto atLoad = decodeTuningProducts(hidden, intermediate, {dtype, /*packPerCall=*/false});
    WeightPackingTuning::Race race;
    const std::vector<double> raced = namedRatesCachedOrMeasured(
        raceCacheKey(target, perCall, atLoad, level, threads),
        {"per_call_gb_s", "at_load_gb_s", "ratio", "ratio_low"}, maxForeignShare,
        [&] {
          return raceLayouts(target, perCall, atLoad, threads, decodeMeasurementRounds(level));
        },
        race.provenance);
    race.perCallGbPerSecond = raced.at(0);
    race.atLoadGbPerSecond = raced.at(1);
    race.atLoadOverPerCall = {raced.at(2), raced.at(3)};
    atLoadOverPerCall = race.atLoadOverPerCall;
    tuning.race = race;
  }
  tuning.chosen = chooseWeightPacking(packedBytes, tuning.packGbPerSecond, atLoadOverPerCall);
  return tuning;
}

void recordWeightPackingTuning(mlir::ModuleOp module, const WeightPackingTuning &tuning) {
  TuningRecord record(module);
  mlir::Builder &b = record.builder;
  record.set(kMeasuredWeightPackingKey, b.getStringAttr(tuning.chosen));
  record.set("weight_packing_gb_s", record.rate(tuning.packGbPerSecond));
  record.set("weight_packing_estimate_s",
             b.getF64FloatAttr(std::round(tuning.estimatedSeconds * 100) / 100));
  record.setOthersShare("weight_packing_others_share", tuning.provenance);
  if (tuning.race) {
    const WeightPackingTuning::Race &race = *tuning.race;
    record.set(
        "weight_packing_decode_gb_s",
        b.getDictionaryAttr({b.getNamedAttr("per_call", record.rate(race.perCallGbPerSecond)),
                             b.getNamedAttr("at_load", record.rate(race.atLoadGbPerSecond))}));
    record.set("weight_packing_decode_ratio",
               b.getF64FloatAttr(std::round(race.atLoadOverPerCall.median * 1000) / 1000));
    record.setOthersShare("weight_packing_decode_others_share", race.provenance);
  }
  record.commit();
}

} // namespace q3::cpu
