//===- DeviceBuffers.h - buffers and their device memory ------------------===//
//
// Every buffer the driver makes (weights, activations, the KV cache, the
// staging ring, the read-back buffer, the step parameters) gets memory of
// its own, of the type chooseMemoryType picks; host-visible coherent memory
// stays mapped. Allocations are counted against the device-local heap so
// that running out says what needed how much and what is already taken
// (and, for the KV cache, that a smaller --ctx helps), before the driver
// would report a bare VK_ERROR_OUT_OF_DEVICE_MEMORY.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/vulkan/VulkanDevice.h"

#include <cstdint>

namespace q3::runtime::vulkan {

struct Buffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  int64_t bytes = 0;
  uint8_t *mapped = nullptr;  // host-visible and coherent memory stays mapped
  int64_t allocatedBytes = 0; // of device memory, counted until destroyed
};

class DeviceBuffers {
public:
  /// `failAllocationAt` > 0 makes that allocation (counting from 1) fail
  /// as out of device memory ($Q3_VULKAN_INJECT "alloc:N", for tests).
  DeviceBuffers(VulkanDevice &device, int failAllocationAt)
      : device_(device), api_(device.api()), failAllocationAt_(failAllocationAt) {}

  /// A buffer of `bytes` in memory with every `required` property and, where
  /// the device has such a type, every `preferred` one; `what` names it in
  /// errors ("the staging ring").
  Buffer create(int64_t bytes, VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred,
                const char *what);
  /// Frees `buffer` (nothing when it is empty) and empties it; its memory
  /// no longer counts as allocated.
  void destroy(Buffer &buffer);

private:
  VulkanError outOfMemory(const char *what, int64_t bytes, const std::string &why) const;

  VulkanDevice &device_;
  VulkanApi &api_;
  int64_t allocatedBytes_ = 0;
  int failAllocationAt_ = 0, allocations_ = 0;
};

} // namespace q3::runtime::vulkan
