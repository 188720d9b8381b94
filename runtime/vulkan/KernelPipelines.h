//===- KernelPipelines.h - one compute pipeline per kernel variant --------===//
//
// At load, every variant of every kernel in the Vulkan manifest becomes a
// compute pipeline: its SPIR-V section checked (and, with
// $Q3_VULKAN_POISON_LOCALS, its function-local variables poisoned), a
// descriptor-set layout of one storage buffer per binding, the push
// constants the kernel ABI lays out, and the workgroup and subgroup size
// chosen for the device as specialization constants.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/vulkan/VulkanDevice.h"
#include "runtime/vulkan/VulkanManifest.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace q3::runtime {
class Artifact;
}

namespace q3::runtime::vulkan {

struct Pipeline {
  const KernelVariant *variant = nullptr;
  VkShaderModule module = VK_NULL_HANDLE;
  VkDescriptorSetLayout setLayout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  uint32_t workgroupSize = 0, subgroupSize = 0;
};

struct Kernel {
  VulkanKernel spec;
  std::vector<Pipeline> pipelines; // parallel to spec.variants
  uint32_t pushWords = 0;
};

class KernelPipelines {
public:
  /// Throws VulkanError naming the kernel, its section and what is wrong.
  KernelPipelines(VulkanDevice &device, const VulkanTarget &target, const Artifact &artifact,
                  uint32_t subgroupSize, bool poisonLocals);
  ~KernelPipelines();
  KernelPipelines(const KernelPipelines &) = delete;
  KernelPipelines &operator=(const KernelPipelines &) = delete;

  const Kernel &at(int64_t id) const { return kernels_.at(size_t(id)); }
  std::optional<int64_t> find(const std::string &name) const;

private:
  /// Creates `p`'s objects; those made before a failure stay in `p`.
  void create(Pipeline &p, const VulkanKernel &kernel, const KernelVariant &variant,
              const Artifact &artifact);
  void destroyAll();
  VkShaderModule createModule(const VulkanKernel &kernel, const KernelVariant &variant,
                              const Artifact &artifact);
  /// The workgroup: as the variant asks, within the device's limits, a
  /// multiple of the subgroup size.
  uint32_t workgroupSize(const KernelVariant &variant) const;

  VulkanDevice &device_;
  VulkanApi &api_;
  uint32_t subgroupSize_;
  bool poisonLocals_;
  std::vector<Kernel> kernels_;
  std::map<std::string, int64_t> ids_;
};

} // namespace q3::runtime::vulkan
