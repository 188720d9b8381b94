//===- WeightPackingTuner.h - whether packing the weights at load pays ----===//
//
// q3c compile --tune, weight packing: bf16 and f16 product weights are read
// either in place, row-major, and packed into column blocks by each prefill
// for the panels it multiplies (per_call), or packed once at load into fresh
// memory (at_load). At load the kernels run faster: on the AMD EPYC family
// 25 VM of 2026-12-05 (0.6B shape, same settings, alternated) decode read
// 58-64 GB/s in every product against 47-58 per call (48-51 against 39-42
// tokens/s on two threads; 24.7-25.0 against 22.1-22.7 on one), prefill ~6%
// faster (the panels are not packed per call); the row-major one-row dot
// products reread x from L1 for every few weight rows, and a down product
// (K = 3072, 12 KiB of x) fell to 0.80-0.85 of the best product's rate.
// What at_load costs is the load: every packed byte written once to memory
// the process has not touched, and on a VM a fresh page can cost far more
// than the write (the hypervisor backs it on first touch: the 0.6B shape
// once loaded in 2.2-3.5 s packed at load, against 0.2 s on the same kind of
// VM later). So the tuner measures that cost on the host: the load's own
// packing (runtime/WeightLayout.h) on all threads into fresh huge pages, and
// packs at load when the model's product weights would take at most
// kPackAtLoadBudgetSeconds; else per call.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "backends/cpu/CpuTarget.h"
#include "backends/cpu/Tuner.h"
#include "backends/cpu/TuningCache.h"

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <string>

namespace q3::cpu {

/// The most a load may spend packing the weights for `auto` to pack at load:
/// the load target of the 0.6B shape (issue 10: one second from a warm page
/// cache), most of which the packing is.
inline constexpr double kPackAtLoadBudgetSeconds = 1.0;

struct WeightPackingTuning {
  std::string chosen;          // "at_load" or "per_call"
  int64_t packedBytes = 0;     // the model's product weights at_load packs
  double packGbPerSecond = 0;  // bytes packed into fresh memory per second, 1e9: the median
  double estimatedSeconds = 0; // packedBytes at that rate
  int threads = 1;
  TuningProvenance provenance;
};

/// "at_load" when `packedBytes` at `packGbPerSecond` take at most
/// kPackAtLoadBudgetSeconds, else "per_call".
std::string chooseWeightPacking(int64_t packedBytes, double packGbPerSecond);

/// Measures how fast the load's packing fills fresh memory on `threads`
/// threads (or reads the cached rate for the same CPU, threads and level)
/// and chooses for a model with `packedBytes` of product weights.
WeightPackingTuning tuneWeightPacking(const CpuTarget &target, int64_t packedBytes, TuneLevel level,
                                      int threads, double maxForeignShare = kMaxForeignShare);

/// Adds `tuning` to the module's q3.tuning: weight_packing (the choice,
/// kMeasuredWeightPackingKey, which cpu-pack-column-blocks takes for
/// --weight-packing=auto),
/// weight_packing_gb_s (the rate), weight_packing_estimate_s.
void recordWeightPackingTuning(mlir::ModuleOp module, const WeightPackingTuning &tuning);

} // namespace q3::cpu
