//===- DeviceRequirements.h - what an artifact's kernels need of a device -===//
//
// The checks VulkanDriver runs at load, before and after the logical device
// exists: which device `--device` names, the features the SPIR-V modules
// declare, a subgroup size in the kernels' range, and the limits (shared
// memory, binding range, workgroup size). Each failure throws VulkanError
// naming the device and everything it lacks, so a user sees one line
// instead of a driver's crash.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/vulkan/VulkanDevice.h"
#include "runtime/vulkan/VulkanManifest.h"

#include <cstdint>

namespace q3::runtime::vulkan {

/// The device index to run on: `requested` (from --device) when it names a
/// device, the instance's default when it is negative.
int selectDevice(const VulkanInstance &instance, int requested);

/// The features to enable on `device` for every kernel variant of `target`.
DeviceFeatures requiredFeatures(const VulkanTarget &target, const DeviceInfo &device);

/// The subgroup size the pipelines run at: the device's default when the
/// kernels allow it, else one the device can be asked for.
uint32_t chooseSubgroupSize(const VulkanTarget &target, const DeviceInfo &device);

/// The device limits the kernels need, at `subgroupSize`.
void checkLimits(const VulkanTarget &target, const DeviceInfo &device, uint32_t subgroupSize);

} // namespace q3::runtime::vulkan
