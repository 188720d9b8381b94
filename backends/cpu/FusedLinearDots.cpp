//===- FusedLinearDots.cpp - the dot products of the fused_linear kernel --===//
#include "backends/cpu/FusedLinearDots.h"
#include "backends/common/KernelMathFunctions.h"
#include "backends/cpu/KernelSourceUtil.h"

#include <fmt/format.h>

#include <stdexcept>

namespace q3::cpu::detail {

/// The 64-wide step's four products of a bf16 weight row read as (k, k+1)
/// pairs: per 32 elements one 64-byte load, whose pairs' low halves (the
/// even k, shifted up) and high halves (the odd k, masked) are exact f32,
/// against x split the same way (@<name>_split_pairs). Widening each
/// element instead (a zero-extension and a shift per 16) made decode
/// issue-bound on AMD EPYC family 23 (AVX2 on 128-bit units): 14.6 against
/// 21.0 GB/s on one core from L2 in a C loop of either.
static std::string splitPairsStep(const std::string &id, const std::string &w,
                                  const std::string &row, const std::string &weightType) {
  std::string text;
  for (int chunk = 0; chunk < 2; ++chunk)
    text += fmt::format(
        "    %wp{0}_{1}_h = vector.load {2}[{3}, %k{4}] : {5}, vector<32xi16>\n"
        "    %wp{0}_{1} = vector.bitcast %wp{0}_{1}_h : vector<32xi16> to vector<16xi32>\n"
        "    %we{0}_{1}_i = arith.shli %wp{0}_{1}, %c16i : vector<16xi32>\n"
        "    %wf{0}_{4} = arith.bitcast %we{0}_{1}_i : vector<16xi32> to vector<16xf32>\n"
        "    %wo{0}_{1}_i = arith.andi %wp{0}_{1}, %highHalves : vector<16xi32>\n"
        "    %wf{0}_{6} = arith.bitcast %wo{0}_{1}_i : vector<16xi32> to vector<16xf32>\n",
        id, chunk, w, row, 2 * chunk, weightType, 2 * chunk + 1);
  return text;
}

/// Appends to `text` the sum of stream s's `accumulators` wide-loop results
/// (%wide#<s * accumulators> on), pairwise; returns the sum's name.
static std::string sumOfAccumulators(int s, int accumulators, std::string &text) {
  const int first = s * accumulators;
  if (accumulators == 1)
    return fmt::format("%wide#{}", first);
  if (accumulators == 2) {
    text += fmt::format("  %s0123_{0} = arith.addf %wide#{1}, %wide#{2} : vector<16xf32>\n", s,
                        first, first + 1);
  } else {
    text += fmt::format("  %s01_{0} = arith.addf %wide#{1}, %wide#{2} : vector<16xf32>\n"
                        "  %s23_{0} = arith.addf %wide#{3}, %wide#{4} : vector<16xf32>\n"
                        "  %s0123_{0} = arith.addf %s01_{0}, %s23_{0} : vector<16xf32>\n",
                        s, first, first + 1, first + 2, first + 3);
  }
  return fmt::format("%s0123_{}", s);
}

/// @<name>_<function>(x, w0, n0, ..., t) -> `streams` x f32: row t of x
/// against weight row n_s of w_s for each stream s, read side by side. Each
/// product: kernel.decodeAccumulators (4, 2 or 1) 16-lane accumulators over
/// 64-wide steps, the step's four 16-wide products added into accumulator
/// i % that (four keep FMA latency off a decode step's path; fewer keep two
/// or four rows side by side in AVX2's 16 registers), summed pairwise, then 16-wide
/// steps, then a scalar tail; each weight row's stream prefetched
/// kernel.prefetchBytes ahead, one hint per cache line of a 64-wide step
/// (no hints with prefetch_bytes = none). With `splitPairs` (bf16 weights)
/// the 64-wide steps read the weight as pairs (splitPairsStep) and x as
/// @<name>_split_pairs leaves it; the tails read both as they are.
static std::string dotRowsFunction(const FusedLinearKernel &kernel, const std::string &xType,
                                   const std::string &weightType, int streams,
                                   const std::string &function, bool splitPairs) {
  const int64_t k = kernel.inFeatures, wideEnd = k - k % (4 * kLanes), vectorEnd = k - k % kLanes;
  const int64_t elementBytes = dtypeBytes(kernel.weight);
  const int64_t rowBytes = k * elementBytes;
  const int64_t rowsAhead =
      kernel.prefetches() ? (kernel.prefetchBytes + rowBytes - 1) / rowBytes : 0;
  const int64_t elementsPerLine = 64 / elementBytes;
  // Names: stream s, accumulator a: %a<s>_<a>; lane l's product added:
  // %r<s>_<l>.
  std::string arguments, wideArgs, wideYield, wideTypes, wideBody, results, resultTypes, tails;
  for (int s = 0; s < streams; ++s) {
    arguments += fmt::format("%w{0}: {1}, %n{0}: index, ", s, weightType);
    if (!kernel.prefetches())
      continue;
    wideBody += fmt::format("    %pfLast{0}_ = memref.dim %w{0}, %c0 : {1}\n"
                            "    %pfLast{0} = arith.subi %pfLast{0}_, %c1 : index\n"
                            "    %pfRow{0}_ = arith.addi %n{0}, %pfAhead : index\n"
                            "    %pfRow{0} = arith.minui %pfRow{0}_, %pfLast{0} : index\n",
                            s, weightType);
    for (int64_t offset = 0; offset < 4 * kLanes; offset += elementsPerLine)
      wideBody +=
          fmt::format("    %pfK{0}_{1} = arith.addi %k, %c{1} : index\n"
                      "    memref.prefetch %w{0}[%pfRow{0}, %pfK{0}_{1}], read, locality<2>, data "
                      ": {2}\n",
                      s, offset, weightType);
  }
  for (int lane = 0; lane < 4; ++lane)
    wideBody += fmt::format("    %k{0} = arith.addi %k, %c{1} : index\n"
                            "    %xv{0} = vector.load %x[%t, %k{0}] : {2}, vector<16xf32>\n",
                            lane, lane * kLanes, xType);
  const int accumulators = int(kernel.decodeAccumulators);
  if (accumulators != 1 && accumulators != 2 && accumulators != 4)
    throw std::invalid_argument(kernel.name + ": decode accumulators must be 1, 2 or 4, not " +
                                std::to_string(accumulators));
  for (int s = 0; s < streams; ++s) {
    if (splitPairs)
      wideBody += splitPairsStep(std::to_string(s), fmt::format("%w{}", s), fmt::format("%n{}", s),
                                 weightType);
    for (int a = 0; a < accumulators; ++a) {
      wideArgs += fmt::format("{}%a{}_{} = %zero", wideArgs.empty() ? "" : ", ", s, a);
      wideTypes += fmt::format("{}vector<16xf32>", wideTypes.empty() ? "" : ", ");
    }
    // Lane l adds into accumulator l % accumulators, after the lanes before
    // it that share that accumulator.
    for (int lane = 0; lane < 4; ++lane) {
      const std::string id = fmt::format("{}_{}", s, lane);
      const int a = lane % accumulators;
      const std::string in = lane < accumulators ? fmt::format("%a{}_{}", s, a)
                                                 : fmt::format("%r{}_{}", s, lane - accumulators);
      if (!splitPairs)
        wideBody += "    " +
                    vectorWidenedLoad(kernel.weight, "%wf" + id, fmt::format("%w{}", s),
                                      fmt::format("%n{}, %k{}", s, lane), weightType) +
                    "\n";
      wideBody += fmt::format("    %r{0} = vector.fma %xv{1}, %wf{0}, {2} : vector<16xf32>\n", id,
                              lane, in);
    }
    for (int a = 0; a < accumulators; ++a)
      wideYield += fmt::format("{}%r{}_{}", wideYield.empty() ? "" : ", ", s, 4 - accumulators + a);
  }
  // Per stream, as @<name>_dot sums: the accumulators pairwise,
  // the 16-wide steps, the horizontal sum, the scalar tail.
  for (int s = 0; s < streams; ++s) {
    const std::string start = sumOfAccumulators(s, accumulators, tails);
    tails += fmt::format(
        R"mlir(  %acc{0} = scf.for %k = %cWideEnd to %cVectorEnd step %c16 iter_args(%a = {1}) -> (vector<16xf32>) {{
    %xv = vector.load %x[%t, %k] : {2}, vector<16xf32>
    {3}
    %r = vector.fma %xv, %wf, %a : vector<16xf32>
    scf.yield %r : vector<16xf32>
  }}
  %sum{0} = vector.reduction <add>, %acc{0} : vector<16xf32> into f32
  %total{0} = scf.for %k = %cVectorEnd to %cK step %c1 iter_args(%sc = %sum{0}) -> (f32) {{
    %xs = memref.load %x[%t, %k] : {2}
    {4}
    %r = math.fma %xs, %wfs, %sc : f32
    scf.yield %r : f32
  }}
)mlir",
        s, start, xType,
        vectorWidenedLoad(kernel.weight, "%wf", fmt::format("%w{}", s), fmt::format("%n{}, %k", s),
                          weightType),
        widenedLoad(kernel.weight, "%wfs", fmt::format("%w{}", s), fmt::format("%n{}, %k", s),
                    weightType));
    results += fmt::format("{}%total{}", results.empty() ? "" : ", ", s);
    resultTypes += fmt::format("{}f32", resultTypes.empty() ? "" : ", ");
  }
  return fmt::format(
      R"mlir(
func.func private @{name}_{function}(%x: {xType}, {arguments}%t: index) -> ({resultTypes}) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %c48 = arith.constant 48 : index
  %c64 = arith.constant 64 : index
  %pfAhead = arith.constant {rowsAhead} : index
  %cWideEnd = arith.constant {wideEnd} : index
  %cVectorEnd = arith.constant {vectorEnd} : index
  %cK = arith.constant {k} : index
  %zero = arith.constant dense<0.0> : vector<16xf32>
  %c16i = arith.constant dense<16> : vector<16xi32>
  %highHalves = arith.constant dense<-65536> : vector<16xi32>
  %wide:{wideCount} = scf.for %k = %c0 to %cWideEnd step %c64 iter_args({wideArgs}) -> ({wideTypes}) {{
{wideBody}    scf.yield {wideYield} : {wideTypes}
  }}
{tails}  return {results} : {resultTypes}
}}
)mlir",
      fmt::arg("name", kernel.name), fmt::arg("function", function), fmt::arg("xType", xType),
      fmt::arg("arguments", arguments), fmt::arg("resultTypes", resultTypes),
      fmt::arg("rowsAhead", rowsAhead), fmt::arg("wideEnd", wideEnd),
      fmt::arg("vectorEnd", vectorEnd), fmt::arg("k", k),
      fmt::arg("wideCount", streams * accumulators), fmt::arg("wideArgs", wideArgs),
      fmt::arg("wideTypes", wideTypes), fmt::arg("wideBody", wideBody),
      fmt::arg("wideYield", wideYield), fmt::arg("tails", tails), fmt::arg("results", results));
}

