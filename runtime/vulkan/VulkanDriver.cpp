#include "runtime/vulkan/VulkanDriver.h"

#include "runtime/Artifact.h"
#include "runtime/LoadError.h"
#include "runtime/vulkan/SpirvCheck.h"
#include "runtime/vulkan/SpirvPoison.h"
#include "runtime/vulkan/VulkanKernelABI.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
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
constexpr uint32_t kSetsPerPool = 1024;
constexpr uint32_t kMaxTimestamps = 8192;
constexpr size_t kMaxRecordedPasses = 32;


int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

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

/// The Vulkan features a SPIR-V capability needs; "" for none, nullopt for
/// one this runtime cannot enable.
std::optional<std::string> featureFor(const std::string &capability) {
  if (capability == "Shader")
    return std::string();
  if (capability == "Float16")
    return std::string("shaderFloat16");
  if (capability == "Int16")
    return std::string("shaderInt16");
  if (capability == "StorageBuffer16BitAccess" || capability == "StorageUniformBufferBlock16")
    return std::string("storageBuffer16BitAccess");
  if (capability == "GroupNonUniform" || capability == "GroupNonUniformArithmetic")
    return std::string("subgroup arithmetic in compute shaders");
  return std::nullopt;
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
    // Q3_VULKAN_VALIDATION=1: the validation layer; =sync: with its
    // synchronization checks.
    const bool validate = envFlag("Q3_VULKAN_VALIDATION");
    instance_ = VulkanInstance::create(
        validate, validate && std::strcmp(std::getenv("Q3_VULKAN_VALIDATION"), "sync") == 0);
    int index = options.device;
    if (index < 0) {
      index = instance_->defaultDevice();
    } else if (index >= int(instance_->devices().size())) {
      std::vector<std::string> names;
      for (const DeviceInfo &d : instance_->devices())
        names.push_back(fmt::format("{}: {}", d.index, d.name));
      throw VulkanError(fmt::format("--device {}: there {} {} Vulkan device{} ({})", index,
                                    names.size() == 1 ? "is" : "are", names.size(),
                                    names.size() == 1 ? "" : "s", fmt::join(names, ", ")));
    }
    const DeviceInfo &info = instance_->devices().at(size_t(index));
    // The features the modules declare, checked before the device exists.
    DeviceFeatures features;
    std::vector<std::string> missing;
    for (const VulkanKernel &kernel : target_.kernels)
      for (const KernelVariant &variant : kernel.variants)
        for (const std::string &capability : variant.capabilities) {
          std::optional<std::string> feature = featureFor(capability);
          if (!feature)
            throw VulkanError("kernel " + kernel.name + " needs the SPIR-V capability " +
                              capability + ", which this runtime cannot enable");
          bool has = true;
          if (*feature == "shaderFloat16")
            has = features.shaderFloat16 = info.shaderFloat16;
          else if (*feature == "shaderInt16")
            has = features.shaderInt16 = info.shaderInt16;
          else if (*feature == "storageBuffer16BitAccess")
            has = features.storageBuffer16BitAccess = info.storageBuffer16BitAccess;
          else if (!feature->empty())
            has = info.subgroupArithmetic;
          if (!has && std::find(missing.begin(), missing.end(), *feature) == missing.end())
            missing.push_back(*feature);
        }
    if (!info.hasComputeQueue)
      missing.push_back("a compute queue");
    if (!missing.empty())
      throw VulkanError(fmt::format("Vulkan device {} ({}) lacks what the kernels need: {}",
                                    info.index, info.name, fmt::join(missing, ", ")));
    // The subgroup size: the device's default when the kernels allow it,
    // else one the device can be asked for.
    const int64_t lo = target_.minSubgroupSize, hi = target_.maxSubgroupSize;
    subgroupSize_ = info.subgroupSize;
    if (subgroupSize_ < lo || subgroupSize_ > hi) {
      subgroupSize_ = 0;
      if (info.subgroupSizeControl)
        for (uint32_t size = info.minSubgroupSize; size <= info.maxSubgroupSize; size *= 2)
          if (size >= lo && size <= hi) {
            subgroupSize_ = size;
            break;
          }
      if (subgroupSize_ == 0)
        throw VulkanError(fmt::format(
            "the kernels need a subgroup size from {} to {}; Vulkan device {} ({}) has {}{}", lo,
            hi, info.index, info.name,
            info.subgroupSizeControl
                ? fmt::format("sizes {} to {}", info.minSubgroupSize, info.maxSubgroupSize)
                : std::to_string(info.subgroupSize),
            info.subgroupSizeControl ? "" : " and cannot change it"));
    }
    features.subgroupSizeControl = info.subgroupSizeControl;
    // Not on a CPU device by default: lavapipe's kernels run on the cores
    // a poll would take.
    const char *poll = std::getenv("Q3_VULKAN_FENCE_POLL");
    const bool pollFence =
        poll && *poll ? std::strcmp(poll, "0") != 0 : info.vkType != VK_PHYSICAL_DEVICE_TYPE_CPU;
    device_ = std::make_unique<VulkanDevice>(*instance_, index, features);
    api_ = &device_->api();
    checkDevice(path);

    VkCommandPoolCreateInfo pool{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pool.queueFamilyIndex = device_->queueFamily();
    check(api_->vkCreateCommandPool(device_->handle(), &pool, nullptr, &pool_),
          "creating a command pool");
    batches_ =
        std::make_unique<SubmitQueue>(*api_, device_->handle(), device_->queue(), pool_, pollFence);
    stepParams_ = createBuffer(int64_t(kStepParamsWords) * 4,
                               VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                   VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                               VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, "the step parameters");
    std::memset(stepParams_.mapped, 0, size_t(stepParams_.bytes));
    createPipelines(artifact, path);
  } catch (const VulkanError &e) {
    throw LoadError(path + ": " + e.what());
  }
}

