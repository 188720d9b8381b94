//===- DecodeProductLayers.cpp - decode's products laid out to be streamed ===//
#include "backends/cpu/DecodeProductLayers.h"

#include "runtime/KernelABI.h"
#include "runtime/MemoryBandwidth.h"

#include "llvm/Support/xxhash.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>

namespace q3::cpu {
namespace {

/// At most this many layers per measurement: a tiny model's (the tests')
/// would otherwise take ten thousand dispatches each.
constexpr int64_t kMaxLayers = 1024;

/// Each weight starts on a cache line, as the plain read beside the
/// products needs (its loads are aligned).
int64_t lineRounded(size_t bytes) { return (int64_t(bytes) + 63) / 64 * 64; }

} // namespace

std::vector<FusedLinearKernel> decodeTuningProducts(int64_t hidden, int64_t intermediate,
                                                    const TunedWeights &weights) {
  return {tuningProduct("tune_decode_up", hidden, 2 * intermediate, weights, /*swiglu=*/false),
          tuningProduct("tune_decode_down", intermediate, hidden, weights, /*swiglu=*/false)};
}

std::string productsCacheKey(const std::vector<FusedLinearKernel> &products,
                             const CpuTarget &target) {
  std::string shapes, sources;
  for (const FusedLinearKernel &product : products) {
    shapes += fmt::format(" {}x{}", product.inFeatures, product.outFeatures);
    // Each stream count's kernel as loadTuningKernels builds it.
    for (int64_t streams : {1, 2, 4}) {
      FusedLinearKernel variant = product;
      variant.decodeStreams = streams;
      sources += fusedLinearSource(builtForTarget(variant, target));
    }
  }
  return fmt::format("{} {:016x}", shapes, llvm::xxHash64(sources));
}

/// Where the measured products' weights lie: `layers` copies of each
/// product's, one after the other like a checkpoint's tensors, each start
/// moved on by a few KiB (a checkpoint's small norm tensors do that). Over
/// 160 MiB of copies a whole power of two apart, four streams measured 40%
/// under one; staggered, within 5% (AMD EPYC family 26, 2026-12-03; runs
/// meeting in the same DRAM banks would do it, not verified).
ProductLayers::LayerWeights
ProductLayers::layerWeights(const std::vector<std::vector<uint8_t>> &packed, int64_t layers,
                            runtime::ThreadPool &pool) {
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
      w.at.back().push_back(cursor);
      cursor += lineRounded(weight.size());
    }
  }
  // Copied on every thread: the first touch of fresh memory is most of the
  // time (on a VM, 0.4-0.8 GB/s on one thread), and it spreads.
  pool.parallelFor(layers, [&](int64_t begin, int64_t end) {
    for (int64_t layer = begin; layer < end; ++layer)
      for (size_t p = 0; p < packed.size(); ++p)
        std::memcpy(w.at[size_t(layer)][p], packed[p].data(), packed[p].size());
  });
  return w;
}

ProductLayers::ProductLayers(const std::vector<FusedLinearKernel> &products,
                             runtime::ThreadPool &pool)
    : products(products), pool(pool) {
  std::mt19937 rng(11);
  int64_t widest = 0, longest = 0, scratchBytes = 0;
  for (const FusedLinearKernel &product : products) {
    widest = std::max(widest, product.inFeatures);
    longest = std::max(longest, product.outFeatures);
    scratchBytes = std::max(scratchBytes, product.threadScratch().bytesFor(1));
    packed.push_back(randomWeights(product, rng));
    gains.push_back(randomStored(*product.prologueGain, product.inFeatures, rng));
    layerBytes += int64_t(packed.back().size());
  }
  layers = std::clamp<int64_t>((kDecodeStreamBytes + layerBytes - 1) / layerBytes, 2, kMaxLayers);
  weights = layerWeights(packed, layers, pool);
  x.assign(size_t(widest), 0.5f);
  y.resize(size_t(longest));
  threadScratch.assign(size_t(pool.size()), std::vector<uint8_t>(size_t(scratchBytes)));
}

std::vector<DecodeRate> ProductLayers::measure(const CpuTarget &target,
                                               const std::vector<DecodeSetting> &candidates,
                                               const DecodeSetting &baseline, int rounds,
                                               double &plainRead) {
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

/// Compiles the kernels of the candidates' settings that an earlier stage
/// did not (the second stage's baseline is one of the first's settings).
void ProductLayers::compileMissing(const CpuTarget &target,
                                   const std::vector<DecodeSetting> &candidates) {
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

/// Seconds to run every layer's products in order, each one pool loop
/// of bodyOf(layer, product) = {workgroups, body} cut into `chunks` pieces
/// per thread, all in one ThreadPool::runLoops as a decode pass runs.
template <typename BodyOf> double ProductLayers::timeEveryProduct(int chunks, BodyOf bodyOf) {
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
double ProductLayers::streamAll(const std::vector<LoadedTuningKernel> &entries, int chunks) {
  return timeEveryProduct(chunks, [&](size_t layer, size_t p) {
    const FusedLinearKernel &product = products[p];
    const std::array<void *, 4> buffers = {x.data(), weights.at[layer][p], gains[p].data(),
                                           y.data()};
    const std::array<int64_t, 4> bytes = {product.inFeatures * 4, int64_t(packed[p].size()),
                                          int64_t(gains[p].size()), product.outFeatures * 4};
    const runtime::KernelEntry entry = entries[p].entry;
    runtime::ThreadPool::Body body = [this, entry, buffers, bytes](int64_t begin, int64_t end) {
      const int64_t scalars[runtime::kFixedKernelScalars] = {1, 1, 1};
      // The thread's scratch last, as the runtime passes it.
      std::vector<uint8_t> &scratch = threadScratch[size_t(runtime::ThreadPool::currentSlot())];
      void *pointers[5] = {buffers[0], buffers[1], buffers[2], buffers[3], scratch.data()};
      const int64_t sizes[5] = {bytes[0], bytes[1], bytes[2], bytes[3], int64_t(scratch.size())};
      entry(pointers, sizes, scalars, begin, end);
    };
    return std::make_pair(product.workgroups(), std::move(body));
  });
}

/// Seconds to read every layer's product weights once with the bandwidth
/// probe's loop (four runs side by side per piece), cut into `chunks`
/// pieces per thread as the products are: what the products would take
/// if streaming cost nothing but the reads.
double ProductLayers::readAll(int chunks) {
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

std::function<double()> ProductLayers::streamRun(const CpuTarget &target,
                                                 const DecodeSetting &setting) {
  compileMissing(target, {setting});
  return [this, setting] { return streamAll(loaded.at(keyOf(setting)), int(setting.chunks)); };
}

} // namespace q3::cpu
