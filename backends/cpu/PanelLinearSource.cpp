//===- PanelLinearSource.cpp - fused_linear packing its panels per call ---===//
//
// fused_linear for a bf16 or f16 weight left row-major (q3.lowering weight_packing =
// per_call): the runtime binds the checkpoint's mapped bytes, so loading
// copies nothing; a weight concatenated by merge-sibling-matmuls comes as its
// parts, one buffer each (cpu-sink-weight-concat). A prefill packs, for each
// pair of 16-row blocks it owns, those 32 weight rows into the column-block
// order of runtime/WeightLayout.h (16 rows x 16 (k, k+1) pairs at a time: 16
// loads, a transpose in registers, 16 stores) in a 2 x K x 32-byte panel that
// stays in cache while every row tile of the prompt multiplies it: the same
// register tiles as the column-block kernel (ColumnBlockLinearSource.cpp).
//
// The packing's cost is its reads: packing a pair whose rows are in cache
// cost nothing measurable, packing it from memory 6-12% of a 128-row
// prefill. So the row tiles prefetch the next pair's rows as they go (each
// tile a slice, one line every 2^s k steps so that each line is prefetched
// once: every step, the redundant prefetches cost pp128 7-8%), and the
// packing finds them in L2:
// pp128 on par with packing at load for 0.6B, 2-5% below it for 1.7B (AMD
// family 26).
//
// Decode (one row) reads the weight rows in place: one dot product per
// output column, prefetching prefetch_bytes ahead (FusedLinearDots.cpp),
// four rows side by side (four memory streams per thread). A bf16 prefill
// of at most inPlacePrefillRows rows reads them in place the same way,
// once for all its rows, where packing panels for so few rows streamed the
// weight at half decode's rate (docs/cpu-backend.md, "Prompts of a few
// rows").
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/ColumnBlockLinear.h"
#include "backends/cpu/FusedLinearDots.h"
#include "backends/cpu/KernelSourceUtil.h"
#include "backends/cpu/WeightParts.h"

#include <fmt/format.h>

