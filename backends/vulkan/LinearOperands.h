//===- LinearOperands.h - how the matrix-product kernels bind their tensors ===//
#pragma once

#include "backends/vulkan/GpuKernelBuilder.h"
#include "backends/vulkan/Kernels.h"
#include "backends/vulkan/WeightAccess.h"

#include <optional>
#include <vector>

namespace q3::vulkan {

/// The tensors of a LinearKernel as every variant (matrix-vector, GEMM) views
/// them, so the variants bind alike and the manifest's element sizes agree:
/// x (16-byte vectors when linearVectorInput), the weight (and its up half)
/// in WeightAccess units, the gain in words of two, residual and y as f32.
struct LinearOperands {
  LinearOperands(mlir::MLIRContext &context, const LinearKernel &kernel);
  WeightAccess weight;
  std::optional<WeightAccess> gain;
  bool vectorX;
  LinearBindings slots;
  std::vector<TensorBinding> bindings;
};

} // namespace q3::vulkan
