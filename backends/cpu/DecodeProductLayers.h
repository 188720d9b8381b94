//===- DecodeProductLayers.h - decode's products laid out to be streamed --===//
//
// What the decode tuners time: a layer's one-row products (their weights in
// the layout the compiled model's will have) copied layer after layer over
// more memory than any cache holds, streamed in turn on a thread pool as a
// decode step streams them. DecodeTuner measures settings on it;
// WeightPackingTuner races the two weight layouts on it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "backends/cpu/CpuTarget.h"
#include "backends/cpu/DecodeTuner.h"
#include "backends/cpu/Tuner.h"
#include "backends/cpu/TuningKernel.h"

#include "runtime/HostBuffer.h"
#include "runtime/ThreadPool.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace q3::cpu {

/// Weight bytes one measurement streams: layers' products, far more than a
/// last-level cache (32 MiB here) and as much as a small model decodes per
/// token. The working set matters beyond the cache: on the AMD EPYC
/// family-26 VM (2026-12-03) the same layers streamed 72-77 GB/s over 160
/// MiB, 62-65 over 256 MiB and 54-56 over 512 MiB or 1.2 GB, the model's
/// products 51-57 in the same minutes; and only from 512 MiB did the stream
/// counts rank as in the model (4 > 2 > 1 by 10-20%; over 160 MiB 2 came
/// out ahead of 4).
inline constexpr int64_t kDecodeStreamBytes = int64_t(512) << 20;

/// Rounds per decode measurement, each streaming 512 MiB per candidate:
/// with quick's, a 0.6B compile with a fresh tuning cache took 6.3-8.2 s in
/// all on the family-26 VM (2026-12-05; the bound is 10 s of tuning).
inline int decodeMeasurementRounds(TuneLevel level) { return level == TuneLevel::Full ? 31 : 11; }

/// A layer's products as decode streams them, one row each, their weights
/// held as `weights` says: the gate and up weight, then the down weight,
/// both as plain products (lm_head, q/k/v, o and down, 70% of a 0.6B
/// token's weights, are), so one stream is told apart from two (a SwiGLU
/// product reads its gate and up rows side by side). One product measured
/// alone over 160 MiB ranked the stream counts the other way round from the
/// model (four streams 20-40% under one, where the model decoded 8-20%
/// faster with four).
std::vector<FusedLinearKernel> decodeTuningProducts(int64_t hidden, int64_t intermediate,
                                                    const TunedWeights &weights);

/// What names `products` in a tuning cache key: their shapes (" KxN" each)
/// and a hash of their kernels' sources for `target` at each stream count,
/// so a changed kernel is measured again.
std::string productsCacheKey(const std::vector<FusedLinearKernel> &products,
                             const CpuTarget &target);

/// Decode's products laid out over kDecodeStreamBytes of layers, streamed on
/// `pool`'s threads: built once for every stage of a measurement (filling
/// 512 MiB of huge pages is a good part of its time).
class ProductLayers {
public:
  ProductLayers(const std::vector<FusedLinearKernel> &products, runtime::ThreadPool &pool);

  /// The median GB/s of each candidate over interleaved rounds (the order
  /// rotates each round, so none always runs first after another's
  /// streams), its ratios to `baseline`'s in the same rounds, and its ratio
  /// to a plain read of the same weights cut as the baseline's (one more
  /// run in every round; its median GB/s goes to `plainRead`). A
  /// measurement streams the products in turn, layer after layer, as a
  /// decode step does.
  std::vector<DecodeRate> measure(const CpuTarget &target,
                                  const std::vector<DecodeSetting> &candidates,
                                  const DecodeSetting &baseline, int rounds, double &plainRead);

  /// One stream of every layer's products with `setting` (compiled now),
  /// timed: a run for timesInterleaved beside other layers' runs.
  std::function<double()> streamRun(const CpuTarget &target, const DecodeSetting &setting);

  /// The weight bytes one stream reads.
  int64_t streamedBytes() const { return layers * layerBytes; }

private:
  // One compiled kernel per product, prefetch distance and stream count.
  using KernelKey = std::pair<int64_t, int64_t>;
  using KernelsBySetting = std::map<KernelKey, std::vector<LoadedTuningKernel>>;
  static KernelKey keyOf(const DecodeSetting &s) { return {s.prefetchBytes, s.streams}; }

  /// Where the products' weights lie: `layers` copies of each product's.
  struct LayerWeights {
    runtime::HostBuffer memory;
    std::vector<std::vector<uint8_t *>> at; // [layer][product]
  };
  static LayerWeights layerWeights(const std::vector<std::vector<uint8_t>> &packed, int64_t layers,
                                   runtime::ThreadPool &pool);

  void compileMissing(const CpuTarget &target, const std::vector<DecodeSetting> &candidates);
  template <typename BodyOf> double timeEveryProduct(int chunks, BodyOf bodyOf);
  double streamAll(const std::vector<LoadedTuningKernel> &entries, int chunks);
  double readAll(int chunks);

  const std::vector<FusedLinearKernel> &products;
  runtime::ThreadPool &pool;
  std::vector<std::vector<uint8_t>> packed, gains;
  int64_t layerBytes = 0, layers = 0;
  LayerWeights weights;
  std::vector<float> x, y;
  std::vector<std::vector<uint8_t>> threadScratch; // per pool slot, for one row
  KernelsBySetting loaded;
};

} // namespace q3::cpu
