//===- TuningKernel.h - the kernels the tuners compile and run ------------===//
//
// The product tuners (Tuner.h: prefill variants, DecodeTuner.h: the decode
// split) measure the model's gate/up product: SwiGLU with its RMSNorm and
// gain, the checkpoint's bf16 or f16 weights packed at load or per call, on
// random inputs. All three tuners (AttentionTuner.h too) compile their
// candidates at once and time them in turns.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "backends/cpu/CpuTarget.h"
#include "backends/cpu/KernelSource.h"

#include "runtime/KernelABI.h"
#include "runtime/SharedLibrary.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace q3::cpu {

/// Throws std::invalid_argument naming --tune unless the model's products
/// (K = `hidden`, `intermediate` outputs) have a column-block layout.
void requireTunableShape(int64_t hidden, int64_t intermediate);

/// How the compiled model's products hold their weights, which is what the
/// tuners measure.
struct TunedWeights {
  DType dtype = DType::BF16;                 // the checkpoint's: bf16 or f16
  bool packPerCall = true;                   // else packed at load (column blocks)
};

/// The measured product, `outputs` wide (a multiple of 16 at most that), its
/// weight of `weights.dtype` (and its gain) packed at load (column blocks)
/// or per call (row-major), as the compiled model's products will be; a
/// SwiGLU product (2 x outputs weight rows) unless `swiglu` is false.
FusedLinearKernel tuningProduct(const std::string &name, int64_t hidden, int64_t outputs,
                                const TunedWeights &weights, bool swiglu = true);

/// `count` random values in [-1, 1) stored as `dtype` (f32, bf16 or f16).
std::vector<uint8_t> randomStored(DType dtype, int64_t count, std::mt19937 &rng);

/// Random weights for `kernel` (its dtype), in the layout it reads (column
/// blocks when packed at load).
std::vector<uint8_t> randomWeights(const FusedLinearKernel &kernel, std::mt19937 &rng);

/// A kernel the tuners compiled and loaded; `entry` stays valid while
/// `library` (shared by the kernels compiled with it) lives.
struct LoadedTuningKernel {
  std::shared_ptr<runtime::SharedLibrary> library;
  runtime::KernelEntry entry = nullptr;
};

/// The kernels `names[i]` (distinct) of MLIR `sources[i]` compiled for
/// `target` (on all CPUs at once: compileKernelsToObjects), linked into one
/// library and loaded; a source this process compiled for `target` before is
/// not compiled again.
std::vector<LoadedTuningKernel> loadTuningSources(const std::vector<std::string> &sources,
                                                  const std::vector<std::string> &names,
                                                  const CpuTarget &target);

/// `kernel` as the compiled model would build it on `target`: its decode
/// accumulators as cpu-set-decode-accumulators sets them.
FusedLinearKernel builtForTarget(FusedLinearKernel kernel, const CpuTarget &target);

/// Each of `kernels` (fusedLinearSource) compiled and loaded, as
/// loadTuningSources, each built for `target` (builtForTarget); their names
/// may repeat (each is given a suffix), and kernels that build the same
/// source share one compiled kernel.
std::vector<LoadedTuningKernel> loadTuningKernels(const std::vector<FusedLinearKernel> &kernels,
                                                  const CpuTarget &target);

/// The lowest seconds of each of `runs` (each times one run) over `rounds`
/// rounds after a warm-up round. Every round runs each once, the order
/// rotated by one per round, so load that changes while the tuner measures
/// weighs on all of them alike rather than on whichever ran last.
std::vector<double> bestOfInterleaved(const std::vector<std::function<double()>> &runs, int rounds);

/// The seconds of each of `runs` in each of `rounds` rounds ([run][round]),
/// after a warm-up round, interleaved and rotated as bestOfInterleaved.
std::vector<std::vector<double>> timesInterleaved(const std::vector<std::function<double()>> &runs,
                                                  int rounds);

/// How a candidate compares with the baseline measured in the same rounds:
/// the median and the lower quartile over the rounds of the ratio of its rate
/// to the baseline's. Within a round the candidates run back to back, so a
/// ratio is moved less by a shared machine's drift than the rates are.
struct RoundRatios {
  double median = 1;
  double lowerQuartile = 1;
};

/// The value `fraction` of the way up `values` sorted (0.5: the median).
double quantile(std::vector<double> values, double fraction);

/// Per run, its rate over run `baseline`'s in each round of `seconds`
/// (timesInterleaved; the baseline's seconds over the run's), summarized.
std::vector<RoundRatios> ratiosToBaseline(const std::vector<std::vector<double>> &seconds,
                                          size_t baseline);

/// Whether a candidate with `ratios` clearly beats the baseline: a median
/// ratio above 1 + `tie` and a lower quartile above 1 (faster in at least
/// three rounds of four), or a lower quartile above 1 + `tie` / 2 (faster
/// by that much in three rounds of four: on a contended machine a real
/// difference shrinks, but stays consistent, while the noise's lower
/// quartiles stay under 1).
bool clearlyFaster(const RoundRatios &ratios, double tie);

} // namespace q3::cpu
