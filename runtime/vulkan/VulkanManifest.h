// The Vulkan part of an artifact's manifest, under its "vulkan" key (the
// rest is the typed manifest of runtime/Manifest.h, format "q3c-vulkan"):
// for every kernel of the
// schedule, its SPIR-V modules (a decode and a prefill variant where they
// differ), the tensor bindings, how the driver sizes the grid and the
// workgroup, and what each module requires of the device. q3c writes it
// (backends/vulkan) and the driver reads it (runtime/vulkan) through these
// structs, so no key is spelled in two places. docs/artifact.md lists the
// fields.
#pragma once

#include "runtime/Manifest.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace q3::runtime::vulkan {

inline constexpr const char *kVulkanFormat = manifest::kVulkanFormat;
/// The manifest key that holds a Vulkan artifact's VulkanTarget.
inline constexpr const char *kVulkanManifestKey = "vulkan";

/// How many workgroups a dispatch of `rows` rows runs:
/// rowFactor(rows) * ceil(units / unitsPerWorkgroup), where units is
/// `units`, or the rows of the weight part a dispatch runs on with
/// `partUnits` (a weight in parts: VulkanKernel::split), and
/// unitsPerWorkgroup is `perWorkgroup` (times the workgroup's subgroups
/// when `perSubgroup`, divided by `subgroupsPerUnit`: a unit that takes
/// that many subgroups of one workgroup, whose subgroup count the driver
/// then keeps a multiple of it).
struct GridSpec {
  enum class Rows { One, Each, Tiles };
  Rows rows = Rows::One;
  int64_t rowTile = 1; // Rows::Tiles: rows per workgroup
  int64_t units = 1;
  int64_t perWorkgroup = 1;
  bool perSubgroup = false;
  bool partUnits = false;
  int64_t subgroupsPerUnit = 1;
};

/// One SPIR-V module of a kernel.
struct KernelVariant {
  std::string section;    // the artifact section holding the SPIR-V words
  std::string entryPoint; // its GLCompute entry point
  int64_t minRows = 1, maxRows = 0; // used for dispatches of minRows..maxRows rows (0: any)
  /// Runs right after the variant before it, on the same dispatch (its rows
  /// and bindings), reading what that one wrote: a second stage, such as
  /// the merge of a split decode attention. The driver dispatches the first
  /// variant whose rows fit and then each one that follows it so.
  bool afterPrevious = false;
  GridSpec grid;
  /// The workgroup: `subgroups` subgroups when set, else `invocations`,
  /// clamped to the device's limits (a multiple of the subgroup size).
  int64_t subgroups = 0;
  int64_t invocations = 64;
  int64_t maxInvocations = 1024; // the kernel's shared memory is sized for this many
  int64_t sharedBytes = 0;
  std::vector<std::string> capabilities; // SPIR-V capabilities the module declares
};

/// A weight larger than a storage-buffer binding may be, run as one
/// dispatch per part of `rowsPerPart` rows (the last part: the rest). With
/// `halves`, the scheduler's weight (two stacked halves of `rows` rows each,
/// SwiGLU's gate and up) is bound twice, at bindings `binding` and
/// `binding` + 1: a part's rows of the first half and the same rows of the
/// second.
struct WeightSplit {
  int64_t binding = 0; // index among the kernel's tensors
  int64_t rows = 0;
  int64_t rowBytes = 0;
  int64_t rowsPerPart = 0;
  bool halves = false;
};

struct VulkanKernel {
  std::string name;
  /// Bytes of one element of each tensor binding as the kernel views it
  /// (offsets are pushed in these units).
  std::vector<int64_t> elementBytes;
  /// Indices into the scheduler's scalars (runtime/KernelABI.h: [0] rows,
  /// [1] visible, [2] capacity, then the kernel's own) pushed after the
  /// tensor offsets. Never one that depends on the position: a recorded
  /// pass is replayed at other positions.
  std::vector<int64_t> pushScalars;
  std::optional<WeightSplit> split;
  std::vector<KernelVariant> variants;
};

struct VulkanTarget {
  int64_t minSubgroupSize = 4, maxSubgroupSize = 128; // the kernels are correct for these
  std::vector<VulkanKernel> kernels;
};

//===- JSON ---------------------------------------------------------------===//

inline void to_json(nlohmann::json &j, const GridSpec &g) {
  static const char *rows[] = {"one", "each", "tiles"};
  j = {{"rows", rows[int(g.rows)]},     {"units", g.units},
       {"per_workgroup", g.perWorkgroup}, {"per_subgroup", g.perSubgroup},
       {"part_units", g.partUnits}};
  if (g.rows == GridSpec::Rows::Tiles)
    j["row_tile"] = g.rowTile;
  if (g.subgroupsPerUnit != 1)
    j["subgroups_per_unit"] = g.subgroupsPerUnit;
}
inline void from_json(const nlohmann::json &j, GridSpec &g) {
  const std::string rows = j.at("rows").get<std::string>();
  if (rows == "one")
    g.rows = GridSpec::Rows::One;
  else if (rows == "each")
    g.rows = GridSpec::Rows::Each;
  else if (rows == "tiles")
    g.rows = GridSpec::Rows::Tiles;
  else
    throw std::invalid_argument("grid.rows: expected one, each or tiles, found '" + rows + "'");
  g.rowTile = j.value("row_tile", int64_t(1));
  j.at("units").get_to(g.units);
  j.at("per_workgroup").get_to(g.perWorkgroup);
  j.at("per_subgroup").get_to(g.perSubgroup);
  j.at("part_units").get_to(g.partUnits);
  g.subgroupsPerUnit = j.value("subgroups_per_unit", int64_t(1));
  if (g.rowTile < 1 || g.units < 1 || g.perWorkgroup < 1)
    throw std::invalid_argument("grid: expected row_tile, units and per_workgroup >= 1");
  if (g.subgroupsPerUnit < 1 || g.subgroupsPerUnit > 64 ||
      (g.subgroupsPerUnit > 1 && !g.perSubgroup))
    throw std::invalid_argument(
        "grid: expected subgroups_per_unit 1 to 64, and above 1 only with per_subgroup");
}

