//===- QKNormRopeCacheSource.cpp - the q/k-norm + RoPE + cache kernel ---- ===//
#include "backends/cpu/KernelSource.h"
#include "backends/cpu/KernelSourceUtil.h"
#include "runtime/DType.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <vector>

namespace q3::cpu {

using namespace detail;

namespace {

/// Positions between two directly computed RoPE angle tables.
constexpr int64_t kRopeAnglePeriod = 64;

/// theta^(i * -2/D) for i < D/2, as the kernel computed them at run time
/// (math.powf on f64 is libm's pow), each through `f`; printed with 17
/// digits, which round-trip an f64 exactly. With `f` cos and sin: the
/// rotation by one position that `_rotate_angles` applies, from the same
/// libm the kernel's direct angles call.
std::vector<std::string> ropeTable(const QKNormRopeCacheKernel &kernel,
                                   double (*f)(double) = nullptr) {
  const double exponentStep = -2.0 / double(kernel.headDim);
  std::vector<std::string> table;
  for (int64_t i = 0; i < kernel.headDim / 2; ++i) {
    const double frequency = std::pow(kernel.theta, double(i) * exponentStep);
    table.push_back(fmt::format("{:.17e}", f ? f(frequency) : frequency));
  }
  return table;
}

/// Workgroup (t, h) prefetches its share of row t + 1 of q/k/v: the lines
/// h * L .. h * L + L - 1 of it, L = the row's lines over the query heads, so
/// a row's workgroups together fetch all of the next row. Without it each
/// head's loads waited on memory (the rows come from the q/k/v product, which
/// both threads wrote, and a prompt's rows exceed L2): a 512-row prefill spent
/// 17-19 ms in this kernel against 12-14 with it (AMD family 26, 2 threads;
/// the whole prefill within the noise, docs/cpu-backend.md).
/// `width` is the row's floats, `qkvType` its memref type.
std::string nextRowPrefetch(const QKNormRopeCacheKernel &kernel, int64_t width,
                            const std::string &qkvType) {
  constexpr int64_t kLineFloats = 16;
  const int64_t lines = (width + kLineFloats - 1) / kLineFloats;
  return fmt::format(
      R"mlir(    %pfRow = arith.addi %t, %c1 : index
    %pfAhead = arith.cmpi ult, %pfRow, %rows : index
    scf.if %pfAhead {{
      %cPfLines = arith.constant {headLines} : index
      %cPfLineFloats = arith.constant {lineFloats} : index
      %cPfLastColumn = arith.constant {lastColumn} : index
      %pfFirstLine = arith.muli %h, %cPfLines : index
      scf.for %pfI = %c0 to %cPfLines step %c1 {{
        %pfLine = arith.addi %pfFirstLine, %pfI : index
        %pfColumn = arith.muli %pfLine, %cPfLineFloats : index
        %pfAt = arith.minui %pfColumn, %cPfLastColumn : index
        memref.prefetch %qkv[%pfRow, %pfAt], read, locality<3>, data : {qkvType}
      }}
    }}
)mlir",
      fmt::arg("headLines", (lines + kernel.queryHeads - 1) / kernel.queryHeads),
      fmt::arg("lineFloats", kLineFloats), fmt::arg("lastColumn", width - 1),
      fmt::arg("qkvType", qkvType));
}

} // namespace

