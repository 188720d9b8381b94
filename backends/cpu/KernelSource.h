//===- KernelSource.h - MLIR source of the CPU kernels --------------------===//
//
// Each kernel kind is an MLIR function over scf/vector/memref/arith/math,
// specialized to the model's shapes and written as text (one template per
// kind), so the generated kernel can be dumped and read like any other IR.
// Every kernel follows the buffer convention of runtime/KernelABI.h: tensor
// arguments are raw byte buffers (memref<?xi8>) viewed at their real types.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace q3::cpu {

enum class WeightStorage { F32, F16, BF16 };

/// The shape of one q3.fused_linear kernel (q3.linear is the plain case).
struct FusedLinearKernel {
  std::string name;        // symbol suffix: q3_kernel_<name>
  int64_t inFeatures = 0;  // K
  int64_t outFeatures = 0; // columns of the result
  WeightStorage weight = WeightStorage::F32;
  std::optional<double> normEps; // RMSNorm prologue
  bool swiglu = false;           // weight has 2 x outFeatures rows: gate over up
  bool residual = false;
  static constexpr int64_t kColumnsPerWorkgroup = 64;
  int64_t weightRows() const { return swiglu ? 2 * outFeatures : outFeatures; }
  int64_t workgroups() const {
    return (outFeatures + kColumnsPerWorkgroup - 1) / kColumnsPerWorkgroup;
  }
};

/// MLIR source of `func.func @q3k_<name>(x, w, [residual,] y, rows, wgBegin, wgEnd)`
/// and its private helpers.
std::string fusedLinearSource(const FusedLinearKernel &kernel);

} // namespace q3::cpu