namespace q3::cpu::detail {
namespace {

/// The views a panel kernel reads its weight (each part of it) through.
struct PanelViews {
  WeightParts parts;     // the rows of each part, as the dot products read them
  std::string pairsType; // a part as (k, k+1) pairs: [rows * K/2] i32
  std::string panelType; // the packed pair of blocks as i32: [2][K/2][16]
};

PanelViews panelViews(const FusedLinearKernel &kernel, const ColumnBlockLayout &l) {
  PanelViews v;
  v.parts = weightParts(kernel);
  v.pairsType = "memref<?xi32>";
  v.panelType = fmt::format("memref<2x{}x16xi32>", l.pairs);
  return v;
}

/// The views %wRows<p> and %wPairs<p> of every part, at the kernel's top.
std::string partViews(const PanelViews &v, const ColumnBlockLayout &l) {
  std::string text = partRowViews(v.parts);
  for (size_t p = 0; p < v.parts.rows.size(); ++p)
    text +=
        fmt::format("  %cPartPairs{0} = arith.constant {1} : index\n"
                    "  %wPairs{0} = memref.view {2}[%c0][%cPartPairs{0}] : memref<?xi8> to {3}\n",
                    p, v.parts.rows[p] * l.pairs, partBuffer(p), v.pairsType);
  return text;
}

/// A 16 x 16 transpose of the i32 (k, k+1) pairs in %in0 .. %in15 into
/// %<out>0 .. %<out>15 (row j of the result holds element j of every input),
/// in four rounds of two-vector shuffles whose masks x86 has single
/// instructions for: interleaving 32-bit and then 64-bit elements within
/// 128-bit lanes (vpunpck*), then swapping 128-bit and 256-bit blocks.
std::string transpose16(const std::string &out) {
  // Each round: (first result, second result, first source, second source).
  struct Pair {
    int low, high, x, y;
  };
  auto mask = [](auto element) {
    std::string text;
    for (int j = 0; j < 16; ++j)
      text += fmt::format("{}{}", j ? ", " : "", element(j));
    return text;
  };
  // Within each 128-bit lane l: 32-bit interleave of x and y (low / high
  // halves), then 64-bit interleave.
  const std::string low32 = mask([](int j) { return 4 * (j / 4) + (j % 4) / 2 + (j % 2) * 16; });
  const std::string high32 =
      mask([](int j) { return 4 * (j / 4) + 2 + (j % 4) / 2 + (j % 2) * 16; });
  const std::string low64 = mask([](int j) { return 4 * (j / 4) + j % 2 + (j % 4) / 2 * 16; });
  const std::string high64 = mask([](int j) { return 4 * (j / 4) + 2 + j % 2 + (j % 4) / 2 * 16; });
  auto blockSwap = [&](int s, bool low) {
    return mask([=](int j) {
      const bool left = (j & s) == 0;
      return low ? (left ? j : 16 + j - s) : (left ? j + s : 16 + j);
    });
  };
  struct Round {
    std::vector<Pair> pairs;
    std::string lowMask, highMask;
  };
  std::vector<Round> rounds(4);
  for (int i = 0; i < 8; ++i)
    rounds[0].pairs.push_back({2 * i, 2 * i + 1, 2 * i, 2 * i + 1});
  rounds[0].lowMask = low32;
  rounds[0].highMask = high32;
  for (int i = 0; i < 4; ++i) {
    rounds[1].pairs.push_back({4 * i, 4 * i + 1, 4 * i, 4 * i + 2});
    rounds[1].pairs.push_back({4 * i + 2, 4 * i + 3, 4 * i + 1, 4 * i + 3});
  }
  rounds[1].lowMask = low64;
  rounds[1].highMask = high64;
  for (int r = 2; r < 4; ++r) {
    const int s = r == 2 ? 4 : 8;
    for (int i = 0; i < 16; ++i)
      if (!(i & s))
        rounds[r].pairs.push_back({i, i + s, i, i + s});
    rounds[r].lowMask = blockSwap(s, true);
    rounds[r].highMask = blockSwap(s, false);
  }
  std::string text;
  std::string from = "%in";
  for (size_t r = 0; r < rounds.size(); ++r) {
    const std::string to = r + 1 == rounds.size() ? out : fmt::format("%tr{}_", r);
    for (const Pair &p : rounds[r].pairs)
      text += fmt::format("    {0}{1} = vector.shuffle {2}{3}, {2}{4} [{5}] : vector<16xi32>, "
                          "vector<16xi32>\n"
                          "    {0}{6} = vector.shuffle {2}{3}, {2}{4} [{7}] : vector<16xi32>, "
                          "vector<16xi32>\n",
                          to, p.low, from, p.x, p.y, rounds[r].lowMask, p.high, rounds[r].highMask);
    from = to;
  }
  return text;
}

/// @<name>_pack_panel(w, panel, slot, base): the block whose first pair is
/// element `base` of part `w` (block_at) into panel slot `slot`: 16 pairs
/// of the 16 rows at a time (16 loads, a transpose in registers, 16 stores),
/// the last K/2 % 16 pairs one gather of a pair of the 16 rows each.
std::string packPanelFunction(const FusedLinearKernel &kernel, const ColumnBlockLayout &l,
                              const PanelViews &v) {
  std::string offsets, loads, stores;
  for (int64_t row = 0; row < kBlock; ++row) {
    offsets += fmt::format("{}{}", row ? ", " : "", row * l.pairs);
    loads += fmt::format("    %at{0} = arith.addi %rowAt{0}, %kp : index\n"
                         "    %in{0} = vector.load %w[%at{0}] : {1}, vector<16xi32>\n",
                         row, v.pairsType);
    stores += fmt::format("    %kp{0} = arith.addi %kp, %c{0} : index\n"
                          "    vector.store %out{0}, %panel[%slot, %kp{0}, %c0] : {1}, "
                          "vector<16xi32>\n",
                          row, v.panelType);
  }
  std::string rowStarts;
  for (int64_t row = 0; row < kBlock; ++row)
    rowStarts +=
        fmt::format("{2}"
                    "  %rowOffset{0} = arith.constant {1} : index\n"
                    "  %rowAt{0} = arith.addi %base, %rowOffset{0} : index\n",
                    row, row * l.pairs,
                    row < 2 ? "" : fmt::format("  %c{0} = arith.constant {0} : index\n", row));
  return fmt::format(R"mlir(
func.func private @{name}_pack_panel(%w: {rowPairsType}, %panel: {pairsType}, %slot: index, %base: index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cStep = arith.constant 16 : index
  %cSquareEnd = arith.constant {squareEnd} : index
  %cPairs = arith.constant {pairs} : index
  %rowOffsets = arith.constant dense<[{offsets}]> : vector<16xi32>
  %all = arith.constant dense<true> : vector<16xi1>
  %none = arith.constant dense<0> : vector<16xi32>
{rowStarts}  scf.for %kp = %c0 to %cSquareEnd step %cStep {{
{loads}{transpose}{stores}  }}
  scf.for %kp = %cSquareEnd to %cPairs step %c1 {{
    %at = arith.addi %base, %kp : index
    %pair = vector.gather %w[%at][%rowOffsets], %all, %none : {rowPairsType}, vector<16xi32>, vector<16xi1>, vector<16xi32> into vector<16xi32>
    vector.store %pair, %panel[%slot, %kp, %c0] : {pairsType}, vector<16xi32>
  }}
  return
}}
)mlir",
                     fmt::arg("name", kernel.name), fmt::arg("rowPairsType", v.pairsType),
                     fmt::arg("pairsType", v.panelType), fmt::arg("pairs", l.pairs),
                     fmt::arg("squareEnd", l.pairs - l.pairs % kBlock),
                     fmt::arg("offsets", offsets),
                     fmt::arg("rowStarts", rowStarts), fmt::arg("loads", loads),
                     fmt::arg("transpose", transpose16("%out")), fmt::arg("stores", stores));
}

