// Checks a SPIR-V module from an artifact before the driver hands it to the
// device: a truncated or corrupt section is refused with the validator's
// one-line reason instead of reaching the driver's compiler.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace q3::runtime::vulkan {

/// "" when `bytes` is a valid SPIR-V module for Vulkan 1.1 (SPIRV-Tools'
/// validator) with a GLCompute entry point named `entryPoint`; else what is
/// wrong, in one line.
std::string checkSpirv(const uint8_t *bytes, size_t size, const std::string &entryPoint);

} // namespace q3::runtime::vulkan
