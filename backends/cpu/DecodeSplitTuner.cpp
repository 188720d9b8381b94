//===- DecodeSplitTuner.cpp - measure decode attention's position splits --===//
#include "backends/cpu/DecodeSplitTuner.h"
#include "backends/cpu/CpuTarget.h"
#include "backends/cpu/DecodeTuner.h"
#include "backends/cpu/TuningKernel.h"
#include "backends/cpu/TuningRecord.h"
#include "backends/cpu/passes/CpuPasses.h"
#include "runtime/HostBuffer.h"
#include "runtime/KernelABI.h"
#include "runtime/ThreadPool.h"

#include "llvm/Support/xxhash.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

namespace q3::cpu {
namespace {

constexpr int64_t kPositions = 2048; // a long context: attention is much of decode there
// Caches of their own in the model's cache type, 256 MiB in all for
// Qwen3-0.6B's shape with f32 (128 with f16), so the step streams from
// memory. Over 4 layers of 4096 f32 positions (128 MiB), one run side by side
// measured 1.2-1.3x faster than four in some compiles while in the model it
// read 15% slower after 2048 tokens (AMD family 26, 2026-12-03); over 16
// layers one measured 0.93-1.06 of four.
constexpr int64_t kLayers = 16;
constexpr int kRepetitions = 5;

std::string candidateName(const DecodeSplitRate &setting, int64_t baseStreams) {
  std::string name = fmt::format("splits{}", setting.splits);
  if (setting.streams != baseStreams)
    name += fmt::format("_streams{}", setting.streams);
  if (setting.prefetchBytes == kNoPrefetch)
    name += "_prefetch_none";
  return name;
}

AttentionKernel measuredKernel(const AttentionKernel &shape, const DecodeSplitRate &setting) {
  AttentionKernel kernel = shape;
  kernel.name = "tune_decode_" + candidateName(setting, 0);
  kernel.paths = AttentionKernel::Paths::DecodeOnly;
  kernel.decodeStreams = setting.streams;
  kernel.bf16Prefill = false;
  kernel.prefillRowSets = 1;
  kernel.decodeSplits = setting.splits;
  kernel.prefetchBytes = setting.prefetchBytes;
  return kernel;
}

/// Values in [-0.5, 0.5) from a multiplicative hash of the index: cheap to
/// fill hundreds of MB with, and no two rows alike.
void fillPattern(float *values, size_t count, uint32_t seed) {
  for (size_t i = 0; i < count; ++i)
    values[i] = float((uint32_t(i) * 2654435761u + seed) >> 8) * (1.0f / 16777216.0f) - 0.5f;
}

/// One decode step's attention over kPositions cached positions of each of
/// kLayers layers, the same inputs for every kernel measured. The caches are
/// on huge pages, as the runtime's KV cache is (Model.h,
/// kvCacheOnHugePagesPays): decode attention streamed a cache there at 37-39
/// GB/s against 24-35 on small pages (AMD family 26), another memory path.
struct DecodeInputs {
  std::vector<float> q, out;
  // Per layer: [kvHeads][kPositions][headDim] in the model's cache type.
  std::vector<runtime::HostBuffer> keys, values;
  std::vector<uint8_t> workspace;
  size_t layerValues = 0;
  size_t elementBytes = 4;

  DecodeInputs(const AttentionKernel &shape, int64_t workspaceBytes)
      : workspace(size_t(workspaceBytes), 0),
        layerValues(size_t(shape.kvHeads * kPositions * shape.headDim)),
        elementBytes(runtime::dtypeSize(shape.cache)) {
    q.resize(size_t(shape.queryHeads * shape.headDim));
    fillPattern(q.data(), q.size(), 1);
    out.resize(q.size());
    std::vector<float> pattern(layerValues);
    auto filled = [&](uint32_t seed) {
      runtime::HostBuffer buffer(layerValues * elementBytes, runtime::HostBuffer::Pages::Huge);
      fillPattern(pattern.data(), layerValues, seed);
      runtime::convertFromF32(shape.cache, pattern.data(), buffer.data(), layerValues);
      return buffer;
    };
    for (int64_t layer = 0; layer < kLayers; ++layer) {
      keys.push_back(filled(uint32_t(2 * layer + 2)));
      values.push_back(filled(uint32_t(2 * layer + 3)));
    }
  }

  int64_t cacheBytes() const { return kLayers * 2 * int64_t(layerValues * elementBytes); }