std::string dotFunction(const FusedLinearKernel &kernel, const std::string &xType,
                        const std::string &weightType, bool splitPairs) {
  return dotRowsFunction(kernel, xType, weightType, 1, "dot", splitPairs);
}

std::string dotStreamsFunction(const FusedLinearKernel &kernel, const std::string &xType,
                               const std::string &weightType, bool splitPairs) {
  return dotRowsFunction(kernel, xType, weightType, kernel.decodeRowsSideBySide(), "dot_streams",
                         splitPairs);
}

std::string splitPairsFunction(const FusedLinearKernel &kernel, const std::string &xType) {
  const int64_t k = kernel.inFeatures, wideEnd = k - k % (4 * kLanes);
  std::string even, odd;
  for (int i = 0; i < kLanes; ++i) {
    even += fmt::format("{}{}", i ? ", " : "", 2 * i);
    odd += fmt::format("{}{}", i ? ", " : "", 2 * i + 1);
  }
  return fmt::format(R"mlir(
func.func private @{name}_split_pairs(%x: {xType}, %xs: {xType}, %t: index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %cWideEnd = arith.constant {wideEnd} : index
  %cK = arith.constant {k} : index
  scf.for %k = %c0 to %cWideEnd step %c32 {{
    %kHigh = arith.addi %k, %c16 : index
    %low = vector.load %x[%t, %k] : {xType}, vector<16xf32>
    %high = vector.load %x[%t, %kHigh] : {xType}, vector<16xf32>
    %even = vector.shuffle %low, %high [{even}] : vector<16xf32>, vector<16xf32>
    %odd = vector.shuffle %low, %high [{odd}] : vector<16xf32>, vector<16xf32>
    vector.store %even, %xs[%t, %k] : {xType}, vector<16xf32>
    vector.store %odd, %xs[%t, %kHigh] : {xType}, vector<16xf32>
  }}
  scf.for %k = %cWideEnd to %cK step %c1 {{
    %v = memref.load %x[%t, %k] : {xType}
    memref.store %v, %xs[%t, %k] : {xType}
  }}
  return
}}
)mlir",
                     fmt::arg("name", kernel.name), fmt::arg("xType", xType),
                     fmt::arg("wideEnd", wideEnd), fmt::arg("k", k), fmt::arg("even", even),
                     fmt::arg("odd", odd));
}

