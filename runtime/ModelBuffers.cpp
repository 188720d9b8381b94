// Model::State's memory beside the weights: the activation buffers, the
// KV cache (allocated for the context, used for a capacity that doubles as
// the context fills, on huge pages where that pays), the kernels'
// workspace, and the weights locked in memory on request.
#include "runtime/ModelState.h"

#include "runtime/DType.h"
#include "runtime/HostBuffer.h"
#include "runtime/LoadError.h"

#include <fmt/format.h>

#include <algorithm>

namespace q3::runtime {

void Model::State::allocate(uint64_t memoryBudget, bool reserveContext) {
  const manifest::ModelConfig &c = manifest.config;
  layers = c.numHiddenLayers;
  vocab = c.vocabSize;
  chunkRows = manifest.prefillRows;
  kvRowBytes = c.numKeyValueHeads * c.headDim * int64_t(runtime::dtypeSize(manifest.kvCache));
  // The manifest's extents are bounded (runtime/Manifest.h), the context is
  // the user's: keep every size a product that cannot overflow.
  auto bytes = [&](int64_t a, int64_t b, const char *what) {
    if (a < 0 || b < 0 || (a != 0 && b > (int64_t(1) << 50) / a))
      throw LoadError(fmt::format("{}: {} of {} x {} bytes is more than this runtime allocates "
                                  "(use a smaller --ctx)",
                                  artifact->displayName(), what, a, b));
    return a * b;
  };
  // The weights first: on a device with its own memory they are uploaded,
  // and what no longer fits after them is the context's part (the KV
  // cache), which the driver's error then asks to shrink (--ctx).
  weightBuffers.assign(weights.size(), -1);
  for (size_t i = 0; i < weights.size(); ++i)
    if (weights[i].data)
      weightBuffers[i] = driver->wrapHost(weights[i].data, weights[i].bytes());
  for (int64_t rowBytes : manifest.bufferRowBytes)
    buffers.push_back(driver->allocate(bytes(chunkRows, rowBytes, "an activation buffer")));
  // Positions are written before attention reads them: the cache needs no
  // zeroing (allocate() leaves untouched pages unmapped). Its layout gives
  // each layer and head one stretch of the capacity, so its first token
  // touches every stretch; with the whole context's capacity (on huge
  // pages) that made all of it resident at once (0.9 GB for the 0.6B
  // shape's 4096 f32 positions, about 1.6 s of a first token on the
  // project's VM), so where the driver moves memory in place the capacity
  // starts small and doubles as the context fills, inside buffers that
  // reserve the whole context.
  const int64_t cacheBytes =
      bytes(bytes(layers, context, "the KV cache"), kvRowBytes, "the KV cache");
  kvCacheOnHugePages = manifest.target.backend == "cpu" &&
                       kvCacheOnHugePagesPays(2 * uint64_t(cacheBytes), memoryBudget);
  capacity = driver->movesInPlace() && !reserveContext ? std::min(context, kInitialCachePositions)
                                                       : context;
  const auto kvPages = kvCacheOnHugePages ? Driver::Pages::Huge : Driver::Pages::Small;
  keyCache = driver->allocate(cacheBytes, kvPages);
  valueCache = driver->allocate(cacheBytes, kvPages);
  tokenBuffer = driver->allocate(chunkRows * 4);
  int64_t workspaceBytes = 0;
  for (const manifest::Kernel &k : manifest.kernels)
    workspaceBytes = std::max(workspaceBytes, k.workspaceBytes);
  if (workspaceBytes > 0)
    workspace = driver->allocate(workspaceBytes);
  for (const manifest::Step &step : manifest.steps) {
    stepKernels.push_back(driver->kernel(step.kernel));
    for (const manifest::Kernel &k : manifest.kernels)
      if (k.name == step.kernel)
        stepKernelInfo.push_back(&k);
  }
  // The logits product computes each row on its own (a fixed grid of column
  // tiles) when it writes the output: then generation runs it on one row.
  const manifest::Step &lastStep = manifest.steps.back();
  logitsRowwise = stepKernelInfo.back()->gridKind == manifest::GridKind::Fixed &&
                  lastStep.results.size() == 1 &&
                  lastStep.results[0].kind == manifest.output.kind &&
                  lastStep.results[0].id == manifest.output.id;
}

void Model::State::reserve(int64_t positions) {
  if (positions <= capacity)
    return;
  int64_t grown = capacity;
  while (grown < positions)
    grown *= 2;
  grown = std::min(grown, context);
  if (position == 0) { // nothing cached to move
    capacity = grown;
    return;
  }
  // Each layer and head keeps its first `position` rows (the ones written),
  // now `grown` rows apart. Stretch h moves to h * grown rows, past the
  // sources of every stretch below `hi` once h * grown >= hi * capacity:
  // those move together, then the ones below them.
  const int64_t heads = layers * manifest.config.numKeyValueHeads;
  const int64_t headRowBytes = kvRowBytes / manifest.config.numKeyValueHeads;
  std::vector<std::vector<Driver::CopyRange>> waves;
  for (int64_t hi = heads; hi > 1;) {
    // At least the stretch hi - 1 (its rows go to no lower place than they
    // are), where the capacity grows by less than hi / (hi - 1).
    const int64_t lo = std::clamp<int64_t>((hi * capacity + grown - 1) / grown, 1, hi - 1);
    std::vector<Driver::CopyRange> &wave = waves.emplace_back();
    for (int64_t head = lo; head < hi; ++head)
      for (int64_t cache : {keyCache, valueCache})
        wave.push_back({{cache, head * capacity * headRowBytes, position * headRowBytes},
                        {cache, head * grown * headRowBytes, position * headRowBytes}});
    hi = lo;
  }
  driver->move(waves);
  capacity = grown;
}

void Model::State::lockWeights(const std::string &source) {
  std::vector<MemoryRange> ranges;
  for (const WeightData &w : weights)
    if (w.data)
      ranges.push_back({w.data, size_t(w.bytes())});
  lockedWeights = lockInMemory(ranges, fmt::format("{}: the weights", source));
}

bool kvCacheOnHugePagesPays(uint64_t cacheBytes, uint64_t budgetBytes) {
  return cacheBytes >= 2 * kHugePageBytes && cacheBytes <= budgetBytes / 8;
}

} // namespace q3::runtime
