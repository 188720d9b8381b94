//===- ColumnBlockLinearSource.cpp - fused_linear on column-block weights -===//
//
// fused_linear for a bf16 or f16 weight in the column-block layout
// ([N/16][K/2][16][2], #q3.column_blocks). A register tile is R rows x
// 2 blocks of 16 columns: per pair of k, each block is one 64-byte load that
// widens exactly to the f32 weights of k and k+1 (bf16: a shift and a mask;
// f16: the low and high halves through vcvtph2ps), and every
// row's x[t, k] and x[t, k+1] are broadcast into 2R fused multiply-adds per
// block. Prefill runs R-row tiles (R from the kernel's q3.lowering tile: 2R
// accumulators, each weight load serves R rows), the remaining rows tiles
// of the powers of two below R (7 rows left by 8-row tiles: 4 + 2 + 1,
// three passes over the weights instead of seven). Decode cuts its blocks
// into four runs (SwiGLU: two, gate and up) and reads a block of each side
// by side, four memory streams per thread: on huge pages one stream per
// core left a quarter of the bandwidth unused (docs/cpu-backend.md; on
// small pages, where each stream misses the TLB, two streams had measured
// 10-15% slower than one). The epilogue (norm scale, SwiGLU, residual)
// works on 16 columns at once.
// Workgroup w owns output blocks [4w, 4w + 4).
//
// With matmul avx512bf16 every row of a prefill is rounded to bf16 and
// multiplied with vdpbf16ps (its R-row tiles and the smaller tiles of the rest),
// so all prefill rows see the same arithmetic, as the q3.lowering promises;
// decode stays f32. With matmul amx, prefills of 16 rows or more run on the
// tile unit (AmxLinearSource.cpp) and shorter ones on the vdpbf16ps tiles.
//
// SwiGLU pairs gate block b with up block b + N/32 (the up half's rows follow
// the gate half's); plain kernels pair neighbouring output blocks.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/ColumnBlockLinear.h"
#include "backends/cpu/FusedLinearDots.h"
#include "backends/cpu/KernelSourceUtil.h"

#include <fmt/format.h>

