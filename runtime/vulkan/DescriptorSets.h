//===- DescriptorSets.h - descriptor sets made once per binding -----------===//
//
// A recorded pass replays its descriptor sets, so one set per pipeline
// layout and list of buffer windows is made the first time it is asked for
// and reused after; sets come from pools of kSetsPerPool, freed together
// with the cache.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/vulkan/VulkanApi.h"

#include <map>
#include <tuple>
#include <utility>
#include <vector>

namespace q3::runtime::vulkan {

/// One storage-buffer binding: a window onto a buffer.
struct Binding {
  VkBuffer buffer;
  VkDeviceSize offset, range;
  bool operator<(const Binding &o) const {
    return std::tie(buffer, offset, range) < std::tie(o.buffer, o.offset, o.range);
  }
};

class DescriptorSetCache {
public:
  DescriptorSetCache(VulkanApi &api, VkDevice device) : api_(api), device_(device) {}
  ~DescriptorSetCache();
  DescriptorSetCache(const DescriptorSetCache &) = delete;
  DescriptorSetCache &operator=(const DescriptorSetCache &) = delete;

  /// The set of `layout` whose binding i is `bindings[i]`.
  VkDescriptorSet get(VkDescriptorSetLayout layout, const std::vector<Binding> &bindings);

private:
  VkDescriptorSet allocate(VkDescriptorSetLayout layout);

  VulkanApi &api_;
  VkDevice device_;
  std::vector<VkDescriptorPool> pools_;
  uint32_t setsLeft_ = 0; // in pools_.back()
  std::map<std::pair<VkDescriptorSetLayout, std::vector<Binding>>, VkDescriptorSet> sets_;
};

} // namespace q3::runtime::vulkan
