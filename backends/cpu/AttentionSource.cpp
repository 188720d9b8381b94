//===- AttentionSource.cpp - the attention kernel template ----------------- ===//
#include "backends/cpu/KernelSource.h"
#include "backends/cpu/KernelSourceUtil.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace q3::cpu {

using namespace detail;

namespace {

/// q[t, h, :] . keys[s, kv, :] into %dot: 16 lanes at a time when head_dim
/// allows (the reduction is a tree), else one feature at a time.
std::string scoreDot(int64_t headDim, const std::string &queryType, const std::string &kvType) {
  if (headDim % kLanes == 0)
    return fmt::format(R"mlir(%c16 = arith.constant 16 : index
      %zeros = arith.constant dense<0.0> : vector<16xf32>
      %dotv = scf.for %i = %c0 to %cD step %c16 iter_args(%a = %zeros) -> (vector<16xf32>) {{
        %qv = vector.load %q[%t, %h, %i] : {0}, vector<16xf32>
        %kvv = vector.load %keys[%kv, %s, %i] : {1}, vector<16xf32>
        %r = vector.fma %qv, %kvv, %a : vector<16xf32>
        scf.yield %r : vector<16xf32>
      }}
      %dot = vector.reduction <add>, %dotv : vector<16xf32> into f32)mlir",
                       queryType, kvType);
  return fmt::format(
      R"mlir(%dot = scf.for %i = %c0 to %cD step %c1 iter_args(%a = %zero) -> (f32) {{
        %qv = memref.load %q[%t, %h, %i] : {0}
        %kv_ = memref.load %keys[%kv, %s, %i] : {1}
        %r = math.fma %qv, %kv_, %a : f32
        scf.yield %r : f32
      }})mlir",
      queryType, kvType);
}

/// The probability-weighted sum of the value rows into %out[t, h, :], scaled
/// by %inverse: D/16 vector accumulators (independent FMAs) when head_dim
/// allows, else a scalar accumulator in %acc.
std::string valueSum(int64_t headDim, const std::string &queryType, const std::string &kvType,
                     const std::string &accType) {
  if (headDim % kLanes != 0)
    return fmt::format(R"mlir(scf.for %i = %c0 to %cD step %c1 {{
      memref.store %zero, %acc[%i] : {2}
    }}
    scf.for %s = %c0 to %count step %c1 {{
      %p = memref.load %scores[%s] : memref<?xf32>
      scf.for %i = %c0 to %cD step %c1 {{
        %v = memref.load %values[%kv, %s, %i] : {1}
        %a = memref.load %acc[%i] : {2}
        %r = math.fma %p, %v, %a : f32
        memref.store %r, %acc[%i] : {2}
      }}
    }}
    scf.for %i = %c0 to %cD step %c1 {{
      %a = memref.load %acc[%i] : {2}
      %o = arith.mulf %a, %inverse : f32
      memref.store %o, %out[%t, %h, %i] : {0}
    }})mlir",
                       queryType, kvType, accType);
  std::string offsets, iterArgs, body, yields, types, stores;
  for (int64_t j = 0; j < headDim / kLanes; ++j) {
    offsets += fmt::format("    %off{0} = arith.constant {1} : index\n", j, j * kLanes);
    iterArgs += fmt::format("{}%a{} = %vzero", j ? ", " : "", j);
    body +=
        fmt::format("      %v{0} = vector.load %values[%kv, %s, %off{0}] : {1}, vector<16xf32>\n"
                    "      %r{0} = vector.fma %pv, %v{0}, %a{0} : vector<16xf32>\n",
                    j, kvType);
    yields += fmt::format("{}%r{}", j ? ", " : "", j);
    types += j ? ", vector<16xf32>" : "vector<16xf32>";
    stores += fmt::format("    %o{0} = arith.mulf %sums#{0}, %inverseV : vector<16xf32>\n"
                          "    vector.store %o{0}, %out[%t, %h, %off{0}] : {1}, vector<16xf32>\n",
                          j, queryType);
  }
  return fmt::format(R"mlir(%vzero = arith.constant dense<0.0> : vector<16xf32>
{offsets}    %sums:{n} = scf.for %s = %c0 to %count step %c1 iter_args({iterArgs}) -> ({types}) {{
      %p = memref.load %scores[%s] : memref<?xf32>
      %pv = vector.broadcast %p : f32 to vector<16xf32>
{body}      scf.yield {yields} : {types}
    }}
    %inverseV = vector.broadcast %inverse : f32 to vector<16xf32>
{stores})mlir",
                     fmt::arg("offsets", offsets), fmt::arg("n", headDim / kLanes),
                     fmt::arg("iterArgs", iterArgs), fmt::arg("types", types),
                     fmt::arg("body", body), fmt::arg("yields", yields),
                     fmt::arg("stores", stores));
}

} // namespace