namespace q3::cpu::detail {

ColumnBlockLayout columnBlockLayout(const FusedLinearKernel &kernel) {
  ColumnBlockLayout l;
  l.k = kernel.inFeatures;
  l.pairs = l.k / 2;
  l.blocks = kernel.weightRows() / kBlock;
  l.outBlocks = kernel.outFeatures / kBlock;
  l.xType = fmt::format("memref<?x{}xf32>", l.k);
  l.yType = fmt::format("memref<?x{}xf32>", kernel.outFeatures);
  l.weightType = fmt::format("memref<{}x{}x32xi16>", l.blocks, l.pairs);
  l.flatType = fmt::format("memref<{}xi16>", l.blocks * l.pairs * 32);
  l.pairType = fmt::format("memref<?x{}xi32>", l.pairs);
  l.roundType = fmt::format("memref<?x{}xi16>", l.k);
  return l;
}

namespace {

/// Fewer rows take the vdpbf16ps tiles: the tile unit pads to 32 rows.
constexpr int64_t kAmxMinRows = 16;
using Layout = ColumnBlockLayout;

/// %we<id> and %wo<id>, the f32 weights of k and k+1 in the 16 (k, k+1)
/// pairs %wi<id> (vector<16xi32>), exactly: bf16 by a shift and a mask, f16
/// by truncating each pair to its low or high half and vcvtph2ps. Expects
/// %shift (dense<16>) and %highHalf (dense<0xFFFF0000>).
std::string widenPairs(const FusedLinearKernel &kernel, const std::string &id) {
  if (kernel.weight == DType::F16)
    return fmt::format("    %wel{0} = arith.trunci %wi{0} : vector<16xi32> to vector<16xi16>\n"
                       "    %weh{0} = arith.bitcast %wel{0} : vector<16xi16> to vector<16xf16>\n"
                       "    %we{0} = arith.extf %weh{0} : vector<16xf16> to vector<16xf32>\n"
                       "    %wos{0} = arith.shrui %wi{0}, %shift : vector<16xi32>\n"
                       "    %wol{0} = arith.trunci %wos{0} : vector<16xi32> to vector<16xi16>\n"
                       "    %woh{0} = arith.bitcast %wol{0} : vector<16xi16> to vector<16xf16>\n"
                       "    %wo{0} = arith.extf %woh{0} : vector<16xf16> to vector<16xf32>\n",
                       id);
  return fmt::format("    %wes{0} = arith.shli %wi{0}, %shift : vector<16xi32>\n"
                     "    %we{0} = arith.bitcast %wes{0} : vector<16xi32> to vector<16xf32>\n"
                     "    %wom{0} = arith.andi %wi{0}, %highHalf : vector<16xi32>\n"
                     "    %wo{0} = arith.bitcast %wom{0} : vector<16xi32> to vector<16xf32>\n",
                     id);
}

/// The multiply-adds of one k pair for row r into %q<r>_<c> from %a<r>_<c>:
/// f32 FMAs on the widened weights %we<c>/%wo<c> and broadcast x[t, k],
/// x[t, k+1]; or, with `bf16`, one vdpbf16ps per block on the raw weights
/// %wi<c> and the broadcast pair %xp[t, kp] of bf16-rounded activations.
std::string rowMultiplyAdds(const Layout &l, int r, bool bf16) {
  std::string text;
  if (bf16)
    text += fmt::format("    %xs{0} = memref.load %x[%t{0}, %kp] : {1}\n"
                        "    %xv{0} = vector.broadcast %xs{0} : i32 to vector<16xi32>\n",
                        r, l.pairType);
  else
    text += fmt::format("    %xe{0}s = memref.load %x[%t{0}, %k0] : {1}\n"
                        "    %xo{0}s = memref.load %x[%t{0}, %k1] : {1}\n"
                        "    %xe{0} = vector.broadcast %xe{0}s : f32 to vector<16xf32>\n"
                        "    %xo{0} = vector.broadcast %xo{0}s : f32 to vector<16xf32>\n",
                        r, l.xType);
  for (int c = 0; c < 2; ++c) {
    const std::string id = fmt::format("{}_{}", r, c);
    if (bf16)
      text += "    " +
              vdpbf16ps("%q" + id, fmt::format("%xv{}", r), fmt::format("%wi{}", c), "%a" + id) +
              "\n";
    else
      text += fmt::format("    %p{0} = vector.fma %we{1}, %xe{2}, %a{0} : vector<16xf32>\n"
                          "    %q{0} = vector.fma %wo{1}, %xo{2}, %p{0} : vector<16xf32>\n",
                          id, c, r);
  }
  return text;
}

} // namespace

std::string tileFunction(const FusedLinearKernel &kernel, const Layout &l, int rows, bool bf16,
                         bool prefetchNext) {
  std::string setup, loads, body, iterArgs, yields, types;
  // One line of each next block every 2^%pfShift k pairs (line %pfFirst +
  // kp >> %pfShift): the caller's shift covers the tile's share of lines.
  if (prefetchNext) {
    setup += "  %pfOne = arith.constant 1 : index\n"
             "  %pfPeriod = arith.shli %pfOne, %pfShift : index\n"
             "  %pfMask = arith.subi %pfPeriod, %pfOne : index\n";
    loads += "    %pfPhase = arith.andi %kp, %pfMask : index\n"
             "    %pfNow = arith.cmpi eq, %pfPhase, %c0 : index\n"
             "    scf.if %pfNow {\n"
             "    %pfStep = arith.shrui %kp, %pfShift : index\n"
             "    %pfLine_ = arith.addi %pfFirst, %pfStep : index\n"
             "    %pfLine = arith.minui %pfLine_, %pfEnd : index\n"
             "    %pfAt = arith.muli %pfLine, %c16 : index\n"
             "    %pfAtA = arith.addi %pfBaseA, %pfAt : index\n"
             "    %pfAtB = arith.addi %pfBaseB, %pfAt : index\n"
             "    memref.prefetch %pfA[%pfAtA], read, locality<2>, data : memref<?xi32>\n"
             "    memref.prefetch %pfB[%pfAtB], read, locality<2>, data : memref<?xi32>\n"
             "    }\n";
  }
  for (int r = 1; r < rows; ++r)
    setup += fmt::format("  %cRow{0} = arith.constant {0} : index\n"
                         "  %t{0} = arith.addi %t0, %cRow{0} : index\n",
                         r);
  for (int c = 0; c < 2; ++c) {
    if (bf16) {
      loads +=
          fmt::format("    %wv{0} = vector.load %w[%b{0}, %kp, %c0] : {1}, vector<32xi16>\n"
                      "    %wi{0} = vector.bitcast %wv{0} : vector<32xi16> to vector<16xi32>\n",
                      c, l.weightType);
      continue;
    }
    loads += fmt::format("    %wv{0} = vector.load %w[%b{0}, %kp, %c0] : {1}, vector<32xi16>\n"
                         "    %wi{0} = vector.bitcast %wv{0} : vector<32xi16> to vector<16xi32>\n",
                         c, l.weightType) +
             widenPairs(kernel, std::to_string(c));
  }
  for (int r = 0; r < rows; ++r) {
    body += rowMultiplyAdds(l, r, bf16);
    for (int c = 0; c < 2; ++c) {
      const std::string id = fmt::format("{}_{}", r, c);
      iterArgs += fmt::format("{}%a{} = %zero", iterArgs.empty() ? "" : ", ", id);
      yields += fmt::format("{}%q{}", yields.empty() ? "" : ", ", id);
      types += fmt::format("{}vector<16xf32>", types.empty() ? "" : ", ");
    }
  }
  std::string results;
  for (int i = 0; i < 2 * rows; ++i)
    results += fmt::format("{}%acc#{}", i ? ", " : "", i);
  return fmt::format(
      R"mlir(
func.func private @{name}_tile{rows}{suffix}{pfSuffix}(%x: {xType}, %w: {weightType}, %t0: index, %b0: index, %b1: index{pfArgs}) -> ({types}) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %cPairs = arith.constant {pairs} : index
  %shift = arith.constant dense<16> : vector<16xi32>
  %highHalf = arith.constant dense<-65536> : vector<16xi32>
  %zero = arith.constant dense<0.0> : vector<16xf32>
{setup}  %acc:{count} = scf.for %kp = %c0 to %cPairs step %c1 iter_args({iterArgs}) -> ({types}) {{
    %k0 = arith.addi %kp, %kp : index
    %k1 = arith.addi %k0, %c1 : index
{loads}{body}    scf.yield {yields} : {types}
  }}
  return {results} : {types}
}}
)mlir",
      fmt::arg("name", kernel.name), fmt::arg("rows", rows),
      fmt::arg("suffix", bf16 ? "_bf16" : ""), fmt::arg("xType", bf16 ? l.pairType : l.xType),
      fmt::arg("weightType", l.weightType), fmt::arg("flatType", l.flatType),
      fmt::arg("types", types), fmt::arg("pairs", l.pairs), fmt::arg("setup", setup),
      fmt::arg("count", 2 * rows), fmt::arg("iterArgs", iterArgs), fmt::arg("loads", loads),
      fmt::arg("body", body), fmt::arg("yields", yields), fmt::arg("results", results),
      fmt::arg("pfSuffix", prefetchNext ? "_prefetching" : ""),
      fmt::arg("pfArgs", prefetchNext ? ", %pfA: memref<?xi32>, %pfBaseA: index, %pfB: "
                                        "memref<?xi32>, %pfBaseB: index, %pfFirst: index, "
                                        "%pfShift: index, %pfEnd: index"
                                      : ""));
}