std::string qkNormRopeCacheSource(const QKNormRopeCacheKernel &kernel) {
  const int64_t d = kernel.headDim, width = (kernel.queryHeads + 2 * kernel.kvHeads) * d;
  const std::string qkvType = fmt::format("memref<?x{}xf32>", width);
  const std::string gainType = fmt::format("memref<{}x{}>", d, storageType(kernel.gains));
  const std::string queryType = fmt::format("memref<?x{}x{}xf32>", kernel.queryHeads, d);
  // [layers][kvHeads][capacity] rows of D elements, viewed as one list of rows.
  const bool bf16Cache = kernel.cache == DType::BF16;
  const bool f16Cache = kernel.cache == DType::F16;
  const std::string cacheElement = storageType(kernel.cache);
  const std::string cacheType = fmt::format("memref<?x{}x{}>", d, cacheElement);
  const std::string scratchType = fmt::format("memref<{}xf32>", d);
  const std::string angleType = fmt::format("memref<{}xf64>", d / 2);
  // 16 lanes when both halves of a head are whole vectors (head_dim 128:
  // every real Qwen3); else one element at a time. The arithmetic is the
  // same either way, the RoPE in f64.
  const bool vectors = (d / 2) % kLanes == 0;
  const int64_t lanes = vectors ? kLanes : 1;
  const std::string f32Type = vectors ? "vector<16xf32>" : "f32";
  const std::string f64Type = vectors ? "vector<16xf64>" : "f64";
  auto load = [&](const std::string &memref, const std::string &indices, const std::string &type,
                  const std::string &element) {
    return vectors ? fmt::format("vector.load {}[{}] : {}, vector<16x{}>", memref, indices, type,
                                 element)
                   : fmt::format("memref.load {}[{}] : {}", memref, indices, type);
  };
  auto store = [&](const std::string &value, const std::string &memref, const std::string &indices,
                   const std::string &type, const std::string &element) {
    return vectors ? fmt::format("vector.store {}, {}[{}] : {}, vector<16x{}>", value, memref,
                                 indices, type, element)
                   : fmt::format("memref.store {}, {}[{}] : {}", value, memref, indices, type);
  };
  // A key or value row into the cache: as it is, or rounded to nearest even
  // as f16 (arith.truncf: vcvtps2ph with F16C) or as bf16 bits. f16 clamps
  // to its largest finite value first (runtime::kF16Max; NaN stays NaN), so
  // an outlier does not become an infinity that attention turns into NaN.
  auto storeCached = [&](const std::string &value, const std::string &memref) {
    if (f16Cache) {
      const std::string limit = fmt::format("{:e}", runtime::kF16Max);
      const std::string constant = vectors ? "dense<{}> : vector<16xf32>" : "{} : f32";
      return fmt::format("{0}Max = arith.constant {3}\n        "
                         "{0}Min = arith.constant {4}\n        "
                         "{0}Above = arith.cmpf ogt, {0}, {0}Max : {1}\n        "
                         "{0}Low = arith.select {0}Above, {0}Max, {0} : {5}{1}\n        "
                         "{0}Below = arith.cmpf olt, {0}Low, {0}Min : {1}\n        "
                         "{0}Clamped = arith.select {0}Below, {0}Min, {0}Low : {5}{1}\n        "
                         "{0}h = arith.truncf {0}Clamped : {1} to {2}\n        ",
                         value, f32Type, vectors ? "vector<16xf16>" : "f16",
                         fmt::format(fmt::runtime(constant), limit),
                         fmt::format(fmt::runtime(constant), "-" + limit),
                         vectors ? "vector<16xi1>, " : "") +
             store(value + "h", memref, "%row, %i", cacheType, "f16");
    }
    if (!bf16Cache)
      return store(value, memref, "%row, %i", cacheType, "f32");
    return fmt::format("{0}h = func.call @{1}_to_bf16({0}) : ({2}) -> {3}\n        ", value,
                       kernel.name, f32Type, vectors ? "vector<16xi16>" : "i16") +
           store(value + "h", memref, "%row, %i", cacheType, "i16");
  };
  // (x, y) rotated by the angle whose cos and sin are c and s, in f64:
  // (x c - y s, y c + x s). RoPE rotates each pair of halves so, and one
  // position's step rotates the angle tables.
  auto rotation = [&](const std::string &x, const std::string &y, const std::string &c,
                      const std::string &s, const std::string &outX, const std::string &outY) {
    // Products named after their factors: %xc is x times c.
    return fmt::format("    {x}{cn} = arith.mulf {x}, {c} : {t}\n"
                       "    {y}{sn} = arith.mulf {y}, {s} : {t}\n"
                       "    {y}{cn} = arith.mulf {y}, {c} : {t}\n"
                       "    {x}{sn} = arith.mulf {x}, {s} : {t}\n"
                       "    {outX} = arith.subf {x}{cn}, {y}{sn} : {t}\n"
                       "    {outY} = arith.addf {y}{cn}, {x}{sn} : {t}\n",
                       fmt::arg("x", x), fmt::arg("y", y), fmt::arg("c", c), fmt::arg("s", s),
                       fmt::arg("cn", c.substr(1)), fmt::arg("sn", s.substr(1)),
                       fmt::arg("outX", outX), fmt::arg("outY", outY), fmt::arg("t", f64Type));
  };
  return fmt::format(
      R"mlir({rounding}
// theta^(-2i/D), the rotary frequencies, in f64: computed by the compiler
// with the same libm pow the kernel called per row before.
memref.global "private" constant @{name}_frequencies : {angleType} = dense<[{frequencies}]>

// cos and sin of the rotate-half RoPE angles of position `pos`, in f64 as the
// reference computes them. Every head of a row shares them: computed once per
// row, not per head (libm's pow/cos/sin dominated this kernel before).
func.func private @{name}_angles(%pos: index, %cosTable: {angleType}, %sinTable: {angleType}) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cHalf = arith.constant {half} : index
  %frequencies = memref.get_global @{name}_frequencies : {angleType}
  %pos64 = arith.index_cast %pos : index to i64
  %posF = arith.sitofp %pos64 : i64 to f64
  scf.for %i = %c0 to %cHalf step %c1 {{
    %frequency = memref.load %frequencies[%i] : {angleType}
    %angle = arith.mulf %posF, %frequency : f64
    %cos = math.cos %angle : f64
    %sin = math.sin %angle : f64
    memref.store %cos, %cosTable[%i] : {angleType}
    memref.store %sin, %sinTable[%i] : {angleType}
  }}
  return
}}

