//===- WeightPlan.h - the weights a compiled model's kernels read ---------===//
//
// A manifest's weight plan lists checkpoint tensors (params) and transforms
// of them (fold_gain, concat_rows, pack_column_blocks) in dependency order.
// Evaluating it binds the params from the checkpoint (mapped, used in place
// when the dtype matches), computes the transforms the schedule needs, and
// releases every intermediate right after its last use.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Checkpoint.h"
#include "runtime/DType.h"
#include "runtime/HostBuffer.h"
#include "runtime/Manifest.h"
#include "runtime/ThreadPool.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace q3::runtime {

/// A weight as the kernels read it: bytes in the plan's dtype and layout.
struct WeightData {
  DType dtype = DType::F32;
  int64_t elements = 0;
  const uint8_t *data = nullptr; // null for a weight that was only an intermediate
  HostBuffer owned;              // when converted or computed
  int64_t bytes() const { return elements * int64_t(dtypeSize(dtype)); }
};

/// Called after each weight-plan entry is computed (done, total).
using WeightPlanProgress = std::function<void(int64_t done, int64_t total)>;

/// Evaluates `m.weights` against `checkpoint`: every weight a dispatch of
/// `m.steps` reads ends up with data; the others (inputs of transforms only)
/// are released. Throws LoadError naming the tensor on a checkpoint that does
/// not fit the plan. `warnings` receives unused checkpoint tensors.
std::vector<WeightData> evaluateWeightPlan(const manifest::Manifest &m,
                                           const Checkpoint &checkpoint, ThreadPool &pool,
                                           std::vector<std::string> *warnings,
                                           const WeightPlanProgress &progress = {});

/// The weights an artifact embeds (`m.embedded`), bound in place in its
/// mapped section `section` (`sectionBytes` long): nothing is copied. Throws
/// LoadError naming `file` when an entry lies outside the section.
std::vector<WeightData> bindEmbeddedWeights(const manifest::Manifest &m, const uint8_t *section,
                                            uint64_t sectionBytes, const std::string &file);

} // namespace q3::runtime
