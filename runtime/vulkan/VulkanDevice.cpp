#include "runtime/vulkan/VulkanDevice.h"

#include "runtime/Driver.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace q3::runtime::vulkan {
namespace {

constexpr const char *kValidationLayer = "VK_LAYER_KHRONOS_validation";

bool hasDeviceExtension(VulkanApi &api, VkPhysicalDevice device, const char *name) {
  uint32_t count = 0;
  api.vkEnumerateDeviceExtensionProperties(device, nullptr, &count, nullptr);
  std::vector<VkExtensionProperties> extensions(count);
  api.vkEnumerateDeviceExtensionProperties(device, nullptr, &count, extensions.data());
  return std::any_of(extensions.begin(), extensions.end(), [&](const VkExtensionProperties &e) {
    return std::strcmp(e.extensionName, name) == 0;
  });
}

int computeQueueFamily(VulkanApi &api, VkPhysicalDevice device, double *timestampNs,
                       float period) {
  uint32_t count = 0;
  api.vkGetPhysicalDeviceQueueFamilyProperties(device, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  api.vkGetPhysicalDeviceQueueFamilyProperties(device, &count, families.data());
  for (uint32_t i = 0; i < count; ++i)
    if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
      *timestampNs = families[i].timestampValidBits ? double(period) : 0.0;
      return int(i);
    }
  return -1;
}

} // namespace

const char *deviceTypeName(VkPhysicalDeviceType type) {
  switch (type) {
  case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
    return "discrete GPU";
  case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
    return "integrated GPU";
  case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
    return "virtual GPU";
  case VK_PHYSICAL_DEVICE_TYPE_CPU:
    return "CPU";
  default:
    return "other";
  }
}

std::string formatBytes(uint64_t bytes) {
  if (bytes >= (uint64_t(1) << 30))
    return fmt::format("{:.2f} GiB", double(bytes) / double(uint64_t(1) << 30));
  if (bytes >= (uint64_t(1) << 20))
    return fmt::format("{:.1f} MiB", double(bytes) / double(uint64_t(1) << 20));
  return fmt::format("{} bytes", bytes);
}

//===- VulkanInstance -------------------------------------------------------===//

