//===- VulkanDriver.h - the Driver for q3c-vulkan artifacts ---------------===//
//
// Runs the artifact's SPIR-V kernels on a Vulkan device (docs/vulkan-backend.md):
//  - load: picks the device (DriverOptions::device, else the first discrete
//    GPU, integrated GPU, virtual GPU, CPU device), checks every feature and
//    limit the kernels need and names what is missing (DeviceRequirements.h),
//    validates each SPIR-V module, and creates one compute pipeline per
//    kernel variant with the workgroup and subgroup sizes it chose for the
//    device (KernelPipelines.h);
//  - memory: weights are uploaded once into device-local buffers (through a
//    staging ring when the device memory is not host-visible), activations
//    and the KV cache live on the device (DeviceBuffers.h); a weight too
//    large for one binding runs as one dispatch per part (VulkanManifest.h's
//    WeightSplit, DispatchGrid.h);
//  - passes: a forward pass is recorded once per shape into a command buffer
//    (dispatches, push constants, barriers, descriptor sets that are created
//    once per binding: DescriptorSets.h) and replayed at every later
//    position, which the kernels read from the step-parameter buffer; with
//    profiling on, each dispatch is timed with timestamp queries.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Driver.h"
#include "runtime/vulkan/DescriptorSets.h"
#include "runtime/vulkan/DeviceBuffers.h"
#include "runtime/vulkan/KernelPipelines.h"
#include "runtime/vulkan/SubmitQueue.h"
#include "runtime/vulkan/VulkanDevice.h"
#include "runtime/vulkan/VulkanManifest.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace q3::runtime::vulkan {

class VulkanDriver final : public Driver {
public:
  /// Throws LoadError naming `path` when no device is usable.
  VulkanDriver(const Artifact &artifact, const std::string &path, const DriverOptions &options);
  ~VulkanDriver() override;

  int64_t kernel(const std::string &name) override;
  int64_t allocate(int64_t bytes, Pages pages = Pages::Small) override;
  int64_t wrapHost(const void *data, int64_t bytes) override;
  void write(const BufferRange &to, const void *from) override;
  void read(const BufferRange &from, void *to) override;
  void dispatch(int64_t kernel, const std::vector<BufferRange> &buffers,
                const std::vector<int64_t> &scalars, int64_t workgroups) override;
  void finish() override;
  bool beginPass(const PassShape &shape, int64_t startPos) override;
  void endPass() override;
  void setProfiling(bool enabled) override;
  std::vector<double> dispatchSeconds() override;
  std::string deviceName() const override;
  std::optional<Bandwidth> measureReadBandwidth(int reads) override;

  const DeviceInfo &device() const { return device_->info(); }
  /// The workgroup and subgroup size chosen for a kernel's first variant.
  std::pair<uint32_t, uint32_t> workgroupOf(const std::string &kernel) const;
  /// Queue submissions so far (a decode step is one: its token write, pass
  /// and logits read go together).
  int submissions() const { return submits_; }

private:
  /// A recorded command buffer: a pass of one shape, or the dispatches
  /// issued outside a pass.
  struct Recording {
    VkCommandBuffer commands = VK_NULL_HANDLE;
    VkQueryPool timestamps = VK_NULL_HANDLE;
    uint32_t queries = 0;
    std::vector<uint32_t> dispatchEnds; // per scheduler dispatch: its last timestamp query
  };

  /// The instance and the device; returns the subgroup size the kernels run at.
  uint32_t openDevice(const DriverOptions &options);
  void ensureStaging(); // the staging ring, made on first use
  void ensureReadback(int64_t bytes); // the read-back buffer, at least `bytes`
  void upload(Buffer &to, int64_t offset, const void *from, int64_t bytes);
  void download(const Buffer &from, int64_t offset, void *to, int64_t bytes);
  VkCommandBuffer beginOneShot();
  /// Command buffers wait in batches_, in issue order, until flush() submits
  /// them as one batch (a decode step: its token write, its pass and the
  /// read of its logits); finish() flushes and waits.
  VkCommandBuffer openTransfers(); // small writes not yet queued
  void closeIssued();              // queues the open transfers or ad-hoc dispatches
  void queue(VkCommandBuffer commands, bool oneShot);
  void flush();
  void submitAndWait(VkCommandBuffer commands);
  Recording startRecording();
  /// Work of `srcStages` that accessed memory as `srcAccess` happens before
  /// (and is visible to) work of `dstStages` accessing it as `dstAccess`.
  void memoryBarrier(VkCommandBuffer commands, VkPipelineStageFlags srcStages,
                     VkAccessFlags srcAccess, VkPipelineStageFlags dstStages,
                     VkAccessFlags dstAccess);
  void recordDispatch(Recording &recording, const Pipeline &pipeline, uint32_t groups,
                      VkDescriptorSet set, const std::vector<uint32_t> &push);
  /// Records one dispatch of variant `stage` of `kernel` over weight part
  /// `part` (0 when the weight is whole).
  void recordPart(const Kernel &kernel, size_t stage, int64_t part,
                  const std::vector<BufferRange> &ranges, const std::vector<int64_t> &scalars);
  void dropRecordings();
  void traceDispatch(const VulkanKernel &spec, int64_t rows,
                     const std::vector<BufferRange> &ranges);
  /// Counts a queue submission; the one $Q3_VULKAN_INJECT names reports a lost device.
  void countSubmit();

  std::string path_;
  std::unique_ptr<VulkanInstance> instance_;
  std::unique_ptr<VulkanDevice> device_;
  VulkanApi *api_ = nullptr;
  VulkanTarget target_;
  std::unique_ptr<DeviceBuffers> memory_;
  std::unique_ptr<KernelPipelines> kernels_;
  std::unique_ptr<DescriptorSetCache> sets_;
  std::vector<Buffer> buffers_;
  Buffer stepParams_;
  Buffer staging_;
  Buffer readback_;          // host-visible, host-cached where the device has it
  Buffer probe_, probeSink_; // the read-bandwidth kernel's buffers, made on first use
  VkCommandPool pool_ = VK_NULL_HANDLE;
  std::unique_ptr<SubmitQueue> batches_;
  VkCommandBuffer transfers_ = VK_NULL_HANDLE; // write()s recorded, not yet queued
  std::map<PassShape, Recording> passes_;
  Recording adHoc_;          // dispatches issued outside a pass
  Recording *recording_ = nullptr; // where dispatch() records
  Recording *lastSubmitted_ = nullptr;
  PassShape passShape_;
  bool inPass_ = false, replaying_ = false;
  bool profiling_ = false;
  bool forceStaging_ = false;
  // $Q3_VULKAN_TRACE: every dispatch runs alone and its tensors' statistics
  // go to stderr, to find the first kernel a device computes differently.
  bool trace_ = false;
  bool poisonLocals_ = false; // $Q3_VULKAN_POISON_LOCALS (SpirvPoison.h)
  int64_t traced_ = 0;
  // Fault injection for tests ($Q3_VULKAN_INJECT: "alloc:N" fails the N-th
  // device allocation, "lost:N" reports a lost device at the N-th submit,
  // "hide:<feature>" takes a feature away: VulkanDevice.cpp).
  int injectAllocAt_ = 0, injectLostAt_ = 0, submits_ = 0;
};

} // namespace q3::runtime::vulkan
