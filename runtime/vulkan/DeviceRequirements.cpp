#include "runtime/vulkan/DeviceRequirements.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace q3::runtime::vulkan {
namespace {

/// The Vulkan feature a SPIR-V capability needs; "" for none, nullopt for
/// one this runtime cannot enable.
std::optional<std::string> featureFor(const std::string &capability) {
  if (capability == "Shader")
    return std::string();
  if (capability == "Float16")
    return std::string("shaderFloat16");
  if (capability == "Int16")
    return std::string("shaderInt16");
  if (capability == "StorageBuffer16BitAccess" || capability == "StorageUniformBufferBlock16")
    return std::string("storageBuffer16BitAccess");
  if (capability == "GroupNonUniform" || capability == "GroupNonUniformArithmetic")
    return std::string("subgroup arithmetic in compute shaders");
  return std::nullopt;
}

/// Whether `device` has `feature`, which is then enabled in `features`.
bool enable(const std::string &feature, const DeviceInfo &device, DeviceFeatures &features) {
  if (feature == "shaderFloat16")
    return features.shaderFloat16 = device.shaderFloat16;
  if (feature == "shaderInt16")
    return features.shaderInt16 = device.shaderInt16;
  if (feature == "storageBuffer16BitAccess")
    return features.storageBuffer16BitAccess = device.storageBuffer16BitAccess;
  return feature.empty() || device.subgroupArithmetic;
}

} // namespace

int selectDevice(const VulkanInstance &instance, int requested) {
  if (requested < 0)
    return instance.defaultDevice();
  if (requested < int(instance.devices().size()))
    return requested;
  std::vector<std::string> names;
  for (const DeviceInfo &d : instance.devices())
    names.push_back(fmt::format("{}: {}", d.index, d.name));
  throw VulkanError(fmt::format("--device {}: there {} {} Vulkan device{} ({})", requested,
                                names.size() == 1 ? "is" : "are", names.size(),
                                names.size() == 1 ? "" : "s", fmt::join(names, ", ")));
}

DeviceFeatures requiredFeatures(const VulkanTarget &target, const DeviceInfo &device) {
  DeviceFeatures features;
  std::vector<std::string> missing;
  for (const VulkanKernel &kernel : target.kernels)
    for (const KernelVariant &variant : kernel.variants)
      for (const std::string &capability : variant.capabilities) {
        std::optional<std::string> feature = featureFor(capability);
        if (!feature)
          throw VulkanError("kernel " + kernel.name + " needs the SPIR-V capability " + capability +
                            ", which this runtime cannot enable");
        if (!enable(*feature, device, features) &&
            std::find(missing.begin(), missing.end(), *feature) == missing.end())
          missing.push_back(*feature);
      }
  if (!device.hasComputeQueue)
    missing.push_back("a compute queue");
  if (!missing.empty())
    throw VulkanError(fmt::format("Vulkan device {} ({}) lacks what the kernels need: {}",
                                  device.index, device.name, fmt::join(missing, ", ")));
  // Pipelines ask for their subgroup size wherever the device lets them.
  features.subgroupSizeControl = device.subgroupSizeControl;
  return features;
}

uint32_t chooseSubgroupSize(const VulkanTarget &target, const DeviceInfo &device) {
  const int64_t lo = target.minSubgroupSize, hi = target.maxSubgroupSize;
  if (device.subgroupSize >= lo && device.subgroupSize <= hi)
    return device.subgroupSize;
  if (device.subgroupSizeControl)
    for (uint32_t size = device.minSubgroupSize; size && size <= device.maxSubgroupSize; size *= 2)
      if (size >= lo && size <= hi)
        return size;
  throw VulkanError(fmt::format(
      "the kernels need a subgroup size from {} to {}; Vulkan device {} ({}) has {}{}", lo, hi,
      device.index, device.name,
      device.subgroupSizeControl
          ? fmt::format("sizes {} to {}", device.minSubgroupSize, device.maxSubgroupSize)
          : std::to_string(device.subgroupSize),
      device.subgroupSizeControl ? "" : " and cannot change it"));
}

void checkLimits(const VulkanTarget &target, const DeviceInfo &device, uint32_t subgroupSize) {
  const VkPhysicalDeviceLimits &limits = device.limits;
  for (const VulkanKernel &kernel : target.kernels)
    for (const KernelVariant &variant : kernel.variants)
      if (uint64_t(variant.sharedBytes) > limits.maxComputeSharedMemorySize)
        throw VulkanError(fmt::format("kernel {} needs {} bytes of shared memory; Vulkan device {} "
                                      "({}) has {} (maxComputeSharedMemorySize)",
                                      variant.entryPoint, variant.sharedBytes, device.index,
                                      device.name, limits.maxComputeSharedMemorySize));
  for (const VulkanKernel &kernel : target.kernels)
    if (kernel.split &&
        uint64_t(kernel.split->rowsPerPart * kernel.split->rowBytes) > limits.maxStorageBufferRange)
      throw VulkanError(fmt::format(
          "kernel {} binds weight parts of {}; Vulkan device {} ({}) binds at most {} "
          "(maxStorageBufferRange)",
          kernel.name, formatBytes(uint64_t(kernel.split->rowsPerPart * kernel.split->rowBytes)),
          device.index, device.name, formatBytes(limits.maxStorageBufferRange)));
  if (subgroupSize > limits.maxComputeWorkGroupInvocations)
    throw VulkanError("the device's subgroup is larger than its largest workgroup");
}

} // namespace q3::runtime::vulkan
