#include "runtime/vulkan/DescriptorSets.h"

namespace q3::runtime::vulkan {
namespace {

constexpr uint32_t kSetsPerPool = 1024;
// Bindings per set the pools provide for on average (the kernels bind the
// step parameters and up to a dozen tensors).
constexpr uint32_t kBindingsPerSet = 16;

} // namespace

DescriptorSetCache::~DescriptorSetCache() {
  for (VkDescriptorPool pool : pools_)
    api_.vkDestroyDescriptorPool(device_, pool, nullptr);
}

VkDescriptorSet DescriptorSetCache::allocate(VkDescriptorSetLayout layout) {
  if (setsLeft_ == 0) {
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * kBindingsPerSet};
    VkDescriptorPoolCreateInfo create{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    create.maxSets = kSetsPerPool;
    create.poolSizeCount = 1;
    create.pPoolSizes = &size;
    VkDescriptorPool pool = VK_NULL_HANDLE;
    check(api_.vkCreateDescriptorPool(device_, &create, nullptr, &pool),
          "creating a descriptor pool");
    pools_.push_back(pool);
    setsLeft_ = kSetsPerPool;
  }
  VkDescriptorSetAllocateInfo allocate{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  allocate.descriptorPool = pools_.back();
  allocate.descriptorSetCount = 1;
  allocate.pSetLayouts = &layout;
  VkDescriptorSet set = VK_NULL_HANDLE;
  check(api_.vkAllocateDescriptorSets(device_, &allocate, &set), "allocating a descriptor set");
  --setsLeft_;
  return set;
}

VkDescriptorSet DescriptorSetCache::get(VkDescriptorSetLayout layout,
                                        const std::vector<Binding> &bindings) {
  auto key = std::make_pair(layout, bindings);
  if (auto it = sets_.find(key); it != sets_.end())
    return it->second;
  VkDescriptorSet set = allocate(layout);
  std::vector<VkDescriptorBufferInfo> infos;
  for (const Binding &b : bindings)
    infos.push_back({b.buffer, b.offset, b.range});
  std::vector<VkWriteDescriptorSet> writes;
  for (uint32_t i = 0; i < infos.size(); ++i) {
    VkWriteDescriptorSet w{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    w.dstSet = set;
    w.dstBinding = i;
    w.descriptorCount = 1;
    w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    w.pBufferInfo = &infos[i];
    writes.push_back(w);
  }
  api_.vkUpdateDescriptorSets(device_, uint32_t(writes.size()), writes.data(), 0, nullptr);
  sets_.emplace(std::move(key), set);
  return set;
}

} // namespace q3::runtime::vulkan
