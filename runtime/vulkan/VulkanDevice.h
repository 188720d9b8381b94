// A Vulkan instance and the device the driver runs on: device selection,
// what each device offers (for `q3run --list-devices` and for the checks an
// artifact's kernels need), and the logical device with one compute queue.
#pragma once

#include "runtime/vulkan/VulkanApi.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace q3::runtime::vulkan {

/// What one physical device offers, as far as q3c's kernels care.
struct DeviceInfo {
  int index = 0;
  std::string name;
  std::string type; // discrete GPU, integrated GPU, virtual GPU, CPU, other
  VkPhysicalDeviceType vkType = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  std::string driver;       // driver name and info
  uint32_t apiVersion = 0;
  uint64_t deviceLocalBytes = 0; // the largest device-local heap
  uint32_t subgroupSize = 0;     // the default
  uint32_t minSubgroupSize = 0, maxSubgroupSize = 0; // with subgroup size control
  bool subgroupSizeControl = false;  // pipelines can require a subgroup size
  bool computeFullSubgroups = false; // ... and full subgroups
  bool subgroupArithmetic = false;   // in compute shaders
  bool storageBuffer16BitAccess = false;
  bool shaderFloat16 = false;
  bool shaderInt16 = false;
  VkPhysicalDeviceLimits limits{};
  bool hasComputeQueue = false;
  double timestampPeriodNs = 0; // 0: no timestamps on the compute queue
};

const char *deviceTypeName(VkPhysicalDeviceType type);
std::string formatBytes(uint64_t bytes); // "2.0 GiB"

/// The instance. With `validation`, the Khronos validation layer is enabled
/// and every message it emits is printed to stderr as one line starting
/// "vulkan validation:" and counted.
class VulkanInstance {
public:
  /// `validation`: run under the Khronos validation layer; `synchronization`
  /// also turns on its synchronization checks (hazards between dispatches,
  /// copies and host access that a missing barrier leaves).
  static std::unique_ptr<VulkanInstance> create(bool validation, bool synchronization = false);
  ~VulkanInstance();

  VulkanApi &api() { return api_; }
  VkInstance handle() const { return instance_; }
  const std::vector<DeviceInfo> &devices() const { return devices_; }
  VkPhysicalDevice physical(int index) const { return physical_.at(size_t(index)); }
  /// The first discrete GPU, else integrated, else virtual, else a CPU
  /// device (lavapipe). Throws VulkanError when there is no device.
  int defaultDevice() const;
  int validationMessages() const { return validationMessages_; }

private:
  explicit VulkanInstance(VulkanApi &api) : api_(api) {}
  static VkBool32 VKAPI_PTR onMessage(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                      VkDebugUtilsMessageTypeFlagsEXT types,
                                      const VkDebugUtilsMessengerCallbackDataEXT *data,
                                      void *self);
  DeviceInfo describe(int index, VkPhysicalDevice device);

  VulkanApi &api_;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  std::vector<VkPhysicalDevice> physical_;
  std::vector<DeviceInfo> devices_;
  int validationMessages_ = 0;
};

/// What the kernels need enabled on the logical device.
struct DeviceFeatures {
  bool storageBuffer16BitAccess = false;
  bool shaderFloat16 = false;
  bool shaderInt16 = false;
  bool subgroupSizeControl = false;
};

/// The logical device and its compute queue.
class VulkanDevice {
public:
  VulkanDevice(VulkanInstance &instance, int index, const DeviceFeatures &features);
  ~VulkanDevice();

  VulkanApi &api() { return instance_.api(); }
  VkDevice handle() const { return device_; }
  VkQueue queue() const { return queue_; }
  uint32_t queueFamily() const { return queueFamily_; }
  const DeviceInfo &info() const { return info_; }
  VkPhysicalDevice physical() const { return physical_; }
  const VkPhysicalDeviceMemoryProperties &memory() const { return memory_; }

private:
  VulkanInstance &instance_;
  DeviceInfo info_;
  VkPhysicalDevice physical_;
  VkPhysicalDeviceMemoryProperties memory_{};
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queueFamily_ = 0;
};

/// The memory type a buffer gets: among the types `typeBits` allows that
/// have every `required` flag, the first that also has every `preferred`
/// one, else the first; -1 when none qualifies. The order matters because
/// drivers list their types best-first: a discrete NVIDIA GPU lists plain
/// DEVICE_LOCAL before the host-visible window onto the same memory, and
/// host memory that is write-combined (fast to write, slow to read back:
/// every CPU load goes to memory) before the HOST_CACHED type reads want.
int chooseMemoryType(const VkPhysicalDeviceMemoryProperties &memory, uint32_t typeBits,
                     VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred);

} // namespace q3::runtime::vulkan
