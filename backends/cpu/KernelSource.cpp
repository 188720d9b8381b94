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
#include <fmt/ranges.h>

#include <cctype>
#include <cstring>
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

/// Loads weights [%n, <column> .. +16) as vector<16xf32> into %wf<suffix>.
std::string vectorWeightLoad(const FusedLinearKernel &kernel, const std::string &weightType,
                             const std::string &suffix = "", const std::string &column = "%k") {
  const std::string at = "%w[%n, " + column + "]";
  switch (kernel.weight) {
  case WeightStorage::F32:
    return fmt::format("%wf{0} = vector.load {1} : {2}, vector<16xf32>", suffix, at, weightType);
  case WeightStorage::F16:
    return fmt::format("%wh{0} = vector.load {1} : {2}, vector<16xf16>\n"
                       "    %wf{0} = arith.extf %wh{0} : vector<16xf16> to vector<16xf32>",
                       suffix, at, weightType);
  case WeightStorage::BF16:
    return fmt::format("%wh{0} = vector.load {1} : {2}, vector<16xi16>\n"
                       "    %wi{0} = arith.extui %wh{0} : vector<16xi16> to vector<16xi32>\n"
                       "    %shift{0} = arith.constant dense<16> : vector<16xi32>\n"
                       "    %ws{0} = arith.shli %wi{0}, %shift{0} : vector<16xi32>\n"
                       "    %wf{0} = arith.bitcast %ws{0} : vector<16xi32> to vector<16xf32>",
                       suffix, at, weightType);
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

/// The dot product of row %t of x with weight row %n: four independent
/// 16-lane accumulators over 64-wide steps (so FMA latency does not bound a
/// decode step), then 16-wide steps, then a scalar tail.
std::string dotFunction(const FusedLinearKernel &kernel, const std::string &xType,
                        const std::string &weightType) {
  const int64_t k = kernel.inFeatures, wideEnd = k - k % (4 * kLanes), vectorEnd = k - k % kLanes;
  std::string wideBody;
  for (int lane = 0; lane < 4; ++lane) {
    const std::string l = std::to_string(lane);
    wideBody +=
        fmt::format(R"mlir(
    %k{l} = arith.addi %k, %c{offset} : index
    %xv{l} = vector.load %x[%t, %k{l}] : {xType}, vector<16xf32>
    {load}
    %r{l} = vector.fma %xv{l}, %wf{l}, %a{l} : vector<16xf32>)mlir",
                    fmt::arg("l", l), fmt::arg("offset", lane * kLanes), fmt::arg("xType", xType),
                    fmt::arg("load", vectorWeightLoad(kernel, weightType, l, "%k" + l)));
  }
  return fmt::format(
      R"mlir(
func.func private @{name}_dot(%x: {xType}, %w: {weightType}, %t: index, %n: index) -> f32 {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %c48 = arith.constant 48 : index
  %c64 = arith.constant 64 : index
  %cWideEnd = arith.constant {wideEnd} : index
  %cVectorEnd = arith.constant {vectorEnd} : index
  %cK = arith.constant {k} : index
  %zero = arith.constant dense<0.0> : vector<16xf32>
  %wide:4 = scf.for %k = %c0 to %cWideEnd step %c64 iter_args(%a0 = %zero, %a1 = %zero, %a2 = %zero, %a3 = %zero) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {{{wideBody}
    scf.yield %r0, %r1, %r2, %r3 : vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>
  }}
  %s01 = arith.addf %wide#0, %wide#1 : vector<16xf32>
  %s23 = arith.addf %wide#2, %wide#3 : vector<16xf32>
  %s0123 = arith.addf %s01, %s23 : vector<16xf32>
  %acc = scf.for %k = %cWideEnd to %cVectorEnd step %c16 iter_args(%a = %s0123) -> (vector<16xf32>) {{
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
      fmt::arg("name", kernel.name), fmt::arg("xType", xType), fmt::arg("weightType", weightType),
      fmt::arg("wideEnd", wideEnd), fmt::arg("vectorEnd", vectorEnd), fmt::arg("k", k),
      fmt::arg("wideBody", wideBody), fmt::arg("vectorLoad", vectorWeightLoad(kernel, weightType)),
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

/// Stores column %n of row %t from its dot product(s): the norm scale, SwiGLU
/// (with the up half's dot product %du), the residual.
std::string finishFunction(const FusedLinearKernel &kernel, const std::string &yType) {
  std::string body = "  %v0 = arith.mulf %d, %st : f32\n";
  std::string last = "%v0";
  if (kernel.swiglu) {
    body += "  %one = arith.constant 1.0 : f32\n"
            "  %u = arith.mulf %du, %st : f32\n"
            "  %neg = arith.negf %v0 : f32\n"
            "  %e = math.exp %neg : f32\n"
            "  %den = arith.addf %one, %e : f32\n"
            "  %silu = arith.divf %v0, %den : f32\n"
            "  %v1 = arith.mulf %silu, %u : f32\n";
    last = "%v1";
  }
  if (kernel.residual) {
    body += fmt::format("  %rv = memref.load %res[%t, %n] : {}\n"
                        "  %v2 = arith.addf {}, %rv : f32\n",
                        yType, last);
    last = "%v2";
  }
  return fmt::format(R"mlir(
func.func private @{name}_finish(%d: f32, %du: f32, %st: f32, %t: index, %n: index, %y: {yType}, %res: {yType}) {{
{body}  memref.store {last}, %y[%t, %n] : {yType}
  return
}}
)mlir",
                     fmt::arg("name", kernel.name), fmt::arg("yType", yType),
                     fmt::arg("body", body), fmt::arg("last", last));
}

/// Dot products of rows %t .. %t+3 of x with weight row %n: one weight load
/// (and widening) serves four rows, the register tile of a prefill.
std::string dot4Function(const FusedLinearKernel &kernel, const std::string &xType,
                         const std::string &weightType) {
  const int64_t k = kernel.inFeatures, vectorEnd = k - k % kLanes;
  std::string vectorBody, reductions, tail, results;
  for (int r = 0; r < 4; ++r) {
    vectorBody += fmt::format("    %xv{0} = vector.load %x[%t{0}, %k] : {1}, vector<16xf32>\n"
                              "    %r{0} = vector.fma %xv{0}, %wf, %a{0} : vector<16xf32>\n",
                              r, xType);
    reductions +=
        fmt::format("  %sum{0} = vector.reduction <add>, %acc#{0} : vector<16xf32> into f32\n", r);
    tail += fmt::format("    %xs{0} = memref.load %x[%t{0}, %k] : {1}\n"
                        "    %q{0} = math.fma %xs{0}, %wfs, %s{0} : f32\n",
                        r, xType);
  }
  return fmt::format(R"mlir(
func.func private @{name}_dot4(%x: {xType}, %w: {weightType}, %t0: index, %n: index) -> (f32, f32, f32, f32) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c16 = arith.constant 16 : index
  %cVectorEnd = arith.constant {vectorEnd} : index
  %cK = arith.constant {k} : index
  %t1 = arith.addi %t0, %c1 : index
  %t2 = arith.addi %t0, %c2 : index
  %t3 = arith.addi %t0, %c3 : index
  %zero = arith.constant dense<0.0> : vector<16xf32>
  %acc:4 = scf.for %k = %c0 to %cVectorEnd step %c16 iter_args(%a0 = %zero, %a1 = %zero, %a2 = %zero, %a3 = %zero) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {{
    {vectorLoad}
{vectorBody}    scf.yield %r0, %r1, %r2, %r3 : vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>
  }}
{reductions}  %total:4 = scf.for %k = %cVectorEnd to %cK step %c1 iter_args(%s0 = %sum0, %s1 = %sum1, %s2 = %sum2, %s3 = %sum3) -> (f32, f32, f32, f32) {{
    {scalarLoad}
{tail}    scf.yield %q0, %q1, %q2, %q3 : f32, f32, f32, f32
  }}
  return %total#0, %total#1, %total#2, %total#3 : f32, f32, f32, f32
}}
)mlir",
                     fmt::arg("name", kernel.name), fmt::arg("xType", xType),
                     fmt::arg("weightType", weightType), fmt::arg("vectorEnd", vectorEnd),
                     fmt::arg("k", k), fmt::arg("vectorLoad", vectorWeightLoad(kernel, weightType)),
                     fmt::arg("scalarLoad", scalarWeightLoad(kernel, weightType)),
                     fmt::arg("vectorBody", vectorBody), fmt::arg("reductions", reductions),
                     fmt::arg("tail", tail));
}

/// The 4 x 4 register tile of a prefill: rows %t .. %t+3 of x against weight
/// rows %n .. %n+3, sixteen accumulators; every load serves four products.
std::string dot4x4Function(const FusedLinearKernel &kernel, const std::string &xType,
                           const std::string &weightType) {
  const int64_t k = kernel.inFeatures, vectorEnd = k - k % kLanes;
  std::string loads, fmas, iterArgs, yields, types, reductions, tailLoads, tailFmas, tailArgs,
      tailYields, tailTypes, results;
  for (int i = 0; i < 4; ++i) {
    loads +=
        fmt::format("    %xv{0} = vector.load %x[%t{0}, %k] : {1}, vector<16xf32>\n", i, xType);
    loads += "    " + vectorWeightLoad(kernel, weightType, std::to_string(i), "%k") + "\n";
    // vectorWeightLoad reads row %n; column j reads row %n<j>.
    const std::string row = "%w[%n, %k]", rowJ = "%w[%n" + std::to_string(i) + ", %k]";
    loads.replace(loads.rfind(row), row.size(), rowJ);
    tailLoads += fmt::format("    %xs{0} = memref.load %x[%t{0}, %k] : {1}\n", i, xType);
    std::string scalar = scalarWeightLoad(kernel, weightType);
    for (const char *name : {"%wfs", "%whs", "%wis", "%wss", "%shift1"}) {
      const std::string renamed = std::string(name) + std::to_string(i);
      for (size_t at = 0; (at = scalar.find(name, at)) != std::string::npos; at += renamed.size()) {
        const size_t end = at + std::strlen(name);
        if (end < scalar.size() && std::isalnum(static_cast<unsigned char>(scalar[end])))
          continue;
        scalar.replace(at, std::strlen(name), renamed);
      }
    }
    const std::string scalarRow = "%w[%n, %k]";
    scalar.replace(scalar.find(scalarRow), scalarRow.size(), "%w[%n" + std::to_string(i) + ", %k]");
    tailLoads += "    " + scalar + "\n";
  }
  for (int t = 0; t < 4; ++t)
    for (int n = 0; n < 4; ++n) {
      const std::string id = std::to_string(t) + std::to_string(n);
      fmas +=
          fmt::format("    %r{0} = vector.fma %xv{1}, %wf{2}, %a{0} : vector<16xf32>\n", id, t, n);
      iterArgs += fmt::format("{}%a{} = %zero", iterArgs.empty() ? "" : ", ", id);
      yields += fmt::format("{}%r{}", yields.empty() ? "" : ", ", id);
      types += fmt::format("{}vector<16xf32>", types.empty() ? "" : ", ");
      reductions +=
          fmt::format("  %sum{0} = vector.reduction <add>, %acc#{1} : vector<16xf32> into f32\n",
                      id, t * 4 + n);
      tailFmas += fmt::format("    %q{0} = math.fma %xs{1}, %wfs{2}, %s{0} : f32\n", id, t, n);
      tailArgs += fmt::format("{}%s{} = %sum{}", tailArgs.empty() ? "" : ", ", id, id);
      tailYields += fmt::format("{}%q{}", tailYields.empty() ? "" : ", ", id);
      tailTypes += fmt::format("{}f32", tailTypes.empty() ? "" : ", ");
      results += fmt::format("{}%total#{}", results.empty() ? "" : ", ", t * 4 + n);
    }
  return fmt::format(R"mlir(
func.func private @{name}_dot4x4(%x: {xType}, %w: {weightType}, %t0: index, %n0: index) -> ({tailTypes}) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c16 = arith.constant 16 : index
  %cVectorEnd = arith.constant {vectorEnd} : index
  %cK = arith.constant {k} : index
  %t1 = arith.addi %t0, %c1 : index
  %t2 = arith.addi %t0, %c2 : index
  %t3 = arith.addi %t0, %c3 : index
  %n1 = arith.addi %n0, %c1 : index
  %n2 = arith.addi %n0, %c2 : index
  %n3 = arith.addi %n0, %c3 : index
  %zero = arith.constant dense<0.0> : vector<16xf32>
  %acc:16 = scf.for %k = %c0 to %cVectorEnd step %c16 iter_args({iterArgs}) -> ({types}) {{
{loads}{fmas}    scf.yield {yields} : {types}
  }}
{reductions}  %total:16 = scf.for %k = %cVectorEnd to %cK step %c1 iter_args({tailArgs}) -> ({tailTypes}) {{
{tailLoads}{tailFmas}    scf.yield {tailYields} : {tailTypes}
  }}
  return {results} : {tailTypes}
}}
)mlir",
                     fmt::arg("name", kernel.name), fmt::arg("xType", xType),
                     fmt::arg("weightType", weightType), fmt::arg("vectorEnd", vectorEnd),
                     fmt::arg("k", k), fmt::arg("iterArgs", iterArgs), fmt::arg("types", types),
                     fmt::arg("loads", loads), fmt::arg("fmas", fmas), fmt::arg("yields", yields),
                     fmt::arg("reductions", reductions), fmt::arg("tailArgs", tailArgs),
                     fmt::arg("tailTypes", tailTypes), fmt::arg("tailLoads", tailLoads),
                     fmt::arg("tailFmas", tailFmas), fmt::arg("tailYields", tailYields),
                     fmt::arg("results", results));
}