/// The weight row stream s of a side-by-side read takes in the runs
/// %run<r> (DecodeRunCut): run s, or with SwiGLU run s / 2's gate row and
/// then its up row %runUp<r>, which `definition` defines (empty otherwise).
struct StreamRow {
  std::string definition, row;
};
std::vector<StreamRow> streamRows(const FusedLinearKernel &kernel, const std::string &indent) {
  std::vector<StreamRow> rows;
  for (int s = 0; s < kernel.decodeRowsSideBySide(); ++s) {
    const int run = kernel.swiglu ? s / 2 : s;
    if (kernel.swiglu && s % 2 == 1)
      rows.push_back(
          {fmt::format("{1}%runUp{0} = arith.addi %run{0}, %cOut : index\n", run, indent),
           fmt::format("%runUp{}", run)});
    else
      rows.push_back({"", fmt::format("%run{}", run)});
  }
  return rows;
}

/// Whether decode reads a bf16 weight's rows in (k, k+1) pairs: the split
/// row it reads then fits in the panel's scratch, which decode leaves unused.
bool splitsDecodePairs(const FusedLinearKernel &kernel) {
  return kernel.weight == DType::BF16 && kernel.panelBytes() >= 4 * kernel.inFeatures;
}

/// Decode (one row, or none): the row against each weight row n the
/// workgroups own, in place. The columns are cut into decodeRuns() runs
/// (SwiGLU: each read as its gate and up rows) read side by side by
/// @<name>_dot_streams, so a thread keeps decode_streams memory streams
/// going; the columns the runs leave go one at a time.
std::string rowMajorDecode(const FusedLinearKernel &kernel, const ColumnBlockLayout &l,
                           const PanelViews &v, const KernelFrame &frame) {
  // A bf16 weight's dots read decode's row split into pairs' halves
  // (splitPairsFunction), written where a prefill packs its panel.
  const bool split = splitsDecodePairs(kernel);
  const std::string x = split ? "%xSplit" : frame.dotInput;
  const std::string splitRow =
      split ? fmt::format("    %xSplit = memref.view %scratch[%c0][%rows] : memref<?xi8> to {1}\n"
                          "    scf.for %t = %c0 to %rows step %c1 {{\n"
                          "      func.call @{0}_split_pairs({2}, %xSplit, %t) : ({1}, {1}, index) "
                          "-> ()\n"
                          "    }}\n",
                          kernel.name, l.xType, frame.dotInput)
            : "";
  // The dot product of row %t with global weight row `row`, as `result`.
  auto dotOfRow = [&](const std::string &row, const std::string &result) {
    return "      " + rowAtCall(kernel, v.parts, row, result) +
           fmt::format("      {1} = func.call @{0}_dot({2}, {1}Part, {1}Row, %t) : ({3}, {4}, "
                       "index, index) -> f32\n",
                       kernel.name, result, x, l.xType, v.parts.rowsType);
  };
  auto finish = [&](const std::string &d, const std::string &du, const std::string &n) {
    return fmt::format("      func.call @{}_finish({}, {}, %st, %t, {}, %y, {}) : (f32, f32, f32, "
                       "index, index, {}, {}) -> ()\n",
                       kernel.name, d, du, n, frame.residualOperand, l.yType, l.yType);
  };
  std::string up = "%d";
  std::string upDot;
  if (kernel.swiglu) {
    upDot = "      %nUp = arith.addi %n, %cOut : index\n" + dotOfRow("%nUp", "%du");
    up = "%du";
  }
  // The runs: column %run<r> = %nBegin + r * %runLength + %i; each stream
  // reads the weight row of a run's column (SwiGLU: gate, then up).
  const int runs = kernel.decodeRuns(), rows = kernel.decodeRowsSideBySide();
  const DecodeRunCut cut = decodeRunCut("%nBegin", "%nEnd", runs, "%nRest");
  std::string streams = cut.indices;
  std::string operands, operandTypes, finishes;
  const std::vector<StreamRow> read = streamRows(kernel, "      ");
  for (int s = 0; s < rows; ++s) {
    const std::string result = fmt::format("%ds{}", s);
    streams += read[s].definition + "      " + rowAtCall(kernel, v.parts, read[s].row, result);
    operands += fmt::format(", {0}Part, {0}Row", result);
    operandTypes += fmt::format(", {}, index", v.parts.rowsType);
  }
  for (int r = 0; r < runs; ++r)
    finishes += kernel.swiglu ? finish(fmt::format("%dot#{}", 2 * r),
                                       fmt::format("%dot#{}", 2 * r + 1), fmt::format("%run{}", r))
                              : finish(fmt::format("%dot#{}", r), fmt::format("%dot#{}", r),
                                       fmt::format("%run{}", r));
  const std::string resultTypes = typeList("f32", rows);
  streams +=
      fmt::format("      %dot:{0} = func.call @{1}_dot_streams({2}{3}, %t) : ({4}{5}, index) "
                  "-> ({6})\n",
                  rows, kernel.name, x, operands, l.xType, operandTypes, resultTypes);
  return fmt::format(
      R"mlir({splitRow}    %cColumnsPerGroup = arith.constant {columnsPerGroup} : index
    %cOut = arith.constant {out} : index
    %nBegin = arith.muli %wgBegin, %cColumnsPerGroup : index
    %nEndGroup = arith.muli %wgEnd, %cColumnsPerGroup : index
    %nEnd = arith.minui %nEndGroup, %cOut : index
{cut}    scf.for %t = %c0 to %rows step %c1 {{
    %st = memref.load %scale[%t] : memref<?xf32>
    scf.for %i = %c0 to %runLength step %c1 {{
{streams}{finishes}    }}
    scf.for %n = %nRest to %nEnd step %c1 {{
{dot}{upDot}{single}    }}
    }}
)mlir",
      fmt::arg("splitRow", splitRow),
      fmt::arg("columnsPerGroup", FusedLinearKernel::kColumnsPerWorkgroup),
      fmt::arg("out", kernel.outFeatures), fmt::arg("cut", cut.cut), fmt::arg("streams", streams),
      fmt::arg("finishes", finishes), fmt::arg("dot", dotOfRow("%n", "%d")),
      fmt::arg("upDot", upDot), fmt::arg("single", finish("%d", up, "%n")));
}

