// The interface of a Vulkan kernel: what the SPIR-V modules q3c generates
// (backends/vulkan) and the driver that runs them (runtime/vulkan) agree on.
// Owned by the runtime, like runtime/KernelABI.h for the CPU.
//
// Every kernel is one compute entry point in its own SPIR-V module with
//  - descriptor set 0, binding 0: the step parameters, a storage buffer of
//    i32 the driver writes before it submits a pass: [kStepStartPosition] is
//    the first position of the rows being run. It is a buffer, not a push
//    constant, because a pass's command buffer is recorded once per shape and
//    replayed at every position.
//  - bindings 1, 2, ...: the kernel's tensors in the order of its dispatch
//    (operands, then results), each a storage buffer bound at an offset that
//    is a multiple of the device's minStorageBufferOffsetAlignment; the rest
//    of a tensor's byte offset is passed in elements as a push constant.
//  - push constants, 32-bit words: the rows of the dispatch, the first row
//    and the row count of the weight part it runs on (a weight larger than a
//    storage buffer binding may be runs as one dispatch per part), then one
//    element offset per tensor binding.
//  - specialization constants: the workgroup size (x; y and z are 1) and the
//    subgroup size, chosen by the driver for the device at pipeline creation
//    (the subgroup size is also required of the pipeline when the device can
//    control it).
#pragma once

#include <cstdint>

namespace q3::runtime::vulkan {

inline constexpr uint32_t kStepParamsBinding = 0;
inline constexpr uint32_t kFirstTensorBinding = 1;
inline constexpr uint32_t kStepStartPosition = 0; // word of the step parameters
inline constexpr uint32_t kStepParamsWords = 4;

inline constexpr uint32_t kPushRows = 0;
inline constexpr uint32_t kPushPartFirstRow = 1;
inline constexpr uint32_t kPushPartRows = 2;
inline constexpr uint32_t kPushFirstTensorOffset = 3;
/// Vulkan guarantees 128 bytes of push constants.
inline constexpr uint32_t kMaxPushWords = 32;

inline constexpr uint32_t kWorkgroupSizeSpecId = 0;
inline constexpr uint32_t kSubgroupSizeSpecId = 1;

/// Vulkan guarantees at least this maxStorageBufferRange (2^27 bytes), so
/// a weight the compiler splits into parts of at most this size binds on
/// every device.
inline constexpr int64_t kPortableBindingBytes = int64_t(1) << 27;
/// The largest minStorageBufferOffsetAlignment Vulkan allows: weight parts
/// start at multiples of it.
inline constexpr int64_t kMaxOffsetAlignment = 256;

/// The kernel every Vulkan artifact carries for `q3run bench`: it binds a
/// buffer of 16-byte vectors and a sink, takes the vector count as its push
/// scalar, and each invocation reads kBandwidthVectorsPerInvocation of them.
inline constexpr const char *kReadBandwidthKernel = "q3_read_bandwidth";
inline constexpr int64_t kBandwidthVectorsPerInvocation = 64;

} // namespace q3::runtime::vulkan