/// With a prologue gain the dot products read %xg = x * gain, computed once
/// per call on the heap (prefill rows can be many); without, they read %x.
struct GainPrologue {
  std::string prologue, epilogue, dotInput = "%x";
};

GainPrologue gainPrologue(const FusedLinearKernel &kernel, const std::string &xType) {
  GainPrologue gain;
  if (!kernel.prologueGain)
    return gain;
  const std::string gainType =
      fmt::format("memref<{}x{}>", kernel.inFeatures, storageType(*kernel.prologueGain));
  gain.prologue = fmt::format(
      R"mlir(%gain = memref.view %gb[%c0][] : memref<?xi8> to {gainType}
  %cK = arith.constant {k} : index
  %xg = memref.alloc(%rows) : {xType}
  scf.for %t = %c0 to %rows step %c1 {{
    scf.for %k = %c0 to %cK step %c1 {{
      %xv = memref.load %x[%t, %k] : {xType}
      {gainLoad}
      %scaled = arith.mulf %xv, %gv : f32
      memref.store %scaled, %xg[%t, %k] : {xType}
    }}
  }})mlir",
      fmt::arg("gainType", gainType), fmt::arg("k", kernel.inFeatures), fmt::arg("xType", xType),
      fmt::arg("gainLoad", widenedLoad(*kernel.prologueGain, "%gv", "%gain", "%k", gainType)));
  gain.epilogue = fmt::format("memref.dealloc %xg : {}", xType);
  gain.dotInput = "%xg";
  return gain;
}

} // namespace