/// From this many rows on, the in-place loop prefetches each weight stream
/// kInPlacePrefetchBytes ahead, one hint per line it loads. With more rows
/// the loop spends longer on each line and the hardware prefetcher alone
/// falls behind: on AMD family 26 (0.6B, 2 threads, `q3run compare -p N -g 1
/// -r 9`) 2 KiB ahead gave pp3 1.03, pp4 1.06, pp5 1.07-1.09, pp6 1.15, pp7
/// 1.12-1.17 against none, but pp2 0.975 (4 KiB: pp2 0.95, pp7 1.11).
constexpr int kInPlacePrefetchFromRows = 3;
constexpr int64_t kInPlacePrefetchBytes = 2048;
/// The same distance in the loop's index unit, (k, k+1) pairs of bf16.
constexpr int64_t kInPlacePrefetchPairs = kInPlacePrefetchBytes / int64_t(sizeof(int32_t));

/// @<name>_in_place_rows<R>_<S>(xp, w0, b0, ..., w<S-1>, b<S-1>) -> S x R f32 (stream
/// s, row r at s * R + r): rows 0 .. R-1 of the bf16-rounded activations
/// %xp against S weight rows, each the (k, k+1) pairs of `w_s` from element
/// `b_s`, read side by side once for all R rows: per 16 pairs one load of
/// each weight row and of each activation row, S x R vdpbf16ps (and from
/// kInPlacePrefetchFromRows rows a prefetch per weight row; a hint past a
/// stream's last row reads nothing it could fault on).
std::string inPlaceRowsFunction(const FusedLinearKernel &kernel, const ColumnBlockLayout &l,
                                int rows, int streams) {
  std::string arguments, rowConstants, iterArgs, body, yields, sums, results, ahead;
  const bool prefetch = rows >= kInPlacePrefetchFromRows;
  if (prefetch)
    ahead = fmt::format("  %cAhead = arith.constant {} : index\n", kInPlacePrefetchPairs);
  for (int s = 0; s < streams; ++s) {
    arguments += fmt::format(", %w{0}: memref<?xi32>, %b{0}: index", s);
    body += fmt::format("    %at{0} = arith.addi %b{0}, %kp : index\n"
                        "    %wv{0} = vector.load %w{0}[%at{0}] : memref<?xi32>, vector<16xi32>\n",
                        s);
    if (prefetch)
      body += fmt::format(
          "    %ahead{0} = arith.addi %at{0}, %cAhead : index\n"
          "    memref.prefetch %w{0}[%ahead{0}], read, locality<2>, data : memref<?xi32>\n",
          s);
  }
  for (int r = 0; r < rows; ++r) {
    rowConstants += fmt::format("  %cRow{0} = arith.constant {0} : index\n", r);
    body += fmt::format("    %xv{0} = vector.load %xp[%cRow{0}, %kp] : {1}, vector<16xi32>\n", r,
                        l.pairType);
    for (int s = 0; s < streams; ++s) {
      const std::string id = fmt::format("{}_{}", s, r);
      body += "    " +
              vdpbf16ps("%q" + id, fmt::format("%xv{}", r), fmt::format("%wv{}", s), "%a" + id) +
              "\n";
    }
  }
  for (int s = 0; s < streams; ++s)
    for (int r = 0; r < rows; ++r) {
      const std::string id = fmt::format("{}_{}", s, r);
      const bool first = s == 0 && r == 0;
      iterArgs += fmt::format("{}%a{} = %zero", first ? "" : ", ", id);
      yields += fmt::format("{}%q{}", first ? "" : ", ", id);
      sums +=
          fmt::format("  %sum{0} = vector.reduction <add>, %acc#{1} : vector<16xf32> into f32\n",
                      id, s * rows + r);
      results += fmt::format("{}%sum{}", first ? "" : ", ", id);
    }
  const std::string resultTypes = typeList("f32", rows * streams);
  const std::string types = typeList("vector<16xf32>", rows * streams);
  return fmt::format(
      R"mlir(
func.func private @{name}_in_place_rows{rows}_{streams}(%xp: {pairType}{arguments}) -> ({resultTypes}) {{
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %cPairs = arith.constant {pairs} : index
  %zero = arith.constant dense<0.0> : vector<16xf32>
{ahead}{rowConstants}  %acc:{count} = scf.for %kp = %c0 to %cPairs step %c16 iter_args({iterArgs}) -> ({types}) {{
{body}    scf.yield {yields} : {types}
  }}
{sums}  return {results} : {resultTypes}
}}
)mlir",
      fmt::arg("name", kernel.name), fmt::arg("rows", rows), fmt::arg("streams", streams),
      fmt::arg("pairType", l.pairType), fmt::arg("arguments", arguments),
      fmt::arg("resultTypes", resultTypes), fmt::arg("pairs", l.pairs), fmt::arg("ahead", ahead),
      fmt::arg("rowConstants", rowConstants), fmt::arg("count", rows * streams),
      fmt::arg("iterArgs", iterArgs), fmt::arg("types", types), fmt::arg("body", body),
      fmt::arg("yields", yields), fmt::arg("sums", sums), fmt::arg("results", results));
}

