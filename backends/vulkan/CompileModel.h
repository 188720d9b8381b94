//===- CompileModel.h - a dispatch-stage module -> a Vulkan artifact ------===//
#pragma once

#include "backends/vulkan/KernelCompiler.h"

#include "mlir/IR/BuiltinOps.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace q3::vulkan {

struct CompiledVulkanModel {
  nlohmann::json manifest;             // docs/artifact.md, "The Vulkan manifest"
  std::vector<CompiledKernel> kernels; // the schedule's kernels, then the bandwidth probe
  std::string kernelSource;            // the MLIR of every kernel variant, before lowering
};

/// Runs the Vulkan target passes (VulkanPasses.h) on `module`, which must
/// be at the dispatch stage, then generates, lowers and validates every
/// kernel and records the schedule, buffer plan and weight plan. Throws
/// std::runtime_error naming the op when a kernel has no Vulkan version.
CompiledVulkanModel compileForVulkan(mlir::ModuleOp module);

/// The kernels of `module` (after the target passes) as MLIR, before
/// lowering: `q3c dump --target vulkan --emit=kernels`.
std::string vulkanKernelSource(mlir::ModuleOp module);

/// Writes `model` as one artifact file (runtime/Artifact.h).
void writeVulkanArtifact(const std::string &path, const CompiledVulkanModel &model);

} // namespace q3::vulkan
