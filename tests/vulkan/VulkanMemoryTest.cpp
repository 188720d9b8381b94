//===- VulkanMemoryTest.cpp - which memory each kind of buffer gets -------===//
//
// chooseMemoryType on the memory types real drivers report: on a discrete
// NVIDIA GPU the read-back buffer must be host-cached (reading the
// write-combined type back is a bus transaction per CPU load), kernel buffers
// plain device-local, the step parameters in the host-visible window onto
// device memory.
//
//===----------------------------------------------------------------------===//
#include "runtime/vulkan/VulkanDevice.h"

#include <gtest/gtest.h>

#include <vector>

namespace q3::testing {
namespace {

using q3::runtime::vulkan::chooseMemoryType;

constexpr VkMemoryPropertyFlags kDevice = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
constexpr VkMemoryPropertyFlags kVisible = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT;
constexpr VkMemoryPropertyFlags kCoherent = VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
constexpr VkMemoryPropertyFlags kCached = VK_MEMORY_PROPERTY_HOST_CACHED_BIT;

VkPhysicalDeviceMemoryProperties memoryTypes(const std::vector<VkMemoryPropertyFlags> &flags) {
  VkPhysicalDeviceMemoryProperties memory{};
  memory.memoryTypeCount = uint32_t(flags.size());
  for (size_t t = 0; t < flags.size(); ++t)
    memory.memoryTypes[t].propertyFlags = flags[t];
  return memory;
}

// The types NVIDIA's Linux driver reports for a discrete GPU, in its order.
const VkPhysicalDeviceMemoryProperties kNvidia =
    memoryTypes({0, kDevice, kDevice, kVisible | kCoherent, kVisible | kCoherent | kCached,
                 kDevice | kVisible | kCoherent});
const uint32_t kAll = ~0u;

TEST(VulkanMemory, ReadBackIsHostCachedOnADiscreteGpu) {
  EXPECT_EQ(chooseMemoryType(kNvidia, kAll, kVisible | kCoherent, kCached), 4);
  // The staging ring for uploads: the first host-visible type
  // (write-combined: fast to write, and the GPU reads it once).
  EXPECT_EQ(chooseMemoryType(kNvidia, kAll, kVisible | kCoherent, 0), 3);
}

TEST(VulkanMemory, KernelBuffersAreDeviceLocalAndUnmapped) {
  EXPECT_EQ(chooseMemoryType(kNvidia, kAll, kDevice, 0), 1);
  // The step parameters: written by the host, read by every kernel.
  EXPECT_EQ(chooseMemoryType(kNvidia, kAll, kVisible | kCoherent, kDevice), 5);
}

TEST(VulkanMemory, FallsBackWhenNothingHasThePreferredFlags) {
  // An integrated GPU or lavapipe: one type that has everything.
  const VkPhysicalDeviceMemoryProperties unified =
      memoryTypes({kDevice | kVisible | kCoherent | kCached});
  EXPECT_EQ(chooseMemoryType(unified, kAll, kVisible | kCoherent, kCached), 0);
  // No cached host memory: the read-back takes the coherent type.
  const VkPhysicalDeviceMemoryProperties uncached = memoryTypes({kDevice, kVisible | kCoherent});
  EXPECT_EQ(chooseMemoryType(uncached, kAll, kVisible | kCoherent, kCached), 1);
}

TEST(VulkanMemory, HonoursTheBuffersTypeBitsAndRequiredFlags) {
  // A buffer that may not live in type 4 gets the uncached one.
  EXPECT_EQ(chooseMemoryType(kNvidia, kAll & ~(1u << 4), kVisible | kCoherent, kCached), 3);
  const VkPhysicalDeviceMemoryProperties deviceOnly = memoryTypes({kDevice});
  EXPECT_EQ(chooseMemoryType(deviceOnly, kAll, kVisible | kCoherent, 0), -1);
}

} // namespace
} // namespace q3::testing
