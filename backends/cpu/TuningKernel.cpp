//===- TuningKernel.cpp ---------------------------------------------------===//
#include "backends/cpu/TuningKernel.h"
#include "backends/cpu/CompileKernels.h"

#include "runtime/CpuFeatures.h"
#include "runtime/DType.h"
#include "runtime/WeightLayout.h"

#include "llvm/Support/xxhash.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>

namespace q3::cpu {

namespace {

void requireHalves(DType dtype) {
  if (dtype == DType::F32)
    throw std::invalid_argument("--tune: measures bf16 and f16 products only");
}

} // namespace

void requireTunableShape(int64_t hidden, int64_t intermediate) {
  if (hidden % 2 != 0 || intermediate < 16)
    throw std::invalid_argument("--tune: the model's products have no column-block layout");
}

FusedLinearKernel tuningProduct(const std::string &name, int64_t hidden, int64_t outputs,
                                const TunedWeights &weights, bool swiglu) {
  requireHalves(weights.dtype);
  FusedLinearKernel kernel;
  kernel.name = name;
  kernel.inFeatures = hidden;
  kernel.outFeatures = outputs / 16 * 16;
  kernel.weight = weights.dtype;
  kernel.normEps = 1e-6;
  kernel.swiglu = swiglu;
  kernel.prologueGain = weights.dtype;
  kernel.columnBlocks = !weights.packPerCall;
  kernel.panelsPerCall = weights.packPerCall;
  return kernel;
}

std::vector<uint8_t> randomStored(DType dtype, int64_t count, std::mt19937 &rng) {
  // A splitmix64 stream seeded from `rng`: uniform_real_distribution over
  // mt19937 took ~150 ms for a decode tuner's 9 M weights.
  uint64_t state = (uint64_t(rng()) << 32) | rng();
  std::vector<float> values(static_cast<size_t>(count));
  for (float &v : values) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    v = float(int64_t(z >> 40) - (int64_t(1) << 23)) * 0x1p-23f; // [-1, 1), exactly
  }
  std::vector<uint8_t> stored(values.size() * runtime::dtypeSize(dtype));
  runtime::convertFromF32(dtype, values.data(), stored.data(), values.size());
  return stored;
}

std::vector<uint8_t> randomWeights(const FusedLinearKernel &kernel, std::mt19937 &rng) {
  requireHalves(kernel.weight);
  std::vector<uint8_t> plain =
      randomStored(kernel.weight, kernel.weightRows() * kernel.inFeatures, rng);
  if (!kernel.columnBlocks)
    return plain;
  std::vector<uint8_t> packed(plain.size());
  runtime::packColumnBlocks(reinterpret_cast<const uint16_t *>(plain.data()),
                            reinterpret_cast<uint16_t *>(packed.data()), kernel.inFeatures, 0,
                            kernel.weightRows() / runtime::kColumnBlockRows);
  return packed;
}

namespace {

/// The entry of kernel `name` in `library`.
runtime::KernelEntry entryOf(const runtime::SharedLibrary &library, const std::string &name) {
  auto entry = reinterpret_cast<runtime::KernelEntry>(
      library.symbol(std::string(runtime::kKernelSymbolPrefix) + name));
  if (!entry)
    throw std::runtime_error("the tuning kernel '" + name + "' has no entry point");
  return entry;
}

/// The kernels this process already compiled for the tuners, by target and
/// source: the tuners share some (the weight-packing race's per-call
/// products are the decode tuner's baseline), and a fresh compile's
/// tuning time is bounded (--tune).
class CompiledTuningKernels {
public:
  static std::string keyOf(const std::string &source, const CpuTarget &target) {
    return target.llvmCpu + "\n" + target.features + "\n" + source;
  }
  std::optional<LoadedTuningKernel> find(const std::string &key) {
    std::lock_guard<std::mutex> lock(mutex);
    auto at = kernels.find(key);
    return at == kernels.end() ? std::nullopt : std::optional(at->second);
  }
  void add(const std::string &key, const LoadedTuningKernel &kernel) {
    std::lock_guard<std::mutex> lock(mutex);
    kernels.emplace(key, kernel);
  }

private:
  std::mutex mutex;
  std::map<std::string, LoadedTuningKernel> kernels;
};

CompiledTuningKernels &compiledTuningKernels() {
  static CompiledTuningKernels compiled;
  return compiled;
}

/// The AMX tile state for this process, which Linux grants on request only
/// (without it the first tile instruction raises SIGILL); throws if refused.
void requireAmxState() {
  if (std::string refused = runtime::requestAmxState(); !refused.empty())
    throw std::runtime_error("--tune: cannot measure the AMX prefill: " + refused);
}

} // namespace