std::string fusedLinearSource(const FusedLinearKernel &kernel) {
  const std::string xType = fmt::format("memref<?x{}xf32>", kernel.inFeatures);
  const std::string yType = fmt::format("memref<?x{}xf32>", kernel.outFeatures);
  const std::string weightType = fmt::format("memref<{}x{}x{}>", kernel.weightRows(),
                                             kernel.inFeatures, storageType(kernel.weight));
  std::string source = dotFunction(kernel, xType, weightType);
  std::string rowScale = "arith.constant 1.0 : f32";
  if (kernel.normEps) {
    source += inverseRmsFunction(kernel, xType);
    rowScale =
        fmt::format("func.call @{}_inverse_rms(%x, %t) : ({}, index) -> f32", kernel.name, xType);
  }
  std::string residualArgument = kernel.residual ? "%rb: memref<?xi8>, " : "";
  std::string gainArgument = kernel.prologueGain ? "%gb: memref<?xi8>, " : "";
  GainPrologue gain = gainPrologue(kernel, xType);
  auto dotOf = [&](const std::string &column) {
    return fmt::format("func.call @{}_dot({}, %w, %t, {}) : ({}, {}, index, index) -> f32",
                       kernel.name, gain.dotInput, column, xType, weightType);
  };
  std::string residualView =
      kernel.residual
          ? fmt::format("%res = memref.view %rb[%c0][%rows] : memref<?xi8> to {}", yType)
          : "";
  source += finishFunction(kernel, yType) + dot4Function(kernel, xType, weightType) +
            dot4x4Function(kernel, xType, weightType);
  // Without a residual the finish function still takes a buffer for it: %y.
  const std::string residualOperand = kernel.residual ? "%res" : "%y";
  auto finishCall = [&](const std::string &d, const std::string &du, const std::string &st,
                        const std::string &t) {
    return fmt::format("func.call @{}_finish({}, {}, {}, {}, %n, %y, {}) : (f32, f32, f32, index, "
                       "index, {}, {}) -> ()",
                       kernel.name, d, du, st, t, residualOperand, yType, yType);
  };
  auto dot4Of = [&](const std::string &column) {
    return fmt::format("func.call @{}_dot4({}, %w, %t, {}) : ({}, {}, index, index) -> (f32, f32, "
                       "f32, f32)",
                       kernel.name, gain.dotInput, column, xType, weightType);
  };
  // Rows in tiles of four, then the rest one by one (all of a decode step).
  std::string tiled = fmt::format("%d4:4 = {}\n", dot4Of("%n"));
  std::string up4 = "%d4";
  if (kernel.swiglu) {
    tiled += fmt::format("      %nUp4 = arith.addi %n, %cOut : index\n"
                         "      %u4:4 = {}\n",
                         dot4Of("%nUp4"));
    up4 = "%u4";
  }
  for (int r = 0; r < 4; ++r)
    tiled += fmt::format("      %tr{0} = arith.addi %t, %c{0} : index\n"
                         "      %str{0} = memref.load %scale[%tr{0}] : memref<?xf32>\n"
                         "      {1}\n",
                         r,
                         finishCall("%d4#" + std::to_string(r), up4 + "#" + std::to_string(r),
                                    "%str" + std::to_string(r), "%tr" + std::to_string(r)));
  // Columns in fours too: the 4 x 4 tile.
  auto dot4x4Of = [&](const std::string &column) {
    std::string types = "f32";
    for (int i = 1; i < 16; ++i)
      types += ", f32";
    return fmt::format("func.call @{}_dot4x4({}, %w, %t, {}) : ({}, {}, index, index) -> ({})",
                       kernel.name, gain.dotInput, column, xType, weightType, types);
  };
  std::string square = fmt::format("%d16:16 = {}\n", dot4x4Of("%n"));
  std::string up16 = "%d16";
  if (kernel.swiglu) {
    square += fmt::format("        %nUp16 = arith.addi %n, %cOut : index\n"
                          "        %u16:16 = {}\n",
                          dot4x4Of("%nUp16"));
    up16 = "%u16";
  }
  for (int t = 0; t < 4; ++t) {
    square += fmt::format("        %sq_t{0} = arith.addi %t, %c{0} : index\n"
                          "        %sq_st{0} = memref.load %scale[%sq_t{0}] : memref<?xf32>\n",
                          t);
    for (int c = 0; c < 4; ++c) {
      const std::string idx = std::to_string(t * 4 + c),
                        col = "%sq_n" + std::to_string(t) + std::to_string(c);
      std::string call = finishCall("%d16#" + idx, up16 + "#" + idx, "%sq_st" + std::to_string(t),
                                    "%sq_t" + std::to_string(t));
      call.replace(call.find(", %n,"), 5, ", " + col + ",");
      square += fmt::format("        {} = arith.addi %n, %c{} : index\n        {}\n", col, c, call);
    }
  }
  std::string single = fmt::format("%d = {}\n", dotOf("%n"));
  std::string up = "%d";
  if (kernel.swiglu) {
    single += fmt::format("      %nUp = arith.addi %n, %cOut : index\n"
                          "      %du = {}\n",
                          dotOf("%nUp"));
    up = "%du";
  }
  single += "      " + finishCall("%d", up, "%st", "%t");
  source +=
      fmt::format(R"mlir(
func.func @q3k_{name}(%xb: memref<?xi8>, %wb: memref<?xi8>, {gainArgument}{residualArgument}%yb: memref<?xi8>, %rows: index, %visible: index, %capacity: index, %wgBegin: index, %wgEnd: index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cTile = arith.constant {tile} : index
  %cOut = arith.constant {out} : index
  %one = arith.constant 1.0 : f32
  %x = memref.view %xb[%c0][%rows] : memref<?xi8> to {xType}
  %w = memref.view %wb[%c0][] : memref<?xi8> to {weightType}
  %y = memref.view %yb[%c0][%rows] : memref<?xi8> to {yType}
  {residualView}
  {gainPrologue}
  %scale = memref.alloca(%rows) : memref<?xf32>
  scf.for %t = %c0 to %rows step %c1 {{
    %s = {rowScale}
    memref.store %s, %scale[%t] : memref<?xf32>
  }}
  %nBegin = arith.muli %wgBegin, %cTile : index
  %nEndTile = arith.muli %wgEnd, %cTile : index
  %nEnd = arith.minui %nEndTile, %cOut : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %quads = arith.divui %rows, %c4 : index
  %tiledRows = arith.muli %quads, %c4 : index
  %columns = arith.subi %nEnd, %nBegin : index
  %columnQuads = arith.divui %columns, %c4 : index
  %columnsTiled = arith.muli %columnQuads, %c4 : index
  %nSquareEnd = arith.addi %nBegin, %columnsTiled : index
  scf.for %n = %nBegin to %nSquareEnd step %c4 {{
    scf.for %t = %c0 to %tiledRows step %c4 {{
        {square}
    }}
  }}
  scf.for %n = %nBegin to %nEnd step %c1 {{
    %inSquare = arith.cmpi ult, %n, %nSquareEnd : index
    %firstRow = arith.select %inSquare, %tiledRows, %c0 : index
    scf.for %t = %firstRow to %tiledRows step %c4 {{
      {tiled}
    }}
    scf.for %t = %tiledRows to %rows step %c1 {{
      %st = memref.load %scale[%t] : memref<?xf32>
      {single}
    }}
  }}
  {gainEpilogue}
  return
}}
)mlir",
                  fmt::arg("name", kernel.name), fmt::arg("residualArgument", residualArgument),
                  fmt::arg("tile", FusedLinearKernel::kColumnsPerWorkgroup),
                  fmt::arg("out", kernel.outFeatures), fmt::arg("xType", xType),
                  fmt::arg("weightType", weightType), fmt::arg("yType", yType),
                  fmt::arg("residualView", residualView), fmt::arg("rowScale", rowScale),
                  fmt::arg("gainArgument", gainArgument), fmt::arg("gainPrologue", gain.prologue),
                  fmt::arg("gainEpilogue", gain.epilogue), fmt::arg("tiled", tiled),
                  fmt::arg("square", square), fmt::arg("single", single));
  return source;
}