std::string finishFunction(const FusedLinearKernel &kernel, const std::string &yType) {
  const Epilogue e = epilogue(kernel, "f32", "%d", "%du", "%st",
                              fmt::format("%rv = memref.load %res[%t, %n] : {}", yType));
  return fmt::format(R"mlir(
func.func private @{name}_finish(%d: f32, %du: f32, %st: f32, %t: index, %n: index, %y: {yType}, %res: {yType}) {{
{body}  memref.store {last}, %y[%t, %n] : {yType}
  return
}}
)mlir",
                     fmt::arg("name", kernel.name), fmt::arg("yType", yType),
                     fmt::arg("body", e.ops), fmt::arg("last", e.result));
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
  %inverse = func.call @{name}_rms_scale(%total) : (f32) -> f32
  return %inverse : f32
}}
)mlir",
                     fmt::arg("name", kernel.name), fmt::arg("xType", xType),
                     fmt::arg("vectorEnd", vectorEnd), fmt::arg("k", k)) +
         // 1 / sqrt(sum / K + eps): the shared RMSNorm scale.
         kernels::inverseRmsFunctionText(kernel.name + "_rms_scale", k, *kernel.normEps);
}

/// Constants and row indices %t0 .. %t3 (and weight rows %n0 .. %n3 when
/// `weightRows`) that the register tiles below start with.
static std::string tilePreamble(int64_t k, int64_t vectorEnd, bool weightRows) {
  std::string text = fmt::format("  %c0 = arith.constant 0 : index\n"
                                 "  %c16 = arith.constant 16 : index\n"
                                 "  %cVectorEnd = arith.constant {} : index\n"
                                 "  %cK = arith.constant {} : index\n",
                                 vectorEnd, k);
  for (int i = 1; i < 4; ++i) {
    text += fmt::format("  %c{0} = arith.constant {0} : index\n"
                        "  %t{0} = arith.addi %t0, %c{0} : index\n",
                        i);
    if (weightRows)
      text += fmt::format("  %n{0} = arith.addi %n0, %c{0} : index\n", i);
  }
  return text;
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
{preamble}  %zero = arith.constant dense<0.0> : vector<16xf32>
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
                     fmt::arg("preamble", tilePreamble(k, vectorEnd, false)),
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
    const std::string n = std::to_string(i), row = "%n" + n;
    loads +=
        fmt::format("    %xv{0} = vector.load %x[%t{0}, %k] : {1}, vector<16xf32>\n", i, xType);
    loads += "    " + vectorWeightLoad(kernel, weightType, n, "%k", row) + "\n";
    tailLoads += fmt::format("    %xs{0} = memref.load %x[%t{0}, %k] : {1}\n", i, xType);
    tailLoads += "    " + scalarWeightLoad(kernel, weightType, n, row) + "\n";
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
{preamble}  %zero = arith.constant dense<0.0> : vector<16xf32>
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
                     fmt::arg("results", results),
                     fmt::arg("preamble", tilePreamble(k, vectorEnd, true)));
}

