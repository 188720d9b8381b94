//===- KernelSourceUtil.cpp -----------------------------------------------===//
#include "backends/cpu/KernelSourceUtil.h"

#include <fmt/format.h>

namespace q3::cpu::detail {

const char *storageType(WeightStorage storage) {
  switch (storage) {
  case WeightStorage::F32:
    return "f32";
  case WeightStorage::F16:
    return "f16";
  case WeightStorage::BF16:
    return "i16"; // widened by hand: LLVM 16 cannot select vector bf16 -> f32 on x86
  }
  return "f32";
}

/// Loads `memref[indices]` (stored as `storage`) into an f32 `result`.
std::string widenedLoad(WeightStorage storage, const std::string &result, const std::string &memref,
                        const std::string &indices, const std::string &type) {
  switch (storage) {
  case WeightStorage::F32:
    return fmt::format("{} = memref.load {}[{}] : {}", result, memref, indices, type);
  case WeightStorage::F16:
    return fmt::format("{0}_h = memref.load {1}[{2}] : {3}\n"
                       "      {0} = arith.extf {0}_h : f16 to f32",
                       result, memref, indices, type);
  case WeightStorage::BF16:
    return fmt::format("{0}_h = memref.load {1}[{2}] : {3}\n"
                       "      {0}_i = arith.extui {0}_h : i16 to i32\n"
                       "      {0}_c = arith.constant 16 : i32\n"
                       "      {0}_s = arith.shli {0}_i, {0}_c : i32\n"
                       "      {0} = arith.bitcast {0}_s : i32 to f32",
                       result, memref, indices, type);
  }
  return "";
}

std::string vectorWidenedLoad(WeightStorage storage, const std::string &result,
                              const std::string &memref, const std::string &indices,
                              const std::string &type) {
  const std::string at = memref + "[" + indices + "]";
  switch (storage) {
  case WeightStorage::F32:
    return fmt::format("{} = vector.load {} : {}, vector<16xf32>", result, at, type);
  case WeightStorage::F16:
    return fmt::format("{0}_h = vector.load {1} : {2}, vector<16xf16>\n"
                       "    {0} = arith.extf {0}_h : vector<16xf16> to vector<16xf32>",
                       result, at, type);
  case WeightStorage::BF16:
    return fmt::format("{0}_h = vector.load {1} : {2}, vector<16xi16>\n"
                       "    {0}_i = arith.extui {0}_h : vector<16xi16> to vector<16xi32>\n"
                       "    {0}_c = arith.constant dense<16> : vector<16xi32>\n"
                       "    {0}_s = arith.shli {0}_i, {0}_c : vector<16xi32>\n"
                       "    {0} = arith.bitcast {0}_s : vector<16xi32> to vector<16xf32>",
                       result, at, type);
  }
  return "";
}

std::string bf16RoundingFunction(const std::string &name, bool vector) {
  const std::string f32 = vector ? "vector<16xf32>" : "f32",
                    i32 = vector ? "vector<16xi32>" : "i32",
                    i16 = vector ? "vector<16xi16>" : "i16", i1 = vector ? "vector<16xi1>" : "i1";
  auto constant = [&](int value) {
    return vector ? fmt::format("dense<{}> : {}", value, i32) : fmt::format("{} : i32", value);
  };
  return fmt::format(R"mlir(
func.func private @{name}(%v: {f32}) -> {i16} {{
  %bits16 = arith.constant {c16}
  %roundBias = arith.constant {bias}
  %oneBit = arith.constant {one}
  %quiet = arith.constant {quiet}
  %bits = arith.bitcast %v : {f32} to {i32}
  %high = arith.shrui %bits, %bits16 : {i32}
  %odd = arith.andi %high, %oneBit : {i32}
  %addend = arith.addi %roundBias, %odd : {i32}
  %sum = arith.addi %bits, %addend : {i32}
  %rounded = arith.shrui %sum, %bits16 : {i32}
  %quietNaN = arith.ori %high, %quiet : {i32}
  %isNaN = arith.cmpf uno, %v, %v : {f32}
  %chosen = arith.select %isNaN, %quietNaN, %rounded : {i1}, {i32}
  %halves = arith.trunci %chosen : {i32} to {i16}
  return %halves : {i16}
}}
)mlir",
                     fmt::arg("name", name), fmt::arg("f32", f32), fmt::arg("i32", i32),
                     fmt::arg("i16", i16), fmt::arg("i1", i1), fmt::arg("c16", constant(16)),
                     fmt::arg("bias", constant(32767)), fmt::arg("one", constant(1)),
                     fmt::arg("quiet", constant(64)));
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
