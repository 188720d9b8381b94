//===- Tuner.h - measure the prefill kernel variants on this machine ------===//
//
// q3c compile --tune: the fastest prefill instructions and register tile are
// a property of the machine, not of its CPU's name (vdpbf16ps wins by 40% on
// one AMD family and loses on an Intel one), so the compiler measures them.
// It compiles each candidate variant of the model's SwiGLU product, runs it on
// a 128-row prompt on one thread, and keeps the fastest. Results are cached
// per CPU, model shape and kernel source in $XDG_CACHE_HOME/q3c/tuning.json.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "backends/cpu/CpuTarget.h"
#include "backends/cpu/ForeignLoad.h"
#include "backends/cpu/KernelSource.h"
#include "backends/cpu/TuningCache.h"
#include "backends/cpu/TuningKernel.h"

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <string>
#include <vector>

namespace q3::cpu {

enum class TuneLevel { Off, Quick, Full };

/// "off", "quick", "full"; std::invalid_argument naming --tune otherwise.
TuneLevel parseTuneLevel(const std::string &text);

struct PrefillVariant {
  PrefillMatmul matmul = PrefillMatmul::F32;
  int64_t tileRows = 2;
  double gflops = 0; // measured: multiply-adds x 2 per second, 1e9
};

struct TuningResult {
  PrefillVariant best;
  std::vector<PrefillVariant> measured; // every candidate, in the order run
  TuningProvenance provenance;
};

/// The candidates `level` measures on `target` for a product of K = `in`
/// (AMX needs K % 32 == 0 and weights packed at load): f32 FMA tiles and,
/// for bf16 weights where the target has them, vdpbf16ps tiles and AMX, over
/// the tile heights the vector registers allow.
std::vector<PrefillVariant> prefillCandidates(const CpuTarget &target, int64_t in, TuneLevel level,
                                              const TunedWeights &weights);

/// Measures the candidates on the SwiGLU product of `hidden` x
/// `intermediate` (capped so one run stays short), its weights as `weights`
/// says (dtype, packed per call or at load), or returns the cached
/// result for the same CPU, shape, level and kernel source. A measurement
/// during which others took more than `maxForeignShare` of the machine is
/// used but not cached.
TuningResult tunePrefill(const CpuTarget &target, int64_t hidden, int64_t intermediate,
                         const TunedWeights &weights, TuneLevel level,
                         double maxForeignShare = kMaxForeignShare);

/// Records `result` as the module's q3.tuning (matmul, prefill_rows and the
/// measured rates), which cpu-select-matmul and cpu-select-tiles read.
void recordTuning(mlir::ModuleOp module, const TuningResult &result);

/// "f32", "avx512bf16", "amx".
const char *prefillMatmulName(PrefillMatmul matmul);

} // namespace q3::cpu
