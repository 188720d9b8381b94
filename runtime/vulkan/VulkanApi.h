// The Vulkan functions the driver calls, loaded at run time from the system's
// Vulkan loader (libvulkan.so.1). q3run does not link the loader, so a
// machine without one still runs CPU artifacts, and a Vulkan artifact there
// fails with one clear line instead of a dynamic-linker error.
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <stdexcept>
#include <string>

namespace q3::runtime::vulkan {

/// A failed Vulkan call or an unusable device; the message is one line.
class VulkanError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

#define Q3_VK_GLOBAL_FUNCTIONS(X)                                                                  \
  X(vkCreateInstance)                                                                              \
  X(vkEnumerateInstanceLayerProperties)                                                            \
  X(vkEnumerateInstanceExtensionProperties)                                                        \
  X(vkEnumerateInstanceVersion)

#define Q3_VK_INSTANCE_FUNCTIONS(X)                                                                \
  X(vkDestroyInstance)                                                                             \
  X(vkEnumeratePhysicalDevices)                                                                    \
  X(vkGetPhysicalDeviceProperties)                                                                 \
  X(vkGetPhysicalDeviceProperties2)                                                                \
  X(vkGetPhysicalDeviceFeatures2)                                                                  \
  X(vkGetPhysicalDeviceMemoryProperties)                                                           \
  X(vkGetPhysicalDeviceQueueFamilyProperties)                                                      \
  X(vkEnumerateDeviceExtensionProperties)                                                          \
  X(vkCreateDevice)                                                                                \
  X(vkGetDeviceProcAddr)                                                                           \
  X(vkCreateDebugUtilsMessengerEXT)                                                                \
  X(vkDestroyDebugUtilsMessengerEXT)

#define Q3_VK_DEVICE_FUNCTIONS(X)                                                                  \
  X(vkDestroyDevice)                                                                               \
  X(vkGetDeviceQueue)                                                                              \
  X(vkDeviceWaitIdle)                                                                              \
  X(vkCreateBuffer)                                                                                \
  X(vkDestroyBuffer)                                                                               \
  X(vkGetBufferMemoryRequirements)                                                                 \
  X(vkAllocateMemory)                                                                              \
  X(vkFreeMemory)                                                                                  \
  X(vkBindBufferMemory)                                                                            \
  X(vkMapMemory)                                                                                   \
  X(vkUnmapMemory)                                                                                 \
  X(vkCreateShaderModule)                                                                          \
  X(vkDestroyShaderModule)                                                                         \
  X(vkCreateDescriptorSetLayout)                                                                   \
  X(vkDestroyDescriptorSetLayout)                                                                  \
  X(vkCreatePipelineLayout)                                                                        \
  X(vkDestroyPipelineLayout)                                                                       \
  X(vkCreateComputePipelines)                                                                      \
  X(vkDestroyPipeline)                                                                             \
  X(vkCreateDescriptorPool)                                                                        \
  X(vkDestroyDescriptorPool)                                                                       \
  X(vkAllocateDescriptorSets)                                                                      \
  X(vkUpdateDescriptorSets)                                                                        \
  X(vkCreateCommandPool)                                                                           \
  X(vkDestroyCommandPool)                                                                          \
  X(vkAllocateCommandBuffers)                                                                      \
  X(vkFreeCommandBuffers)                                                                          \
  X(vkBeginCommandBuffer)                                                                          \
  X(vkEndCommandBuffer)                                                                            \
  X(vkResetCommandBuffer)                                                                          \
  X(vkCmdBindPipeline)                                                                             \
  X(vkCmdBindDescriptorSets)                                                                       \
  X(vkCmdPushConstants)                                                                            \
  X(vkCmdDispatch)                                                                                 \
  X(vkCmdPipelineBarrier)                                                                          \
  X(vkCmdCopyBuffer)                                                                               \
  X(vkCmdFillBuffer)                                                                               \
  X(vkCmdUpdateBuffer)                                                                             \
  X(vkCmdWriteTimestamp)                                                                           \
  X(vkCmdResetQueryPool)                                                                           \
  X(vkCreateQueryPool)                                                                             \
  X(vkDestroyQueryPool)                                                                            \
  X(vkGetQueryPoolResults)                                                                         \
  X(vkCreateFence)                                                                                 \
  X(vkDestroyFence)                                                                                \
  X(vkResetFences)                                                                                 \
  X(vkWaitForFences)                                                                               \
  X(vkQueueSubmit)                                                                                 \
  X(vkGetFenceStatus)

/// The loader and the function pointers, resolved in three steps as Vulkan
/// prescribes: global functions, then per instance, then per device.
struct VulkanApi {
#define Q3_VK_DECLARE(name) PFN_##name name = nullptr;
  Q3_VK_GLOBAL_FUNCTIONS(Q3_VK_DECLARE)
  Q3_VK_INSTANCE_FUNCTIONS(Q3_VK_DECLARE)
  Q3_VK_DEVICE_FUNCTIONS(Q3_VK_DECLARE)
#undef Q3_VK_DECLARE
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;

  /// Opens the loader: $Q3_VULKAN_LOADER if set (tests point it elsewhere),
  /// else libvulkan.so.1. Throws VulkanError when it is not there.
  static VulkanApi &load();
  void loadInstance(VkInstance instance);
  void loadDevice(VkDevice device);

private:
  void *library_ = nullptr;
};

/// "VK_ERROR_OUT_OF_DEVICE_MEMORY" and the like.
const char *resultName(VkResult result);

/// Throws VulkanError "<what>: <result>" unless `result` is VK_SUCCESS; a
/// lost device says so and that the run cannot continue.
void check(VkResult result, const std::string &what);

} // namespace q3::runtime::vulkan
