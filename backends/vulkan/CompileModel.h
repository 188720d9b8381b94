//===- CompileModel.h - a dispatch-stage module -> a Vulkan artifact ------===//
#pragma once

#include "backends/vulkan/KernelCompiler.h"
#include "backends/vulkan/VulkanPasses.h"

#include "runtime/Artifact.h"
#include "runtime/Manifest.h"
#include "runtime/Signature.h"
#include "runtime/vulkan/VulkanManifest.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace q3::vulkan {

struct CompiledVulkanModel {
  manifest::Manifest manifest;         // the typed manifest (format q3c-vulkan)
  runtime::vulkan::VulkanTarget vulkan; // its "vulkan" part (docs/artifact.md)
  std::vector<CompiledKernel> kernels; // the schedule's kernels, then the bandwidth probe
  std::string kernelSource;            // the MLIR of every kernel variant, before lowering
};

/// Runs the Vulkan target passes (VulkanPasses.h) on a dispatch-stage
/// module: the decisions recorded in every kernel's lowering config. Throws
/// when a pass fails.
void runVulkanTargetPasses(mlir::ModuleOp module, const VulkanTargetOptions &options = {});

/// Runs the Vulkan target passes (VulkanPasses.h) on `module`, which must
/// be at the dispatch stage, then generates, lowers and validates every
/// kernel and records the schedule, buffer plan and weight plan. Throws
/// std::runtime_error naming the op when a kernel has no Vulkan version.
CompiledVulkanModel compileForVulkan(mlir::ModuleOp module,
                                     const VulkanTargetOptions &options = {});

/// The kernels of `module` (after the target passes) as MLIR, before
/// lowering: `q3c dump --target vulkan --emit=kernels`.
std::string vulkanKernelSource(mlir::ModuleOp module, const VulkanTargetOptions &options = {});

/// Writes `model` as one artifact file (runtime/Artifact.h), with `extra`
/// sections (the tokenizer's) and signed by `signer` when given.
void writeVulkanArtifact(const std::string &path, const CompiledVulkanModel &model,
                         const std::vector<runtime::ArtifactSection> &extra = {},
                         const runtime::SecretKey *signer = nullptr);

} // namespace q3::vulkan
