// What Model::load will allocate for an artifact and a context length, from
// the manifest alone, so that a context or model that cannot fit is refused
// before anything is allocated (with the estimate in the message) instead of
// ending in an out-of-memory kill part-way through loading.
#pragma once

#include "runtime/ResourceLimits.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

namespace q3::runtime {

/// Weights the schedule reads (as the artifact stores them), the activation
/// buffers (min(context, prefill_rows) x row_bytes each), the K and V caches (layers x context x
/// kv_heads x head_dim x `kvElementBytes` each) and the token ids. Sizes
/// saturate instead of overflowing; fields that are absent
/// or malformed count as zero (validating the manifest is not this file's job).
std::vector<MemoryPart> estimateModelMemory(const nlohmann::json &manifest, int64_t context,
                                            uint64_t kvElementBytes);

} // namespace q3::runtime