  /// Seconds of one step (every layer) of `loaded`, a kernel of `kernel`'s
  /// shape, its workgroups dealt to `pool`'s threads as the runtime deals a
  /// decode dispatch of attention (one contiguous piece each).
  double time(const LoadedTuningKernel &loaded, const AttentionKernel &kernel,
              runtime::ThreadPool &pool) {
    const int64_t scalars[] = {1, kPositions, kPositions}; // rows, visible, capacity
    const auto start = std::chrono::steady_clock::now();
    for (int64_t layer = 0; layer < kLayers; ++layer) {
      void *buffers[] = {q.data(), keys[size_t(layer)].data(), values[size_t(layer)].data(),
                         out.data(), workspace.data()};
      const int64_t bytes[] = {int64_t(q.size() * 4), int64_t(layerValues * elementBytes),
                               int64_t(layerValues * elementBytes), int64_t(out.size() * 4),
                               int64_t(workspace.size())};
      pool.parallelFor(kernel.workgroupsPerRow(), [&](int64_t begin, int64_t end) {
        loaded.entry(buffers, bytes, scalars, begin, end);
      });
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
};

/// Each setting's median rate and its per-round ratios to `settings[base]`.
std::vector<DecodeSplitRate> measure(const AttentionKernel &shape, const CpuTarget &target,
                                     const std::vector<DecodeSplitRate> &settings, size_t base,
                                     int threads) {
  std::vector<AttentionKernel> kernels;
  std::vector<std::string> sources, names;
  int64_t workspaceBytes = 0;
  for (const DecodeSplitRate &setting : settings) {
    kernels.push_back(measuredKernel(shape, setting));
    sources.push_back(attentionSource(kernels.back()));
    names.push_back(kernels.back().name);
    workspaceBytes = std::max(workspaceBytes, kernels.back().workspaceBytes());
  }
  const std::vector<LoadedTuningKernel> loaded = loadTuningSources(sources, names, target);
  DecodeInputs inputs(shape, workspaceBytes);
  runtime::ThreadPool pool(threads, runtime::kKernelStackBytes);
  std::vector<std::function<double()>> runs;
  for (size_t i = 0; i < kernels.size(); ++i)
    runs.push_back([&, i] { return inputs.time(loaded[i], kernels[i], pool); });
  const std::vector<std::vector<double>> seconds = timesInterleaved(runs, kRepetitions);
  const std::vector<RoundRatios> ratios = ratiosToBaseline(seconds, base);
  std::vector<DecodeSplitRate> rates;
  for (size_t i = 0; i < kernels.size(); ++i)
    rates.push_back({kernels[i].decodeSplits,
                     double(inputs.cacheBytes()) / quantile(seconds[i], 0.5) / 1e9,
                     kernels[i].decodeStreams, kernels[i].prefetchBytes, ratios[i].median,
                     ratios[i].lowerQuartile});
  return rates;
}

std::string cacheKey(const CpuTarget &target, const AttentionKernel &shape,
                     const std::vector<DecodeSplitRate> &settings, int threads) {
  std::string sources;
  for (const DecodeSplitRate &setting : settings)
    sources += attentionSource(measuredKernel(shape, setting));
  return fmt::format(
      "decode-splits huge-pages medians and ratios {} positions x {} layers, {} {:016x} {} "
      "threads {} {}x{}x{} [{}] {:016x}",
      kPositions, kLayers, target.llvmCpu, llvm::xxHash64(target.features),
      target.requiredFeatures.size(), threads, shape.queryHeads, shape.kvHeads, shape.headDim,
      fmt::join(shape.kvHeadMap, ","), llvm::xxHash64(sources));
}

} // namespace

std::vector<int64_t> decodeSplitCandidates(const AttentionKernel &shape, int64_t threads) {
  const int64_t covering = shape.coveringDecodeSplits(threads);
  std::vector<int64_t> candidates = {1, covering,
                                     std::min(2 * covering, AttentionKernel::kMaxDecodeSplits)};
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  return candidates;
}

std::vector<DecodeSplitRate> decodeSplitSettings(const AttentionKernel &shape, int64_t threads,
                                                 int64_t fixedStreams) {
  const int64_t streams = fixedStreams > 0 ? fixedStreams : kDefaultDecodeStreams;
  std::vector<DecodeSplitRate> settings;
  for (int64_t splits : decodeSplitCandidates(shape, threads))
    settings.push_back({splits, 0, streams});
  const int64_t covering = shape.coveringDecodeSplits(threads);
  // One stream is not a candidate: in the model after 2048 tokens it read
  // the cache 15% slower than 2 or 4 (AMD family 26) while this step put it
  // at 0.93-1.06 of 4; the tuner here put it at 0.86 (AMD family 25).
  if (fixedStreams == 0)
    for (int64_t count : {2, 4})
      if (count != streams)
        settings.push_back({covering, 0, count});
  settings.push_back({covering, 0, streams, kNoPrefetch});
  return settings;
}

DecodeSplitRate chooseAttentionDecode(const std::vector<DecodeSplitRate> &rates,
                                      const DecodeSplitRate &base) {
  const DecodeSplitRate *chosen = nullptr;
  for (const DecodeSplitRate &r : rates) {
    if (!clearlyFaster({r.relative, r.relativeLow}, kDecodeTieFraction))
      continue; // also a rate without ratios (0, 0)
    if (!chosen ||
        std::pair(r.relative, r.relativeLow) > std::pair(chosen->relative, chosen->relativeLow))
      chosen = &r;
  }
  return chosen ? *chosen : base;
}

DecodeSplitTuning tuneDecodeSplits(const CpuTarget &target, const AttentionKernel &modelShape,
                                   int threads, double maxForeignShare, int64_t fixedStreams) {
  if (!modelShape.vectorized())
    throw std::invalid_argument("--tune: decode attention of head_dim " +
                                std::to_string(modelShape.headDim) + " does not split");
  // The value passes cpu-set-decode-accumulators will give the kernel.
  AttentionKernel shape = modelShape;
  shape.decodeAccumulators =
      decodeValueAccumulatorsFor(target, shape.headsPerWorkgroup(), shape.valueColumns());
  const std::vector<DecodeSplitRate> candidates = decodeSplitSettings(shape, threads, fixedStreams);
  DecodeSplitTuning tuning;
  tuning.threads = threads;
  tuning.positions = kPositions;
  tuning.baseStreams = fixedStreams > 0 ? fixedStreams : kDefaultDecodeStreams;
  const int64_t covering = shape.coveringDecodeSplits(threads);
  // The ratios' baseline: the covering split at the base count and distance.
  const size_t base = size_t(std::find_if(candidates.begin(), candidates.end(),
                                          [&](const DecodeSplitRate &c) {
                                            return c.splits == covering &&
                                                   c.streams == tuning.baseStreams &&
                                                   c.prefetchBytes == kDefaultPrefetchBytes;
                                          }) -
                             candidates.begin());
  // Cached as one list of numbers: the rates, then each one's median and
  // lower-quartile ratio.
  std::vector<std::string> names;
  for (const char *suffix : {"", "_ratio", "_ratio_low"})
    for (const DecodeSplitRate &setting : candidates)
      names.push_back(candidateName(setting, tuning.baseStreams) + suffix);
  const std::vector<double> numbers = namedRatesCachedOrMeasured(
      cacheKey(target, shape, candidates, threads), names, maxForeignShare,
      [&] {
        std::vector<double> rates, ratios, lows;
        for (const DecodeSplitRate &r : measure(shape, target, candidates, base, threads)) {
          rates.push_back(r.gbPerSecond);
          ratios.push_back(r.relative);
          lows.push_back(r.relativeLow);
        }
        rates.insert(rates.end(), ratios.begin(), ratios.end());
        rates.insert(rates.end(), lows.begin(), lows.end());
        return rates;
      },
      tuning.provenance);
  const size_t n = candidates.size();
  for (size_t i = 0; i < n; ++i)
    tuning.measured.push_back({candidates[i].splits, numbers[i], candidates[i].streams,
                               candidates[i].prefetchBytes, numbers[n + i], numbers[2 * n + i]});
  tuning.chosen = chooseAttentionDecode(tuning.measured, candidates[base]);
  return tuning;
}

void recordDecodeSplitTuning(mlir::ModuleOp module, const DecodeSplitTuning &tuning) {
  TuningRecord record(module);
  mlir::Builder &b = record.builder;
  llvm::SmallVector<mlir::NamedAttribute> rates;
  for (const DecodeSplitRate &r : tuning.measured)
    rates.push_back(
        b.getNamedAttr(candidateName(r, tuning.baseStreams), record.rate(r.gbPerSecond)));
  record.set("attention_decode_splits", b.getI64IntegerAttr(tuning.chosen.splits));
  record.set("attention_decode_streams", b.getI64IntegerAttr(tuning.chosen.streams));
  record.set(kMeasuredAttentionPrefetchKey, measuredPrefetchAttr(b, tuning.chosen.prefetchBytes));
  record.set("attention_decode_gb_s", b.getDictionaryAttr(rates));
  // The per-round ratios to the default loops: median, lower quartile.
  llvm::SmallVector<mlir::NamedAttribute> ratios;
  for (const DecodeSplitRate &r : tuning.measured)
    ratios.push_back(b.getNamedAttr(
        candidateName(r, tuning.baseStreams),
        b.getArrayAttr({b.getF64FloatAttr(std::round(r.relative * 1000) / 1000),
                        b.getF64FloatAttr(std::round(r.relativeLow * 1000) / 1000)})));
  record.set("attention_decode_ratios", b.getDictionaryAttr(ratios));
  record.setOthersShare("attention_decode_others_share", tuning.provenance);
  record.set("attention_decode_measured_on",
             b.getStringAttr(fmt::format("one decode step over {} f32 positions of {} layers, "
                                         "{} threads",
                                         kPositions, kLayers, tuning.threads)));
  record.commit();
}

} // namespace q3::cpu
