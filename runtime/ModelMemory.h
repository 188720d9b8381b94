// What Model::load will allocate for an artifact and a context length, from
// the manifest alone, so that a context or model that cannot fit is refused
// before anything is allocated (with the estimate in the message) instead of
// ending in an out-of-memory kill part-way through loading.
#pragma once

#include "runtime/Manifest.h"
#include "runtime/ResourceLimits.h"

#include <cstdint>
#include <vector>

namespace q3::runtime {

/// Weights the schedule reads (as the artifact stores them), the activation
/// buffers (min(context, prefill_rows) x row_bytes each, the token ids, the
/// largest kernel workspace and the thread scratch of each of `threads`
/// threads) and the K and V caches (layers x context x kv_heads x head_dim x
/// the cache's element size each) of a manifest that
/// manifest::validateManifest accepted. Sizes saturate instead of
/// overflowing.
std::vector<MemoryPart> estimateModelMemory(const manifest::Manifest &m, int64_t context,
                                            int threads);

} // namespace q3::runtime
