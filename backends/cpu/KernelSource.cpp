//===- KernelSource.cpp - MLIR source of the CPU kernels ------------------===//
//
// fused_linear: workgroup w computes output columns [64w, 64w + 64) for every
// row. Column-outer, row-inner order keeps a weight row in L1 while all rows
// of a prefill use it; a decode step (one row) streams each weight row once.
// The dot product runs 16 lanes wide with f32 accumulation; bf16 weights are
// widened exactly by a 16-bit shift, f16 by extf.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/KernelSource.h"

#include <fmt/format.h>

#include <functional>

namespace q3::cpu {
namespace {

constexpr int64_t kLanes = 16;

/// MLIR element type the weight buffer is viewed as.
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

/// Loads weights [n, k .. k+16) as vector<16xf32> into %wf.
std::string vectorWeightLoad(const FusedLinearKernel &kernel, const std::string &weightType) {
  switch (kernel.weight) {
  case WeightStorage::F32:
    return fmt::format("%wf = vector.load %w[%n, %k] : {}, vector<16xf32>", weightType);
  case WeightStorage::F16:
    return fmt::format("%wh = vector.load %w[%n, %k] : {}, vector<16xf16>\n"
                       "    %wf = arith.extf %wh : vector<16xf16> to vector<16xf32>",
                       weightType);
  case WeightStorage::BF16:
    return fmt::format("%wh = vector.load %w[%n, %k] : {}, vector<16xi16>\n"
                       "    %wi = arith.extui %wh : vector<16xi16> to vector<16xi32>\n"
                       "    %shift = arith.constant dense<16> : vector<16xi32>\n"
                       "    %ws = arith.shli %wi, %shift : vector<16xi32>\n"
                       "    %wf = arith.bitcast %ws : vector<16xi32> to vector<16xf32>",
                       weightType);
  }
  return "";
}

/// Loads the weight [n, k] as f32 into %wfs.
std::string scalarWeightLoad(const FusedLinearKernel &kernel, const std::string &weightType) {
  switch (kernel.weight) {
  case WeightStorage::F32:
    return fmt::format("%wfs = memref.load %w[%n, %k] : {}", weightType);
  case WeightStorage::F16:
    return fmt::format("%whs = memref.load %w[%n, %k] : {}\n"
                       "    %wfs = arith.extf %whs : f16 to f32",
                       weightType);
  case WeightStorage::BF16:
    return fmt::format("%whs = memref.load %w[%n, %k] : {}\n"
                       "    %wis = arith.extui %whs : i16 to i32\n"
                       "    %shift1 = arith.constant 16 : i32\n"
                       "    %wss = arith.shli %wis, %shift1 : i32\n"
                       "    %wfs = arith.bitcast %wss : i32 to f32",
                       weightType);
  }
  return "";
}

std::string dotFunction(const FusedLinearKernel &kernel, const std::string &xType,
                        const std::string &weightType) {
  const int64_t k = kernel.inFeatures, vectorEnd = k - k % kLanes;
  return fmt::format(R"mlir(
func.func private @{name}_dot(%x: {xType}, %w: {weightType}, %t: index, %n: index) -> f32 {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %cVectorEnd = arith.constant {vectorEnd} : index
  %cK = arith.constant {k} : index
  %zero = arith.constant dense<0.0> : vector<16xf32>
  %acc = scf.for %k = %c0 to %cVectorEnd step %c16 iter_args(%a = %zero) -> (vector<16xf32>) {{
    %xv = vector.load %x[%t, %k] : {xType}, vector<16xf32>
    {vectorLoad}
    %r = vector.fma %xv, %wf, %a : vector<16xf32>
    scf.yield %r : vector<16xf32>
  }}
  %sum = vector.reduction <add>, %acc : vector<16xf32> into f32
  %total = scf.for %k = %cVectorEnd to %cK step %c1 iter_args(%s = %sum) -> (f32) {{
    %xs = memref.load %x[%t, %k] : {xType}
    {scalarLoad}
    %r = math.fma %xs, %wfs, %s : f32
    scf.yield %r : f32
  }}
  return %total : f32
}}
)mlir",
                     fmt::arg("name", kernel.name), fmt::arg("xType", xType),
                     fmt::arg("weightType", weightType), fmt::arg("vectorEnd", vectorEnd),
                     fmt::arg("k", k), fmt::arg("vectorLoad", vectorWeightLoad(kernel, weightType)),
                     fmt::arg("scalarLoad", scalarWeightLoad(kernel, weightType)));
}

/// rsqrt(mean(x[t]^2) + eps) for one row.
std::string inverseRmsFunction(const FusedLinearKernel &kernel, const std::string &xType) {
  const int64_t k = kernel.inFeatures, vectorEnd = k - k % kLanes;
  return fmt::format(R"mlir(
func.func private @{name}_inverse_rms(%x: {xType}, %t: index) -> f32 {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %cVectorEnd = arith.constant {vectorEnd} : index
  %cK = arith.constant {k} : index
  %zero = arith.constant dense<0.0> : vector<16xf32>
  %acc = scf.for %k = %c0 to %cVectorEnd step %c16 iter_args(%a = %zero) -> (vector<16xf32>) {{
    %xv = vector.load %x[%t, %k] : {xType}, vector<16xf32>
    %r = vector.fma %xv, %xv, %a : vector<16xf32>
    scf.yield %r : vector<16xf32>
  }}
  %sum = vector.reduction <add>, %acc : vector<16xf32> into f32
  %total = scf.for %k = %cVectorEnd to %cK step %c1 iter_args(%s = %sum) -> (f32) {{
    %xs = memref.load %x[%t, %k] : {xType}
    %r = math.fma %xs, %xs, %s : f32
    scf.yield %r : f32
  }}
  %count = arith.constant {kFloat:e} : f32
  %eps = arith.constant {eps:e} : f32
  %one = arith.constant 1.0 : f32
  %mean = arith.divf %total, %count : f32
  %shifted = arith.addf %mean, %eps : f32
  %root = math.sqrt %shifted : f32
  %inverse = arith.divf %one, %root : f32
  return %inverse : f32
}}
)mlir",
                     fmt::arg("name", kernel.name), fmt::arg("xType", xType),
                     fmt::arg("vectorEnd", vectorEnd), fmt::arg("k", k),
                     fmt::arg("kFloat", double(k)), fmt::arg("eps", *kernel.normEps));
}