VulkanDriver::~VulkanDriver() {
  if (!device_)
    return;
  VkDevice device = device_->handle();
  api_->vkDeviceWaitIdle(device);
  dropRecordings();
  for (VkDescriptorPool pool : descriptorPools_)
    api_->vkDestroyDescriptorPool(device, pool, nullptr);
  for (Kernel &kernel : kernels_)
    for (Pipeline &p : kernel.pipelines) {
      api_->vkDestroyPipeline(device, p.pipeline, nullptr);
      api_->vkDestroyPipelineLayout(device, p.layout, nullptr);
      api_->vkDestroyDescriptorSetLayout(device, p.setLayout, nullptr);
      api_->vkDestroyShaderModule(device, p.module, nullptr);
    }
  for (Buffer &buffer : buffers_)
    destroyBuffer(buffer);
  destroyBuffer(stepParams_);
  destroyBuffer(staging_);
  destroyBuffer(readback_);
  destroyBuffer(probe_);
  destroyBuffer(probeSink_);
  batches_.reset();
  if (adHoc_.timestamps)
    api_->vkDestroyQueryPool(device, adHoc_.timestamps, nullptr);
  if (pool_)
    api_->vkDestroyCommandPool(device, pool_, nullptr);
}

void VulkanDriver::checkDevice(const std::string &path) {
  const DeviceInfo &info = device_->info();
  for (const VulkanKernel &kernel : target_.kernels)
    for (const KernelVariant &variant : kernel.variants)
      if (uint64_t(variant.sharedBytes) > info.limits.maxComputeSharedMemorySize)
        throw VulkanError(fmt::format("kernel {} needs {} bytes of shared memory; Vulkan device {} "
                                      "({}) has {} (maxComputeSharedMemorySize)",
                                      variant.entryPoint, variant.sharedBytes, info.index,
                                      info.name, info.limits.maxComputeSharedMemorySize));
  for (const VulkanKernel &kernel : target_.kernels)
    if (kernel.split && uint64_t(kernel.split->rowsPerPart * kernel.split->rowBytes) >
                            info.limits.maxStorageBufferRange)
      throw VulkanError(fmt::format(
          "kernel {} binds weight parts of {}; Vulkan device {} ({}) binds at most {} "
          "(maxStorageBufferRange)",
          kernel.name, formatBytes(uint64_t(kernel.split->rowsPerPart * kernel.split->rowBytes)),
          info.index, info.name, formatBytes(info.limits.maxStorageBufferRange)));
  if (subgroupSize_ > info.limits.maxComputeWorkGroupInvocations)
    throw VulkanError("the device's subgroup is larger than its largest workgroup");
  (void)path;
}

