#include "runtime/vulkan/KernelPipelines.h"

#include "runtime/Artifact.h"
#include "runtime/LoadError.h"
#include "runtime/vulkan/SpirvCheck.h"
#include "runtime/vulkan/SpirvPoison.h"
#include "runtime/vulkan/VulkanKernelABI.h"

#include <fmt/format.h>

#include <algorithm>

namespace q3::runtime::vulkan {

KernelPipelines::KernelPipelines(VulkanDevice &device, const VulkanTarget &target,
                                 const Artifact &artifact, uint32_t subgroupSize, bool poisonLocals)
    : device_(device), api_(device.api()), subgroupSize_(subgroupSize),
      poisonLocals_(poisonLocals) {
  for (const VulkanKernel &spec : target.kernels) {
    Kernel kernel;
    kernel.spec = spec;
    kernel.pushWords =
        uint32_t(kPushFirstTensorOffset + spec.elementBytes.size() + spec.pushScalars.size());
    if (kernel.pushWords > kMaxPushWords ||
        kernel.pushWords * 4 > device_.info().limits.maxPushConstantsSize)
      throw VulkanError("kernel " + spec.name + " needs more push constants than the device has");
    ids_[spec.name] = int64_t(kernels_.size());
    kernels_.push_back(std::move(kernel));
  }
  // Pipelines after the kernels are in place: each points into its spec.
  // Each is in place before its objects are created, so a failure part
  // way destroys what was made.
  try {
    for (Kernel &kernel : kernels_)
      for (const KernelVariant &variant : kernel.spec.variants)
        create(kernel.pipelines.emplace_back(), kernel.spec, variant, artifact);
  } catch (...) {
    destroyAll();
    throw;
  }
}

KernelPipelines::~KernelPipelines() { destroyAll(); }

void KernelPipelines::destroyAll() {
  VkDevice device = device_.handle();
  for (Kernel &kernel : kernels_)
    for (Pipeline &p : kernel.pipelines) {
      api_.vkDestroyPipeline(device, p.pipeline, nullptr);
      api_.vkDestroyPipelineLayout(device, p.layout, nullptr);
      api_.vkDestroyDescriptorSetLayout(device, p.setLayout, nullptr);
      api_.vkDestroyShaderModule(device, p.module, nullptr);
    }
  kernels_.clear();
}

std::optional<int64_t> KernelPipelines::find(const std::string &name) const {
  auto it = ids_.find(name);
  return it == ids_.end() ? std::nullopt : std::optional<int64_t>(it->second);
}

VkShaderModule KernelPipelines::createModule(const VulkanKernel &kernel,
                                             const KernelVariant &variant,
                                             const Artifact &artifact) {
  const Artifact::Section *section = artifact.find(variant.section);
  const std::string name = "section '" + printable(variant.section) + "'";
  if (!section)
    throw VulkanError("kernel " + kernel.name + ": no " + name + " in the artifact");
  if (section->kind != SectionKind::Spirv)
    throw VulkanError(name + ": kind: expected 4 (spirv) for a kernel's module");
  if (std::string problem = checkSpirv(section->data, section->size, variant.entryPoint);
      !problem.empty())
    throw VulkanError(name + ": corrupt SPIR-V: " + problem);
  VkShaderModuleCreateInfo module{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  module.codeSize = section->size;
  module.pCode = reinterpret_cast<const uint32_t *>(section->data);
  std::vector<uint32_t> poisoned;
  if (poisonLocals_) {
    poisoned = poisonFunctionVariables(
        std::vector<uint32_t>(module.pCode, module.pCode + section->size / 4));
    module.codeSize = poisoned.size() * 4;
    module.pCode = poisoned.data();
    if (std::string problem = checkSpirv(reinterpret_cast<const uint8_t *>(poisoned.data()),
                                         module.codeSize, variant.entryPoint);
        !problem.empty())
      throw VulkanError(name + " with poisoned locals: " + problem);
  }
  VkShaderModule handle = VK_NULL_HANDLE;
  check(api_.vkCreateShaderModule(device_.handle(), &module, nullptr, &handle),
        "creating the shader module of " + variant.entryPoint);
  return handle;
}

uint32_t KernelPipelines::workgroupSize(const KernelVariant &variant) const {
  const VkPhysicalDeviceLimits &limits = device_.info().limits;
  const int64_t sg = subgroupSize_;
  const int64_t cap =
      std::min<int64_t>({variant.maxInvocations, int64_t(limits.maxComputeWorkGroupInvocations),
                         int64_t(limits.maxComputeWorkGroupSize[0])});
  const int64_t want = variant.subgroups > 0 ? variant.subgroups * sg : variant.invocations;
  const int64_t size = std::max<int64_t>(sg, std::min(want, cap) / sg * sg);
  if (size > cap)
    throw VulkanError(fmt::format("kernel {}: a workgroup of one {}-wide subgroup exceeds its "
                                  "limit of {} invocations",
                                  variant.entryPoint, sg, cap));
  if ((size / sg) % variant.grid.subgroupsPerUnit != 0)
    throw VulkanError(fmt::format(
        "kernel {}: needs workgroups of a multiple of {} subgroups; with {}-wide subgroups "
        "the device allows {} invocations",
        variant.entryPoint, variant.grid.subgroupsPerUnit, sg, cap));
  return uint32_t(size);
}

void KernelPipelines::create(Pipeline &p, const VulkanKernel &kernel, const KernelVariant &variant,
                             const Artifact &artifact) {
  VkDevice device = device_.handle();
  p.variant = &variant;
  p.module = createModule(kernel, variant, artifact);

  std::vector<VkDescriptorSetLayoutBinding> bindings;
  for (uint32_t b = 0; b < kFirstTensorBinding + kernel.elementBytes.size(); ++b)
    bindings.push_back(
        {b, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr});
  VkDescriptorSetLayoutCreateInfo setLayout{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  setLayout.bindingCount = uint32_t(bindings.size());
  setLayout.pBindings = bindings.data();
  check(api_.vkCreateDescriptorSetLayout(device, &setLayout, nullptr, &p.setLayout),
        "creating a descriptor set layout");
  const uint32_t pushWords =
      uint32_t(kPushFirstTensorOffset + kernel.elementBytes.size() + kernel.pushScalars.size());
  VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, pushWords * 4};
  VkPipelineLayoutCreateInfo layout{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  layout.setLayoutCount = 1;
  layout.pSetLayouts = &p.setLayout;
  layout.pushConstantRangeCount = 1;
  layout.pPushConstantRanges = &push;
  check(api_.vkCreatePipelineLayout(device, &layout, nullptr, &p.layout),
        "creating a pipeline layout");

  p.workgroupSize = workgroupSize(variant);
  p.subgroupSize = subgroupSize_;
  const uint32_t constants[2] = {p.workgroupSize, p.subgroupSize};
  const VkSpecializationMapEntry entries[2] = {{kWorkgroupSizeSpecId, 0, 4},
                                               {kSubgroupSizeSpecId, 4, 4}};
  VkSpecializationInfo specialization{2, entries, sizeof(constants), constants};
  VkPipelineShaderStageRequiredSubgroupSizeCreateInfo required{
      VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO};
  required.requiredSubgroupSize = p.subgroupSize;
  VkComputePipelineCreateInfo pipeline{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  pipeline.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  pipeline.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  pipeline.stage.module = p.module;
  pipeline.stage.pName = variant.entryPoint.c_str();
  pipeline.stage.pSpecializationInfo = &specialization;
  if (device_.info().subgroupSizeControl) {
    pipeline.stage.pNext = &required;
    if (device_.info().computeFullSubgroups)
      pipeline.stage.flags |= VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT;
  }
  pipeline.layout = p.layout;
  check(api_.vkCreateComputePipelines(device, VK_NULL_HANDLE, 1, &pipeline, nullptr, &p.pipeline),
        "creating the pipeline of " + variant.entryPoint);
}

} // namespace q3::runtime::vulkan