namespace {

/// @<name>_blocks<N>(x, w, wflat, t, b0, ..., b<N-1>) -> N x 16 f32 sums:
/// row t of x against weight blocks b0 .. b<N-1>, the decode streams read
/// side by side: per k pair one 64-byte load of each block, the k and k+1
/// products in separate accumulators (no FMA waits for another of its
/// iteration), and a prefetch kernel.prefetchBytes ahead of each, in the
/// flat weight (a run of blocks is contiguous, so it continues into the
/// block that run reads next), unless prefetch_bytes = none.
std::string decodeBlocksFunction(const FusedLinearKernel &kernel, const Layout &l, int streams) {
  const int64_t blockElems = l.pairs * 32;
  const int64_t aheadElems = kernel.prefetches() ? kernel.prefetchBytes / 2 : 0;
  std::string arguments, iterArgs, yields, types, bases, body, sums, results, resultTypes;
  for (int s = 0; s < streams; ++s) {
    const std::string sep = s == 0 ? "" : ", ";
    arguments += fmt::format(", %b{}: index", s);
    iterArgs += fmt::format("{0}%ae{1} = %zero, %ao{1} = %zero", sep, s);
    yields += fmt::format("{0}%qe{1}, %qo{1}", sep, s);
    types += fmt::format("{}vector<16xf32>, vector<16xf32>", sep);
    bases += fmt::format("  %base{0}_ = arith.muli %b{0}, %blockElems : index\n"
                         "  %base{0} = arith.addi %base{0}_, %ahead : index\n",
                         s);
    if (kernel.prefetches())
      body += fmt::format("    %pfAt{0}_ = arith.addi %base{0}, %pfPair : index\n"
                          "    %pfAt{0} = arith.minui %pfAt{0}_, %lastElem : index\n"
                          "    memref.prefetch %wflat[%pfAt{0}], read, locality<2>, data : {1}\n",
                          s, l.flatType);
    body += fmt::format(R"mlir(    %wv{0} = vector.load %w[%b{0}, %kp, %c0] : {2}, vector<32xi16>
    %wi{0} = vector.bitcast %wv{0} : vector<32xi16> to vector<16xi32>
{3}    %qe{0} = vector.fma %we{0}, %xe, %ae{0} : vector<16xf32>
    %qo{0} = vector.fma %wo{0}, %xo, %ao{0} : vector<16xf32>
)mlir",
                        s, l.flatType, l.weightType, widenPairs(kernel, std::to_string(s)));
    sums += fmt::format("  %sum{0} = arith.addf %wide#{1}, %wide#{2} : vector<16xf32>\n", s, 2 * s,
                        2 * s + 1);
    results += fmt::format("{}%sum{}", sep, s);
    resultTypes += fmt::format("{}vector<16xf32>", sep);
  }
  return fmt::format(
      R"mlir(
func.func private @{name}_blocks{streams}(%x: {xType}, %w: {weightType}, %wflat: {flatType}, %t0: index{arguments}) -> ({resultTypes}) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cPairs = arith.constant {pairs} : index
  %pairElems = arith.constant 32 : index
  %blockElems = arith.constant {blockElems} : index
  %ahead = arith.constant {ahead} : index
  %lastElem = arith.constant {lastElem} : index
  %shift = arith.constant dense<16> : vector<16xi32>
  %highHalf = arith.constant dense<-65536> : vector<16xi32>
  %zero = arith.constant dense<0.0> : vector<16xf32>
{bases}  %wide:{wideCount} = scf.for %kp = %c0 to %cPairs step %c1 iter_args({iterArgs}) -> ({types}) {{
    %k0 = arith.addi %kp, %kp : index
    %k1 = arith.addi %k0, %c1 : index
    %xes = memref.load %x[%t0, %k0] : {xType}
    %xos = memref.load %x[%t0, %k1] : {xType}
    %xe = vector.broadcast %xes : f32 to vector<16xf32>
    %xo = vector.broadcast %xos : f32 to vector<16xf32>
    %pfPair = arith.muli %kp, %pairElems : index
{body}    scf.yield {yields} : {types}
  }}
{sums}  return {results} : {resultTypes}
}}
)mlir",
      fmt::arg("name", kernel.name), fmt::arg("streams", streams), fmt::arg("xType", l.xType),
      fmt::arg("weightType", l.weightType), fmt::arg("flatType", l.flatType),
      fmt::arg("arguments", arguments), fmt::arg("resultTypes", resultTypes),
      fmt::arg("pairs", l.pairs), fmt::arg("blockElems", blockElems), fmt::arg("ahead", aheadElems),
      fmt::arg("lastElem", l.blocks * blockElems - 1), fmt::arg("bases", bases),
      fmt::arg("wideCount", 2 * streams), fmt::arg("iterArgs", iterArgs), fmt::arg("types", types),
      fmt::arg("body", body), fmt::arg("yields", yields), fmt::arg("sums", sums),
      fmt::arg("results", results));
}

