//===- AttentionTuner.h - measure the prefill attention's instructions ----===//
//
// q3c compile --tune, attention: where the products' prefill takes vdpbf16ps,
// attention's may too (cpu-select-attention-matmul). Whether it pays is the
// machine's to say, not the products': the flash kernel's score and value
// loops are broadcast-bound in another way than the products' tiles, and its
// bf16 form adds per-block conversions. The tuner compiles the model's
// attention kernel with f32 FMAs and with vdpbf16ps on 1, 2 and 3 blocks of
// rows per workgroup (the sets that share each key block's rounded copies:
// q3.lowering's attention tile), runs a 512-row causal prefill of one layer
// on one thread (best of 4, the candidates taking turns), and records every
// rate and the choice: the fastest vdpbf16ps build, as the products, unless
// f32 FMAs measured 10% faster than it. Cached per CPU, attention shape and
// kernel source like the other tuners (both --tune levels measure the same).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "backends/cpu/CpuTarget.h"
#include "backends/cpu/ForeignLoad.h"
#include "backends/cpu/KernelSource.h"
#include "backends/cpu/TuningCache.h"

#include "mlir/IR/BuiltinOps.h"

#include <vector>

namespace q3::cpu {

struct AttentionRate {
  bool bf16 = false;   // vdpbf16ps on bf16 pairs, else f32 FMAs
  int64_t rowSets = 1; // blocks of rows per workgroup (f32: 1)
  double gflops = 0;   // multiply-adds x 2 per second, 1e9
};

struct AttentionTuning {
  AttentionRate chosen;                // the fastest bf16 unless f32 measured 10% faster
  std::vector<AttentionRate> measured; // f32, then bf16 by row sets
  TuningProvenance provenance;
};

/// Whether attention of `shape` has a choice on `target`: the vector
/// template with head_dim % 32 == 0, and AVX512-BF16.
bool attentionTunable(const CpuTarget &target, const AttentionKernel &shape);

/// Measures the f32 and the vdpbf16ps flash prefills of `shape` (its
/// queryHeads, kvHeads, headDim, map and scale; an f32 cache), or returns
/// the cached result for the same CPU, shape and kernel sources. A
/// measurement during which others took more than `maxForeignShare` of the
/// machine is used but not cached. Needs attentionTunable().
AttentionTuning tuneAttention(const CpuTarget &target, const AttentionKernel &shape,
                              double maxForeignShare = kMaxForeignShare);

/// Adds the result to the module's q3.tuning: `attention_matmul` (f32 or
/// avx512bf16, which cpu-select-attention-matmul reads),
/// `attention_row_sets` (which cpu-assign-grids reads) and
/// `attention_gflops`.
void recordAttentionTuning(mlir::ModuleOp module, const AttentionTuning &tuning);

} // namespace q3::cpu
