#include "runtime/vulkan/SubmitQueue.h"

#include "runtime/CpuRelax.h"

#include <algorithm>
#include <chrono>

namespace q3::runtime::vulkan {
namespace {

// How long a wait polls the fence before it sleeps: longer than a decode
// step, while a long prefill's wait sleeps rather than keep a core busy.
constexpr auto kFencePollTime = std::chrono::milliseconds(20);

} // namespace

SubmitQueue::SubmitQueue(VulkanApi &api, VkDevice device, VkQueue queue, VkCommandPool pool,
                         bool pollFence)
    : api_(api), device_(device), queue_(queue), pool_(pool), pollFence_(pollFence) {
  VkFenceCreateInfo fence{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO, nullptr, 0};
  check(api_.vkCreateFence(device_, &fence, nullptr, &fence_), "creating a fence");
}

SubmitQueue::~SubmitQueue() {
  // The owner waited for the device; its command pool frees the buffers.
  for (VkQueryPool pool : retiredPools_)
    api_.vkDestroyQueryPool(device_, pool, nullptr);
  api_.vkDestroyFence(device_, fence_, nullptr);
}

void SubmitQueue::add(VkCommandBuffer commands, bool oneShot) {
  queued_.push_back(commands);
  if (oneShot)
    oneShots_.push_back(commands);
}

void SubmitQueue::retire(VkQueryPool pool) { retiredPools_.push_back(pool); }

void SubmitQueue::submit() {
  if (queued_.empty())
    return;
  wait(); // one batch in flight: it signals fence_
  VkSubmitInfo info{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  info.commandBufferCount = uint32_t(queued_.size());
  info.pCommandBuffers = queued_.data();
  check(api_.vkQueueSubmit(queue_, 1, &info, fence_), "submitting to the device");
  queued_.clear();
  inFlight_ = true;
}

void SubmitQueue::waitForFence() {
  // A GPU's fence wait sleeps until an interrupt wakes the thread, tens of
  // microseconds after the work ended: a few percent of a small model's
  // decode step. So poll first, as long as a decode step takes.
  if (pollFence_) {
    const auto deadline = std::chrono::steady_clock::now() + kFencePollTime;
    for (;;) {
      const VkResult status = api_.vkGetFenceStatus(device_, fence_);
      if (status == VK_SUCCESS)
        return;
      if (status != VK_NOT_READY)
        check(status, "waiting for the device");
      if (std::chrono::steady_clock::now() > deadline)
        break;
      for (int i = 0; i < 32; ++i)
        cpuRelax();
    }
  }
  check(api_.vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX), "waiting for the device");
}

void SubmitQueue::wait() {
  if (inFlight_) {
    inFlight_ = false;
    waitForFence();
    api_.vkResetFences(device_, 1, &fence_);
  }
  // What ran is freed; what is still queued is not.
  std::vector<VkCommandBuffer> keep;
  for (VkCommandBuffer commands : oneShots_) {
    if (std::find(queued_.begin(), queued_.end(), commands) != queued_.end())
      keep.push_back(commands);
    else
      api_.vkFreeCommandBuffers(device_, pool_, 1, &commands);
  }
  oneShots_ = std::move(keep);
  if (queued_.empty()) {
    for (VkQueryPool pool : retiredPools_)
      api_.vkDestroyQueryPool(device_, pool, nullptr);
    retiredPools_.clear();
  }
}

} // namespace q3::runtime::vulkan
