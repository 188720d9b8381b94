//===- SpirvLowering.h - a kernel's gpu.module -> a SPIR-V binary ---------===//
//
// A Vulkan kernel is generated as a gpu.module holding one gpu.func over
// scf/arith/math/memref and the gpu dialect's ids and subgroup reductions
// (backends/vulkan/GpuKernelBuilder.h). This lowers it to the spirv dialect
// and serializes it to the binary the runtime hands to vkCreateShaderModule.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include <cstdint>
#include <string>
#include <vector>

namespace q3::vulkan {

/// Dialects a kernel's gpu.module uses: load them into the context before
/// building one.
void loadKernelDialects(mlir::MLIRContext &context);

/// Lowers a clone of `kernelModule` (left unchanged) to one spirv.module and
/// serializes it. Throws std::runtime_error with MLIR's diagnostic when a
/// pattern or a pass fails: a generator bug, never bad user input.
///
/// The lowering, per docs/vulkan-backend.md: ONE applyFullConversion with
/// the GPU, SCF, arith, memref, math and func -> SPIR-V pattern sets together
/// (MLIR 16's per-dialect passes one after another leave unresolved
/// materializations), plus the patterns of this file for the workgroup size,
/// the subgroup size and the lane id; then spirv-lower-abi-attrs and
/// spirv-update-vce; then the specialization constants of
/// runtime/vulkan/VulkanKernelABI.h; then spirv::serialize. The target
/// environment allows Vulkan 1.1 (SPIR-V 1.3) with the capabilities a kernel
/// may need; update-vce keeps only those the kernel uses, so a module
/// declares exactly what it requires of the device.
struct SpirvModule {
  std::vector<uint32_t> words;
  std::vector<std::string> capabilities; // as update-vce left them
};
SpirvModule lowerToSpirv(mlir::gpu::GPUModuleOp kernelModule);

} // namespace q3::vulkan
