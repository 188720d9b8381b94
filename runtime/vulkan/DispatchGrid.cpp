#include "runtime/vulkan/DispatchGrid.h"

#include "runtime/vulkan/VulkanApi.h"

#include <fmt/format.h>

#include <algorithm>

namespace q3::runtime::vulkan {
namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

} // namespace

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

int64_t weightParts(const VulkanKernel &spec) {
  return spec.split ? ceilDiv(spec.split->rows, spec.split->rowsPerPart) : 1;
}

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

} // namespace q3::runtime::vulkan
