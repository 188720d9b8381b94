//===- SubmitQueue.h - command buffers batched into one submission --------===//
//
// The Vulkan driver's command buffers wait here, in the order they were
// issued, until submit() sends them to the device as one batch: a decode
// step's token write, its pass and the copy of its logits go together, with
// one fence and one wait. One batch is in flight at a time. What ran once
// (one-shot command buffers, the query pools of ad-hoc dispatches) is freed
// after the batch that used it has run.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/vulkan/VulkanApi.h"

#include <vector>

namespace q3::runtime::vulkan {

class SubmitQueue {
public:
  /// `pollFence`: a wait polls the fence for a while before it sleeps
  /// (VulkanDriver: on GPUs, whose sleeping waits wake late).
  SubmitQueue(VulkanApi &api, VkDevice device, VkQueue queue, VkCommandPool pool, bool pollFence);
  ~SubmitQueue();
  SubmitQueue(const SubmitQueue &) = delete;
  SubmitQueue &operator=(const SubmitQueue &) = delete;

  /// Queues `commands` (recorded and ended) after everything queued before;
  /// a one-shot buffer is freed once it has run.
  void add(VkCommandBuffer commands, bool oneShot);
  /// Destroys `pool` once what is queued and in flight has run.
  void retire(VkQueryPool pool);
  bool hasQueued() const { return !queued_.empty(); }
  /// Waits for the batch in flight, then submits what is queued as one.
  void submit();
  /// Returns when the batch in flight (if any) has run, and frees what it used.
  void wait();

private:
  void waitForFence();

  VulkanApi &api_;
  VkDevice device_;
  VkQueue queue_;
  VkCommandPool pool_;
  bool pollFence_;
  VkFence fence_ = VK_NULL_HANDLE;
  bool inFlight_ = false;
  std::vector<VkCommandBuffer> queued_;
  std::vector<VkCommandBuffer> oneShots_;
  std::vector<VkQueryPool> retiredPools_;
};

} // namespace q3::runtime::vulkan