std::unique_ptr<VulkanInstance> VulkanInstance::create(bool validation, bool synchronization) {
  VulkanApi &api = VulkanApi::load();
  std::unique_ptr<VulkanInstance> self(new VulkanInstance(api));
  uint32_t version = VK_API_VERSION_1_0;
  if (api.vkEnumerateInstanceVersion)
    api.vkEnumerateInstanceVersion(&version);
  if (version < VK_API_VERSION_1_1)
    throw VulkanError("the Vulkan loader offers version " +
                      std::to_string(VK_API_VERSION_MAJOR(version)) + "." +
                      std::to_string(VK_API_VERSION_MINOR(version)) + "; q3c's kernels need 1.1");
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "q3run";
  app.pEngineName = "q3c";
  app.apiVersion = std::min<uint32_t>(version, VK_API_VERSION_1_3);
  std::vector<const char *> layers, extensions;
  if (validation) {
    uint32_t count = 0;
    api.vkEnumerateInstanceLayerProperties(&count, nullptr);
    std::vector<VkLayerProperties> available(count);
    api.vkEnumerateInstanceLayerProperties(&count, available.data());
    if (std::none_of(available.begin(), available.end(), [](const VkLayerProperties &l) {
          return std::strcmp(l.layerName, kValidationLayer) == 0;
        }))
      throw VulkanError(std::string("validation requested, but the layer ") + kValidationLayer +
                        " is not installed (Debian: vulkan-validationlayers)");
    layers.push_back(kValidationLayer);
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    if (synchronization)
      extensions.push_back(VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME); // the layer's own
  }
  const VkValidationFeatureEnableEXT syncChecks =
      VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
  VkValidationFeaturesEXT features{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = &syncChecks;
  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  if (validation && synchronization)
    info.pNext = &features;
  info.pApplicationInfo = &app;
  info.enabledLayerCount = uint32_t(layers.size());
  info.ppEnabledLayerNames = layers.data();
  info.enabledExtensionCount = uint32_t(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  VkResult created = api.vkCreateInstance(&info, nullptr, &self->instance_);
  if (created == VK_ERROR_INCOMPATIBLE_DRIVER)
    throw VulkanError("no Vulkan device: the loader found no driver (install one, e.g. "
                      "mesa-vulkan-drivers; VK_DRIVER_FILES may point to a missing file)");
  check(created, "creating the Vulkan instance");
  api.loadInstance(self->instance_);
  if (validation) {
    VkDebugUtilsMessengerCreateInfoEXT messenger{
        VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    messenger.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                                VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    messenger.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                            VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                            VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    messenger.pfnUserCallback = &VulkanInstance::onMessage;
    messenger.pUserData = self.get();
    check(api.vkCreateDebugUtilsMessengerEXT(self->instance_, &messenger, nullptr,
                                             &self->messenger_),
          "creating the validation messenger");
  }
  uint32_t count = 0;
  check(api.vkEnumeratePhysicalDevices(self->instance_, &count, nullptr),
        "listing the Vulkan devices");
  self->physical_.resize(count);
  check(api.vkEnumeratePhysicalDevices(self->instance_, &count, self->physical_.data()),
        "listing the Vulkan devices");
  for (uint32_t i = 0; i < count; ++i)
    self->devices_.push_back(self->describe(int(i), self->physical_[i]));
  return self;
}

VulkanInstance::~VulkanInstance() {
  if (messenger_)
    api_.vkDestroyDebugUtilsMessengerEXT(instance_, messenger_, nullptr);
  if (instance_)
    api_.vkDestroyInstance(instance_, nullptr);
}

VkBool32 VKAPI_PTR VulkanInstance::onMessage(VkDebugUtilsMessageSeverityFlagBitsEXT,
                                             VkDebugUtilsMessageTypeFlagsEXT,
                                             const VkDebugUtilsMessengerCallbackDataEXT *data,
                                             void *self) {
  auto *instance = static_cast<VulkanInstance *>(self);
  ++instance->validationMessages_;
  std::string text = data && data->pMessage ? data->pMessage : "(no message)";
  std::replace(text.begin(), text.end(), '\n', ' ');
  std::fprintf(stderr, "vulkan validation: %s\n", text.c_str());
  return VK_FALSE;
}

DeviceInfo VulkanInstance::describe(int index, VkPhysicalDevice device) {
  VulkanApi &api = api_;
  DeviceInfo d;
  d.index = index;
  VkPhysicalDeviceProperties base{};
  api.vkGetPhysicalDeviceProperties(device, &base);
  d.name = base.deviceName;
  d.vkType = base.deviceType;
  d.type = deviceTypeName(base.deviceType);
  d.apiVersion = base.apiVersion;
  d.limits = base.limits;
  const bool v12 = base.apiVersion >= VK_API_VERSION_1_2;
  const bool v13 = base.apiVersion >= VK_API_VERSION_1_3;
  const bool sizeControlExt =
      v13 || hasDeviceExtension(api, device, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  const bool float16Ext =
      v12 || hasDeviceExtension(api, device, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
  const bool driverExt =
      v12 || hasDeviceExtension(api, device, VK_KHR_DRIVER_PROPERTIES_EXTENSION_NAME);

  // Properties: subgroups, subgroup size control, driver.
  VkPhysicalDeviceProperties2 properties{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceSubgroupSizeControlProperties sizeControl{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES};
  VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  properties.pNext = &subgroup;
  void **tail = &subgroup.pNext;
  if (sizeControlExt) {
    *tail = &sizeControl;
    tail = &sizeControl.pNext;
  }
  if (driverExt) {
    *tail = &driver;
    tail = &driver.pNext;
  }
  api.vkGetPhysicalDeviceProperties2(device, &properties);
  d.subgroupSize = subgroup.subgroupSize;
  d.minSubgroupSize = d.maxSubgroupSize = subgroup.subgroupSize;
  d.subgroupArithmetic = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                         (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_BASIC_BIT) &&
                         (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
  d.driver = driverExt ? fmt::format("{} ({})", driver.driverName, driver.driverInfo)
                       : fmt::format("driver version {:#x}", base.driverVersion);

  // Features: 16-bit storage and arithmetic, subgroup size control.
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDevice16BitStorageFeatures storage16{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDeviceShaderFloat16Int8Features float16{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
  VkPhysicalDeviceSubgroupSizeControlFeatures sizeControlFeatures{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES};
  features.pNext = &storage16;
  tail = &storage16.pNext;
  if (float16Ext) {
    *tail = &float16;
    tail = &float16.pNext;
  }
  if (sizeControlExt) {
    *tail = &sizeControlFeatures;
    tail = &sizeControlFeatures.pNext;
  }
  api.vkGetPhysicalDeviceFeatures2(device, &features);
  d.storageBuffer16BitAccess = storage16.storageBuffer16BitAccess;
  d.shaderFloat16 = float16Ext && float16.shaderFloat16;
  d.shaderInt16 = features.features.shaderInt16;
  if (sizeControlExt && sizeControlFeatures.subgroupSizeControl &&
      (sizeControl.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT)) {
    d.subgroupSizeControl = true;
    d.computeFullSubgroups = sizeControlFeatures.computeFullSubgroups;
    d.minSubgroupSize = sizeControl.minSubgroupSize;
    d.maxSubgroupSize = sizeControl.maxSubgroupSize;
  }

  VkPhysicalDeviceMemoryProperties memory{};
  api.vkGetPhysicalDeviceMemoryProperties(device, &memory);
  for (uint32_t h = 0; h < memory.memoryHeapCount; ++h)
    if (memory.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      d.deviceLocalBytes = std::max<uint64_t>(d.deviceLocalBytes, memory.memoryHeaps[h].size);
  d.hasComputeQueue =
      computeQueueFamily(api, device, &d.timestampPeriodNs, base.limits.timestampPeriod) >= 0;
  // Tests take a feature away ($Q3_VULKAN_INJECT "hide:<feature>") to see
  // the error a device without it gives.
  if (const char *inject = std::getenv("Q3_VULKAN_INJECT")) {
    const std::string hide = inject;
    if (hide == "hide:shaderFloat16")
      d.shaderFloat16 = false;
    else if (hide == "hide:storageBuffer16BitAccess")
      d.storageBuffer16BitAccess = false;
    else if (hide == "hide:subgroupArithmetic")
      d.subgroupArithmetic = false;
  }
  if (!base.limits.timestampComputeAndGraphics)
    d.timestampPeriodNs = 0;
  return d;
}

int VulkanInstance::defaultDevice() const {
  if (devices_.empty())
    throw VulkanError("no Vulkan device: the Vulkan loader lists none (install a driver, e.g. "
                      "mesa-vulkan-drivers for lavapipe, the CPU device)");
  for (VkPhysicalDeviceType type :
       {VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU,
        VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU, VK_PHYSICAL_DEVICE_TYPE_CPU})
    for (const DeviceInfo &d : devices_)
      if (d.vkType == type && d.hasComputeQueue)
        return d.index;
  return devices_.front().index;
}

//===- VulkanDevice ---------------------------------------------------------===//

VulkanDevice::VulkanDevice(VulkanInstance &instance, int index, const DeviceFeatures &wanted)
    : instance_(instance), info_(instance.devices().at(size_t(index))),
      physical_(instance.physical(index)) {
  VulkanApi &api = instance.api();
  api.vkGetPhysicalDeviceMemoryProperties(physical_, &memory_);
  double unused = 0;
  int family = computeQueueFamily(api, physical_, &unused, info_.limits.timestampPeriod);
  if (family < 0)
    throw VulkanError("Vulkan device " + std::to_string(index) + " (" + info_.name +
                      ") has no compute queue");
  queueFamily_ = uint32_t(family);
  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queue.queueFamilyIndex = queueFamily_;
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;

  // Exactly the features the kernels use; the rest stay off.
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.features.shaderInt16 = wanted.shaderInt16;
  VkPhysicalDevice16BitStorageFeatures storage16{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  storage16.storageBuffer16BitAccess = wanted.storageBuffer16BitAccess;
  VkPhysicalDeviceShaderFloat16Int8Features float16{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
  float16.shaderFloat16 = wanted.shaderFloat16;
  VkPhysicalDeviceSubgroupSizeControlFeatures sizeControl{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES};
  sizeControl.subgroupSizeControl = wanted.subgroupSizeControl;
  sizeControl.computeFullSubgroups = wanted.subgroupSizeControl && info_.computeFullSubgroups;
  features.pNext = &storage16;
  void **tail = &storage16.pNext;
  std::vector<const char *> extensions;
  const bool v12 = info_.apiVersion >= VK_API_VERSION_1_2;
  const bool v13 = info_.apiVersion >= VK_API_VERSION_1_3;
  if (wanted.shaderFloat16) {
    *tail = &float16;
    tail = &float16.pNext;
    if (!v12)
      extensions.push_back(VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
  }
  if (wanted.subgroupSizeControl) {
    *tail = &sizeControl;
    tail = &sizeControl.pNext;
    if (!v13)
      extensions.push_back(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  }
  VkDeviceCreateInfo info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  info.pNext = &features;
  info.queueCreateInfoCount = 1;
  info.pQueueCreateInfos = &queue;
  info.enabledExtensionCount = uint32_t(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  check(api.vkCreateDevice(physical_, &info, nullptr, &device_),
        "creating the Vulkan device " + info_.name);
  api.loadDevice(device_);
  api.vkGetDeviceQueue(device_, queueFamily_, 0, &queue_);
}

VulkanDevice::~VulkanDevice() {
  if (device_) {
    instance_.api().vkDeviceWaitIdle(device_);
    instance_.api().vkDestroyDevice(device_, nullptr);
  }
}

int chooseMemoryType(const VkPhysicalDeviceMemoryProperties &memory, uint32_t typeBits,
                     VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred) {
  int chosen = -1;
  for (uint32_t t = 0; t < memory.memoryTypeCount && t < VK_MAX_MEMORY_TYPES; ++t) {
    const VkMemoryPropertyFlags flags = memory.memoryTypes[t].propertyFlags;
    if (!(typeBits & (1u << t)) || (flags & required) != required)
      continue;
    if ((flags & preferred) == preferred)
      return int(t);
    if (chosen < 0)
      chosen = int(t);
  }
  return chosen;
}

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
