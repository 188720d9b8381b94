//===- QKNormRopeCacheSource.cpp - the q/k-norm + RoPE + cache kernel ---- ===//
#include "backends/cpu/KernelSource.h"
#include "backends/cpu/KernelSourceUtil.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <vector>

namespace q3::cpu {

using namespace detail;

namespace {

/// theta^(i * -2/D) for i < D/2, as the kernel computed them at run time
/// (math.powf on f64 is libm's pow); printed with 17 digits, which
/// round-trip an f64 exactly.
std::vector<std::string> ropeFrequencies(const QKNormRopeCacheKernel &kernel) {
  const double exponentStep = -2.0 / double(kernel.headDim);
  std::vector<std::string> frequencies;
  for (int64_t i = 0; i < kernel.headDim / 2; ++i)
    frequencies.push_back(fmt::format("{:.17e}", std::pow(kernel.theta, double(i) * exponentStep)));
  return frequencies;
}

} // namespace

std::string qkNormRopeCacheSource(const QKNormRopeCacheKernel &kernel) {
  const int64_t d = kernel.headDim, width = (kernel.queryHeads + 2 * kernel.kvHeads) * d;
  const std::string qkvType = fmt::format("memref<?x{}xf32>", width);
  const std::string gainType = fmt::format("memref<{}x{}>", d, storageType(kernel.gains));
  const std::string queryType = fmt::format("memref<?x{}x{}xf32>", kernel.queryHeads, d);
  // [layers][kvHeads][capacity] rows of D floats, viewed as one list of rows.
  const std::string cacheType = fmt::format("memref<?x{}xf32>", d);
  const std::string scratchType = fmt::format("memref<{}xf32>", d);
  const std::string angleType = fmt::format("memref<{}xf64>", d / 2);
  return fmt::format(
      R"mlir(
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

// One head vector qkv[t, offset .. offset + D): RMSNorm with `gain`, then
// rotate-half RoPE with the row's angle table, into %out.
func.func private @{name}_head(%qkv: {qkvType}, %t: index, %offset: index, %gain: {gainType}, %cosTable: {angleType}, %sinTable: {angleType}, %out: {scratchType}) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cD = arith.constant {d} : index
  %cHalf = arith.constant {half} : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %count = arith.constant {dFloat:e} : f32
  %eps = arith.constant {eps:e} : f32
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
  scf.for %i = %c0 to %cHalf step %c1 {{
    %cos = memref.load %cosTable[%i] : {angleType}
    %sin = memref.load %sinTable[%i] : {angleType}
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
  %cKVHeadsAgain = arith.constant {kvHeads} : index
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
      func.call @{name}_angles(%pos, %cosTable, %sinTable) : (index, {angleType}, {angleType}) -> ()
    }}
    %qOffset = arith.muli %h, %cD : index
    func.call @{name}_head(%qkv, %t, %qOffset, %qGain, %cosTable, %sinTable, %scratch) : ({qkvType}, index, index, {gainType}, {angleType}, {angleType}, {scratchType}) -> ()
    scf.for %i = %c0 to %cD step %c1 {{
      %v = memref.load %scratch[%i] : {scratchType}
      memref.store %v, %query[%t, %h, %i] : {queryType}
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
      scf.for %i = %c0 to %cD step %c1 {{
        %k = memref.load %scratch[%i] : {scratchType}
        memref.store %k, %kCache[%row, %i] : {cacheType}
        %at = arith.addi %vOffset, %i : index
        %v = memref.load %qkv[%t, %at] : {qkvType}
        memref.store %v, %vCache[%row, %i] : {cacheType}
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
      fmt::arg("frequencies", fmt::join(ropeFrequencies(kernel), ", ")),
      fmt::arg("queryHeads", kernel.queryHeads), fmt::arg("kvHeads", kernel.kvHeads),
      fmt::arg("cacheRowBytes", d * 4),
      fmt::arg("gainLoad", widenedLoad(kernel.gains, "%g", "%gain", "%i", gainType)));
}

} // namespace q3::cpu