/// The in-place functions a kernel calls: for each row count 2 ..
/// inPlacePrefillRows, the runs' streams side by side and the columns
/// the runs leave (one row, or a gate and an up row, at a time).
std::string inPlaceRowsFunctions(const FusedLinearKernel &kernel, const ColumnBlockLayout &l) {
  std::string text;
  const int streams = kernel.decodeRowsSideBySide(), single = kernel.swiglu ? 2 : 1;
  for (int rows = 2; rows <= kernel.inPlacePrefillRows; ++rows) {
    text += inPlaceRowsFunction(kernel, l, rows, streams);
    if (single != streams)
      text += inPlaceRowsFunction(kernel, l, rows, single);
  }
  return text;
}

/// The text of an in-place prefill (inPlacePrefill) for one row count.
struct InPlaceText {
  const FusedLinearKernel &kernel;
  const ColumnBlockLayout &l;
  const PanelViews &v;
  const KernelFrame &frame;

  /// The call of @<name>_in_place_rows<rows>_<S> on weight rows `weightRows`
  /// (S of them), after finding each row's part and first pair; its results
  /// %`dot`.
  std::string call(int rows, const std::vector<std::string> &weightRows,
                   const std::string &dot) const {
    const std::string parts = partList(v.parts, "%wPairs");
    const std::string pairRowType =
        fmt::format("({}, index) -> ({}, index)", partTypes(v.parts, v.pairsType), v.pairsType);
    std::string text, operands, operandTypes;
    for (size_t s = 0; s < weightRows.size(); ++s) {
      const std::string id = fmt::format("%{}{}", dot, s);
      text += fmt::format("        {1}Part, {1}Base = func.call @{0}_pair_row_at({2}, {3}) : {4}\n",
                          kernel.name, id, parts, weightRows[s], pairRowType);
      operands += fmt::format(", {0}Part, {0}Base", id);
      operandTypes += fmt::format(", {}, index", v.pairsType);
    }
    const std::string resultTypes = typeList("f32", rows * int64_t(weightRows.size()));
    return text + fmt::format("        %{0}:{1} = func.call @{2}_in_place_rows{3}_{4}(%xp{5}) : "
                              "({6}{7}) -> ({8})\n",
                              dot, rows * weightRows.size(), kernel.name, rows, weightRows.size(),
                              operands, l.pairType, operandTypes, resultTypes);
  }