std::string embeddingSource(const EmbeddingKernel &kernel) {
  const std::string tableType =
      fmt::format("memref<{}x{}x{}>", kernel.vocab, kernel.hidden, storageType(kernel.table));
  const std::string yType = fmt::format("memref<?x{}xf32>", kernel.hidden);
  return fmt::format(
      R"mlir(
func.func @q3k_{name}(%eb: memref<?xi8>, %tb: memref<?xi8>, %yb: memref<?xi8>, %rows: index, %visible: index, %capacity: index, %wgBegin: index, %wgEnd: index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cHidden = arith.constant {hidden} : index
  %tokens = memref.view %tb[%c0][%rows] : memref<?xi8> to memref<?xi32>
  %table = memref.view %eb[%c0][] : memref<?xi8> to {tableType}
  %y = memref.view %yb[%c0][%rows] : memref<?xi8> to {yType}
  scf.for %t = %wgBegin to %wgEnd step %c1 {{
    %id32 = memref.load %tokens[%t] : memref<?xi32>
    %id = arith.index_cast %id32 : i32 to index
    scf.for %k = %c0 to %cHidden step %c1 {{
      {load}
      memref.store %v, %y[%t, %k] : {yType}
    }}
  }}
  return
}}
)mlir",
      fmt::arg("name", kernel.name), fmt::arg("hidden", kernel.hidden),
      fmt::arg("tableType", tableType), fmt::arg("yType", yType),
      fmt::arg("load", widenedLoad(kernel.table, "%v", "%table", "%id, %k", tableType)));
}