/// Decode (one row, or none): the output blocks %bBegin .. %bEnd cut into
/// decodeRuns() runs (SwiGLU: each read as its gate and up blocks) read side
/// by side by @<name>_blocks<decodeRowsSideBySide()>, then the blocks the
/// runs leave one at a time (@<name>_blocks1; SwiGLU: gate and up).
std::string blockDecode(const FusedLinearKernel &kernel, const Layout &l, const std::string &x,
                        const std::string &residual) {
  const int runs = kernel.decodeRuns(), rows = kernel.decodeRowsSideBySide();
  const std::string xTypes = fmt::format("{}, {}, {}, index", l.xType, l.weightType, l.flatType);
  const DecodeRunCut cut = decodeRunCut("%bBegin", "%bEnd", runs, "%bRest");
  std::string streams = cut.indices;
  std::string blocks, blockTypes, vectorTypes, stores;
  for (int s = 0; s < rows; ++s) {
    const int r = kernel.swiglu ? s / 2 : s;
    if (kernel.swiglu && s % 2 == 1) {
      streams += fmt::format("        %runUp{0} = arith.addi %run{0}, %cUpOffset : index\n", r);
      blocks += fmt::format(", %runUp{}", r);
    } else {
      blocks += fmt::format(", %run{}", r);
    }
    blockTypes += ", index";
    vectorTypes += fmt::format("{}vector<16xf32>", s == 0 ? "" : ", ");
  }
  for (int r = 0; r < runs; ++r) {
    const std::string v = fmt::format("%v#{}", kernel.swiglu ? 2 * r : r);
    const std::string up = kernel.swiglu ? fmt::format("%v#{}", 2 * r + 1) : v;
    stores += fmt::format(
        "        %col{0} = arith.muli %run{0}, %c16 : index\n"
        "        {1}\n",
        r, storeCall(kernel, l, v, up, "%st", "%t", fmt::format("%col{}", r), residual));
  }
  std::string rest =
      fmt::format("        %vb = func.call @{0}_blocks1({1}, %w, %wflat, %t, %b) : ({2}, index) "
                  "-> vector<16xf32>\n",
                  kernel.name, x, xTypes);
  std::string up = "%vb";
  if (kernel.swiglu) {
    rest += fmt::format("        %bUp = arith.addi %b, %cUpOffset : index\n"
                        "        %vu = func.call @{0}_blocks1({1}, %w, %wflat, %t, %bUp) : ({2}, "
                        "index) -> vector<16xf32>\n",
                        kernel.name, x, xTypes);
    up = "%vu";
  }
  rest += fmt::format("        %colRest = arith.muli %b, %c16 : index\n        {}\n",
                      storeCall(kernel, l, "%vb", up, "%st", "%t", "%colRest", residual));
  return fmt::format(
      R"mlir({cut}    %cUpOffset = arith.constant {upOffset} : index
    scf.for %t = %c0 to %rows step %c1 {{
      %st = memref.load %scale[%t] : memref<?xf32>
      scf.for %i = %c0 to %runLength step %c1 {{
{streams}        %v:{streamCount} = func.call @{name}_blocks{streamCount}({x}, %w, %wflat, %t{blocks}) : ({xTypes}{blockTypes}) -> ({vectorTypes})
{stores}      }}
      scf.for %b = %bRest to %bEnd step %c1 {{
{rest}      }}
    }}
)mlir",
      fmt::arg("cut", cut.cut), fmt::arg("upOffset", l.outBlocks), fmt::arg("streams", streams),
      fmt::arg("streamCount", rows), fmt::arg("name", kernel.name), fmt::arg("x", x),
      fmt::arg("blocks", blocks), fmt::arg("xTypes", xTypes), fmt::arg("blockTypes", blockTypes),
      fmt::arg("vectorTypes", vectorTypes), fmt::arg("stores", stores), fmt::arg("rest", rest));
}

} // namespace