std::string gainViewType(const FusedLinearKernel &kernel) {
  return fmt::format("memref<{}x{}>", kernel.inFeatures, storageType(*kernel.prologueGain));
}

namespace {
/// x * gain into %xg, the thread scratch's rows from gainScratchOffset()
/// (empty text without a prologue gain). A kernel that rounds its prefill
/// rows to bf16 scales them as it rounds (roundedActivations), so here it
/// scales only decode's row: the scratch then holds one f32 row, not one per
/// row of the call, and a prefill writes and reads its rows once, not twice.
std::string gainPrologue(const FusedLinearKernel &kernel, const std::string &xType) {
  const bool decodeRowOnly = kernel.roundsActivations();
  return std::string(decodeRowOnly ? "  %gainRows = arith.minui %rows, %c1 : index\n" : "") +
         fmt::format(
             R"mlir(  %gain = memref.view %gb[%c0][] : memref<?xi8> to {gainType}
  %cGainK = arith.constant {k} : index
  %cGainAt = arith.constant {at} : index
  %xg = memref.view %scratch[%cGainAt][{rows}] : memref<?xi8> to {xType}
  scf.for %t = %c0 to {rows} step %c1 {{
    scf.for %k = %c0 to %cGainK step %c1 {{
      %xv = memref.load %x[%t, %k] : {xType}
      {gainLoad}
      %scaled = arith.mulf %xv, %gv : f32
      memref.store %scaled, %xg[%t, %k] : {xType}
    }}
  }}
)mlir",
             fmt::arg("rows", decodeRowOnly ? "%gainRows" : "%rows"),
             fmt::arg("gainType", gainViewType(kernel)), fmt::arg("k", kernel.inFeatures),
             fmt::arg("xType", xType), fmt::arg("at", kernel.gainScratchOffset()),
             fmt::arg("gainLoad", widenedLoad(*kernel.prologueGain, "%gv", "%gain", "%k",
                                              gainViewType(kernel))));
}
/// %roundedAt: where the bf16-rounded rows start in the thread scratch,
/// after decode's gain-scaled row (FusedLinearKernel::threadScratch).
std::string roundedRowsOffset(const FusedLinearKernel &kernel) {
  return fmt::format("  %roundedAt = arith.constant {} : index\n", kernel.roundedScratchOffset());
}
} // namespace