std::string attentionSource(const AttentionKernel &kernel) {
  const int64_t d = kernel.headDim;
  const std::string queryType = fmt::format("memref<?x{}x{}xf32>", kernel.queryHeads, d);
  // One layer of the cache: [kvHeads][capacity][D], each head's positions contiguous.
  const std::string kvType = fmt::format("memref<{}x?x{}xf32>", kernel.kvHeads, d);
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
  %keys = memref.view %kb[%c0][%capacity] : memref<?xi8> to {kvType}
  %values = memref.view %vb[%c0][%capacity] : memref<?xi8> to {kvType}
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
      {scoreDot}
      %score = arith.mulf %dot, %scale : f32
      memref.store %score, %scores[%s] : memref<?xf32>
      %m2 = arith.maxf %m, %score : f32
      scf.yield %m2 : f32
    }}
    // exp(score - max) and their sum, 16 positions at a time (exp is a
    // polynomial of ~15 operations: scalar, it cost more than the dots).
    %cSixteen = arith.constant 16 : index
    %chunks = arith.divui %count, %cSixteen : index
    %vectorEnd = arith.muli %chunks, %cSixteen : index
    %maxV = vector.broadcast %max : f32 to vector<16xf32>
    %zeroV = arith.constant dense<0.0> : vector<16xf32>
    %sumV = scf.for %s = %c0 to %vectorEnd step %cSixteen iter_args(%a = %zeroV) -> (vector<16xf32>) {{
      %scoreV = vector.load %scores[%s] : memref<?xf32>, vector<16xf32>
      %shiftedV = arith.subf %scoreV, %maxV : vector<16xf32>
      %eV = math.exp %shiftedV : vector<16xf32>
      vector.store %eV, %scores[%s] : memref<?xf32>, vector<16xf32>
      %r = arith.addf %a, %eV : vector<16xf32>
      scf.yield %r : vector<16xf32>
    }}
    %vectorSum = vector.reduction <add>, %sumV : vector<16xf32> into f32
    %total = scf.for %s = %vectorEnd to %count step %c1 iter_args(%a = %vectorSum) -> (f32) {{
      %score = memref.load %scores[%s] : memref<?xf32>
      %shifted = arith.subf %score, %max : f32
      %e = math.exp %shifted : f32
      memref.store %e, %scores[%s] : memref<?xf32>
      %r = arith.addf %a, %e : f32
      scf.yield %r : f32
    }}
    %inverse = arith.divf %one, %total : f32
    {valueSum}
  }}
  return
}}
)mlir",
      fmt::arg("name", kernel.name), fmt::arg("queryType", queryType), fmt::arg("kvType", kvType),
      fmt::arg("accType", accType), fmt::arg("d", d), fmt::arg("queryHeads", kernel.queryHeads),
      fmt::arg("map", fmt::join(kernel.kvHeadMap, ", ")), fmt::arg("scale", kernel.scale),
      fmt::arg("scoreDot", scoreDot(d, queryType, kvType)),
      fmt::arg("valueSum", valueSum(d, queryType, kvType, accType)));
}

} // namespace q3::cpu
