//===- FusedLinearSource.cpp - the fused_linear kernel template -----------===//
//
// fused_linear: workgroup w computes output columns [64w, 64w + 64) for every
// row. Columns are the outer loop so a weight row stays in L1 while the rows
// of a prefill use it; a decode step (one row) streams each weight row once.
// Prefill rows go through 4 x 4 (rows x columns) register tiles, then 4-row
// tiles, then one by one. Dot products accumulate in f32, 16 lanes wide; bf16
// weights are widened exactly by a 16-bit shift, f16 by extf.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/FusedLinearDots.h"
#include "backends/cpu/KernelSource.h"
#include "backends/cpu/KernelSourceUtil.h"
#include "backends/cpu/WeightParts.h"

#include <fmt/format.h>

#include <functional>

namespace q3::cpu {
using namespace detail;

namespace {
int64_t alignedToScratch(int64_t bytes) {
  return (bytes + kScratchAlignment - 1) / kScratchAlignment * kScratchAlignment;
}
} // namespace

int64_t FusedLinearKernel::gainScratchOffset() const { return alignedToScratch(panelBytes()); }

int64_t FusedLinearKernel::roundedScratchOffset() const {
  // Decode's one gain-scaled f32 row sits between the panel and the rounded rows.
  return gainScratchOffset() + (prologueGain ? alignedToScratch(4 * inFeatures) : 0);
}

ThreadScratch FusedLinearKernel::threadScratch() const {
  ThreadScratch scratch;
  if (panelsPerCall)
    scratch.fixedBytes = gainScratchOffset();
  if (roundsActivations()) {
    // The prefill scales its rows by the gain as it rounds them: one f32 row
    // for decode, then a bf16 row per row of the call.
    scratch.fixedBytes = roundedScratchOffset();
    scratch.rowBytes = 2 * inFeatures;
    if (prefillMatmul == PrefillMatmul::Amx)
      scratch.fixedBytes += (kAmxTileRows - 1) * 2 * inFeatures;
  } else if (prologueGain) {
    scratch.rowBytes = 4 * inFeatures; // every row scaled by the gain, in f32
  }
  return scratch;
}

std::string fusedLinearSource(const FusedLinearKernel &kernel) {
  if (kernel.tiledPrefill())
    return columnBlockLinearSource(kernel);
  const std::string xType = fmt::format("memref<?x{}xf32>", kernel.inFeatures);
  const std::string yType = fmt::format("memref<?x{}xf32>", kernel.outFeatures);
  // The rows of each part of the weight (one part unless
  // cpu-sink-weight-concat gave the kernel a concatenation's parts); a
  // 4-column tile never straddles two parts (each a multiple of 16 rows).
  const WeightParts parts = weightParts(kernel);
  const std::string &weightType = parts.rowsType;
  const KernelFrame frame = kernelFrame(kernel, xType, yType);
  std::string source = dotFunction(kernel, xType, weightType) + frame.helpers +
                       partAtFunction(kernel, parts, "row_at", weightType, 1, 1);
  // `result` = @<name>_<function>(x, the part of `column`, ...), after the
  // call that finds that part (its values named after `result`).
  auto callOnPart = [&](const std::string &function, const std::string &column,
                        const std::string &result, int results, const std::string &resultTypes) {
    const std::string at = "%at" + result.substr(1);
    return rowAtCall(kernel, parts, column, at) +
           fmt::format("      {}{} = func.call @{}_{}({}, {}Part, %t, {}Row) : ({}, {}, index, "
                       "index) -> ({})",
                       result, results > 1 ? ":" + std::to_string(results) : "", kernel.name,
                       function, frame.dotInput, at, at, xType, weightType, resultTypes);
  };
  auto dotOf = [&](const std::string &column, const std::string &result) {
    const std::string at = "%at" + result.substr(1);
    return rowAtCall(kernel, parts, column, at) +
           fmt::format("      {} = func.call @{}_dot({}, {}Part, {}Row, %t) : ({}, {}, index, "
                       "index) -> f32",
                       result, kernel.name, frame.dotInput, at, at, xType, weightType);
  };
  source += finishFunction(kernel, yType) + dot4Function(kernel, xType, weightType) +
            dot4x4Function(kernel, xType, weightType);
  auto finishCall = [&](const std::string &d, const std::string &du, const std::string &st,
                        const std::string &t) {
    return fmt::format("func.call @{}_finish({}, {}, {}, {}, %n, %y, {}) : (f32, f32, f32, index, "
                       "index, {}, {}) -> ()",
                       kernel.name, d, du, st, t, frame.residualOperand, yType, yType);
  };
  auto dot4Of = [&](const std::string &column, const std::string &result) {
    return callOnPart("dot4", column, result, 4, "f32, f32, f32, f32");
  };
  // Rows in tiles of four, then the rest one by one (all of a decode step).
  std::string tiled = dot4Of("%n", "%d4") + "\n";
  std::string up4 = "%d4";
  if (kernel.swiglu) {
    tiled += "      %nUp4 = arith.addi %n, %cOut : index\n" + dot4Of("%nUp4", "%u4") + "\n";
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
  auto dot4x4Of = [&](const std::string &column, const std::string &result) {
    std::string types = "f32";
    for (int i = 1; i < 16; ++i)
      types += ", f32";
    return callOnPart("dot4x4", column, result, 16, types);
  };
  std::string square = dot4x4Of("%n", "%d16") + "\n";
  std::string up16 = "%d16";
  if (kernel.swiglu) {
    square += "        %nUp16 = arith.addi %n, %cOut : index\n" + dot4x4Of("%nUp16", "%u16") + "\n";
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
  std::string single = dotOf("%n", "%d") + "\n";
  std::string up = "%d";
  if (kernel.swiglu) {
    single += "      %nUp = arith.addi %n, %cOut : index\n" + dotOf("%nUp", "%du") + "\n";
    up = "%du";
  }
  single += "      " + finishCall("%d", up, "%st", "%t");
  source += frame.opening;
  source +=
      fmt::format(R"mlir(  %cTile = arith.constant {tile} : index
  %cOut = arith.constant {out} : index
{partViews}  %nBegin = arith.muli %wgBegin, %cTile : index
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
)mlir",
                  fmt::arg("tile", FusedLinearKernel::kColumnsPerWorkgroup),
                  fmt::arg("out", kernel.outFeatures), fmt::arg("partViews", partRowViews(parts)),
                  fmt::arg("tiled", tiled), fmt::arg("square", square), fmt::arg("single", single));
  source += frame.closing;
  return source;
}

} // namespace q3::cpu
