//===- AttentionSource.cpp - the attention kernel template ----------------- ===//
#include "backends/cpu/KernelSource.h"
#include "backends/cpu/KernelSourceUtil.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace q3::cpu {

using namespace detail;

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
