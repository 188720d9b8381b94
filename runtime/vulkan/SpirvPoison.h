// A test aid: gives a SPIR-V module's uninitialized function-local variables
// a garbage initial value. lavapipe reads an uninitialized variable as zero,
// a GPU as whatever its register held, so a kernel that reads one before
// writing it passes on lavapipe and fails on hardware; with the variables
// poisoned it fails on lavapipe too ($Q3_VULKAN_POISON_LOCALS).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace q3::runtime::vulkan {

/// The module with every Function-storage OpVariable of a 32-bit scalar or
/// vector type that has no initializer initialized to the bits 0x7FC00000
/// (a NaN as a float, a large number as an integer). Other variables stay as
/// they are. `words` must be a valid module (checkSpirv).
std::vector<uint32_t> poisonFunctionVariables(const std::vector<uint32_t> &words);

} // namespace q3::runtime::vulkan
