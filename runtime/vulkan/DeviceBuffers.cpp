#include "runtime/vulkan/DeviceBuffers.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace q3::runtime::vulkan {

VulkanError DeviceBuffers::outOfMemory(const char *what, int64_t bytes,
                                       const std::string &why) const {
  const DeviceInfo &info = device_.info();
  return VulkanError(fmt::format(
      "out of device memory: {} needs {}, {} are already allocated, and the device ({}) has {} "
      "of device-local memory{}{}",
      what, formatBytes(uint64_t(bytes)), formatBytes(uint64_t(allocatedBytes_)), info.name,
      formatBytes(info.deviceLocalBytes), why,
      std::strstr(what, "KV-cache") ? "; use a smaller --ctx" : ""));
}

Buffer DeviceBuffers::create(int64_t bytes, VkMemoryPropertyFlags required,
                             VkMemoryPropertyFlags preferred, const char *what) {
  VkDevice device = device_.handle();
  const int64_t size = std::max<int64_t>(bytes, 4);
  if (uint64_t(allocatedBytes_ + size) > device_.info().deviceLocalBytes)
    throw outOfMemory(what, size, "");
  Buffer buffer;
  buffer.bytes = bytes;
  VkBufferCreateInfo create{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  create.size = VkDeviceSize(size);
  create.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                 VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  create.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(api_.vkCreateBuffer(device, &create, nullptr, &buffer.buffer), "creating a buffer");
  VkMemoryRequirements needs{};
  api_.vkGetBufferMemoryRequirements(device, buffer.buffer, &needs);
  const VkPhysicalDeviceMemoryProperties &memory = device_.memory();
  const int chosen = chooseMemoryType(memory, needs.memoryTypeBits, required, preferred);
  if (chosen < 0) {
    destroy(buffer);
    throw VulkanError(std::string("no memory type for ") + what);
  }
  VkMemoryAllocateInfo allocate{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  allocate.allocationSize = needs.size;
  allocate.memoryTypeIndex = uint32_t(chosen);
  VkResult result = VK_SUCCESS;
  if (failAllocationAt_ > 0 && ++allocations_ == failAllocationAt_)
    result = VK_ERROR_OUT_OF_DEVICE_MEMORY;
  else
    result = api_.vkAllocateMemory(device, &allocate, nullptr, &buffer.memory);
  if (result == VK_ERROR_OUT_OF_DEVICE_MEMORY || result == VK_ERROR_OUT_OF_HOST_MEMORY) {
    destroy(buffer);
    throw outOfMemory(what, size, fmt::format(" ({})", resultName(result)));
  }
  try {
    check(result, std::string("allocating device memory for ") + what);
    check(api_.vkBindBufferMemory(device, buffer.buffer, buffer.memory, 0), "binding memory");
    const VkMemoryPropertyFlags flags = memory.memoryTypes[chosen].propertyFlags;
    if ((flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) &&
        (flags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT)) {
      void *mapped = nullptr;
      check(api_.vkMapMemory(device, buffer.memory, 0, VK_WHOLE_SIZE, 0, &mapped),
            "mapping memory");
      buffer.mapped = static_cast<uint8_t *>(mapped);
    }
  } catch (const VulkanError &) {
    destroy(buffer);
    throw;
  }
  buffer.allocatedBytes = int64_t(needs.size);
  allocatedBytes_ += buffer.allocatedBytes;
  return buffer;
}

void DeviceBuffers::destroy(Buffer &buffer) {
  VkDevice device = device_.handle();
  if (buffer.mapped)
    api_.vkUnmapMemory(device, buffer.memory);
  if (buffer.buffer)
    api_.vkDestroyBuffer(device, buffer.buffer, nullptr);
  if (buffer.memory)
    api_.vkFreeMemory(device, buffer.memory, nullptr);
  allocatedBytes_ -= buffer.allocatedBytes;
  buffer = Buffer{};
}

} // namespace q3::runtime::vulkan
