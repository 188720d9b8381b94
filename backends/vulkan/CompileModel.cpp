//===- CompileModel.cpp - a dispatch-stage module -> a Vulkan artifact ----===//
//
// The target passes record the Vulkan decisions in each kernel's lowering
// config; each q3.kernel function then becomes its Vulkan kernel variants
// (KernelSelection.h), lowered to SPIR-V and checked by SPIRV-Tools'
// validator before they are written; the schedule, buffer plan and weight
// plan come from ScheduleWriter.h. The artifact holds one section per
// SPIR-V module, the kernels' MLIR (`kernels.mlir`) and the manifest.
//
//===----------------------------------------------------------------------===//
#include "backends/vulkan/CompileModel.h"
#include "backends/vulkan/KernelFacts.h"
#include "backends/vulkan/KernelSelection.h"
#include "backends/vulkan/LoweringConfig.h"
#include "backends/vulkan/ScheduleWriter.h"
#include "backends/vulkan/SpirvLowering.h"
#include "backends/vulkan/VulkanPasses.h"

#include "ir/Q3Ops.h"
#include "runtime/Artifact.h"
#include "runtime/vulkan/SpirvCheck.h"
#include "runtime/vulkan/VulkanKernelABI.h"
#include "runtime/vulkan/VulkanManifest.h"

#include "mlir/Pass/PassManager.h"


#include <algorithm>
#include <cstring>
#include <stdexcept>

using namespace mlir;
namespace rv = q3::runtime::vulkan;

namespace q3::vulkan {
namespace {

std::vector<func::FuncOp> kernelFunctions(ModuleOp module) {
  std::vector<func::FuncOp> kernels;
  module.walk([&](func::FuncOp kernel) {
    if (kernel->hasAttr(ir::kKernelAttrName))
      kernels.push_back(kernel);
  });
  return kernels;
}

/// SPIRV-Tools' validator (spirv-val, the runtime's check at load) over a
/// module q3c is about to write: an invalid module is a compiler bug, caught
/// here rather than on a device.
void validate(const CompiledKernel::Module &module, const std::string &entryPoint) {
  std::string problem = runtime::vulkan::checkSpirv(
      reinterpret_cast<const uint8_t *>(module.words.data()), module.words.size() * 4, entryPoint);
  if (!problem.empty())
    throw std::runtime_error("generated SPIR-V (" + module.section + ", " + entryPoint +
                             ") is invalid: " + problem);
}

} // namespace

void runVulkanTargetPasses(ModuleOp module, const VulkanTargetOptions &options) {
  PassManager pm(module.getContext());
  addVulkanTargetPasses(pm, options);
  if (failed(pm.run(module)))
    throw std::runtime_error("the Vulkan target passes failed");
}

CompiledVulkanModel compileForVulkan(ModuleOp module, const VulkanTargetOptions &options) {
  runVulkanTargetPasses(module, options);
  MLIRContext &context = *module.getContext();
  loadKernelDialects(context);
  CompiledVulkanModel compiled;
  KernelCompiler compiler(context);
  rv::VulkanTarget target;
  target.minSubgroupSize = 4;
  for (func::FuncOp kernel : kernelFunctions(module)) {
    CompiledKernel k = compileKernel(compiler, kernel);
    target.minSubgroupSize =
        std::max(target.minSubgroupSize, loweringConfigInt(kernel, "min_subgroup_size").value_or(4));
    compiled.kernels.push_back(std::move(k));
  }
  compiled.kernels.push_back(
      compiler.readBandwidth(rv::kReadBandwidthKernel, rv::kBandwidthVectorsPerInvocation));
  for (const CompiledKernel &k : compiled.kernels) {
    target.kernels.push_back(k.spec);
    for (size_t v = 0; v < k.modules.size(); ++v) {
      validate(k.modules[v], k.spec.variants.at(v).entryPoint);
      compiled.kernelSource += k.modules[v].mlir;
    }
  }
  compiled.manifest = writeSchedule(module);
  compiled.vulkan = std::move(target);
  return compiled;
}

std::string vulkanKernelSource(ModuleOp module, const VulkanTargetOptions &options) {
  runVulkanTargetPasses(module, options);
  MLIRContext &context = *module.getContext();
  loadKernelDialects(context);
  KernelCompiler compiler(context, /*lowering=*/false);
  std::string text;
  for (func::FuncOp kernel : kernelFunctions(module))
    for (const CompiledKernel::Module &m : compileKernel(compiler, kernel).modules)
      text += m.mlir;
  for (const CompiledKernel::Module &m :
       compiler.readBandwidth(rv::kReadBandwidthKernel, rv::kBandwidthVectorsPerInvocation).modules)
    text += m.mlir;
  return text;
}

void writeVulkanArtifact(const std::string &path, const CompiledVulkanModel &model,
                         const std::vector<runtime::ArtifactSection> &extra,
                         const runtime::SecretKey *signer) {
  std::vector<runtime::ArtifactSection> sections;
  for (const CompiledKernel &kernel : model.kernels)
    for (const CompiledKernel::Module &m : kernel.modules) {
      std::vector<uint8_t> bytes(m.words.size() * 4);
      std::memcpy(bytes.data(), m.words.data(), bytes.size());
      sections.push_back({m.section, runtime::SectionKind::Spirv, std::move(bytes)});
    }
  sections.push_back({"kernels.mlir", runtime::SectionKind::Data,
                      std::vector<uint8_t>(model.kernelSource.begin(), model.kernelSource.end())});
  sections.insert(sections.end(), extra.begin(), extra.end());
  nlohmann::json manifest = manifest::toJson(model.manifest);
  manifest[rv::kVulkanManifestKey] = model.vulkan;
  runtime::writeArtifact(path, manifest, sections, signer);
}

} // namespace q3::vulkan