std::string qkNormRopeCacheSource(const QKNormRopeCacheKernel &kernel) {
  const int64_t d = kernel.headDim, width = (kernel.queryHeads + 2 * kernel.kvHeads) * d;
  const std::string qkvType = fmt::format("memref<?x{}xf32>", width);
  const std::string gainType = fmt::format("memref<{}x{}>", d, storageType(kernel.gains));
  const std::string queryType = fmt::format("memref<?x{}x{}xf32>", kernel.queryHeads, d);
  const std::string cacheType = fmt::format("memref<?x{}x{}xf32>", kernel.kvHeads, d);
  const std::string scratchType = fmt::format("memref<{}xf32>", d);
  return fmt::format(
      R"mlir(
// One head vector qkv[t, offset .. offset + D): RMSNorm with `gain`, then
// rotate-half RoPE at `pos` (angles in f64, as the reference), into %out.
func.func private @{name}_head(%qkv: {qkvType}, %t: index, %offset: index, %gain: {gainType}, %pos: index, %out: {scratchType}) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cD = arith.constant {d} : index
  %cHalf = arith.constant {half} : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %count = arith.constant {dFloat:e} : f32
  %eps = arith.constant {eps:e} : f32
  %theta = arith.constant {theta:e} : f64
  %exponentStep = arith.constant {exponentStep:e} : f64
  %squares = scf.for %i = %c0 to %cD step %c1 iter_args(%a = %zero) -> (f32) {{
    %at = arith.addi %offset, %i : index
    %v = memref.load %qkv[%t, %at] : {qkvType}
    %r = math.fma %v, %v, %a : f32
    scf.yield %r : f32
  }}
  %mean = arith.divf %squares, %count : f32
  %shifted = arith.addf %mean, %eps : f32
  %root = math.sqrt %shifted : f32
  %inverse = arith.divf %one, %root : f32
  scf.for %i = %c0 to %cD step %c1 {{
    %at = arith.addi %offset, %i : index
    %v = memref.load %qkv[%t, %at] : {qkvType}
    %n = arith.mulf %v, %inverse : f32
      {gainLoad}
    %scaled = arith.mulf %n, %g : f32
    memref.store %scaled, %out[%i] : {scratchType}
  }}
  %pos64 = arith.index_cast %pos : index to i64
  %posF = arith.sitofp %pos64 : i64 to f64
  scf.for %i = %c0 to %cHalf step %c1 {{
    %i64 = arith.index_cast %i : index to i64
    %iF = arith.sitofp %i64 : i64 to f64
    %exponent = arith.mulf %iF, %exponentStep : f64
    %frequency = math.powf %theta, %exponent : f64
    %angle = arith.mulf %posF, %frequency : f64
    %cos = math.cos %angle : f64
    %sin = math.sin %angle : f64
    %j = arith.addi %i, %cHalf : index
    %a32 = memref.load %out[%i] : {scratchType}
    %b32 = memref.load %out[%j] : {scratchType}
    %a = arith.extf %a32 : f32 to f64
    %b = arith.extf %b32 : f32 to f64
    %ac = arith.mulf %a, %cos : f64
    %bs = arith.mulf %b, %sin : f64
    %bc = arith.mulf %b, %cos : f64
    %as = arith.mulf %a, %sin : f64
    %ra = arith.subf %ac, %bs : f64
    %rb = arith.addf %bc, %as : f64
    %ra32 = arith.truncf %ra : f64 to f32
    %rb32 = arith.truncf %rb : f64 to f32
    memref.store %ra32, %out[%i] : {scratchType}
    memref.store %rb32, %out[%j] : {scratchType}
  }}
  return
}}