// cos and sin of one position more: the angle-sum formulas with the
// constant step tables, in f64 ({lanes} lanes at a time). Every
// {period}th position is computed directly and the ones between by these
// rotations from it (whatever row a thread starts at), so a table is the
// same on every split and within ~1e-14 of the direct one (f64 rounding
// over fewer than {period} steps), far below the f32 the rows are stored in.
// libm's sincos per frequency and row was ~a quarter of the kernel's time.
memref.global "private" constant @{name}_cos_steps : {angleType} = dense<[{cosSteps}]>
memref.global "private" constant @{name}_sin_steps : {angleType} = dense<[{sinSteps}]>
func.func private @{name}_rotate_angles(%cosTable: {angleType}, %sinTable: {angleType}) {{
  %c0 = arith.constant 0 : index
  %cLanes = arith.constant {lanes} : index
  %cHalf = arith.constant {half} : index
  %cosSteps = memref.get_global @{name}_cos_steps : {angleType}
  %sinSteps = memref.get_global @{name}_sin_steps : {angleType}
  scf.for %i = %c0 to %cHalf step %cLanes {{
    %cos = {loadCos}
    %sin = {loadSin}
    %cosStep = {loadCosStep}
    %sinStep = {loadSinStep}
{rotateAngles}    {storeCos}
    {storeSin}
  }}
  return
}}

// The table of position %pos, from the one of %tablePos: one rotation when
// %pos follows it within a period, else direct at the period's start and
// rotations from there.
func.func private @{name}_angles_at(%pos: index, %tablePos: index, %cosTable: {angleType}, %sinTable: {angleType}) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cPeriod = arith.constant {period} : index
  %next = arith.addi %tablePos, %c1 : index
  %follows = arith.cmpi eq, %pos, %next : index
  %phase = arith.remui %pos, %cPeriod : index
  %inPeriod = arith.cmpi ne, %phase, %c0 : index
  %rotateOnce = arith.andi %follows, %inPeriod : i1
  scf.if %rotateOnce {{
    func.call @{name}_rotate_angles(%cosTable, %sinTable) : ({angleType}, {angleType}) -> ()
  }} else {{
    %start = arith.subi %pos, %phase : index
    func.call @{name}_angles(%start, %cosTable, %sinTable) : (index, {angleType}, {angleType}) -> ()
    scf.for %r = %c0 to %phase step %c1 {{
      func.call @{name}_rotate_angles(%cosTable, %sinTable) : ({angleType}, {angleType}) -> ()
    }}
  }}
  return
}}