/// The value stored for column %n of row %t. `dotOf(column)` is the call that
/// computes the dot product of row %t with weight row `column`.
std::string epilogue(const FusedLinearKernel &kernel,
                     const std::function<std::string(const std::string &)> &dotOf,
                     const std::string &yType) {
  std::string body = fmt::format("%d = {}\n      %v0 = arith.mulf %d, %st : f32\n", dotOf("%n"));
  std::string last = "%v0";
  if (kernel.swiglu) {
    body += fmt::format("      %nUp = arith.addi %n, %cOut : index\n"
                        "      %du = {}\n"
                        "      %u = arith.mulf %du, %st : f32\n"
                        "      %neg = arith.negf %v0 : f32\n"
                        "      %e = math.exp %neg : f32\n"
                        "      %den = arith.addf %one, %e : f32\n"
                        "      %silu = arith.divf %v0, %den : f32\n"
                        "      %v1 = arith.mulf %silu, %u : f32\n",
                        dotOf("%nUp"));
    last = "%v1";
  }
  if (kernel.residual) {
    body += fmt::format("      %rv = memref.load %res[%t, %n] : {}\n"
                        "      %v2 = arith.addf {}, %rv : f32\n",
                        yType, last);
    last = "%v2";
  }
  return body + fmt::format("      memref.store {}, %y[%t, %n] : {}", last, yType);
}

} // namespace

std::string fusedLinearSource(const FusedLinearKernel &kernel) {
  const std::string xType = fmt::format("memref<?x{}xf32>", kernel.inFeatures);
  const std::string yType = fmt::format("memref<?x{}xf32>", kernel.outFeatures);
  const std::string weightType = fmt::format("memref<{}x{}x{}>", kernel.weightRows(),
                                             kernel.inFeatures, storageType(kernel.weight));
  auto dotOf = [&](const std::string &column) {
    return fmt::format("func.call @{}_dot(%x, %w, %t, {}) : ({}, {}, index, index) -> f32",
                       kernel.name, column, xType, weightType);
  };

  std::string source = dotFunction(kernel, xType, weightType);
  std::string rowScale = "arith.constant 1.0 : f32";
  if (kernel.normEps) {
    source += inverseRmsFunction(kernel, xType);
    rowScale =
        fmt::format("func.call @{}_inverse_rms(%x, %t) : ({}, index) -> f32", kernel.name, xType);
  }
  std::string residualArgument = kernel.residual ? "%rb: memref<?xi8>, " : "";
  std::string residualView =
      kernel.residual
          ? fmt::format("%res = memref.view %rb[%c0][%rows] : memref<?xi8> to {}", yType)
          : "";
  std::string body = epilogue(kernel, dotOf, yType);
  source +=
      fmt::format(R"mlir(
func.func @q3k_{name}(%xb: memref<?xi8>, %wb: memref<?xi8>, {residualArgument}%yb: memref<?xi8>, %rows: index, %wgBegin: index, %wgEnd: index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cTile = arith.constant {tile} : index
  %cOut = arith.constant {out} : index
  %one = arith.constant 1.0 : f32
  %x = memref.view %xb[%c0][%rows] : memref<?xi8> to {xType}
  %w = memref.view %wb[%c0][] : memref<?xi8> to {weightType}
  %y = memref.view %yb[%c0][%rows] : memref<?xi8> to {yType}
  {residualView}
  %scale = memref.alloca(%rows) : memref<?xf32>
  scf.for %t = %c0 to %rows step %c1 {{
    %s = {rowScale}
    memref.store %s, %scale[%t] : memref<?xf32>
  }}
  %nBegin = arith.muli %wgBegin, %cTile : index
  %nEndTile = arith.muli %wgEnd, %cTile : index
  %nEnd = arith.minui %nEndTile, %cOut : index
  scf.for %n = %nBegin to %nEnd step %c1 {{
    scf.for %t = %c0 to %rows step %c1 {{
      %st = memref.load %scale[%t] : memref<?xf32>
      {body}
    }}
  }}
  return
}}
)mlir",
                  fmt::arg("name", kernel.name), fmt::arg("residualArgument", residualArgument),
                  fmt::arg("tile", FusedLinearKernel::kColumnsPerWorkgroup),
                  fmt::arg("out", kernel.outFeatures), fmt::arg("xType", xType),
                  fmt::arg("weightType", weightType), fmt::arg("yType", yType),
                  fmt::arg("residualView", residualView), fmt::arg("rowScale", rowScale),
                  fmt::arg("body", body));
  return source;
}

} // namespace q3::cpu
