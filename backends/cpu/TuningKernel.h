//===- TuningKernel.h - the product the tuners compile and run ------------===//
//
// Both tuners (Tuner.h: prefill variants, DecodeTuner.h: the decode split)
// measure the model's gate/up product: SwiGLU with its RMSNorm and bf16 gain,
// bf16 weights packed at load or per call, on random inputs.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "backends/cpu/CpuTarget.h"
#include "backends/cpu/KernelSource.h"

#include "runtime/KernelABI.h"
#include "runtime/SharedLibrary.h"

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace q3::cpu {

/// Throws std::invalid_argument naming --tune unless the model's products
/// (K = `hidden`, `intermediate` outputs) have a column-block layout.
void requireTunableShape(int64_t hidden, int64_t intermediate);

/// The measured product, `outputs` wide (a multiple of 16 at most that), its
/// weight packed at load (column blocks) or per call (row-major), as the
/// compiled model's products will be.
FusedLinearKernel tuningProduct(const std::string &name, int64_t hidden, int64_t outputs,
                                bool packPerCall);

/// `count` random bf16 values in [-1, 1).
std::vector<uint8_t> randomBf16(int64_t count, std::mt19937 &rng);

/// Random bf16 weights for `kernel`, in the layout it reads (column blocks
/// when packed at load).
std::vector<uint8_t> randomWeights(const FusedLinearKernel &kernel, std::mt19937 &rng);

/// `kernel` compiled for `target` and loaded; `entry` stays valid while
/// `library` lives.
struct LoadedTuningKernel {
  std::unique_ptr<runtime::SharedLibrary> library;
  runtime::KernelEntry entry = nullptr;
};
LoadedTuningKernel loadTuningKernel(const FusedLinearKernel &kernel, const CpuTarget &target);

} // namespace q3::cpu