  /// Row r's epilogue of column `n` from results %`dot`, weight rows `gate`
  /// and `up` (the same one outside SwiGLU).
  std::string finish(int rows, int r, const std::string &dot, int gate, int up,
                     const std::string &n) const {
    return fmt::format("        func.call @{0}_finish(%{1}#{2}, %{1}#{3}, %st{4}, %cRow{4}, {5}, "
                       "%y, {6}) : (f32, f32, f32, index, index, {7}, {7}) -> ()\n",
                       kernel.name, dot, gate * rows + r, up * rows + r, r, n,
                       frame.residualOperand, l.yType);
  }

  /// The branch taken when %rows == `rows`: the runs of `cut` read side by
  /// side, then the columns they leave.
  std::string rowCount(int rows, const DecodeRunCut &cut) const {
    const int runs = kernel.decodeRuns();
    std::vector<std::string> runRows, singleRows = {"%n"};
    std::string runIndices = cut.indices, singleUp, scales, finishes, singleFinishes;
    for (const StreamRow &read : streamRows(kernel, "        ")) {
      runIndices += read.definition;
      runRows.push_back(read.row);
    }
    if (kernel.swiglu) {
      singleUp = "        %nUp = arith.addi %n, %cOut : index\n";
      singleRows.push_back("%nUp");
    }
    for (int r = 0; r < rows; ++r) {
      scales += fmt::format("      %cRow{0} = arith.constant {0} : index\n"
                            "      %st{0} = memref.load %scale[%cRow{0}] : memref<?xf32>\n",
                            r);
      for (int run = 0; run < runs; ++run) {
        const int gate = kernel.swiglu ? 2 * run : run, up = kernel.swiglu ? gate + 1 : gate;
        finishes += finish(rows, r, "dot", gate, up, fmt::format("%run{}", run));
      }
      singleFinishes += finish(rows, r, "dotN", 0, kernel.swiglu ? 1 : 0, "%n");
    }
    return fmt::format(
        R"mlir(    %cRows{rows} = arith.constant {rows} : index
    %isRows{rows} = arith.cmpi eq, %rows, %cRows{rows} : index
    scf.if %isRows{rows} {{
{scales}      scf.for %i = %c0 to %runLength step %c1 {{
{runIndices}{call}{finishes}      }}
      scf.for %n = %nRest to %nEnd step %c1 {{
{singleUp}{singleCall}{singleFinishes}      }}
    }}
)mlir",
        fmt::arg("rows", rows), fmt::arg("scales", scales), fmt::arg("runIndices", runIndices),
        fmt::arg("call", call(rows, runRows, "dot")), fmt::arg("finishes", finishes),
        fmt::arg("singleUp", singleUp), fmt::arg("singleCall", call(rows, singleRows, "dotN")),
        fmt::arg("singleFinishes", singleFinishes));
  }
};