void VulkanDriver::createPipelines(const Artifact &artifact, const std::string &path) {
  for (const VulkanKernel &spec : target_.kernels) {
    Kernel kernel;
    kernel.spec = spec;
    kernel.pushWords =
        uint32_t(kPushFirstTensorOffset + spec.elementBytes.size() + spec.pushScalars.size());
    if (kernel.pushWords > kMaxPushWords ||
        kernel.pushWords * 4 > device_->info().limits.maxPushConstantsSize)
      throw VulkanError("kernel " + spec.name + " needs more push constants than the device has");
    kernelIds_[spec.name] = int64_t(kernels_.size());
    kernels_.push_back(std::move(kernel));
  }
  // Pipelines after the kernels are in place: each points into its spec.
  for (Kernel &kernel : kernels_)
    for (const KernelVariant &variant : kernel.spec.variants)
      kernel.pipelines.push_back(createPipeline(kernel.spec, variant, artifact, path));
}

VulkanDriver::Pipeline VulkanDriver::createPipeline(const VulkanKernel &kernel,
                                                    const KernelVariant &variant,
                                                    const Artifact &artifact,
                                                    const std::string &path) {
  VkDevice device = device_->handle();
  const DeviceInfo &info = device_->info();
  Pipeline p;
  p.variant = &variant;
  const Artifact::Section *section = artifact.find(variant.section);
  if (!section)
    throw VulkanError("kernel " + kernel.name + ": no section '" + printable(variant.section) +
                      "' in the artifact");
  if (section->kind != SectionKind::Spirv)
    throw VulkanError("section '" + printable(variant.section) +
                      "': kind: expected 4 (spirv) for a kernel's module");
  if (std::string problem = checkSpirv(section->data, section->size, variant.entryPoint);
      !problem.empty())
    throw VulkanError("section '" + printable(variant.section) + "': corrupt SPIR-V: " + problem);
  VkShaderModuleCreateInfo module{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  module.codeSize = section->size;
  module.pCode = reinterpret_cast<const uint32_t *>(section->data);
  std::vector<uint32_t> poisoned;
  if (poisonLocals_) {
    poisoned = poisonFunctionVariables(
        std::vector<uint32_t>(module.pCode, module.pCode + section->size / 4));
    module.codeSize = poisoned.size() * 4;
    module.pCode = poisoned.data();
    if (std::string problem = checkSpirv(reinterpret_cast<const uint8_t *>(poisoned.data()),
                                         module.codeSize, variant.entryPoint);
        !problem.empty())
      throw VulkanError("section '" + printable(variant.section) +
                        "' with poisoned locals: " + problem);
  }
  check(api_->vkCreateShaderModule(device, &module, nullptr, &p.module),
        "creating the shader module of " + variant.entryPoint);

  std::vector<VkDescriptorSetLayoutBinding> bindings;
  for (uint32_t b = 0; b < kFirstTensorBinding + kernel.elementBytes.size(); ++b)
    bindings.push_back({b, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT,
                        nullptr});
  VkDescriptorSetLayoutCreateInfo setLayout{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  setLayout.bindingCount = uint32_t(bindings.size());
  setLayout.pBindings = bindings.data();
  check(api_->vkCreateDescriptorSetLayout(device, &setLayout, nullptr, &p.setLayout),
        "creating a descriptor set layout");
  const uint32_t pushWords =
      uint32_t(kPushFirstTensorOffset + kernel.elementBytes.size() + kernel.pushScalars.size());
  VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, pushWords * 4};
  VkPipelineLayoutCreateInfo layout{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  layout.setLayoutCount = 1;
  layout.pSetLayouts = &p.setLayout;
  layout.pushConstantRangeCount = 1;
  layout.pPushConstantRanges = &push;
  check(api_->vkCreatePipelineLayout(device, &layout, nullptr, &p.layout),
        "creating a pipeline layout");

  // The workgroup: as the variant asks, within the device's limits and the
  // kernel's shared memory, a multiple of the subgroup size.
  const int64_t sg = subgroupSize_;
  int64_t cap = std::min<int64_t>({variant.maxInvocations,
                                   int64_t(info.limits.maxComputeWorkGroupInvocations),
                                   int64_t(info.limits.maxComputeWorkGroupSize[0])});
  int64_t want = variant.subgroups > 0 ? variant.subgroups * sg : variant.invocations;
  int64_t size = std::max<int64_t>(sg, std::min(want, cap) / sg * sg);
  if (size > cap)
    throw VulkanError(fmt::format("kernel {}: a workgroup of one {}-wide subgroup exceeds its "
                                  "limit of {} invocations",
                                  variant.entryPoint, sg, cap));
  if ((size / sg) % variant.grid.subgroupsPerUnit != 0)
    throw VulkanError(fmt::format(
        "kernel {}: needs workgroups of a multiple of {} subgroups; with {}-wide subgroups "
        "the device allows {} invocations",
        variant.entryPoint, variant.grid.subgroupsPerUnit, sg, cap));
  p.workgroupSize = uint32_t(size);
  p.subgroupSize = uint32_t(sg);
  const uint32_t constants[2] = {p.workgroupSize, p.subgroupSize};
  const VkSpecializationMapEntry entries[2] = {{kWorkgroupSizeSpecId, 0, 4},
                                               {kSubgroupSizeSpecId, 4, 4}};
  VkSpecializationInfo specialization{2, entries, sizeof(constants), constants};
  VkPipelineShaderStageRequiredSubgroupSizeCreateInfo required{
      VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO};
  required.requiredSubgroupSize = p.subgroupSize;
  VkComputePipelineCreateInfo pipeline{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  pipeline.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  pipeline.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  pipeline.stage.module = p.module;
  pipeline.stage.pName = variant.entryPoint.c_str();
  pipeline.stage.pSpecializationInfo = &specialization;
  if (info.subgroupSizeControl) {
    pipeline.stage.pNext = &required;
    if (info.computeFullSubgroups)
      pipeline.stage.flags |= VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT;
  }
  pipeline.layout = p.layout;
  check(api_->vkCreateComputePipelines(device, VK_NULL_HANDLE, 1, &pipeline, nullptr, &p.pipeline),
        "creating the pipeline of " + variant.entryPoint);
  (void)path;
  return p;
}

std::pair<uint32_t, uint32_t> VulkanDriver::workgroupOf(const std::string &name) const {
  const Kernel &kernel = kernels_.at(size_t(kernelIds_.at(name)));
  return {kernel.pipelines.at(0).workgroupSize, kernel.pipelines.at(0).subgroupSize};
}

int64_t VulkanDriver::kernel(const std::string &name) {
  auto it = kernelIds_.find(name);
  if (it == kernelIds_.end())
    throw LoadError(path_ + ": the Vulkan manifest has no kernel '" + printable(name) + "'");
  return it->second;
}

//===- Memory -------------------------------------------------------------------===//

void VulkanDriver::failIfInjected(const char *what, int &counter, int at) {
  ++counter;
  if (at > 0 && counter == at)
    check(std::strcmp(what, "submit") == 0 ? VK_ERROR_DEVICE_LOST : VK_ERROR_OUT_OF_DEVICE_MEMORY,
          std::string("injected fault at ") + what);
}

VulkanDriver::Buffer VulkanDriver::createBuffer(int64_t bytes, VkMemoryPropertyFlags required,
                                                VkMemoryPropertyFlags preferred,
                                                const char *what) {
  VkDevice device = device_->handle();
  const DeviceInfo &info = device_->info();
  const int64_t size = std::max<int64_t>(bytes, 4);
  auto outOfMemory = [&](const std::string &why) {
    return VulkanError(fmt::format(
        "out of device memory: {} needs {}, {} are already allocated, and the device ({}) has {} "
        "of device-local memory{}{}",
        what, formatBytes(uint64_t(size)), formatBytes(uint64_t(allocatedBytes_)), info.name,
        formatBytes(info.deviceLocalBytes), why,
        std::strstr(what, "KV-cache") ? "; use a smaller --ctx" : ""));
  };
  if (uint64_t(allocatedBytes_ + size) > info.deviceLocalBytes)
    throw outOfMemory("");
  Buffer buffer;
  buffer.bytes = bytes;
  VkBufferCreateInfo create{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  create.size = VkDeviceSize(size);
  create.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                 VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  create.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(api_->vkCreateBuffer(device, &create, nullptr, &buffer.buffer), "creating a buffer");
  VkMemoryRequirements needs{};
  api_->vkGetBufferMemoryRequirements(device, buffer.buffer, &needs);
  const VkPhysicalDeviceMemoryProperties &memory = device_->memory();
  const int chosen = chooseMemoryType(memory, needs.memoryTypeBits, required, preferred);
  if (chosen < 0) {
    api_->vkDestroyBuffer(device, buffer.buffer, nullptr);
    throw VulkanError(std::string("no memory type for ") + what);
  }
  VkMemoryAllocateInfo allocate{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  allocate.allocationSize = needs.size;
  allocate.memoryTypeIndex = uint32_t(chosen);
  VkResult result = VK_SUCCESS;
  if (injectAllocAt_ > 0 && ++allocations_ == injectAllocAt_)
    result = VK_ERROR_OUT_OF_DEVICE_MEMORY;
  else
    result = api_->vkAllocateMemory(device, &allocate, nullptr, &buffer.memory);
  if (result == VK_ERROR_OUT_OF_DEVICE_MEMORY || result == VK_ERROR_OUT_OF_HOST_MEMORY) {
    api_->vkDestroyBuffer(device, buffer.buffer, nullptr);
    throw outOfMemory(fmt::format(" ({})", resultName(result)));
  }
  check(result, std::string("allocating device memory for ") + what);
  check(api_->vkBindBufferMemory(device, buffer.buffer, buffer.memory, 0), "binding memory");
  allocatedBytes_ += int64_t(needs.size);
  const VkMemoryPropertyFlags flags = memory.memoryTypes[chosen].propertyFlags;
  if ((flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) &&
      (flags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT)) {
    void *mapped = nullptr;
    check(api_->vkMapMemory(device, buffer.memory, 0, VK_WHOLE_SIZE, 0, &mapped), "mapping memory");
    buffer.mapped = static_cast<uint8_t *>(mapped);
  }
  return buffer;
}

void VulkanDriver::destroyBuffer(Buffer &buffer) {
  VkDevice device = device_->handle();
  if (buffer.mapped)
    api_->vkUnmapMemory(device, buffer.memory);
  if (buffer.buffer)
    api_->vkDestroyBuffer(device, buffer.buffer, nullptr);
  if (buffer.memory)
    api_->vkFreeMemory(device, buffer.memory, nullptr);
  buffer = Buffer{};
}

int64_t VulkanDriver::allocate(int64_t bytes, Pages /*device memory has no such choice*/) {
  try {
    Buffer buffer = createBuffer(bytes, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0,
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
    buffers_.push_back(createBuffer(bytes, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0, "a weight"));
    upload(buffers_.back(), 0, data, bytes);
    return int64_t(buffers_.size() - 1);
  } catch (const VulkanError &e) {
    throw LoadError(path_ + ": " + e.what());
  }
}

void VulkanDriver::ensureStaging() {
  if (!staging_.buffer)
    staging_ = createBuffer(2 * kStagingSlotBytes,
                            VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
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
    failIfInjected("submit", submits_, injectLostAt_);
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
    destroyBuffer(readback_);
  }
  // HOST_CACHED where the device has it: the CPU reads it at memory speed,
  // while reading write-combined host memory (the first host-visible type
  // on NVIDIA) is a bus transaction per load, ~1 ms for one row of logits.
  readback_ =
      createBuffer(std::max<int64_t>(bytes, int64_t(1) << 20),
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
  failIfInjected("submit", submits_, injectLostAt_);
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

VkDescriptorSet VulkanDriver::descriptorSet(const Pipeline &pipeline,
                                            const std::vector<Binding> &bindings) {
  auto key = std::make_pair(pipeline.setLayout, bindings);
  if (auto it = sets_.find(key); it != sets_.end())
    return it->second;
  VkDevice device = device_->handle();
  if (setsLeft_ == 0) {
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * 16};
    VkDescriptorPoolCreateInfo create{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    create.maxSets = kSetsPerPool;
    create.poolSizeCount = 1;
    create.pPoolSizes = &size;
    VkDescriptorPool pool = VK_NULL_HANDLE;
    check(api_->vkCreateDescriptorPool(device, &create, nullptr, &pool),
          "creating a descriptor pool");
    descriptorPools_.push_back(pool);
    setsLeft_ = kSetsPerPool;
  }
  VkDescriptorSetAllocateInfo allocate{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  allocate.descriptorPool = descriptorPools_.back();
  allocate.descriptorSetCount = 1;
  allocate.pSetLayouts = &pipeline.setLayout;
  VkDescriptorSet set = VK_NULL_HANDLE;
  check(api_->vkAllocateDescriptorSets(device, &allocate, &set), "allocating a descriptor set");
  --setsLeft_;
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
  api_->vkUpdateDescriptorSets(device, uint32_t(writes.size()), writes.data(), 0, nullptr);
  sets_.emplace(std::move(key), set);
  return set;
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

namespace {

/// The variants a dispatch of `rows` rows runs: the first whose rows fit
/// that is not a second stage, then the stages that run after it.
std::vector<size_t> stagesFor(const VulkanKernel &spec, int64_t rows) {
  std::vector<size_t> stages;
  for (size_t v = 0; v < spec.variants.size() && stages.empty(); ++v)
    if (!spec.variants[v].afterPrevious && rows >= spec.variants[v].minRows &&
        (spec.variants[v].maxRows == 0 || rows <= spec.variants[v].maxRows))
      stages.push_back(v);
  if (stages.empty())
    throw VulkanError(fmt::format("kernel {} has no variant for {} rows", spec.name, rows));
  while (stages.back() + 1 < spec.variants.size() && spec.variants[stages.back() + 1].afterPrevious)
    stages.push_back(stages.back() + 1);
  return stages;
}

/// Workgroups of a dispatch of `rows` rows over `partRows` weight rows
/// (VulkanManifest.h's GridSpec).
int64_t workgroupCount(const GridSpec &grid, int64_t rows, int64_t partRows, bool inParts,
                       int64_t subgroupsPerWorkgroup) {
  const int64_t units = inParts && grid.partUnits ? partRows : grid.units;
  const int64_t perWorkgroup =
      grid.perWorkgroup * (grid.perSubgroup ? subgroupsPerWorkgroup / grid.subgroupsPerUnit : 1);
  const int64_t rowFactor = grid.rows == GridSpec::Rows::One    ? 1
                            : grid.rows == GridSpec::Rows::Each ? rows
                                                                : ceilDiv(rows, grid.rowTile);
  return rowFactor * ceilDiv(std::max<int64_t>(units, 1), perWorkgroup);
}

} // namespace

void VulkanDriver::dispatch(int64_t kernelId, const std::vector<BufferRange> &ranges,
                            const std::vector<int64_t> &scalars, int64_t) {
  const Kernel &kernel = kernels_.at(size_t(kernelId));
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
  const int64_t parts = spec.split ? ceilDiv(spec.split->rows, spec.split->rowsPerPart) : 1;
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
  recordDispatch(*recording_, pipeline, uint32_t(groups), descriptorSet(pipeline, bindings), push);
}

void VulkanDriver::traceDispatch(const VulkanKernel &spec, int64_t rows,
                                 const std::vector<BufferRange> &ranges) {
  finish();
  const int64_t index = traced_++;
  std::string line = fmt::format("q3 trace {} {} rows {}:", index, spec.name, rows);
  const bool halves = spec.split && spec.split->halves;
  for (size_t i = 0; i < ranges.size(); ++i) {
    // A weight in halves has two bindings (VulkanDriver::dispatch).
    const size_t binding = halves && int64_t(i) > spec.split->binding ? i + 1 : i;
    std::vector<uint8_t> bytes(size_t(ranges[i].bytes));
    download(buffers_.at(size_t(ranges[i].buffer)), ranges[i].offset, bytes.data(),
             ranges[i].bytes);
    if (const char *dir = std::getenv("Q3_VULKAN_TRACE_DIR")) {
      std::string file = fmt::format("{}/{}_{}_{}.bin", dir, index, spec.name, i);
      FILE *f = std::fopen(file.c_str(), "wb");
      bool written = f && std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
      if (f && std::fclose(f) != 0)
        written = false;
      if (!written)
        throw VulkanError("Q3_VULKAN_TRACE_DIR: cannot write " + file);
    }
    if (spec.elementBytes.at(binding) != 4) {
      line += fmt::format(" [{}] {} B", i, bytes.size());
      continue;
    }
    double sum = 0, absSum = 0;
    int64_t notFinite = 0;
    for (size_t e = 0; e + 4 <= bytes.size(); e += 4) {
      float v;
      std::memcpy(&v, bytes.data() + e, 4);
      if (!std::isfinite(v)) {
        ++notFinite;
        continue;
      }
      sum += v;
      absSum += std::fabs(v);
    }
    line += fmt::format(" [{}] sum {:.6g} abs {:.6g} nonfinite {}", i, sum, absSum, notFinite);
  }
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
  auto it = kernelIds_.find(kReadBandwidthKernel);
  if (it == kernelIds_.end() || device_->info().timestampPeriodNs <= 0)
    return std::nullopt;
  const Kernel &kernel = kernels_[size_t(it->second)];
  const Pipeline &pipeline = kernel.pipelines.at(0);
  finish();
  if (!probe_.buffer) {
    // As large as one binding may be (128 MiB on lavapipe), at most 256 MiB:
    // beyond any device's last-level cache either way.
    const int64_t bytes = std::min<int64_t>(int64_t(256) << 20,
                                            int64_t(device_->info().limits.maxStorageBufferRange) / 16 * 16);
    probe_ = createBuffer(bytes, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0, "the bandwidth probe");
    probeSink_ = createBuffer(16, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0, "the bandwidth probe");
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
  VkDescriptorSet set = descriptorSet(pipeline, bindings);
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

//===- Devices ------------------------------------------------------------------===//

} // namespace q3::runtime::vulkan

namespace q3::runtime {

std::vector<std::string> listVulkanDevices() {
  using namespace vulkan;
  std::unique_ptr<VulkanInstance> instance = VulkanInstance::create(false);
  std::vector<std::string> lines;
  int chosen = instance->devices().empty() ? -1 : instance->defaultDevice();
  for (const DeviceInfo &d : instance->devices()) {
    std::string subgroups = d.subgroupSizeControl && d.minSubgroupSize != d.maxSubgroupSize
                                ? fmt::format("{} ({}-{})", d.subgroupSize, d.minSubgroupSize,
                                              d.maxSubgroupSize)
                                : std::to_string(d.subgroupSize);
    lines.push_back(fmt::format(
        "{}{}: {} | {} | {} | Vulkan {}.{} | {} device-local | subgroup size {} | 16-bit "
        "storage: {} | f16 arithmetic: {}",
        d.index, d.index == chosen ? "*" : "", d.name, d.type, d.driver,
        VK_API_VERSION_MAJOR(d.apiVersion), VK_API_VERSION_MINOR(d.apiVersion),
        formatBytes(d.deviceLocalBytes), subgroups, d.storageBuffer16BitAccess ? "yes" : "no",
        d.shaderFloat16 ? "yes" : "no"));
  }
  return lines;
}

} // namespace q3::runtime