std::string tileAndStore(const FusedLinearKernel &kernel, const Layout &l, int rows, bool bf16,
                         const std::string &x, const std::string &residual,
                         const std::string &blocks, const std::string &prefetch) {
  std::string types;
  for (int i = 0; i < 2 * rows; ++i)
    types += i ? ", vector<16xf32>" : "vector<16xf32>";
  const std::string prefetchTypes =
      prefetch.empty() ? "" : ", memref<?xi32>, index, memref<?xi32>, index, index, index, index";
  std::string text =
      fmt::format("        %r{0}:{1} = func.call @{2}_tile{0}{3}{11}({4}, {8}{9}) : "
                  "({5}, {6}, index, index, index{10}) -> ({7})\n",
                  rows, 2 * rows, kernel.name, bf16 ? "_bf16" : "", x, bf16 ? l.pairType : l.xType,
                  l.weightType, types, blocks, prefetch.empty() ? "" : ", " + prefetch,
                  prefetchTypes, prefetch.empty() ? "" : "_prefetching");
  auto store = [&](const std::string &v, const std::string &up, const std::string &row,
                   const std::string &column) {
    return storeCall(kernel, l, v, up, "%st" + row, "%t" + row, column, residual);
  };
  for (int r = 0; r < rows; ++r) {
    const std::string row = fmt::format("{}_{}", rows, r); // %t<row>: the row's index
    text += fmt::format("        %c{0} = arith.constant {1} : index\n"
                        "        %t{0} = arith.addi %t, %c{0} : index\n"
                        "        %st{0} = memref.load %scale[%t{0}] : memref<?xf32>\n",
                        row, r);
    const std::string first = fmt::format("%r{}#{}", rows, 2 * r),
                      second = fmt::format("%r{}#{}", rows, 2 * r + 1);
    if (kernel.swiglu) {
      text += "        " + store(first, second, row, "%colA") + "\n";
    } else {
      text += "        " + store(first, first, row, "%colA") + "\n";
      text += fmt::format("        scf.if %pairFull {{\n          {}\n        }}\n",
                          store(second, second, row, "%colB"));
    }
  }
  return text;
}

std::string prefetchShare(const ColumnBlockLayout &l) {
  return fmt::format("    %cBlockLines = arith.constant {0} : index\n"
                     "    %cLastLine = arith.constant {1} : index\n"
                     "    %someTiles = arith.maxui %tiles, %c1 : index\n"
                     "    %pfSpread = arith.addi %cBlockLines, %someTiles : index\n"
                     "    %pfSpread1 = arith.subi %pfSpread, %c1 : index\n"
                     "    %pfLinesPerTile = arith.divui %pfSpread1, %someTiles : index\n"
                     "    %pfRatio_ = arith.divui %cBlockLines, %pfLinesPerTile : index\n"
                     "    %pfRatio = arith.maxui %pfRatio_, %c1 : index\n"
                     "    %pfRatioI = arith.index_cast %pfRatio : index to i64\n"
                     "    %pfZeros = math.ctlz %pfRatioI : i64\n"
                     "    %c63 = arith.constant 63 : i64\n"
                     "    %pfShiftI = arith.subi %c63, %pfZeros : i64\n"
                     "    %pfShift = arith.index_cast %pfShiftI : i64 to index\n",
                     l.pairs, l.pairs - 1);
}

std::string nextBlockPair(const std::string &step) {
  return fmt::format("      %nextA_ = arith.addi %bA, {0} : index\n"
                     "      %nextB_ = arith.addi %bB, {0} : index\n"
                     "      %nextA = arith.minui %nextA_, %cLastBlock : index\n"
                     "      %nextB = arith.minui %nextB_, %cLastBlock : index\n",
                     step);
}