/// A prefill of %rows <= inPlacePrefillRows rows (already rounded into
/// %xp): like decode, the columns the workgroups own cut into
/// decodeRuns() runs read side by side, each weight row read once for all
/// the rows (@<name>_in_place_rows<R>_<S>), then every row's epilogue. A
/// pass over the weight serves the whole prompt where the panels' packing
/// read it at 32 GB/s against decode's 60 (AMD family 26, 2 threads).
std::string inPlacePrefill(const FusedLinearKernel &kernel, const ColumnBlockLayout &l,
                           const PanelViews &v, const KernelFrame &frame) {
  const DecodeRunCut cut = decodeRunCut("%nBegin", "%nEnd", kernel.decodeRuns(), "%nRest");
  const InPlaceText text{kernel, l, v, frame};
  std::string cases;
  for (int rows = 2; rows <= kernel.inPlacePrefillRows; ++rows)
    cases += text.rowCount(rows, cut);
  return fmt::format(R"mlir(    %cColumnsPerGroup = arith.constant {columnsPerGroup} : index
    %cOut = arith.constant {out} : index
    %nBegin = arith.muli %wgBegin, %cColumnsPerGroup : index
    %nEndGroup = arith.muli %wgEnd, %cColumnsPerGroup : index
    %nEnd = arith.minui %nEndGroup, %cOut : index
{cut}{cases})mlir",
                     fmt::arg("columnsPerGroup", FusedLinearKernel::kColumnsPerWorkgroup),
                     fmt::arg("out", kernel.outFeatures), fmt::arg("cut", cut.cut),
                     fmt::arg("cases", cases));
}

} // namespace

