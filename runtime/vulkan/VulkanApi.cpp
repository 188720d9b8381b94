#include "runtime/vulkan/VulkanApi.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace q3::runtime::vulkan {

VulkanApi &VulkanApi::load() {
  static VulkanApi api;
  static std::once_flag once;
  static std::string failure;
  std::call_once(once, [] {
    const char *override = std::getenv("Q3_VULKAN_LOADER");
    const std::string path = override && *override ? override : "libvulkan.so.1";
    api.library_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!api.library_) {
      const char *why = dlerror();
      failure = "no Vulkan loader: cannot open " + path + " (" + (why ? why : "unknown error") +
                "); install the Vulkan loader (Debian: libvulkan1) and a driver "
                "(mesa-vulkan-drivers for lavapipe, the CPU device)";
      return;
    }
    api.vkGetInstanceProcAddr =
        reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(api.library_, "vkGetInstanceProcAddr"));
    if (!api.vkGetInstanceProcAddr) {
      failure = path + " is not a Vulkan loader: it has no vkGetInstanceProcAddr";
      return;
    }
#define Q3_VK_LOAD_GLOBAL(name)                                                                    \
  api.name = reinterpret_cast<PFN_##name>(api.vkGetInstanceProcAddr(nullptr, #name));
    Q3_VK_GLOBAL_FUNCTIONS(Q3_VK_LOAD_GLOBAL)
#undef Q3_VK_LOAD_GLOBAL
    if (!api.vkCreateInstance)
      failure = path + ": the Vulkan loader has no vkCreateInstance";
  });
  if (!failure.empty())
    throw VulkanError(failure);
  return api;
}

void VulkanApi::loadInstance(VkInstance instance) {
#define Q3_VK_LOAD_INSTANCE(name)                                                                  \
  name = reinterpret_cast<PFN_##name>(vkGetInstanceProcAddr(instance, #name));
  Q3_VK_INSTANCE_FUNCTIONS(Q3_VK_LOAD_INSTANCE)
#undef Q3_VK_LOAD_INSTANCE
}

void VulkanApi::loadDevice(VkDevice device) {
#define Q3_VK_LOAD_DEVICE(name)                                                                    \
  name = reinterpret_cast<PFN_##name>(vkGetDeviceProcAddr(device, #name));                         \
  if (!name)                                                                                       \
    throw VulkanError("the Vulkan device has no " #name);
  Q3_VK_DEVICE_FUNCTIONS(Q3_VK_LOAD_DEVICE)
#undef Q3_VK_LOAD_DEVICE
}

const char *resultName(VkResult result) {
  switch (result) {
#define Q3_VK_RESULT(name)                                                                         \
  case name:                                                                                       \
    return #name;
    Q3_VK_RESULT(VK_SUCCESS)
    Q3_VK_RESULT(VK_NOT_READY)
    Q3_VK_RESULT(VK_TIMEOUT)
    Q3_VK_RESULT(VK_INCOMPLETE)
    Q3_VK_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
    Q3_VK_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    Q3_VK_RESULT(VK_ERROR_INITIALIZATION_FAILED)
    Q3_VK_RESULT(VK_ERROR_DEVICE_LOST)
    Q3_VK_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
    Q3_VK_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
    Q3_VK_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
    Q3_VK_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
    Q3_VK_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
    Q3_VK_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
    Q3_VK_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
    Q3_VK_RESULT(VK_ERROR_FRAGMENTED_POOL)
    Q3_VK_RESULT(VK_ERROR_UNKNOWN)
    Q3_VK_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
    Q3_VK_RESULT(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    Q3_VK_RESULT(VK_ERROR_FRAGMENTATION)
    Q3_VK_RESULT(VK_ERROR_INVALID_SHADER_NV)
#undef Q3_VK_RESULT
  default:
    return "an unknown VkResult";
  }
}

void check(VkResult result, const std::string &what) {
  if (result == VK_SUCCESS)
    return;
  if (result == VK_ERROR_DEVICE_LOST)
    throw VulkanError(what + ": the Vulkan device was lost (VK_ERROR_DEVICE_LOST: a driver reset, "
                             "a hang or a crash on the device); the run cannot continue");
  throw VulkanError(what + ": " + resultName(result));
}

} // namespace q3::runtime::vulkan