std::string prefetchFirstLine() {
  return "        %tile = arith.divui %t, %cTileRows : index\n"
         "        %pfFirst = arith.muli %tile, %pfLinesPerTile : index\n";
}

std::string prefetchArguments(const std::string &a, const std::string &baseA,
                              const std::string &b, const std::string &baseB) {
  return fmt::format("{}, {}, {}, {}, %pfFirst, %pfShift, %cLastLine", a, baseA, b, baseB);
}

std::vector<int> leftoverTileRows(int tileRows) {
  std::vector<int> heights;
  for (int p = 1; p < tileRows; p *= 2)
    heights.insert(heights.begin(), p);
  return heights;
}

std::string leftoverTiles(const FusedLinearKernel &kernel, const Layout &l, int tileRows, bool bf16,
                          const std::string &x, const std::string &residual,
                          const std::string &blocks) {
  std::string text = "      %leftRows = arith.subi %rows, %tiledRows : index\n";
  for (int p : leftoverTileRows(tileRows)) {
    // Rows before this tile: the larger tiles', the bits of %leftRows above p.
    text +=
        fmt::format("      %cBit{0} = arith.constant {0} : index\n"
                    "      %cAbove{0} = arith.constant {1} : index\n"
                    "      %bit{0} = arith.andi %leftRows, %cBit{0} : index\n"
                    "      %runs{0} = arith.cmpi ne, %bit{0}, %c0 : index\n"
                    "      %above{0} = arith.andi %leftRows, %cAbove{0} : index\n"
                    "      scf.if %runs{0} {{\n"
                    "        %t = arith.addi %tiledRows, %above{0} : index\n"
                    "{2}      }}\n",
                    p, ~int64_t(2 * p - 1), tileAndStore(kernel, l, p, bf16, x, residual, blocks));
  }
  return text;
}

std::string storeFunction(const FusedLinearKernel &kernel, const ColumnBlockLayout &l) {
  const std::string vector = "vector<16xf32>";
  const Epilogue e =
      epilogue(kernel, vector, "%v", "%up", "%s",
               fmt::format("%rv = vector.load %res[%t, %col] : {}, {}", l.yType, vector));
  const std::string body = "  %s = vector.broadcast %scale : f32 to vector<16xf32>\n" + e.ops;
  return fmt::format(R"mlir(
func.func private @{name}_store(%v: vector<16xf32>, %up: vector<16xf32>, %scale: f32, %t: index, %col: index, %y: {yType}, %res: {yType}) {{
{body}  vector.store {last}, %y[%t, %col] : {yType}, vector<16xf32>
  return
}}
)mlir",
                     fmt::arg("name", kernel.name), fmt::arg("yType", l.yType),
                     fmt::arg("body", body), fmt::arg("last", e.result));
}

std::string storeCall(const FusedLinearKernel &kernel, const ColumnBlockLayout &l,
                      const std::string &v, const std::string &up, const std::string &scale,
                      const std::string &row, const std::string &column,
                      const std::string &residual) {
  return fmt::format("func.call @{0}_store({1}, {2}, {3}, {4}, {5}, %y, {6}) : "
                     "(vector<16xf32>, vector<16xf32>, f32, index, index, {7}, {7}) -> ()",
                     kernel.name, v, up, scale, row, column, residual, l.yType);
}

