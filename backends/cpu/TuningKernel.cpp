//===- TuningKernel.cpp ---------------------------------------------------===//
#include "backends/cpu/TuningKernel.h"
#include "backends/cpu/CompileKernels.h"

#include "runtime/DType.h"
#include "runtime/WeightLayout.h"

#include <algorithm>
#include <limits>
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

std::vector<uint8_t> randomHalves(DType dtype, int64_t count, std::mt19937 &rng) {
  requireHalves(dtype);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(count));
  for (float &v : values)
    v = uniform(rng);
  std::vector<uint8_t> stored(values.size() * 2);
  runtime::convertFromF32(dtype, values.data(), stored.data(), values.size());
  return stored;
}

std::vector<uint8_t> randomWeights(const FusedLinearKernel &kernel, std::mt19937 &rng) {
  std::vector<uint8_t> plain =
      randomHalves(kernel.weight, kernel.weightRows() * kernel.inFeatures, rng);
  if (!kernel.columnBlocks)
    return plain;
  std::vector<uint8_t> packed(plain.size());
  runtime::packColumnBlocks(reinterpret_cast<const uint16_t *>(plain.data()),
                            reinterpret_cast<uint16_t *>(packed.data()), kernel.inFeatures, 0,
                            kernel.weightRows() / runtime::kColumnBlockRows);
  return packed;
}

/// The kernel `name` of the shared object `object`, loaded.
static LoadedTuningKernel loadObject(const std::vector<uint8_t> &object, const std::string &name) {
  LoadedTuningKernel loaded;
  loaded.library = runtime::SharedLibrary::loadFromMemory("tune", object.data(), object.size());
  loaded.entry = reinterpret_cast<runtime::KernelEntry>(
      loaded.library->symbol(std::string(runtime::kKernelSymbolPrefix) + name));
  if (!loaded.entry)
    throw std::runtime_error("the tuning kernel '" + name + "' has no entry point");
  return loaded;
}

std::vector<LoadedTuningKernel> loadTuningSources(const std::vector<std::string> &sources,
                                                  const std::vector<std::string> &names,
                                                  const CpuTarget &target) {
  if (sources.size() != names.size())
    throw std::invalid_argument("loadTuningSources: a name for every source");
  const std::vector<std::vector<uint8_t>> objects = compileKernelsToObjects(sources, target);
  std::vector<LoadedTuningKernel> loaded;
  for (size_t i = 0; i < sources.size(); ++i)
    loaded.push_back(loadObject(linkSharedObject(objects[i]), names[i]));
  return loaded;
}

std::vector<LoadedTuningKernel> loadTuningKernels(const std::vector<FusedLinearKernel> &kernels,
                                                  const CpuTarget &target) {
  std::vector<std::string> sources, names;
  for (const FusedLinearKernel &kernel : kernels) {
    sources.push_back(fusedLinearSource(kernel));
    names.push_back(kernel.name);
  }
  return loadTuningSources(sources, names, target);
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
