#include "runtime/vulkan/VulkanDriver.h"

#include "runtime/Artifact.h"
#include "runtime/LoadError.h"
#include "runtime/vulkan/DeviceRequirements.h"
#include "runtime/vulkan/DispatchGrid.h"
#include "runtime/vulkan/DispatchTrace.h"
#include "runtime/vulkan/VulkanKernelABI.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace q3::runtime::vulkan {
namespace {

constexpr int64_t kStagingSlotBytes = int64_t(32) << 20; // two slots: the staging ring
// The most one read copies back at a time (larger reads run in parts); the
// read-back buffer grows to what the reads need up to this.
constexpr int64_t kReadbackBytes = int64_t(32) << 20;
// vkCmdUpdateBuffer's limit: smaller writes (a step's token ids) ride in the
// next submission instead of a staging round trip of their own.
constexpr int64_t kMaxInlineWriteBytes = 65536;
constexpr uint32_t kMaxTimestamps = 8192;
constexpr size_t kMaxRecordedPasses = 32;

bool envFlag(const char *name) {
  const char *value = std::getenv(name);
  return value && *value && std::strcmp(value, "0") != 0;
}

/// $Q3_VULKAN_INJECT "alloc:N" / "lost:N" (tests force those faults).
void parseInjection(int &allocAt, int &lostAt) {
  const char *value = std::getenv("Q3_VULKAN_INJECT");
  if (!value)
    return;
  std::string text = value;
  auto colon = text.find(':');
  if (colon == std::string::npos)
    return;
  int at = std::atoi(text.c_str() + colon + 1);
  if (text.compare(0, colon, "alloc") == 0)
    allocAt = at;
  else if (text.compare(0, colon, "lost") == 0)
    lostAt = at;
}

} // namespace

//===- Setup ------------------------------------------------------------------===//