func.func @q3k_{name}(%qkvb: memref<?xi8>, %qgb: memref<?xi8>, %kgb: memref<?xi8>, %kcb: memref<?xi8>, %vcb: memref<?xi8>, %qb: memref<?xi8>, %rows: index, %visible: index, %capacity: index, %layer: index, %startPos: index, %wgBegin: index, %wgEnd: index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cD = arith.constant {d} : index
  %cQueryHeads = arith.constant {queryHeads} : index
  %cKVHeads = arith.constant {kvHeads} : index
  %cRowBytes = arith.constant {cacheRowBytes} : index
  %qkv = memref.view %qkvb[%c0][%rows] : memref<?xi8> to {qkvType}
  %qGain = memref.view %qgb[%c0][] : memref<?xi8> to {gainType}
  %kGain = memref.view %kgb[%c0][] : memref<?xi8> to {gainType}
  %query = memref.view %qb[%c0][%rows] : memref<?xi8> to {queryType}
  %cacheBytes = memref.dim %kcb, %c0 : memref<?xi8>
  %cacheRows = arith.divui %cacheBytes, %cRowBytes : index
  %kCache = memref.view %kcb[%c0][%cacheRows] : memref<?xi8> to {cacheType}
  %vCache = memref.view %vcb[%c0][%cacheRows] : memref<?xi8> to {cacheType}
  %scratch = memref.alloca() : {scratchType}
  %layerBase = arith.muli %layer, %capacity : index
  scf.for %g = %wgBegin to %wgEnd step %c1 {{
    %t = arith.divui %g, %cQueryHeads : index
    %h = arith.remui %g, %cQueryHeads : index
    %pos = arith.addi %startPos, %t : index
    %qOffset = arith.muli %h, %cD : index
    func.call @{name}_head(%qkv, %t, %qOffset, %qGain, %pos, %scratch) : ({qkvType}, index, index, {gainType}, index, {scratchType}) -> ()
    scf.for %i = %c0 to %cD step %c1 {{
      %v = memref.load %scratch[%i] : {scratchType}
      memref.store %v, %query[%t, %h, %i] : {queryType}
    }}
    %isKV = arith.cmpi ult, %h, %cKVHeads : index
    scf.if %isKV {{
      %kHead = arith.addi %cQueryHeads, %h : index
      %kOffset = arith.muli %kHead, %cD : index
      func.call @{name}_head(%qkv, %t, %kOffset, %kGain, %pos, %scratch) : ({qkvType}, index, index, {gainType}, index, {scratchType}) -> ()
      %row = arith.addi %layerBase, %pos : index
      %vHeadBase = arith.addi %cQueryHeads, %cKVHeads : index
      %vHead = arith.addi %vHeadBase, %h : index
      %vOffset = arith.muli %vHead, %cD : index
      scf.for %i = %c0 to %cD step %c1 {{
        %k = memref.load %scratch[%i] : {scratchType}
        memref.store %k, %kCache[%row, %h, %i] : {cacheType}
        %at = arith.addi %vOffset, %i : index
        %v = memref.load %qkv[%t, %at] : {qkvType}
        memref.store %v, %vCache[%row, %h, %i] : {cacheType}
      }}
    }}
  }}
  return
}}
)mlir",
      fmt::arg("name", kernel.name), fmt::arg("qkvType", qkvType), fmt::arg("gainType", gainType),
      fmt::arg("queryType", queryType), fmt::arg("cacheType", cacheType),
      fmt::arg("scratchType", scratchType), fmt::arg("d", d), fmt::arg("half", d / 2),
      fmt::arg("dFloat", double(d)), fmt::arg("eps", kernel.eps), fmt::arg("theta", kernel.theta),
      fmt::arg("exponentStep", -2.0 / double(d)), fmt::arg("queryHeads", kernel.queryHeads),
      fmt::arg("kvHeads", kernel.kvHeads), fmt::arg("cacheRowBytes", kernel.kvHeads * d * 4),
      fmt::arg("gainLoad", widenedLoad(kernel.gains, "%g", "%gain", "%i", gainType)));
}