RoundedActivations roundedActivations(const FusedLinearKernel &kernel, const ColumnBlockLayout &l,
                                      const std::string &rows, const std::string &allocatedRows) {
  const int64_t vectorEnd = l.k - l.k % kLanes;
  // x, or x * gain (the frame's %gain view): the same f32 product the decode
  // row's prologue makes, so a row rounds alike on either path.
  std::string loaded = "%v", vectorScaled, scalarScaled;
  if (kernel.prologueGain) {
    loaded = "%xr";
    vectorScaled =
        "\n      " +
        vectorWidenedLoad(*kernel.prologueGain, "%gvr", "%gain", "%k", gainViewType(kernel)) +
        "\n      %v = arith.mulf %xr, %gvr : vector<16xf32>";
    scalarScaled = "\n      " +
                   widenedLoad(*kernel.prologueGain, "%gsr", "%gain", "%k", gainViewType(kernel)) +
                   "\n      %v = arith.mulf %xr, %gsr : f32";
  }
  RoundedActivations rounded;
  rounded.opening = fmt::format(
      R"mlir(  %xh = memref.view %scratch[%roundedAt][{allocatedRows}] : memref<?xi8> to {roundType}
  %xp = memref.view %scratch[%roundedAt][{allocatedRows}] : memref<?xi8> to {pairType}
  %scratchAt = memref.extract_aligned_pointer_as_index %scratch : memref<?xi8> -> index
  %xhAtIndex = arith.addi %scratchAt, %roundedAt : index
  %xhAt = arith.index_cast %xhAtIndex : index to i64
  %roundK = arith.constant {k} : index
  %roundVectorEnd = arith.constant {vectorEnd} : index
  %roundStep = arith.constant 16 : index
  %zeroHalves = arith.constant dense<0> : vector<16xi16>
  %zeroHalf = arith.constant 0 : i16
  scf.for %t = %c0 to {rows} step %c1 {{
    scf.for %k = %c0 to %roundVectorEnd step %roundStep {{
      {loaded} = vector.load %x[%t, %k] : {xType}, vector<16xf32>{vectorScaled}
      %halves = func.call @{name}_round_bf16(%v) : (vector<16xf32>) -> vector<16xi16>
      vector.store %halves, %xh[%t, %k] : {roundType}, vector<16xi16>
    }}
    scf.for %k = %roundVectorEnd to %roundK step %c1 {{
      {loaded} = memref.load %x[%t, %k] : {xType}{scalarScaled}
      %vv = vector.broadcast %v : f32 to vector<16xf32>
      %halves = func.call @{name}_round_bf16(%vv) : (vector<16xf32>) -> vector<16xi16>
      %half = vector.extractelement %halves[%c0 : index] : vector<16xi16>
      memref.store %half, %xh[%t, %k] : {roundType}
    }}
  }}
  scf.for %t = {rows} to {allocatedRows} step %c1 {{
    scf.for %k = %c0 to %roundVectorEnd step %roundStep {{
      vector.store %zeroHalves, %xh[%t, %k] : {roundType}, vector<16xi16>
    }}
    scf.for %k = %roundVectorEnd to %roundK step %c1 {{
      memref.store %zeroHalf, %xh[%t, %k] : {roundType}
    }}
  }}
)mlir",
      fmt::arg("allocatedRows", allocatedRows), fmt::arg("roundType", l.roundType),
      fmt::arg("pairType", l.pairType), fmt::arg("k", l.k), fmt::arg("vectorEnd", vectorEnd),
      fmt::arg("rows", rows), fmt::arg("loaded", loaded), fmt::arg("vectorScaled", vectorScaled),
      fmt::arg("scalarScaled", scalarScaled), fmt::arg("xType", l.xType),
      fmt::arg("name", kernel.name));
  rounded.helpers = bf16RoundingFunction(kernel.name + "_round_bf16", true);
  return rounded;
}

DecodeRunCut decodeRunCut(const std::string &begin, const std::string &end, int runs,
                          const std::string &rest) {
  DecodeRunCut cut;
  cut.cut = fmt::format("    %cRuns = arith.constant {0} : index\n"
                        "    %runSpan = arith.subi {2}, {1} : index\n"
                        "    %runLength = arith.divui %runSpan, %cRuns : index\n"
                        "    %inRuns = arith.muli %runLength, %cRuns : index\n"
                        "    {3} = arith.addi {1}, %inRuns : index\n",
                        runs, begin, end, rest);
  cut.indices = fmt::format("        %run0 = arith.addi {}, %i : index\n", begin);
  for (int r = 1; r < runs; ++r)
    cut.indices +=
        fmt::format("        %run{} = arith.addi %run{}, %runLength : index\n", r, r - 1);
  return cut;
}

std::string blockPairing(const FusedLinearKernel &kernel, const ColumnBlockLayout &l) {
  if (kernel.swiglu)
    return fmt::format("      %cUpOffset = arith.constant {} : index\n"
                       "      %bB = arith.addi %bA, %cUpOffset : index\n"
                       "      %pairFull = arith.constant true\n",
                       l.outBlocks);
  return "      %bNext = arith.addi %bA, %c1 : index\n"
         "      %pairFull = arith.cmpi ult, %bNext, %bEnd : index\n"
         "      %bB = arith.select %pairFull, %bNext, %bA : index\n";
}

