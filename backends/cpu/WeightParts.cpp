//===- WeightParts.cpp - a product weight read part by part ---------------===//
#include "backends/cpu/WeightParts.h"
#include "backends/cpu/KernelSourceUtil.h"

#include <fmt/format.h>

namespace q3::cpu::detail {

WeightParts weightParts(const FusedLinearKernel &kernel) {
  WeightParts parts;
  parts.rowsType = fmt::format("memref<?x{}x{}>", kernel.inFeatures, storageType(kernel.weight));
  parts.rows = kernel.partRows();
  int64_t start = 0;
  for (int64_t rows : parts.rows) {
    parts.starts.push_back(start);
    start += rows;
  }
  return parts;
}

std::string partBuffer(size_t p) { return p == 0 ? "%wb" : fmt::format("%wb{}", p); }

std::string partList(const WeightParts &parts, const std::string &prefix) {
  std::string text;
  for (size_t p = 0; p < parts.rows.size(); ++p)
    text += fmt::format("{}{}{}", p ? ", " : "", prefix, p);
  return text;
}

std::string partTypes(const WeightParts &parts, const std::string &type) {
  std::string text;
  for (size_t p = 0; p < parts.rows.size(); ++p)
    text += (p ? ", " : "") + type;
  return text;
}

std::string partRowViews(const WeightParts &parts) {
  std::string text;
  for (size_t p = 0; p < parts.rows.size(); ++p)
    text += fmt::format("  %cPartRows{0} = arith.constant {1} : index\n"
                        "  %wRows{0} = memref.view {2}[%c0][%cPartRows{0}] : memref<?xi8> to {3}\n",
                        p, parts.rows[p], partBuffer(p), parts.rowsType);
  return text;
}

std::string partAtFunction(const FusedLinearKernel &kernel, const WeightParts &parts,
                           const std::string &function, const std::string &type, int64_t unitRows,
                           int64_t localScale) {
  const size_t last = parts.rows.size() - 1;
  std::string arguments, body;
  for (size_t p = 0; p < parts.rows.size(); ++p)
    arguments += fmt::format("%w{}: {}, ", p, type);
  std::string part, local;
  for (size_t p = last + 1; p-- > 0;) {
    body += fmt::format("  %start{0} = arith.constant {1} : index\n"
                        "  %units{0} = arith.subi %i, %start{0} : index\n"
                        "  %local{0}_ = arith.muli %units{0}, %cScale : index\n",
                        p, parts.starts[p] / unitRows);
    if (p == last) {
      part = fmt::format("%w{}", p);
      local = fmt::format("%local{}_", p);
      continue;
    }
    body += fmt::format("  %end{0} = arith.constant {1} : index\n"
                        "  %in{0} = arith.cmpi ult, %i, %end{0} : index\n"
                        "  %part{0} = arith.select %in{0}, %w{0}, {2} : {4}\n"
                        "  %local{0} = arith.select %in{0}, %local{0}_, {3} : index\n",
                        p, parts.starts[p + 1] / unitRows, part, local, type);
    part = fmt::format("%part{}", p);
    local = fmt::format("%local{}", p);
  }
  return fmt::format(R"mlir(
func.func private @{name}_{function}({arguments}%i: index) -> ({type}, index) {{
  %cScale = arith.constant {scale} : index
{body}  return {part}, {local} : {type}, index
}}
)mlir",
                     fmt::arg("name", kernel.name), fmt::arg("function", function),
                     fmt::arg("arguments", arguments), fmt::arg("type", type),
                     fmt::arg("scale", localScale), fmt::arg("body", body), fmt::arg("part", part),
                     fmt::arg("local", local));
}

std::string rowAtCall(const FusedLinearKernel &kernel, const WeightParts &parts,
                      const std::string &row, const std::string &result) {
  return fmt::format(
      "{1}Part, {1}Row = func.call @{0}_row_at({2}, {3}) : ({4}, index) -> ({5}, index)\n",
      kernel.name, result, partList(parts, "%wRows"), row, partTypes(parts, parts.rowsType),
      parts.rowsType);
}

} // namespace q3::cpu::detail
