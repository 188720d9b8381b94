//===- WeightParts.h - a product weight read part by part -----------------===//
//
// A weight that merge-sibling-matmuls concatenated (q, k and v; gate and up)
// reaches a kernel that reads rows in place as its parts, one buffer each
// (cpu-sink-weight-concat): the runtime binds the checkpoint's bytes and
// loading copies nothing. These are the pieces every such kernel shares: the
// parts' buffers and row views, and the function that finds the part holding
// a row.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "backends/cpu/KernelSource.h"

#include <cstdint>
#include <string>
#include <vector>

namespace q3::cpu::detail {

struct WeightParts {
  std::string rowsType;              // a part as rows: memref<?xKxT>
  std::vector<int64_t> rows, starts; // rows of each part; its first row in the whole
};
WeightParts weightParts(const FusedLinearKernel &kernel);

/// The buffer argument of part `p` (kernelFrame: %wb, %wb1, ...).
std::string partBuffer(size_t p);
/// `prefix`0, `prefix`1, ...: one name per part.
std::string partList(const WeightParts &parts, const std::string &prefix);
/// `type`, once per part.
std::string partTypes(const WeightParts &parts, const std::string &type);
/// %wRows<p>, the rows view of each part's buffer, at the kernel's top.
std::string partRowViews(const WeightParts &parts);

/// @<name>_<function>(w0, .., i) -> (part, local): the part (of `type`,
/// one argument per part) that holds unit i of the weight, a unit being
/// `unitRows` rows, and (i - the part's first unit) x `localScale`. A chain
/// of selects, so a kernel calls whatever reads the part once.
std::string partAtFunction(const FusedLinearKernel &kernel, const WeightParts &parts,
                           const std::string &function, const std::string &type, int64_t unitRows,
                           int64_t localScale);

/// The call of @<name>_row_at (partAtFunction(..., "row_at", rowsType, 1, 1))
/// for weight row `row`: defines `result`Part and `result`Row.
std::string rowAtCall(const FusedLinearKernel &kernel, const WeightParts &parts,
                      const std::string &row, const std::string &result);

} // namespace q3::cpu::detail
