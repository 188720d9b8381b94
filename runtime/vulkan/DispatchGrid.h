//===- DispatchGrid.h - which variants a dispatch runs, and how many groups ===//
//
// The manifest's kernels carry variants by row count and grids in units of
// work (VulkanManifest.h's KernelVariant and GridSpec); these turn one
// dispatch of the schedule into the variants it runs and each one's
// workgroup count on the device's subgroup size.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/vulkan/VulkanManifest.h"

#include <cstdint>
#include <vector>

namespace q3::runtime::vulkan {

/// The variants a dispatch of `rows` rows runs: the first whose rows fit
/// that is not a second stage, then the stages that run after it. Throws
/// VulkanError when no variant takes `rows`.
std::vector<size_t> stagesFor(const VulkanKernel &spec, int64_t rows);

/// The dispatches each stage of `spec` runs as: one per weight part (1 for
/// a whole weight).
int64_t weightParts(const VulkanKernel &spec);

/// Workgroups of a dispatch of `rows` rows over `partRows` weight rows
/// (`inParts`: the weight is split, VulkanManifest.h's WeightSplit), with
/// `subgroupsPerWorkgroup` subgroups in each workgroup.
int64_t workgroupCount(const GridSpec &grid, int64_t rows, int64_t partRows, bool inParts,
                       int64_t subgroupsPerWorkgroup);

} // namespace q3::runtime::vulkan
