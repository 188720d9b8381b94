//===- DispatchTrace.h - $Q3_VULKAN_TRACE's line per dispatch -------------===//
//
// With $Q3_VULKAN_TRACE set, every dispatch runs alone and its tensors are
// read back and summarized on stderr, so the first kernel a device computes
// differently from another (or from the CPU backend) shows as the first
// line that differs; $Q3_VULKAN_TRACE_DIR also keeps the tensors' bytes.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/vulkan/VulkanManifest.h"

#include <cstdint>
#include <string>
#include <vector>

namespace q3::runtime::vulkan {

/// The line for dispatch number `index` of `spec` over `rows` rows, where
/// `tensors[i]` holds the bytes the schedule bound as its tensor i: f32
/// tensors' sum, absolute sum and count of non-finite values, other
/// tensors' size. With `dumpDir`, tensor i is also written to
/// `<dumpDir>/<index>_<kernel>_<i>.bin` (VulkanError when it cannot be).
std::string traceLine(int64_t index, const VulkanKernel &spec, int64_t rows,
                      const std::vector<std::vector<uint8_t>> &tensors, const char *dumpDir);

} // namespace q3::runtime::vulkan