std::string columnBlockLinearSource(const FusedLinearKernel &kernel) {
  if (kernel.panelsPerCall)
    return panelLinearSource(kernel);
  const Layout l = columnBlockLayout(kernel);
  const int64_t tileRows = kernel.prefillTileRows;
  const bool amx = kernel.prefillMatmul == PrefillMatmul::Amx && kernel.amxFits();
  // vdpbf16ps tiles: the avx512bf16 prefill, and AMX's prompts too short for the tile unit.
  const bool bf16 = kernel.prefillMatmul == PrefillMatmul::Avx512Bf16 ||
                    kernel.prefillMatmul == PrefillMatmul::Amx;
  // The decode block reads, the prefill tile and the leftover rows' smaller
  // tiles.
  // (@<name>_blocks1 once when decode reads one block at a time.)
  const int decodeRows = kernel.decodeRowsSideBySide();
  std::string source = decodeBlocksFunction(kernel, l, 1) + storeFunction(kernel, l);
  if (decodeRows > 1)
    source += decodeBlocksFunction(kernel, l, decodeRows);
  // The row tiles prefetch the next pair's blocks as they go, as the panel
  // kernel's do its rows (a pair's first tile otherwise waits on memory).
  source += tileFunction(kernel, l, int(tileRows), bf16, /*prefetchNext=*/true);
  for (int p : leftoverTileRows(int(tileRows)))
    source += tileFunction(kernel, l, p, bf16);
  if (amx)
    source += amxFunctions(kernel, l);
  const KernelFrame frame = kernelFrame(kernel, l.xType, l.yType);
  source += frame.helpers;
  // A prefill (more than one row) rounds all its rows; decode rounds none.
  const RoundedActivations rounding = roundedActivations(kernel, l, "%roundedRows", "%roundedRows");
  if (bf16)
    source += rounding.helpers;
  const std::string amxOpening =
      amx ? fmt::format("  %cAmxMinRows = arith.constant {} : index\n"
                        "  %useAmx = arith.cmpi uge, %rows, %cAmxMinRows : index\n"
                        "  scf.if %useAmx {{\n{}  }} else {{\n",
                        kAmxMinRows, amxPrefill(kernel, l, frame.residualOperand))
          : "";
  // The rows the R-row tiles of a prefill leave: tiles of fewer rows.
  const std::string leftoverRows =
      leftoverTiles(kernel, l, int(tileRows), bf16, bf16 ? "%xp" : frame.dotInput,
                    frame.residualOperand, "%w, %t, %bA, %bB");
  source += frame.opening;
  source += fmt::format(
      R"mlir(  %c16 = arith.constant 16 : index
  %cTwo = arith.constant 2 : index
  %cBlocksPerGroup = arith.constant {blocksPerGroup} : index
  %cOutBlocks = arith.constant {outBlocks} : index
  %cTileRows = arith.constant {tileRows} : index
  %w = memref.view %wb[%c0][] : memref<?xi8> to {weightType}
  %wflat = memref.view %wb[%c0][] : memref<?xi8> to {flatType}
  %bBegin = arith.muli %wgBegin, %cBlocksPerGroup : index
  %bEndGroup = arith.muli %wgEnd, %cBlocksPerGroup : index
  %bEnd = arith.minui %bEndGroup, %cOutBlocks : index
  %multiRow = arith.cmpi ugt, %rows, %c1 : index
  %roundedRows = arith.select %multiRow, %rows, %c0 : index
{opening}  %tiles = arith.divui %rows, %cTileRows : index
  %tiledRows = arith.muli %tiles, %cTileRows : index
{rounding}  scf.if %multiRow {{
    %cWords = arith.constant {words} : index
    %wWords = memref.view %wb[%c0][%cWords] : memref<?xi8> to memref<?xi32>
    %cBlockWords = arith.constant {blockWords} : index
    %cLastBlock = arith.constant {lastBlock} : index
{prefetchShare}  scf.for %bA = %bBegin to %bEnd step {step} {{
{pairing}      %colA = arith.muli %bA, %c16 : index
      %colB = arith.muli %bB, %c16 : index
{nextPair}      %pfBaseA = arith.muli %nextA, %cBlockWords : index
      %pfBaseB = arith.muli %nextB, %cBlockWords : index
      scf.for %t = %c0 to %tiledRows step %cTileRows {{
{firstLine}{prefillTile}      }}
{leftoverRows}  }}
  }} else {{
{decode}  }}
{closing})mlir",
      fmt::arg("blocksPerGroup", FusedLinearKernel::kColumnsPerWorkgroup / kBlock),
      fmt::arg("outBlocks", l.outBlocks), fmt::arg("tileRows", tileRows),
      fmt::arg("weightType", l.weightType), fmt::arg("flatType", l.flatType),
      fmt::arg("pairing", blockPairing(kernel, l)),
      fmt::arg("step", kernel.swiglu ? "%c1" : "%cTwo"),
      fmt::arg("nextPair", nextBlockPair(kernel.swiglu ? "%c1" : "%cTwo")),
      fmt::arg("rounding", bf16 ? rounding.opening : ""),
      fmt::arg("words", l.blocks * l.pairs * kBlock), fmt::arg("blockWords", l.pairs * kBlock),
      fmt::arg("lastBlock", l.blocks - 1), fmt::arg("prefetchShare", prefetchShare(l)),
      fmt::arg("firstLine", prefetchFirstLine()),
      fmt::arg("prefillTile",
               tileAndStore(kernel, l, int(tileRows), bf16, bf16 ? "%xp" : frame.dotInput,
                            frame.residualOperand, "%w, %t, %bA, %bB",
                            prefetchArguments("%wWords", "%pfBaseA", "%wWords", "%pfBaseB"))),
      fmt::arg("leftoverRows", leftoverRows),
      fmt::arg("decode", blockDecode(kernel, l, frame.dotInput, frame.residualOperand)),
      fmt::arg("opening", amx ? amxOpening : ""), fmt::arg("closing", amx ? "  }\n" : ""));
  source += frame.closing;
  return source;
}

} // namespace q3::cpu::detail