VulkanDriver::VulkanDriver(const Artifact &artifact, const std::string &path,
                           const DriverOptions &options)
    : path_(path) {
  try {
    // The generic part (format, version, weights, schedule) was read and
    // validated as the typed manifest (runtime/Manifest.h); the Vulkan
    // part is under "vulkan".
    target_ = artifact.manifest().at(kVulkanManifestKey).get<VulkanTarget>();
  } catch (const nlohmann::json::exception &e) {
    throw LoadError(path + ": malformed Vulkan manifest: " + describeJsonError(e));
  } catch (const std::invalid_argument &e) {
    throw LoadError(path + ": malformed Vulkan manifest: " + e.what());
  }
  forceStaging_ = envFlag("Q3_VULKAN_FORCE_STAGING");
  trace_ = envFlag("Q3_VULKAN_TRACE");
  poisonLocals_ = envFlag("Q3_VULKAN_POISON_LOCALS");
  parseInjection(injectAllocAt_, injectLostAt_);
  try {
    const uint32_t subgroupSize = openDevice(options);
    checkLimits(target_, device_->info(), subgroupSize);
    memory_ = std::make_unique<DeviceBuffers>(*device_, injectAllocAt_);
    sets_ = std::make_unique<DescriptorSetCache>(*api_, device_->handle());
    VkCommandPoolCreateInfo pool{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pool.queueFamilyIndex = device_->queueFamily();
    check(api_->vkCreateCommandPool(device_->handle(), &pool, nullptr, &pool_),
          "creating a command pool");
    // Not on a CPU device by default: lavapipe's kernels run on the cores
    // a poll would take.
    const char *poll = std::getenv("Q3_VULKAN_FENCE_POLL");
    const bool pollFence = poll && *poll ? std::strcmp(poll, "0") != 0
                                         : device_->info().vkType != VK_PHYSICAL_DEVICE_TYPE_CPU;
    batches_ =
        std::make_unique<SubmitQueue>(*api_, device_->handle(), device_->queue(), pool_, pollFence);
    stepParams_ =
        memory_->create(int64_t(kStepParamsWords) * 4,
                        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                        VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, "the step parameters");
    std::memset(stepParams_.mapped, 0, size_t(stepParams_.bytes));
    kernels_ =
        std::make_unique<KernelPipelines>(*device_, target_, artifact, subgroupSize, poisonLocals_);
  } catch (const VulkanError &e) {
    throw LoadError(path + ": " + e.what());
  }
}

uint32_t VulkanDriver::openDevice(const DriverOptions &options) {
  // Q3_VULKAN_VALIDATION=1: the validation layer; =sync: with its
  // synchronization checks.
  const bool validate = envFlag("Q3_VULKAN_VALIDATION");
  instance_ = VulkanInstance::create(
      validate, validate && std::strcmp(std::getenv("Q3_VULKAN_VALIDATION"), "sync") == 0);
  const int index = selectDevice(*instance_, options.device);
  // The features the modules declare and the subgroup size, checked before
  // the device exists.
  const DeviceInfo &info = instance_->devices().at(size_t(index));
  const DeviceFeatures features = requiredFeatures(target_, info);
  const uint32_t subgroupSize = chooseSubgroupSize(target_, info);
  device_ = std::make_unique<VulkanDevice>(*instance_, index, features);
  api_ = &device_->api();
  return subgroupSize;
}

VulkanDriver::~VulkanDriver() {
  if (!device_)
    return;
  VkDevice device = device_->handle();
  api_->vkDeviceWaitIdle(device);
  dropRecordings();
  if (memory_) {
    for (Buffer &buffer : buffers_)
      memory_->destroy(buffer);
    for (Buffer *buffer : {&stepParams_, &staging_, &readback_, &probe_, &probeSink_})
      memory_->destroy(*buffer);
  }
  batches_.reset();
  if (adHoc_.timestamps)
    api_->vkDestroyQueryPool(device, adHoc_.timestamps, nullptr);
  if (pool_)
    api_->vkDestroyCommandPool(device, pool_, nullptr);
}

std::pair<uint32_t, uint32_t> VulkanDriver::workgroupOf(const std::string &name) const {
  std::optional<int64_t> id = kernels_->find(name);
  if (!id)
    throw std::out_of_range("no kernel " + name);
  const Pipeline &first = kernels_->at(*id).pipelines.at(0);
  return {first.workgroupSize, first.subgroupSize};
}

int64_t VulkanDriver::kernel(const std::string &name) {
  std::optional<int64_t> id = kernels_->find(name);
  if (!id)
    throw LoadError(path_ + ": the Vulkan manifest has no kernel '" + printable(name) + "'");
  return *id;
}

//===- Memory -------------------------------------------------------------------===//

void VulkanDriver::countSubmit() {
  if (++submits_ == injectLostAt_)
    check(VK_ERROR_DEVICE_LOST, "injected fault at submit");
}

int64_t VulkanDriver::allocate(int64_t bytes, Pages /*device memory has no such choice*/) {
  try {
    Buffer buffer = memory_->create(bytes, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0,
                                    "an activation or KV-cache buffer");
    VkCommandBuffer commands = beginOneShot();
    api_->vkCmdFillBuffer(commands, buffer.buffer, 0, VK_WHOLE_SIZE, 0);
    submitAndWait(commands);
    buffers_.push_back(buffer);
    return int64_t(buffers_.size() - 1);
  } catch (const VulkanError &e) {
    throw LoadError(path_ + ": " + e.what());
  }
}

int64_t VulkanDriver::wrapHost(const void *data, int64_t bytes) {
  try {
    buffers_.push_back(memory_->create(bytes, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0, "a weight"));
    upload(buffers_.back(), 0, data, bytes);
    return int64_t(buffers_.size() - 1);
  } catch (const VulkanError &e) {
    throw LoadError(path_ + ": " + e.what());
  }
}

void VulkanDriver::ensureStaging() {
  if (!staging_.buffer)
    staging_ =
        memory_->create(2 * kStagingSlotBytes,
                        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                        0, "the staging ring");
}

void VulkanDriver::upload(Buffer &to, int64_t offset, const void *from, int64_t bytes) {
  if (to.mapped && !forceStaging_) {
    std::memcpy(to.mapped + offset, from, size_t(bytes));
    return;
  }
  // The staging ring: two host-visible slots; while the device copies one,
  // the host fills the other. What was issued before runs first.
  finish();
  ensureStaging();
  VkDevice device = device_->handle();
  VkFence slotFences[2] = {VK_NULL_HANDLE, VK_NULL_HANDLE};
  VkCommandBuffer slotCommands[2] = {VK_NULL_HANDLE, VK_NULL_HANDLE};
  VkFenceCreateInfo fenceInfo{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  for (VkFence &f : slotFences)
    check(api_->vkCreateFence(device, &fenceInfo, nullptr, &f), "creating a fence");
  auto waitSlot = [&](int slot) {
    if (!slotCommands[slot])
      return;
    check(api_->vkWaitForFences(device, 1, &slotFences[slot], VK_TRUE, UINT64_MAX),
          "waiting for an upload");
    api_->vkResetFences(device, 1, &slotFences[slot]);
    api_->vkFreeCommandBuffers(device, pool_, 1, &slotCommands[slot]);
    slotCommands[slot] = VK_NULL_HANDLE;
  };
  const auto *source = static_cast<const uint8_t *>(from);
  int slot = 0;
  for (int64_t done = 0; done < bytes; done += kStagingSlotBytes, slot ^= 1) {
    const int64_t chunk = std::min(kStagingSlotBytes, bytes - done);
    waitSlot(slot);
    std::memcpy(staging_.mapped + slot * kStagingSlotBytes, source + done, size_t(chunk));
    VkCommandBuffer commands = beginOneShot();
    VkBufferCopy region{VkDeviceSize(slot * kStagingSlotBytes), VkDeviceSize(offset + done),
                        VkDeviceSize(chunk)};
    api_->vkCmdCopyBuffer(commands, staging_.buffer, to.buffer, 1, &region);
    check(api_->vkEndCommandBuffer(commands), "recording an upload");
    VkSubmitInfo submitInfo{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    submitInfo.commandBufferCount = 1;
    submitInfo.pCommandBuffers = &commands;
    countSubmit();
    check(api_->vkQueueSubmit(device_->queue(), 1, &submitInfo, slotFences[slot]),
          "submitting an upload");
    slotCommands[slot] = commands;
  }
  waitSlot(0);
  waitSlot(1);
  for (VkFence f : slotFences)
    api_->vkDestroyFence(device, f, nullptr);
}

void VulkanDriver::ensureReadback(int64_t bytes) {
  if (readback_.buffer && readback_.bytes >= bytes)
    return;
  if (readback_.buffer) { // too small: an earlier read may still copy into it
    finish();
    memory_->destroy(readback_);
  }
  // HOST_CACHED where the device has it: the CPU reads it at memory speed,
  // while reading write-combined host memory (the first host-visible type
  // on NVIDIA) is a bus transaction per load, ~1 ms for one row of logits.
  readback_ =
      memory_->create(std::max<int64_t>(bytes, int64_t(1) << 20),
                      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                      VK_MEMORY_PROPERTY_HOST_CACHED_BIT, "the read-back buffer");
}

void VulkanDriver::download(const Buffer &from, int64_t offset, void *to, int64_t bytes) {
  if (bytes <= 0) { // nothing to copy; still waits, as read() promises
    finish();
    return;
  }
  if (from.mapped && !forceStaging_) {
    finish();
    std::memcpy(to, from.mapped + offset, size_t(bytes));
    return;
  }
  ensureReadback(std::min(bytes, kReadbackBytes));
  auto *target = static_cast<uint8_t *>(to);
  for (int64_t done = 0; done < bytes; done += readback_.bytes) {
    const int64_t chunk = std::min(readback_.bytes, bytes - done);
    // The copy joins whatever was issued and not yet submitted (a decode
    // step's token write and pass): one submission and one wait per step.
    VkCommandBuffer commands = beginOneShot();
    memoryBarrier(commands, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_WRITE_BIT,
                  VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_READ_BIT);
    VkBufferCopy region{VkDeviceSize(offset + done), 0, VkDeviceSize(chunk)};
    api_->vkCmdCopyBuffer(commands, from.buffer, readback_.buffer, 1, &region);
    memoryBarrier(commands, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                  VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    check(api_->vkEndCommandBuffer(commands), "recording a read-back");
    queue(commands, true);
    finish();
    std::memcpy(target + done, readback_.mapped, size_t(chunk));
  }
}

void VulkanDriver::write(const BufferRange &to, const void *from) {
  Buffer &buffer = buffers_.at(size_t(to.buffer));
  const bool recordInline = !(buffer.mapped && !forceStaging_) && !inPass_ && to.bytes > 0 &&
                            to.bytes <= kMaxInlineWriteBytes && to.bytes % 4 == 0 &&
                            to.offset % 4 == 0;
  if (!recordInline) {
    upload(buffer, to.offset, from, to.bytes);
    return;
  }
  // Into the open ad-hoc recording (after the dispatches issued before it)
  // or the pending transfers, which the next submission carries first.
  VkCommandBuffer commands = recording_ == &adHoc_ ? adHoc_.commands : openTransfers();
  // After the earlier kernels' and copies' writes, ...
  memoryBarrier(commands, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT);
  api_->vkCmdUpdateBuffer(commands, buffer.buffer, VkDeviceSize(to.offset), VkDeviceSize(to.bytes),
                          from);
  // ... and before the later kernels and copies.
  memoryBarrier(commands, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                    VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
}

void VulkanDriver::read(const BufferRange &from, void *to) {
  download(buffers_.at(size_t(from.buffer)), from.offset, to, from.bytes);
}

//===- Commands -----------------------------------------------------------------===//

VkCommandBuffer VulkanDriver::beginOneShot() {
  VkCommandBufferAllocateInfo allocate{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  allocate.commandPool = pool_;
  allocate.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  allocate.commandBufferCount = 1;
  VkCommandBuffer commands = VK_NULL_HANDLE;
  check(api_->vkAllocateCommandBuffers(device_->handle(), &allocate, &commands),
        "allocating a command buffer");
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(api_->vkBeginCommandBuffer(commands, &begin), "beginning a command buffer");
  return commands;
}

VkCommandBuffer VulkanDriver::openTransfers() {
  if (!transfers_)
    transfers_ = beginOneShot();
  return transfers_;
}

void VulkanDriver::closeIssued() {
  // At most one of the two is open: a write while ad-hoc dispatches record
  // goes into their command buffer, and a dispatch closes the transfers.
  if (transfers_) {
    check(api_->vkEndCommandBuffer(transfers_), "recording writes");
    batches_->add(transfers_, /*oneShot=*/true);
    transfers_ = VK_NULL_HANDLE;
  }
  if (recording_ == &adHoc_) {
    recording_ = nullptr;
    check(api_->vkEndCommandBuffer(adHoc_.commands), "recording commands");
    batches_->add(adHoc_.commands, /*oneShot=*/true);
    if (adHoc_.timestamps)
      batches_->retire(adHoc_.timestamps);
    adHoc_ = Recording{};
  }
}

void VulkanDriver::queue(VkCommandBuffer commands, bool oneShot) {
  closeIssued();
  batches_->add(commands, oneShot);
}

void VulkanDriver::flush() {
  closeIssued();
  if (!batches_->hasQueued())
    return;
  countSubmit();
  batches_->submit();
}

void VulkanDriver::submitAndWait(VkCommandBuffer commands) {
  check(api_->vkEndCommandBuffer(commands), "recording commands");
  queue(commands, true);
  finish();
}

void VulkanDriver::finish() {
  flush();
  batches_->wait();
}

VulkanDriver::Recording VulkanDriver::startRecording() {
  Recording recording;
  VkCommandBufferAllocateInfo allocate{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  allocate.commandPool = pool_;
  allocate.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  allocate.commandBufferCount = 1;
  check(api_->vkAllocateCommandBuffers(device_->handle(), &allocate, &recording.commands),
        "allocating a command buffer");
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  check(api_->vkBeginCommandBuffer(recording.commands, &begin), "beginning a command buffer");
  // What the host and earlier submissions wrote is visible to the kernels.
  memoryBarrier(recording.commands, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_WRITE_BIT,
                VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  if (profiling_ && device_->info().timestampPeriodNs > 0) {
    VkQueryPoolCreateInfo pool{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    pool.queryType = VK_QUERY_TYPE_TIMESTAMP;
    pool.queryCount = kMaxTimestamps;
    check(api_->vkCreateQueryPool(device_->handle(), &pool, nullptr, &recording.timestamps),
          "creating a timestamp query pool");
    api_->vkCmdResetQueryPool(recording.commands, recording.timestamps, 0, kMaxTimestamps);
    api_->vkCmdWriteTimestamp(recording.commands, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT,
                              recording.timestamps, recording.queries++);
  }
  return recording;
}

void VulkanDriver::memoryBarrier(VkCommandBuffer commands, VkPipelineStageFlags srcStages,
                                 VkAccessFlags srcAccess, VkPipelineStageFlags dstStages,
                                 VkAccessFlags dstAccess) {
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = srcAccess;
  barrier.dstAccessMask = dstAccess;
  api_->vkCmdPipelineBarrier(commands, srcStages, dstStages, 0, 1, &barrier, 0, nullptr, 0,
                             nullptr);
}

void VulkanDriver::recordDispatch(Recording &recording, const Pipeline &pipeline, uint32_t groups,
                                  VkDescriptorSet set, const std::vector<uint32_t> &push) {
  VkCommandBuffer commands = recording.commands;
  api_->vkCmdBindPipeline(commands, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.pipeline);
  api_->vkCmdBindDescriptorSets(commands, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.layout, 0, 1,
                                &set, 0, nullptr);
  api_->vkCmdPushConstants(commands, pipeline.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                           uint32_t(push.size() * 4), push.data());
  // Counts above 65535 (the guaranteed x limit) fold into y; the kernels
  // linearize the id and skip what lies past their work.
  const uint32_t maxX = std::min<uint32_t>(device_->info().limits.maxComputeWorkGroupCount[0], 65535);
  const uint32_t x = std::min(groups, maxX), y = (groups + x - 1) / x;
  api_->vkCmdDispatch(commands, x, y, 1);
  // Each dispatch reads what the previous ones wrote.
  memoryBarrier(commands, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
                    VK_PIPELINE_STAGE_HOST_BIT,
                VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                    VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_HOST_READ_BIT);
}

void VulkanDriver::dispatch(int64_t kernelId, const std::vector<BufferRange> &ranges,
                            const std::vector<int64_t> &scalars, int64_t) {
  const Kernel &kernel = kernels_->at(kernelId);
  const VulkanKernel &spec = kernel.spec;
  if (!recording_) {
    if (inPass_)
      throw VulkanError("a dispatch while a recorded pass replays");
    closeIssued(); // the writes issued before it go first
    adHoc_ = startRecording();
    recording_ = &adHoc_;
  }
  const int64_t rows = scalars.at(0);
  const std::vector<size_t> stages = stagesFor(spec, rows);
  const bool halves = spec.split && spec.split->halves;
  if (ranges.size() + (halves ? 1 : 0) != spec.elementBytes.size())
    throw VulkanError(fmt::format("kernel {} takes {} tensors, the schedule binds {}", spec.name,
                                  spec.elementBytes.size() - (halves ? 1 : 0), ranges.size()));
  const int64_t parts = weightParts(spec);
  for (size_t stage : stages)
    for (int64_t part = 0; part < parts; ++part)
      recordPart(kernel, stage, part, ranges, scalars);
  if (recording_->timestamps && recording_->queries < kMaxTimestamps) {
    api_->vkCmdWriteTimestamp(recording_->commands, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT,
                              recording_->timestamps, recording_->queries);
    recording_->dispatchEnds.push_back(recording_->queries++);
  }
  if (trace_)
    traceDispatch(spec, rows, ranges);
}

void VulkanDriver::recordPart(const Kernel &kernel, size_t stage, int64_t part,
                              const std::vector<BufferRange> &ranges,
                              const std::vector<int64_t> &scalars) {
  const VulkanKernel &spec = kernel.spec;
  const Pipeline &pipeline = kernel.pipelines[stage];
  const KernelVariant &variant = spec.variants[stage];
  const bool halves = spec.split && spec.split->halves;
  const DeviceInfo &info = device_->info();
  const int64_t align = int64_t(info.limits.minStorageBufferOffsetAlignment);
  const int64_t maxRange = int64_t(info.limits.maxStorageBufferRange);
  std::vector<Binding> bindings = {{stepParams_.buffer, 0, VkDeviceSize(stepParams_.bytes)}};
  std::vector<uint32_t> push(kPushFirstTensorOffset + spec.elementBytes.size() +
                             spec.pushScalars.size());
  int64_t partFirst = 0, partRows = variant.grid.units;
  if (spec.split) {
    partFirst = part * spec.split->rowsPerPart;
    partRows = std::min(spec.split->rowsPerPart, spec.split->rows - partFirst);
  }
  // The window starts at the aligned offset below the range and covers as
  // much of the buffer as one binding may (so one descriptor set serves
  // every shape that starts in it); the rest of the offset is pushed.
  auto bind = [&](const BufferRange &range, int64_t offset, int64_t bytes) {
    const size_t b = bindings.size() - 1; // the tensor binding's index
    const Buffer &buffer = buffers_.at(size_t(range.buffer));
    const int64_t start = offset / align * align;
    const int64_t window = std::min(buffer.bytes - start, maxRange);
    if (offset - start + bytes > window)
      throw VulkanError(
          fmt::format("kernel {} binds {} of one buffer, more than the device's {} per binding "
                      "(maxStorageBufferRange): run fewer rows at a time",
                      spec.name, formatBytes(uint64_t(bytes)), formatBytes(uint64_t(maxRange))));
    const int64_t delta = offset - start;
    if (delta % spec.elementBytes[b] != 0)
      throw VulkanError(fmt::format("kernel {}: tensor {} starts at byte {}, not a multiple "
                                    "of its {}-byte elements",
                                    spec.name, b, offset, spec.elementBytes[b]));
    bindings.push_back(
        {buffer.buffer, VkDeviceSize(start), VkDeviceSize(std::max<int64_t>(window, 4))});
    push[kPushFirstTensorOffset + b] = uint32_t(delta / spec.elementBytes[b]);
  };
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (spec.split && int64_t(i) == spec.split->binding) {
      const int64_t rowBytes = spec.split->rowBytes;
      bind(ranges[i], ranges[i].offset + partFirst * rowBytes, partRows * rowBytes);
      if (halves)
        bind(ranges[i], ranges[i].offset + (spec.split->rows + partFirst) * rowBytes,
             partRows * rowBytes);
      continue;
    }
    bind(ranges[i], ranges[i].offset, ranges[i].bytes);
  }
  const int64_t rows = scalars.at(0);
  push[kPushRows] = uint32_t(rows);
  push[kPushPartFirstRow] = uint32_t(partFirst);
  push[kPushPartRows] = uint32_t(partRows);
  for (size_t s = 0; s < spec.pushScalars.size(); ++s)
    push[kPushFirstTensorOffset + spec.elementBytes.size() + s] =
        uint32_t(scalars.at(size_t(spec.pushScalars[s])));
  const int64_t groups = workgroupCount(variant.grid, rows, partRows, bool(spec.split),
                                        int64_t(pipeline.workgroupSize / pipeline.subgroupSize));
  recordDispatch(*recording_, pipeline, uint32_t(groups), sets_->get(pipeline.setLayout, bindings),
                 push);
}

void VulkanDriver::traceDispatch(const VulkanKernel &spec, int64_t rows,
                                 const std::vector<BufferRange> &ranges) {
  finish();
  std::vector<std::vector<uint8_t>> tensors;
  for (const BufferRange &range : ranges) {
    std::vector<uint8_t> &bytes = tensors.emplace_back(size_t(range.bytes));
    download(buffers_.at(size_t(range.buffer)), range.offset, bytes.data(), range.bytes);
  }
  const std::string line =
      traceLine(traced_++, spec, rows, tensors, std::getenv("Q3_VULKAN_TRACE_DIR"));
  std::fprintf(stderr, "%s\n", line.c_str());
}

//===- Passes -------------------------------------------------------------------===//

bool VulkanDriver::beginPass(const PassShape &shape, int64_t startPos) {
  // The step parameters are rewritten below, so what reads them must have
  // run (an earlier pass still queued is submitted now); writes issued
  // since, still open, go with this pass.
  if (batches_->hasQueued() || recording_ == &adHoc_)
    flush();
  batches_->wait();
  reinterpret_cast<int32_t *>(stepParams_.mapped)[kStepStartPosition] = int32_t(startPos);
  if (trace_)
    return false; // each dispatch runs on its own (traceDispatch)
  passShape_ = shape;
  inPass_ = true;
  if (passes_.count(shape)) {
    replaying_ = true;
    recording_ = nullptr;
    return true;
  }
  if (passes_.size() >= kMaxRecordedPasses)
    dropRecordings();
  replaying_ = false;
  recording_ = &(passes_[shape] = startRecording());
  return false;
}

void VulkanDriver::endPass() {
  if (trace_) {
    finish();
    return;
  }
  Recording &pass = passes_.at(passShape_);
  if (!replaying_)
    check(api_->vkEndCommandBuffer(pass.commands), "recording a pass");
  recording_ = nullptr;
  inPass_ = replaying_ = false;
  // Submitted with what follows it before a wait (a read of the logits).
  queue(pass.commands, false);
  lastSubmitted_ = &pass;
}

void VulkanDriver::dropRecordings() {
  VkDevice device = device_->handle();
  api_->vkDeviceWaitIdle(device);
  for (auto &[shape, pass] : passes_) {
    api_->vkFreeCommandBuffers(device, pool_, 1, &pass.commands);
    if (pass.timestamps)
      api_->vkDestroyQueryPool(device, pass.timestamps, nullptr);
  }
  passes_.clear();
  lastSubmitted_ = nullptr;
}

void VulkanDriver::setProfiling(bool enabled) {
  if (enabled == profiling_)
    return;
  finish();
  profiling_ = enabled;
  dropRecordings(); // re-recorded with (or without) timestamp queries
}

std::vector<double> VulkanDriver::dispatchSeconds() {
  finish();
  if (!lastSubmitted_ || !lastSubmitted_->timestamps || lastSubmitted_->queries == 0)
    return {};
  std::vector<uint64_t> ticks(lastSubmitted_->queries);
  check(api_->vkGetQueryPoolResults(device_->handle(), lastSubmitted_->timestamps, 0,
                                    lastSubmitted_->queries, ticks.size() * 8, ticks.data(), 8,
                                    VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
        "reading timestamps");
  const double secondsPerTick = device_->info().timestampPeriodNs * 1e-9;
  std::vector<double> seconds;
  uint32_t previous = 0;
  for (uint32_t end : lastSubmitted_->dispatchEnds) {
    seconds.push_back(double(ticks[end] - ticks[previous]) * secondsPerTick);
    previous = end;
  }
  return seconds;
}

//===- Reports ------------------------------------------------------------------===//

std::string VulkanDriver::deviceName() const {
  return device_->info().name + " (Vulkan, " + device_->info().type + ")";
}

std::optional<Driver::Bandwidth> VulkanDriver::measureReadBandwidth(int reads) {
  std::optional<int64_t> id = kernels_->find(kReadBandwidthKernel);
  if (!id || device_->info().timestampPeriodNs <= 0)
    return std::nullopt;
  const Kernel &kernel = kernels_->at(*id);
  const Pipeline &pipeline = kernel.pipelines.at(0);
  finish();
  if (!probe_.buffer) {
    // As large as one binding may be (128 MiB on lavapipe), at most 256 MiB:
    // beyond any device's last-level cache either way.
    const int64_t bytes = std::min<int64_t>(int64_t(256) << 20,
                                            int64_t(device_->info().limits.maxStorageBufferRange) / 16 * 16);
    probe_ = memory_->create(bytes, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0, "the bandwidth probe");
    probeSink_ = memory_->create(16, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0, "the bandwidth probe");
    VkCommandBuffer commands = beginOneShot();
    api_->vkCmdFillBuffer(commands, probe_.buffer, 0, VK_WHOLE_SIZE, 0x3F800000u);
    submitAndWait(commands);
  }
  const int64_t vectors = probe_.bytes / 16;
  // Every invocation reads kBandwidthVectorsPerInvocation vectors.
  const int64_t perWorkgroup = int64_t(pipeline.workgroupSize) * kBandwidthVectorsPerInvocation;
  const int64_t workgroups = (vectors + perWorkgroup - 1) / perWorkgroup;
  std::vector<Binding> bindings = {{stepParams_.buffer, 0, VkDeviceSize(stepParams_.bytes)},
                                   {probe_.buffer, 0, VkDeviceSize(probe_.bytes)},
                                   {probeSink_.buffer, 0, VkDeviceSize(probeSink_.bytes)}};
  VkDescriptorSet set = sets_->get(pipeline.setLayout, bindings);
  std::vector<uint32_t> push(kernel.pushWords, 0);
  push[kPushRows] = uint32_t(workgroups);
  push[kPushFirstTensorOffset + 2] = uint32_t(vectors);
  VkQueryPool queries = VK_NULL_HANDLE;
  VkQueryPoolCreateInfo poolInfo{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  poolInfo.queryType = VK_QUERY_TYPE_TIMESTAMP;
  poolInfo.queryCount = uint32_t(reads + 1);
  check(api_->vkCreateQueryPool(device_->handle(), &poolInfo, nullptr, &queries),
        "creating a timestamp query pool");
  Recording recording = startRecording();
  api_->vkCmdResetQueryPool(recording.commands, queries, 0, poolInfo.queryCount);
  api_->vkCmdWriteTimestamp(recording.commands, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, 0);
  for (int r = 0; r < reads; ++r) {
    recordDispatch(recording, pipeline, uint32_t(workgroups), set, push);
    api_->vkCmdWriteTimestamp(recording.commands, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries,
                              uint32_t(r + 1));
  }
  check(api_->vkEndCommandBuffer(recording.commands), "recording the bandwidth probe");
  queue(recording.commands, false);
  finish();
  std::vector<uint64_t> ticks(poolInfo.queryCount);
  check(api_->vkGetQueryPoolResults(device_->handle(), queries, 0, poolInfo.queryCount,
                                    ticks.size() * 8, ticks.data(), 8,
                                    VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
        "reading timestamps");
  api_->vkDestroyQueryPool(device_->handle(), queries, nullptr);
  api_->vkFreeCommandBuffers(device_->handle(), pool_, 1, &recording.commands);
  if (recording.timestamps)
    api_->vkDestroyQueryPool(device_->handle(), recording.timestamps, nullptr);
  double best = 0;
  for (int r = 0; r < reads; ++r) {
    const double seconds = double(ticks[size_t(r + 1)] - ticks[size_t(r)]) *
                           device_->info().timestampPeriodNs * 1e-9;
    if (seconds > 0)
      best = std::max(best, double(vectors * 16) / seconds / 1e9);
  }
  return Bandwidth{best, vectors * 16};
}

} // namespace q3::runtime::vulkan