Epilogue epilogue(const FusedLinearKernel &kernel, const std::string &type,
                  const std::string &dot, const std::string &up, const std::string &scale,
                  const std::string &loadResidual) {
  Epilogue e{fmt::format("  %v0 = arith.mulf {}, {} : {}\n", dot, scale, type), "%v0"};
  if (kernel.swiglu) {
    // silu(gate) * up: the shared SwiGLU (kernelFrame adds the functions).
    e.ops += fmt::format("  %u = arith.mulf {0}, {1} : {2}\n"
                         "  %v1 = func.call @{3}_swiglu{4}(%v0, %u) : ({2}, {2}) -> {2}\n",
                         up, scale, type, kernel.name, type == "f32" ? "" : "_v16");
    e.result = "%v1";
  }
  if (kernel.residual) {
    e.ops += fmt::format("  {}\n"
                         "  %v2 = arith.addf {}, %rv : {}\n",
                         loadResidual, e.result, type);
    e.result = "%v2";
  }
  return e;
}

KernelFrame kernelFrame(const FusedLinearKernel &kernel, const std::string &xType,
                        const std::string &yType) {
  KernelFrame frame;
  if (kernel.swiglu)
    frame.helpers += kernels::swigluFunctionText(kernel.name + "_swiglu", 1) +
                     kernels::swigluFunctionText(kernel.name + "_swiglu_v16", kLanes);
  std::string rowScale = "arith.constant 1.0 : f32";
  if (kernel.normEps) {
    frame.helpers += inverseRmsFunction(kernel, xType);
    rowScale =
        fmt::format("func.call @{}_inverse_rms(%x, %t) : ({}, index) -> f32", kernel.name, xType);
  }
  std::string views = fmt::format("  %x = memref.view %xb[%c0][%rows] : memref<?xi8> to {0}\n"
                                  "  %y = memref.view %yb[%c0][%rows] : memref<?xi8> to {1}\n",
                                  xType, yType);
  frame.residualOperand = "%y";
  if (kernel.residual) {
    views += fmt::format("  %res = memref.view %rb[%c0][%rows] : memref<?xi8> to {}\n", yType);
    frame.residualOperand = "%res";
  }
  frame.dotInput = "%x";
  if (kernel.prologueGain) {
    views += gainPrologue(kernel, xType);
    frame.dotInput = "%xg";
  }
  if (kernel.roundsActivations())
    views += roundedRowsOffset(kernel);
  frame.closing = "  return\n}\n";
  // A weight read part by part: %wb, %wb1, %wb2, ...
  std::string partArguments;
  for (size_t p = 1; p < kernel.partRows().size(); ++p)
    partArguments += fmt::format("%wb{}: memref<?xi8>, ", p);
  frame.opening = fmt::format(
      R"mlir(
func.func @q3k_{name}(%xb: memref<?xi8>, %wb: memref<?xi8>, {partArguments}{gainArgument}{residualArgument}%yb: memref<?xi8>, {scratchArgument}%rows: index, %visible: index, %capacity: index, %wgBegin: index, %wgEnd: index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
{views}  %scale = memref.alloca(%rows) : memref<?xf32>
  scf.for %t = %c0 to %rows step %c1 {{
    %s = {rowScale}
    memref.store %s, %scale[%t] : memref<?xf32>
  }}
)mlir",
      fmt::arg("name", kernel.name), fmt::arg("partArguments", partArguments),
      fmt::arg("gainArgument", kernel.prologueGain ? "%gb: memref<?xi8>, " : ""),
      fmt::arg("residualArgument", kernel.residual ? "%rb: memref<?xi8>, " : ""),
      fmt::arg("scratchArgument", kernel.threadScratch().empty() ? "" : "%scratch: memref<?xi8>, "),
      fmt::arg("views", views), fmt::arg("rowScale", rowScale));
  return frame;
}

} // namespace q3::cpu::detail
