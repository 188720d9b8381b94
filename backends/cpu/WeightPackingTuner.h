//===- WeightPackingTuner.h - whether packing the weights at load pays ----===//
//
// q3c compile --tune, weight packing: bf16 and f16 product weights are read
// either in place, row-major, and packed into column blocks by each prefill
// for the panels it multiplies (per_call), or packed once at load into fresh
// memory (at_load). Whether the packed kernels decode faster depends on the
// machine: on an AMD EPYC family 25 VM (0.6B shape, same settings,
// alternated) decode read 58-64 GB/s in every product packed against 47-58
// per call (48-51 against 39-42 tokens/s on two threads; 24.7-25.0 against
// 22.1-22.7 on one: the row-major one-row dot products reread x from L1 for
// every few weight rows, and the down product, K = 3072, fell to 0.80-0.85
// of the best product's rate); on an AMD EPYC family 26 VM the two decoded
// alike (one thread: 18.8-23.4 against 21.0-24.6 tokens/s, the down product
// per call at the others' rate). And what at_load costs is the load: every
// packed byte written once to memory the process has not touched, which on
// a VM can cost far more than the write (the hypervisor backs a page on its
// first touch: 2.2-3.5 s for the 0.6B shape on one VM, 0.2-0.6 s on others).
// So the tuner measures both on the host: the load's own packing
// (runtime/WeightLayout.h) on all threads into fresh huge pages, and, where
// the model's product weights would pack within kPackAtLoadBudgetSeconds,
// decode's products in both layouts in the same rounds (DecodeProductLayers.h);
// it packs at load only when the packed ones stream clearly faster.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "backends/cpu/CpuTarget.h"
#include "backends/cpu/Tuner.h"
#include "backends/cpu/TuningCache.h"
#include "backends/cpu/TuningKernel.h"

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <optional>
#include <string>

namespace q3::cpu {

/// The most a load may spend packing the weights for `auto` to pack at load:
/// the load target of the 0.6B shape (issue 10: one second from a warm page
/// cache), most of which the packing is.
inline constexpr double kPackAtLoadBudgetSeconds = 1.0;

/// How much faster the packed products must decode, as clearlyFaster's tie,
/// for the load to pack them: a gain must pay for a load that copies 1.2 GB
/// (0.6B) into fresh memory, 0.4-2.5 s on the family-26 VM, against nothing
/// per call. There the race measured the layouts at 0.92-1.13, following
/// the minute's bandwidth (the model decoded alike); on family 25 the
/// per-call down product alone ran 15-20% slower.
inline constexpr double kPackAtLoadDecodeTie = 0.06;

struct WeightPackingTuning {
  std::string chosen;          // "at_load" or "per_call"
  int64_t packedBytes = 0;     // the model's product weights at_load packs
  double packGbPerSecond = 0;  // bytes packed into fresh memory per second, 1e9: the median
  double estimatedSeconds = 0; // packedBytes at that rate
  int threads = 1;
  TuningProvenance provenance;
  /// The decode race, run only when the packing fits the budget: decode's
  /// products (the gate and up, then the down weight, one row each, at the
  /// default decode setting) read per call and packed, interleaved; GB/s
  /// medians and the packed layout's ratios to per call in the same rounds.
  struct Race {
    double perCallGbPerSecond = 0;
    double atLoadGbPerSecond = 0;
    RoundRatios atLoadOverPerCall;
    TuningProvenance provenance;
  };
  std::optional<Race> race;
};

/// Whether `packedBytes` at `packGbPerSecond` take at most
/// kPackAtLoadBudgetSeconds.
bool packingFitsTheLoad(int64_t packedBytes, double packGbPerSecond);

/// "at_load" when the packing fits the load (packingFitsTheLoad) and the
/// packed products decoded clearly faster than per call
/// (`atLoadOverPerCall`, clearlyFaster with kPackAtLoadDecodeTie); else
/// "per_call" (a tie costs a load nothing).
std::string chooseWeightPacking(int64_t packedBytes, double packGbPerSecond,
                                const std::optional<RoundRatios> &atLoadOverPerCall);

/// Measures how fast the load's packing fills fresh memory on `threads`
/// threads and, when it fits the load, races decode's products of a model
/// with `hidden` and `intermediate` (weights of `dtype`) in both layouts
/// (or reads either measurement cached for the same CPU, shapes, threads
/// and level), and chooses for a model with `packedBytes` of product weights.
WeightPackingTuning tuneWeightPacking(const CpuTarget &target, int64_t packedBytes, int64_t hidden,
                                      int64_t intermediate, DType dtype, TuneLevel level,
                                      int threads, double maxForeignShare = kMaxForeignShare);

/// Adds `tuning` to the module's q3.tuning: weight_packing (the choice,
/// kMeasuredWeightPackingKey, which cpu-pack-column-blocks takes for
/// --weight-packing=auto),
/// weight_packing_gb_s (the rate), weight_packing_estimate_s and, when the
/// layouts were raced, weight_packing_decode_gb_s {per_call, at_load}.
void recordWeightPackingTuning(mlir::ModuleOp module, const WeightPackingTuning &tuning);

} // namespace q3::cpu
