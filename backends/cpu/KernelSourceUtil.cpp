//===- KernelSourceUtil.cpp -----------------------------------------------===//
#include "backends/cpu/KernelSourceUtil.h"
#include "backends/common/KernelMathFunctions.h"

#include <fmt/format.h>

namespace q3::cpu::detail {

const char *storageType(DType storage) {
  // bf16 as i16, widened by hand: LLVM 16 cannot select vector bf16 -> f32 on x86.
  return storage == DType::BF16 ? "i16" : runtime::mlirName(storage);
}

std::string indented(const std::string &text, const std::string &prefix) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    end = end == std::string::npos ? text.size() : end + 1;
    out += prefix + text.substr(start, end - start);
    start = end;
  }
  return out;
}

/// Loads `memref[indices]` (stored as `storage`) into an f32 `result`.
std::string widenedLoad(DType storage, const std::string &result, const std::string &memref,
                        const std::string &indices, const std::string &type) {
  switch (storage) {
  case DType::F32:
    return fmt::format("{} = memref.load {}[{}] : {}", result, memref, indices, type);
  case DType::F16:
    return fmt::format("{0}_h = memref.load {1}[{2}] : {3}\n"
                       "      {0} = arith.extf {0}_h : f16 to f32",
                       result, memref, indices, type);
  case DType::BF16:
    return fmt::format("{0}_h = memref.load {1}[{2}] : {3}\n"
                       "      {0}_i = arith.extui {0}_h : i16 to i32\n"
                       "      {0}_c = arith.constant 16 : i32\n"
                       "      {0}_s = arith.shli {0}_i, {0}_c : i32\n"
                       "      {0} = arith.bitcast {0}_s : i32 to f32",
                       result, memref, indices, type);
  }
  return "";
}

std::string vectorWidenedLoad(DType storage, const std::string &result, const std::string &memref,
                              const std::string &indices, const std::string &type) {
  const std::string at = memref + "[" + indices + "]";
  switch (storage) {
  case DType::F32:
    return fmt::format("{} = vector.load {} : {}, vector<16xf32>", result, at, type);
  case DType::F16:
    return fmt::format("{0}_h = vector.load {1} : {2}, vector<16xf16>\n"
                       "    {0} = arith.extf {0}_h : vector<16xf16> to vector<16xf32>",
                       result, at, type);
  case DType::BF16:
    return fmt::format("{0}_h = vector.load {1} : {2}, vector<16xi16>\n"
                       "    {0}_i = arith.extui {0}_h : vector<16xi16> to vector<16xi32>\n"
                       "    {0}_c = arith.constant dense<16> : vector<16xi32>\n"
                       "    {0}_s = arith.shli {0}_i, {0}_c : vector<16xi32>\n"
                       "    {0} = arith.bitcast {0}_s : vector<16xi32> to vector<16xf32>",
                       result, at, type);
  }
  return "";
}

std::string typeList(const std::string &type, int64_t count) {
  std::string text;
  for (int64_t i = 0; i < count; ++i)
    text += (i ? ", " : "") + type;
  return text;
}

std::string bf16RoundingFunction(const std::string &name, bool vector) {
  return kernels::bf16RoundingFunctionText(name, vector ? kLanes : 1);
}

std::string vdpbf16ps(const std::string &result, const std::string &a, const std::string &b,
                      const std::string &acc) {
  return fmt::format("{} = llvm.inline_asm asm_dialect = att \"vdpbf16ps $2, $1, $0\", "
                     "\"=v,v,v,0\" {}, {}, {} : (vector<16xi32>, vector<16xi32>, "
                     "vector<16xf32>) -> vector<16xf32>",
                     result, a, b, acc);
}

std::string vectorWeightLoad(const FusedLinearKernel &kernel, const std::string &weightType,
                             const std::string &suffix, const std::string &column,
                             const std::string &row) {
  return vectorWidenedLoad(kernel.weight, "%wf" + suffix, "%w", row + ", " + column, weightType);
}

std::string scalarWeightLoad(const FusedLinearKernel &kernel, const std::string &weightType,
                             const std::string &suffix, const std::string &row) {
  return widenedLoad(kernel.weight, "%wfs" + suffix, "%w", row + ", %k", weightType);
}

} // namespace q3::cpu::detail