std::string attentionSource(const AttentionKernel &kernel) {
  const int64_t d = kernel.headDim;
  const std::string queryType = fmt::format("memref<?x{}x{}xf32>", kernel.queryHeads, d);
  const std::string kvType = fmt::format("memref<?x{}x{}xf32>", kernel.kvHeads, d);
  const std::string accType = fmt::format("memref<{}xf32>", d);
  return fmt::format(
      R"mlir(
memref.global "private" constant @{name}_kv_head_map : memref<{queryHeads}xi64> = dense<[{map}]>

func.func @q3k_{name}(%qb: memref<?xi8>, %kb: memref<?xi8>, %vb: memref<?xi8>, %ob: memref<?xi8>, %rows: index, %visible: index, %capacity: index, %wgBegin: index, %wgEnd: index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cD = arith.constant {d} : index
  %cQueryHeads = arith.constant {queryHeads} : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %lowest = arith.constant 0xFF800000 : f32
  %scale = arith.constant {scale:e} : f32
  %q = memref.view %qb[%c0][%rows] : memref<?xi8> to {queryType}
  %keys = memref.view %kb[%c0][%visible] : memref<?xi8> to {kvType}
  %values = memref.view %vb[%c0][%visible] : memref<?xi8> to {kvType}
  %out = memref.view %ob[%c0][%rows] : memref<?xi8> to {queryType}
  %map = memref.get_global @{name}_kv_head_map : memref<{queryHeads}xi64>
  %scores = memref.alloca(%visible) : memref<?xf32>
  %acc = memref.alloca() : {accType}
  %cached = arith.subi %visible, %rows : index
  scf.for %g = %wgBegin to %wgEnd step %c1 {{
    %t = arith.divui %g, %cQueryHeads : index
    %h = arith.remui %g, %cQueryHeads : index
    %kv64 = memref.load %map[%h] : memref<{queryHeads}xi64>
    %kv = arith.index_cast %kv64 : i64 to index
    %seen = arith.addi %cached, %t : index
    %count = arith.addi %seen, %c1 : index
    %max = scf.for %s = %c0 to %count step %c1 iter_args(%m = %lowest) -> (f32) {{
      %dot = scf.for %i = %c0 to %cD step %c1 iter_args(%a = %zero) -> (f32) {{
        %qv = memref.load %q[%t, %h, %i] : {queryType}
        %kv_ = memref.load %keys[%s, %kv, %i] : {kvType}
        %r = math.fma %qv, %kv_, %a : f32
        scf.yield %r : f32
      }}
      %score = arith.mulf %dot, %scale : f32
      memref.store %score, %scores[%s] : memref<?xf32>
      %m2 = arith.maxf %m, %score : f32
      scf.yield %m2 : f32
    }}
    %total = scf.for %s = %c0 to %count step %c1 iter_args(%a = %zero) -> (f32) {{
      %score = memref.load %scores[%s] : memref<?xf32>
      %shifted = arith.subf %score, %max : f32
      %e = math.exp %shifted : f32
      memref.store %e, %scores[%s] : memref<?xf32>
      %r = arith.addf %a, %e : f32
      scf.yield %r : f32
    }}
    scf.for %i = %c0 to %cD step %c1 {{
      memref.store %zero, %acc[%i] : {accType}
    }}
    scf.for %s = %c0 to %count step %c1 {{
      %p = memref.load %scores[%s] : memref<?xf32>
      scf.for %i = %c0 to %cD step %c1 {{
        %v = memref.load %values[%s, %kv, %i] : {kvType}
        %a = memref.load %acc[%i] : {accType}
        %r = math.fma %p, %v, %a : f32
        memref.store %r, %acc[%i] : {accType}
      }}
    }}
    %inverse = arith.divf %one, %total : f32
    scf.for %i = %c0 to %cD step %c1 {{
      %a = memref.load %acc[%i] : {accType}
      %o = arith.mulf %a, %inverse : f32
      memref.store %o, %out[%t, %h, %i] : {queryType}
    }}
  }}
  return
}}
)mlir",
      fmt::arg("name", kernel.name), fmt::arg("queryType", queryType), fmt::arg("kvType", kvType),
      fmt::arg("accType", accType), fmt::arg("d", d), fmt::arg("queryHeads", kernel.queryHeads),
      fmt::arg("map", fmt::join(kernel.kvHeadMap, ", ")), fmt::arg("scale", kernel.scale));
}

} // namespace q3::cpu