// One head vector qkv[t, offset .. offset + D): RMSNorm with `gain`, then
// rotate-half RoPE with the row's angle table, into %out; {lanes} lanes at a time.
func.func private @{name}_head(%qkv: {qkvType}, %t: index, %offset: index, %gain: {gainType}, %cosTable: {angleType}, %sinTable: {angleType}, %out: {scratchType}) {{
  %c0 = arith.constant 0 : index
  %cLanes = arith.constant {lanes} : index
  %cD = arith.constant {d} : index
  %cHalf = arith.constant {half} : index
  %zeros = arith.constant {zeros}
  %one = arith.constant 1.0 : f32
  %count = arith.constant {dFloat:e} : f32
  %eps = arith.constant {eps:e} : f32
  {squaresLoop} = scf.for %i = %c0 to %cD step %cLanes iter_args(%a = %zeros) -> ({f32Type}) {{
    %at = arith.addi %offset, %i : index
    %v = {loadQkv}
    %r = math.fma %v, %v, %a : {f32Type}
    scf.yield %r : {f32Type}
  }}
  {sumSquares}
  %mean = arith.divf %squares, %count : f32
  %shifted = arith.addf %mean, %eps : f32
  %root = math.sqrt %shifted : f32
  %inverse = arith.divf %one, %root : f32
  {inverseLanes}
  scf.for %i = %c0 to %cD step %cLanes {{
    %at = arith.addi %offset, %i : index
    %v = {loadQkv}
    %n = arith.mulf %v, {inverseLanesName} : {f32Type}
    {gainLoad}
    %scaled = arith.mulf %n, %g : {f32Type}
    {storeScaled}
  }}
  scf.for %i = %c0 to %cHalf step %cLanes {{
    %cos = {loadCos}
    %sin = {loadSin}
    %j = arith.addi %i, %cHalf : index
    %a32 = {loadA}
    %b32 = {loadB}
    %a = arith.extf %a32 : {f32Type} to {f64Type}
    %b = arith.extf %b32 : {f32Type} to {f64Type}
{rotateHalves}    %ra32 = arith.truncf %ra : {f64Type} to {f32Type}
    %rb32 = arith.truncf %rb : {f64Type} to {f32Type}
    {storeA}
    {storeB}
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
  %cKVHeadsAgain = arith.constant {kvHeads} : index
  %cLanes = arith.constant {lanes} : index
  %qkv = memref.view %qkvb[%c0][%rows] : memref<?xi8> to {qkvType}
  %qGain = memref.view %qgb[%c0][] : memref<?xi8> to {gainType}
  %kGain = memref.view %kgb[%c0][] : memref<?xi8> to {gainType}
  %query = memref.view %qb[%c0][%rows] : memref<?xi8> to {queryType}
  %cacheBytes = memref.dim %kcb, %c0 : memref<?xi8>
  %cacheRows = arith.divui %cacheBytes, %cRowBytes : index
  %kCache = memref.view %kcb[%c0][%cacheRows] : memref<?xi8> to {cacheType}
  %vCache = memref.view %vcb[%c0][%cacheRows] : memref<?xi8> to {cacheType}
  %scratch = memref.alloca() : {scratchType}
  %cosTable = memref.alloca() : {angleType}
  %sinTable = memref.alloca() : {angleType}
  %layerHeads = arith.muli %layer, %cKVHeadsAgain : index
  %none = arith.constant -1 : index
  scf.for %g = %wgBegin to %wgEnd step %c1 iter_args(%tablePos = %none) -> (index) {{
    %t = arith.divui %g, %cQueryHeads : index
    %h = arith.remui %g, %cQueryHeads : index
    %pos = arith.addi %startPos, %t : index
    %stale = arith.cmpi ne, %pos, %tablePos : index
    scf.if %stale {{
      func.call @{name}_angles_at(%pos, %tablePos, %cosTable, %sinTable) : (index, index, {angleType}, {angleType}) -> ()
    }}
{prefetchNextRow}    %qOffset = arith.muli %h, %cD : index
    func.call @{name}_head(%qkv, %t, %qOffset, %qGain, %cosTable, %sinTable, %scratch) : ({qkvType}, index, index, {gainType}, {angleType}, {angleType}, {scratchType}) -> ()
    scf.for %i = %c0 to %cD step %cLanes {{
      %v = {loadScratch}
      {storeQuery}
    }}
    %isKV = arith.cmpi ult, %h, %cKVHeads : index
    scf.if %isKV {{
      %kHead = arith.addi %cQueryHeads, %h : index
      %kOffset = arith.muli %kHead, %cD : index
      func.call @{name}_head(%qkv, %t, %kOffset, %kGain, %cosTable, %sinTable, %scratch) : ({qkvType}, index, index, {gainType}, {angleType}, {angleType}, {scratchType}) -> ()
      %headIndex = arith.addi %layerHeads, %h : index
      %headBase = arith.muli %headIndex, %capacity : index
      %row = arith.addi %headBase, %pos : index
      %vHeadBase = arith.addi %cQueryHeads, %cKVHeads : index
      %vHead = arith.addi %vHeadBase, %h : index
      %vOffset = arith.muli %vHead, %cD : index
      scf.for %i = %c0 to %cD step %cLanes {{
        %k = {loadScratch}
        {storeKey}
        %at = arith.addi %vOffset, %i : index
        %v = {loadQkv}
        {storeValue}
      }}
    }}
    scf.yield %pos : index
  }}
  return
}}
)mlir",
      fmt::arg("name", kernel.name), fmt::arg("qkvType", qkvType), fmt::arg("gainType", gainType),
      fmt::arg("queryType", queryType), fmt::arg("cacheType", cacheType),
      fmt::arg("scratchType", scratchType), fmt::arg("angleType", angleType), fmt::arg("d", d),
      fmt::arg("half", d / 2), fmt::arg("dFloat", double(d)), fmt::arg("eps", kernel.eps),
      fmt::arg("frequencies", fmt::join(ropeTable(kernel), ", ")),
      fmt::arg("queryHeads", kernel.queryHeads), fmt::arg("kvHeads", kernel.kvHeads),
      fmt::arg("cacheRowBytes", d * (bf16Cache || f16Cache ? 2 : 4)),
      fmt::arg("rounding",
               bf16Cache ? bf16RoundingFunction(kernel.name + "_to_bf16", vectors) : std::string()),
      fmt::arg("gainLoad", vectors ? vectorWidenedLoad(kernel.gains, "%g", "%gain", "%i", gainType)
                                   : widenedLoad(kernel.gains, "%g", "%gain", "%i", gainType)),
      fmt::arg("lanes", lanes), fmt::arg("f32Type", f32Type), fmt::arg("f64Type", f64Type),
      fmt::arg("zeros", vectors ? "dense<0.0> : vector<16xf32>" : "0.0 : f32"),
      fmt::arg("squaresLoop", vectors ? "%squaresV" : "%squares"),
      fmt::arg("sumSquares",
               vectors ? "%squares = vector.reduction <add>, %squaresV : vector<16xf32> into f32"
                       : ""),
      fmt::arg("inverseLanes",
               vectors ? "%inverseV = vector.broadcast %inverse : f32 to vector<16xf32>" : ""),
      fmt::arg("inverseLanesName", vectors ? "%inverseV" : "%inverse"),
      fmt::arg("loadQkv", load("%qkv", "%t, %at", qkvType, "f32")),
      fmt::arg("storeScaled", store("%scaled", "%out", "%i", scratchType, "f32")),
      fmt::arg("loadCos", load("%cosTable", "%i", angleType, "f64")),
      fmt::arg("loadSin", load("%sinTable", "%i", angleType, "f64")),
      fmt::arg("loadCosStep", load("%cosSteps", "%i", angleType, "f64")),
      fmt::arg("loadSinStep", load("%sinSteps", "%i", angleType, "f64")),
      fmt::arg("storeCos", store("%nextCos", "%cosTable", "%i", angleType, "f64")),
      fmt::arg("storeSin", store("%nextSin", "%sinTable", "%i", angleType, "f64")),
      fmt::arg("cosSteps",
               fmt::join(ropeTable(kernel, [](double x) { return std::cos(x); }), ", ")),
      fmt::arg("sinSteps",
               fmt::join(ropeTable(kernel, [](double x) { return std::sin(x); }), ", ")),
      fmt::arg("period", kRopeAnglePeriod),
      fmt::arg("rotateAngles",
               rotation("%cos", "%sin", "%cosStep", "%sinStep", "%nextCos", "%nextSin")),
      fmt::arg("rotateHalves", rotation("%a", "%b", "%cos", "%sin", "%ra", "%rb")),
      fmt::arg("loadA", load("%out", "%i", scratchType, "f32")),
      fmt::arg("loadB", load("%out", "%j", scratchType, "f32")),
      fmt::arg("storeA", store("%ra32", "%out", "%i", scratchType, "f32")),
      fmt::arg("storeB", store("%rb32", "%out", "%j", scratchType, "f32")),
      fmt::arg("loadScratch", load("%scratch", "%i", scratchType, "f32")),
      fmt::arg("storeQuery", store("%v", "%query", "%t, %h, %i", queryType, "f32")),
      fmt::arg("storeKey", storeCached("%k", "%kCache")),
      fmt::arg("storeValue", storeCached("%v", "%vCache")),
      fmt::arg("prefetchNextRow", nextRowPrefetch(kernel, width, qkvType)));
}

} // namespace q3::cpu