std::string panelLinearSource(const FusedLinearKernel &kernel) {
  ColumnBlockLayout l = columnBlockLayout(kernel);
  l.weightType = fmt::format("memref<2x{}x32xi16>", l.pairs); // the tiles read the panel
  const PanelViews v = panelViews(kernel, l);
  const int64_t tileRows = kernel.prefillTileRows;
  const bool bf16 = kernel.prefillMatmul == PrefillMatmul::Avx512Bf16;
  const KernelFrame frame = kernelFrame(kernel, l.xType, l.yType);
  const bool splitPairs = splitsDecodePairs(kernel);
  // The row tiles prefetch the next pair's rows as they go.
  std::string source = storeFunction(kernel, l) +
                       tileFunction(kernel, l, int(tileRows), bf16, /*prefetchNext=*/true);
  for (int p : leftoverTileRows(int(tileRows)))
    source += tileFunction(kernel, l, p, bf16);
  // A block's part and first pair (the packing and its prefetch), a row's
  // part and index in it (decode).
  source += packPanelFunction(kernel, l, v) +
            partAtFunction(kernel, v.parts, "block_at", v.pairsType, kBlock, kBlock * l.pairs) +
            partAtFunction(kernel, v.parts, "row_at", v.parts.rowsType, 1, 1) +
            dotFunction(kernel, l.xType, v.parts.rowsType, splitPairs) +
            dotStreamsFunction(kernel, l.xType, v.parts.rowsType, splitPairs) +
            (splitPairs ? splitPairsFunction(kernel, l.xType) : "") +
            finishFunction(kernel, l.yType) + frame.helpers;
  const RoundedActivations rounding = roundedActivations(kernel, l, "%rows", "%rows");
  if (bf16)
    source += rounding.helpers;
  // Prompts of a few rows read the weight rows in place, once, instead.
  const bool inPlace = kernel.inPlacePrefillRows > 1;
  std::string inPlaceOpen;
  if (inPlace) {
    source += inPlaceRowsFunctions(kernel, l) +
              partAtFunction(kernel, v.parts, "pair_row_at", v.pairsType, 1, l.pairs);
    inPlaceOpen = fmt::format("    %cInPlaceRows = arith.constant {} : index\n"
                              "    %inPlace = arith.cmpi ule, %rows, %cInPlaceRows : index\n"
                              "    scf.if %inPlace {{\n{}    }} else {{\n",
                              kernel.inPlacePrefillRows, inPlacePrefill(kernel, l, v, frame));
  }
  const std::string x = bf16 ? "%xp" : frame.dotInput;
  const std::string blocks = "%panel, %t, %c0, %c1";
  const std::string packType =
      fmt::format("({}, {}, index, index) -> ()", v.pairsType, v.panelType);
  const std::string blockAtType =
      fmt::format("({}, index) -> ({}, index)", partTypes(v.parts, v.pairsType), v.pairsType);
  source += frame.opening;
  source += partViews(v, l);
  source += fmt::format(
      R"mlir(  %c16 = arith.constant 16 : index
  %multiRow = arith.cmpi ugt, %rows, %c1 : index
  scf.if %multiRow {{
{rounding}{inPlaceOpen}    %cTwo = arith.constant 2 : index
    %cBlocksPerGroup = arith.constant {blocksPerGroup} : index
    %cOutBlocks = arith.constant {outBlocks} : index
    %cTileRows = arith.constant {tileRows} : index
    %cLastBlock = arith.constant {lastBlock} : index
    %panel = memref.view %scratch[%c0][] : memref<?xi8> to {tileWeightType}
    %panelPairs = memref.view %scratch[%c0][] : memref<?xi8> to {panelType}
    %bBegin = arith.muli %wgBegin, %cBlocksPerGroup : index
    %bEndGroup = arith.muli %wgEnd, %cBlocksPerGroup : index
    %bEnd = arith.minui %bEndGroup, %cOutBlocks : index
    %tiles = arith.divui %rows, %cTileRows : index
    %tiledRows = arith.muli %tiles, %cTileRows : index
{prefetchShare}    scf.for %bA = %bBegin to %bEnd step {step} {{
{pairing}      %colA = arith.muli %bA, %c16 : index
      %colB = arith.muli %bB, %c16 : index
{nextPair}      %pfA, %pfBaseA = func.call @{name}_block_at({pairs}, %nextA) : {blockAtType}
      %pfB, %pfBaseB = func.call @{name}_block_at({pairs}, %nextB) : {blockAtType}
      %wA, %baseA = func.call @{name}_block_at({pairs}, %bA) : {blockAtType}
      %wB, %baseB = func.call @{name}_block_at({pairs}, %bB) : {blockAtType}
      func.call @{name}_pack_panel(%wA, %panelPairs, %c0, %baseA) : {packType}
      func.call @{name}_pack_panel(%wB, %panelPairs, %c1, %baseB) : {packType}
      scf.for %t = %c0 to %tiledRows step %cTileRows {{
{firstLine}{prefillTile}      }}
{leftoverTiles}    }}
{inPlaceClose}  }} else {{
{decode}  }}
)mlir",
      fmt::arg("pairs", partList(v.parts, "%wPairs")), fmt::arg("packType", packType),
      fmt::arg("blockAtType", blockAtType), fmt::arg("prefetchShare", prefetchShare(l)),
      fmt::arg("firstLine", prefetchFirstLine()), fmt::arg("panelType", v.panelType),
      fmt::arg("tileWeightType", l.weightType), fmt::arg("name", kernel.name),
      fmt::arg("blocksPerGroup", FusedLinearKernel::kColumnsPerWorkgroup / kBlock),
      fmt::arg("outBlocks", l.outBlocks), fmt::arg("tileRows", tileRows),
      fmt::arg("lastBlock", l.blocks - 1), fmt::arg("rounding", bf16 ? rounding.opening : ""),
      fmt::arg("step", kernel.swiglu ? "%c1" : "%cTwo"),
      fmt::arg("nextPair", nextBlockPair(kernel.swiglu ? "%c1" : "%cTwo")),
      fmt::arg("pairing", blockPairing(kernel, l)),
      fmt::arg("prefillTile",
               tileAndStore(kernel, l, int(tileRows), bf16, x, frame.residualOperand, blocks,
                            prefetchArguments("%pfA", "%pfBaseA", "%pfB", "%pfBaseB"))),
      fmt::arg("leftoverTiles",
               leftoverTiles(kernel, l, int(tileRows), bf16, x, frame.residualOperand, blocks)),
      fmt::arg("inPlaceOpen", inPlaceOpen), fmt::arg("inPlaceClose", inPlace ? "    }\n" : ""),
      fmt::arg("decode", rowMajorDecode(kernel, l, v, frame)));
  source += frame.closing;
  return source;
}

} // namespace q3::cpu::detail