std::vector<LoadedTuningKernel> loadTuningSources(const std::vector<std::string> &sources,
                                                  const std::vector<std::string> &names,
                                                  const CpuTarget &target) {
  if (sources.size() != names.size())
    throw std::invalid_argument("loadTuningSources: a name for every source");
  std::set<std::string> seen;
  for (const std::string &name : names)
    if (!seen.insert(name).second)
      throw std::invalid_argument("loadTuningSources: the kernels share one library, so each "
                                  "needs its own name; '" +
                                  name + "' is given twice");
  CompiledTuningKernels &compiled = compiledTuningKernels();
  std::vector<LoadedTuningKernel> loaded(sources.size());
  std::vector<size_t> missing;
  std::vector<std::string> missingSources;
  for (size_t i = 0; i < sources.size(); ++i)
    if (std::optional<LoadedTuningKernel> known =
            compiled.find(CompiledTuningKernels::keyOf(sources[i], target)))
      loaded[i] = *known;
    else {
      missing.push_back(i);
      missingSources.push_back(sources[i]);
    }
  if (missing.empty())
    return loaded;
  // One link for the whole batch: each `cc -shared` costs ~50 ms, which over
  // the thirty-odd candidates of a 0.6B compile was 2 s of its tuning.
  const std::vector<uint8_t> object =
      linkSharedObject(compileKernelsToObjects(missingSources, target));
  std::shared_ptr<runtime::SharedLibrary> library =
      runtime::SharedLibrary::loadFromMemory("tune", object.data(), object.size());
  for (size_t i : missing) {
    loaded[i] = {library, entryOf(*library, names[i])};
    compiled.add(CompiledTuningKernels::keyOf(sources[i], target), loaded[i]);
  }
  return loaded;
}

FusedLinearKernel builtForTarget(FusedLinearKernel kernel, const CpuTarget &target) {
  kernel.decodeAccumulators = decodeAccumulatorsFor(target, kernel.decodeRowsSideBySide());
  return kernel;
}

std::vector<LoadedTuningKernel> loadTuningKernels(const std::vector<FusedLinearKernel> &kernels,
                                                  const CpuTarget &target) {
  // Variants of one product share its name: each gets one of its own, the
  // same whenever the same variant is asked for again. Two settings may
  // build the same kernel (a stream count a product cannot use): it is
  // compiled once and given to both.
  std::vector<std::string> sources, names;
  std::vector<size_t> built(kernels.size());
  std::map<std::string, size_t> byName;
  for (size_t i = 0; i < kernels.size(); ++i) {
    FusedLinearKernel kernel = builtForTarget(kernels[i], target);
    if (kernel.prefillMatmul == PrefillMatmul::Amx && kernel.amxFits())
      requireAmxState();
    const std::string source = fusedLinearSource(kernel);
    kernel.name += fmt::format("_{:016x}", llvm::xxHash64(source));
    auto [it, added] = byName.try_emplace(kernel.name, sources.size());
    if (added) {
      sources.push_back(fusedLinearSource(kernel));
      names.push_back(kernel.name);
    }
    built[i] = it->second;
  }
  const std::vector<LoadedTuningKernel> unique = loadTuningSources(sources, names, target);
  std::vector<LoadedTuningKernel> loaded;
  for (size_t index : built)
    loaded.push_back(unique[index]);
  return loaded;
}

std::vector<std::vector<double>> timesInterleaved(const std::vector<std::function<double()>> &runs,
                                                  int rounds) {
  std::vector<std::vector<double>> seconds(runs.size());
  for (int round = 0; round <= rounds; ++round) // round 0 warms caches and pages
    for (size_t i = 0; i < runs.size(); ++i) {
      const size_t which = (size_t(round) + i) % runs.size();
      const double time = runs[which]();
      if (round > 0)
        seconds[which].push_back(time);
    }
  return seconds;
}

std::vector<double> bestOfInterleaved(const std::vector<std::function<double()>> &runs,
                                      int rounds) {
  std::vector<double> best;
  for (const std::vector<double> &times : timesInterleaved(runs, rounds))
    best.push_back(times.empty() ? std::numeric_limits<double>::infinity()
                                 : *std::min_element(times.begin(), times.end()));
  return best;
}

double quantile(std::vector<double> values, double fraction) {
  if (values.empty())
    throw std::invalid_argument("quantile of no values");
  const auto at = values.begin() + long(double(values.size() - 1) * fraction + 0.5);
  std::nth_element(values.begin(), at, values.end());
  return *at;
}

std::vector<RoundRatios> ratiosToBaseline(const std::vector<std::vector<double>> &seconds,
                                          size_t baseline) {
  std::vector<RoundRatios> summaries;
  for (const std::vector<double> &times : seconds) {
    std::vector<double> ratios;
    for (size_t round = 0; round < times.size(); ++round)
      ratios.push_back(seconds.at(baseline).at(round) / times[round]);
    summaries.push_back({quantile(ratios, 0.5), quantile(ratios, 0.25)});
  }
  return summaries;
}

bool clearlyFaster(const RoundRatios &ratios, double tie) {
  return (ratios.median > 1.0 + tie && ratios.lowerQuartile > 1.0) ||
         ratios.lowerQuartile > 1.0 + tie / 2;
}

} // namespace q3::cpu