inline void to_json(nlohmann::json &j, const KernelVariant &v) {
  j = {{"section", v.section},
       {"entry_point", v.entryPoint},
       {"min_rows", v.minRows},
       {"max_rows", v.maxRows},
       {"after_previous", v.afterPrevious},
       {"grid", v.grid},
       {"subgroups", v.subgroups},
       {"invocations", v.invocations},
       {"max_invocations", v.maxInvocations},
       {"shared_bytes", v.sharedBytes},
       {"capabilities", v.capabilities}};
}
inline void from_json(const nlohmann::json &j, KernelVariant &v) {
  j.at("section").get_to(v.section);
  j.at("entry_point").get_to(v.entryPoint);
  j.at("min_rows").get_to(v.minRows);
  j.at("max_rows").get_to(v.maxRows);
  v.afterPrevious = j.value("after_previous", false);
  j.at("grid").get_to(v.grid);
  j.at("subgroups").get_to(v.subgroups);
  j.at("invocations").get_to(v.invocations);
  j.at("max_invocations").get_to(v.maxInvocations);
  j.at("shared_bytes").get_to(v.sharedBytes);
  j.at("capabilities").get_to(v.capabilities);
  if (v.minRows < 1 || v.maxRows < 0 || v.subgroups < 0 || v.invocations < 1 ||
      v.maxInvocations < 1 || v.sharedBytes < 0)
    throw std::invalid_argument("variant " + v.entryPoint + ": a count out of range");
}

inline void to_json(nlohmann::json &j, const WeightSplit &s) {
  j = {{"binding", s.binding},       {"rows", s.rows}, {"row_bytes", s.rowBytes},
       {"rows_per_part", s.rowsPerPart}, {"halves", s.halves}};
}
inline void from_json(const nlohmann::json &j, WeightSplit &s) {
  j.at("binding").get_to(s.binding);
  j.at("rows").get_to(s.rows);
  j.at("row_bytes").get_to(s.rowBytes);
  j.at("rows_per_part").get_to(s.rowsPerPart);
  j.at("halves").get_to(s.halves);
  if (s.binding < 0 || s.rows < 1 || s.rowBytes < 1 || s.rowsPerPart < 1)
    throw std::invalid_argument("split: expected positive rows, row_bytes and rows_per_part");
}

inline void to_json(nlohmann::json &j, const VulkanKernel &k) {
  j = {{"name", k.name},
       {"element_bytes", k.elementBytes},
       {"push_scalars", k.pushScalars},
       {"variants", k.variants}};
  if (k.split)
    j["split"] = *k.split;
}
inline void from_json(const nlohmann::json &j, VulkanKernel &k) {
  j.at("name").get_to(k.name);
  j.at("element_bytes").get_to(k.elementBytes);
  j.at("push_scalars").get_to(k.pushScalars);
  j.at("variants").get_to(k.variants);
  if (j.contains("split"))
    k.split = j.at("split").get<WeightSplit>();
  if (k.variants.empty())
    throw std::invalid_argument("kernel " + k.name + ": no variants");
  if (k.variants.front().afterPrevious)
    throw std::invalid_argument("kernel " + k.name +
                                ": its first variant has no previous one to "
                                "run after");
  for (int64_t bytes : k.elementBytes)
    if (bytes != 2 && bytes != 4 && bytes != 8 && bytes != 16)
      throw std::invalid_argument("kernel " + k.name + ": element_bytes must be 2, 4, 8 or 16");
  if (k.split && k.split->binding + (k.split->halves ? 1 : 0) >= int64_t(k.elementBytes.size()))
    throw std::invalid_argument("kernel " + k.name + ": split binding out of range");
}

inline void to_json(nlohmann::json &j, const VulkanTarget &t) {
  j = {{"min_subgroup_size", t.minSubgroupSize},
       {"max_subgroup_size", t.maxSubgroupSize},
       {"kernels", t.kernels}};
}
inline void from_json(const nlohmann::json &j, VulkanTarget &t) {
  j.at("min_subgroup_size").get_to(t.minSubgroupSize);
  j.at("max_subgroup_size").get_to(t.maxSubgroupSize);
  j.at("kernels").get_to(t.kernels);
  if (t.minSubgroupSize < 1 || t.maxSubgroupSize < t.minSubgroupSize)
    throw std::invalid_argument("subgroup sizes: expected 1 <= min <= max");
}

} // namespace q3::runtime::vulkan
