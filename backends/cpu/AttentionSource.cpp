//===- AttentionSource.cpp - the attention kernel templates ---------------===//
//
// Causal attention of one row over the cached positions of its KV head.
//
// With head_dim a multiple of 16 (every real Qwen3) a workgroup takes P query
// heads that share a KV head (P = 2 for Qwen3's GQA): every key and value row
// is loaded once for all P. The scores run two positions at a time, so 2P
// dot products are independent FMA chains instead of one chain per position
// waiting on FMA latency; the softmax exponentials run 16 positions at a
// time; the value sum keeps P x head_dim/16 accumulators. Other head sizes
// take a scalar template, one query head per workgroup.
//
// Workgroup g is row g % rows of head group g / rows: head-major, so the
// consecutive workgroups a thread runs share their keys and values, which
// stay in L2 from one row to the next (prefill attention -40% at 512 rows).
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/KernelSource.h"
#include "backends/cpu/KernelSourceUtil.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace q3::cpu {

using namespace detail;

int64_t AttentionKernel::headsPerWorkgroup() const {
  if (headDim % kLanes != 0 || queryHeads % 2 != 0)
    return 1;
  for (int64_t h = 0; h < queryHeads; h += 2)
    if (kvHeadMap.at(size_t(h)) != kvHeadMap.at(size_t(h + 1)))
      return 1;
  return 2;
}

namespace {

constexpr int kPositionsPerStep = 2; // of the vector score loop

struct AttentionTypes {
  std::string query, kv;
};

AttentionTypes typesOf(const AttentionKernel &kernel) {
  // One layer of the cache: [kvHeads][capacity][D], each head's positions contiguous.
  return {fmt::format("memref<?x{}x{}xf32>", kernel.queryHeads, kernel.headDim),
          fmt::format("memref<{}x?x{}xf32>", kernel.kvHeads, kernel.headDim)};
}

/// The kernel's signature, constants and views (%q, %keys, %values, %out,
/// %map), shared by both templates.
std::string attentionOpening(const AttentionKernel &kernel, const AttentionTypes &types) {
  return fmt::format(
      R"mlir(
memref.global "private" constant @{name}_kv_head_map : memref<{queryHeads}xi64> = dense<[{map}]>

func.func @q3k_{name}(%qb: memref<?xi8>, %kb: memref<?xi8>, %vb: memref<?xi8>, %ob: memref<?xi8>, %rows: index, %visible: index, %capacity: index, %wgBegin: index, %wgEnd: index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cD = arith.constant {d} : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %lowest = arith.constant 0xFF800000 : f32
  %scale = arith.constant {scale:e} : f32
  %q = memref.view %qb[%c0][%rows] : memref<?xi8> to {queryType}
  %keys = memref.view %kb[%c0][%capacity] : memref<?xi8> to {kvType}
  %values = memref.view %vb[%c0][%capacity] : memref<?xi8> to {kvType}
  %out = memref.view %ob[%c0][%rows] : memref<?xi8> to {queryType}
  %map = memref.get_global @{name}_kv_head_map : memref<{queryHeads}xi64>
  %cached = arith.subi %visible, %rows : index
)mlir",
      fmt::arg("name", kernel.name), fmt::arg("queryHeads", kernel.queryHeads),
      fmt::arg("map", fmt::join(kernel.kvHeadMap, ", ")), fmt::arg("d", kernel.headDim),
      fmt::arg("scale", kernel.scale), fmt::arg("queryType", types.query),
      fmt::arg("kvType", types.kv));
}

/// exp(score - max) over %scores<p>[0, %count) in place and their sum's
/// inverse as %inverse<p>, 16 positions at a time (exp is a polynomial of
/// ~15 operations: scalar, it cost more than the dot products).
std::string softmax(int p, const std::string &max) {
  return fmt::format(R"mlir(    %maxV{0} = vector.broadcast {1} : f32 to vector<16xf32>
    %sumV{0} = scf.for %s = %c0 to %vectorEnd step %c16 iter_args(%a = %zeroV) -> (vector<16xf32>) {{
      %scoreV = vector.load %scores{0}[%s] : memref<?xf32>, vector<16xf32>
      %shiftedV = arith.subf %scoreV, %maxV{0} : vector<16xf32>
      %eV = math.exp %shiftedV : vector<16xf32>
      vector.store %eV, %scores{0}[%s] : memref<?xf32>, vector<16xf32>
      %r = arith.addf %a, %eV : vector<16xf32>
      scf.yield %r : vector<16xf32>
    }}
    %vectorSum{0} = vector.reduction <add>, %sumV{0} : vector<16xf32> into f32
    %total{0} = scf.for %s = %vectorEnd to %count step %c1 iter_args(%a = %vectorSum{0}) -> (f32) {{
      %score = memref.load %scores{0}[%s] : memref<?xf32>
      %shifted = arith.subf %score, {1} : f32
      %e = math.exp %shifted : f32
      memref.store %e, %scores{0}[%s] : memref<?xf32>
      %r = arith.addf %a, %e : f32
      scf.yield %r : f32
    }}
    %inverse{0} = arith.divf %one, %total{0} : f32
)mlir",
                     p, max);
}

/// A comma-separated list of `count` items made by `item(i)`.
template <typename Item> std::string listOf(int count, Item item) {
  std::string text;
  for (int i = 0; i < count; ++i)
    text += (i ? ", " : "") + item(i);
  return text;
}

std::string vectorTypes(int count) {
  return listOf(count, [](int) { return std::string("vector<16xf32>"); });
}

/// The scores of `positions` positions from %s (at %s<j>) against the P
/// query heads, into %scores<p> and the running maxima %m<p> -> %max<p>_<j>.
/// Accumulator chains: one per (head, position).
std::string scoreStep(int heads, int positions, const AttentionTypes &types,
                      const std::string &suffix, bool prefetchValues = false) {
  std::string text, body, reductions;
  for (int j = 0; j < positions; ++j) {
    if (j > 0)
      text += fmt::format("      %cAt{0}{1} = arith.constant {0} : index\n"
                          "      %s{0}{1} = arith.addi %s, %cAt{0}{1} : index\n",
                          j, suffix);
    const std::string position = j ? fmt::format("%s{}{}", j, suffix) : "%s";
    body += fmt::format("        %k{0} = vector.load %keys[%kv, {1}, %i] : {2}, vector<16xf32>\n",
                        j, position, types.kv);
    // Decode: the value sum reads this position's value row after the
    // softmax; fetched now, while the keys stream, it is in L2 by then
    // (decode attention -15%). Prefill rows find the rows cached already.
    if (prefetchValues)
      body += fmt::format(
          "        memref.prefetch %values[%kv, {}, %i], read, locality<2>, data : {}\n", position,
          types.kv);
  }
  for (int p = 0; p < heads; ++p) {
    body += fmt::format("        %qv{0} = vector.load %q[%t, %h{0}, %i] : {1}, vector<16xf32>\n", p,
                        types.query);
    std::string last = fmt::format("%m{}", p);
    for (int j = 0; j < positions; ++j) {
      const int chain = p * positions + j;
      body += fmt::format("        %r{0} = vector.fma %qv{1}, %k{2}, %a{0} : vector<16xf32>\n",
                          chain, p, j);
      reductions += fmt::format(
          "      %dot{0} = vector.reduction <add>, %dots#{0} : vector<16xf32> into f32\n"
          "      %score{0} = arith.mulf %dot{0}, %scale : f32\n"
          "      memref.store %score{0}, %scores{1}[{2}] : memref<?xf32>\n"
          "      %max{1}_{3} = arith.maxf {4}, %score{0} : f32\n",
          chain, p, j ? fmt::format("%s{}{}", j, suffix) : "%s", j, last);
      last = fmt::format("%max{}_{}", p, j);
    }
  }
  const int chains = heads * positions;
  text += fmt::format(
      R"mlir(      %dots:{chains} = scf.for %i = %c0 to %cD step %c16 iter_args({iterArgs}) -> ({types}) {{
{body}        scf.yield {yields} : {types}
      }}
{reductions}      scf.yield {maxima} : {maxTypes}
)mlir",
      fmt::arg("chains", chains),
      fmt::arg("iterArgs", listOf(chains, [](int c) { return fmt::format("%a{} = %zeroV", c); })),
      fmt::arg("types", vectorTypes(chains)), fmt::arg("body", body),
      fmt::arg("yields", listOf(chains, [](int c) { return fmt::format("%r{}", c); })),
      fmt::arg("reductions", reductions),
      fmt::arg("maxima",
               listOf(heads, [&](int p) { return fmt::format("%max{}_{}", p, positions - 1); })),
      fmt::arg("maxTypes", listOf(heads, [](int) { return std::string("f32"); })));
  return text;
}

std::string vectorAttention(const AttentionKernel &kernel, const AttentionTypes &types) {
  const int heads = int(kernel.headsPerWorkgroup());
  const int64_t columns = kernel.headDim / kLanes;
  auto perHead = [&](auto item) {
    std::string text;
    for (int p = 0; p < heads; ++p)
      text += item(p);
    return text;
  };
  const std::string maxTypes = listOf(heads, [](int) { return std::string("f32"); });
  std::string valueBody, valueStores;
  for (int64_t c = 0; c < columns; ++c)
    valueBody += fmt::format("      %off{0} = arith.constant {1} : index\n"
                             "      %v{0} = vector.load %values[%kv, %s, %off{0}] : {2}, "
                             "vector<16xf32>\n",
                             c, c * kLanes, types.kv);
  for (int p = 0; p < heads; ++p) {
    valueBody += fmt::format("      %p{0} = memref.load %scores{0}[%s] : memref<?xf32>\n"
                             "      %pv{0} = vector.broadcast %p{0} : f32 to vector<16xf32>\n",
                             p);
    for (int64_t c = 0; c < columns; ++c) {
      const int64_t acc = p * columns + c;
      valueBody += fmt::format("      %u{0} = vector.fma %pv{1}, %v{2}, %b{0} : vector<16xf32>\n",
                               acc, p, c);
      valueStores +=
          fmt::format("    %o{0} = arith.mulf %sums#{0}, %inverseV{1} : vector<16xf32>\n"
                      "    %oOff{0} = arith.constant {2} : index\n"
                      "    vector.store %o{0}, %out[%t, %h{1}, %oOff{0}] : {3}, vector<16xf32>\n",
                      acc, p, c * kLanes, types.query);
    }
  }
  const int accumulators = int(heads * columns);
  return attentionOpening(kernel, types) +
         fmt::format(
             R"mlir(  %c16 = arith.constant 16 : index
  %cStep = arith.constant {positions} : index
  %cHeads = arith.constant {heads} : index
  %cWorkgroupsPerRow = arith.constant {workgroupsPerRow} : index
  %zeroV = arith.constant dense<0.0> : vector<16xf32>
  %oneRow = arith.cmpi eq, %rows, %c1 : index
{scoreBuffers}  scf.for %g = %wgBegin to %wgEnd step %c1 {{
    %t = arith.remui %g, %rows : index
    %headGroup = arith.divui %g, %rows : index
    %h0 = arith.muli %headGroup, %cHeads : index
{heads_}    %kv64 = memref.load %map[%h0] : memref<{queryHeads}xi64>
    %kv = arith.index_cast %kv64 : i64 to index
    %seen = arith.addi %cached, %t : index
    %count = arith.addi %seen, %c1 : index
    %steps = arith.divui %count, %cStep : index
    %stepEnd = arith.muli %steps, %cStep : index
    %stepMax:{heads} = scf.if %oneRow -> ({maxTypes}) {{
      %decodeMax:{heads} = scf.for %s = %c0 to %stepEnd step %cStep iter_args({maxArgs}) -> ({maxTypes}) {{
{decodeScores}      }}
      scf.yield {decodeMaxima} : {maxTypes}
    }} else {{
      %prefillMax:{heads} = scf.for %s = %c0 to %stepEnd step %cStep iter_args({maxArgs}) -> ({maxTypes}) {{
{pairScores}      }}
      scf.yield {prefillMaxima} : {maxTypes}
    }}
    %lastMax:{heads} = scf.for %s = %stepEnd to %count step %c1 iter_args({lastArgs}) -> ({maxTypes}) {{
{singleScores}    }}
    %chunks = arith.divui %count, %c16 : index
    %vectorEnd = arith.muli %chunks, %c16 : index
{softmaxes}    %sums:{accumulators} = scf.for %s = %c0 to %count step %c1 iter_args({sumArgs}) -> ({sumTypes}) {{
{valueBody}      scf.yield {sumYields} : {sumTypes}
    }}
{inverses}{valueStores}  }}
  return
}}
)mlir",
             fmt::arg("positions", kPositionsPerStep), fmt::arg("heads", heads),
             fmt::arg("workgroupsPerRow", kernel.workgroupsPerRow()),
             fmt::arg("queryHeads", kernel.queryHeads),
             fmt::arg("scoreBuffers", perHead([](int p) {
                        return fmt::format(
                            "  %scores{} = memref.alloca(%visible) : memref<?xf32>\n", p);
                      })),
             fmt::arg("heads_", perHead([](int p) {
                        return p == 0
                                   ? std::string()
                                   : fmt::format("    %hOff{0} = arith.constant {0} : index\n"
                                                 "    %h{0} = arith.addi %h0, %hOff{0} : index\n",
                                                 p);
                      })),
             fmt::arg("maxArgs",
                      listOf(heads, [](int p) { return fmt::format("%m{} = %lowest", p); })),
             fmt::arg("lastArgs",
                      listOf(heads, [](int p) { return fmt::format("%m{0} = %stepMax#{0}", p); })),
             fmt::arg("maxTypes", maxTypes),
             fmt::arg("pairScores", scoreStep(heads, kPositionsPerStep, types, "p")),
             fmt::arg("decodeScores", scoreStep(heads, kPositionsPerStep, types, "d", true)),
             fmt::arg("decodeMaxima",
                      listOf(heads, [](int p) { return fmt::format("%decodeMax#{}", p); })),
             fmt::arg("prefillMaxima",
                      listOf(heads, [](int p) { return fmt::format("%prefillMax#{}", p); })),
             fmt::arg("singleScores", scoreStep(heads, 1, types, "s")),
             fmt::arg("softmaxes",
                      perHead([](int p) { return softmax(p, fmt::format("%lastMax#{}", p)); })),
             fmt::arg("accumulators", accumulators),
             fmt::arg("sumArgs",
                      listOf(accumulators, [](int a) { return fmt::format("%b{} = %zeroV", a); })),
             fmt::arg("sumTypes", vectorTypes(accumulators)), fmt::arg("valueBody", valueBody),
             fmt::arg("sumYields",
                      listOf(accumulators, [](int a) { return fmt::format("%u{}", a); })),
             fmt::arg(
                 "inverses", perHead([](int p) {
                   return fmt::format(
                       "    %inverseV{0} = vector.broadcast %inverse{0} : f32 to vector<16xf32>\n",
                       p);
                 })),
             fmt::arg("valueStores", valueStores));
}

/// One query head per workgroup, one feature at a time: head sizes that are
/// not a multiple of 16.
std::string scalarAttention(const AttentionKernel &kernel, const AttentionTypes &types) {
  const std::string accType = fmt::format("memref<{}xf32>", kernel.headDim);
  return attentionOpening(kernel, types) +
         fmt::format(
             R"mlir(  %c16 = arith.constant 16 : index
  %cQueryHeads = arith.constant {queryHeads} : index
  %zeroV = arith.constant dense<0.0> : vector<16xf32>
  %scores0 = memref.alloca(%visible) : memref<?xf32>
  %acc = memref.alloca() : {accType}
  scf.for %g = %wgBegin to %wgEnd step %c1 {{
    %t = arith.remui %g, %rows : index
    %h = arith.divui %g, %rows : index
    %kv64 = memref.load %map[%h] : memref<{queryHeads}xi64>
    %kv = arith.index_cast %kv64 : i64 to index
    %seen = arith.addi %cached, %t : index
    %count = arith.addi %seen, %c1 : index
    %max0 = scf.for %s = %c0 to %count step %c1 iter_args(%m = %lowest) -> (f32) {{
      %dot = scf.for %i = %c0 to %cD step %c1 iter_args(%a = %zero) -> (f32) {{
        %qv = memref.load %q[%t, %h, %i] : {queryType}
        %kv_ = memref.load %keys[%kv, %s, %i] : {kvType}
        %r = math.fma %qv, %kv_, %a : f32
        scf.yield %r : f32
      }}
      %score = arith.mulf %dot, %scale : f32
      memref.store %score, %scores0[%s] : memref<?xf32>
      %m2 = arith.maxf %m, %score : f32
      scf.yield %m2 : f32
    }}
    %chunks = arith.divui %count, %c16 : index
    %vectorEnd = arith.muli %chunks, %c16 : index
{softmax}    scf.for %i = %c0 to %cD step %c1 {{
      memref.store %zero, %acc[%i] : {accType}
    }}
    scf.for %s = %c0 to %count step %c1 {{
      %p = memref.load %scores0[%s] : memref<?xf32>
      scf.for %i = %c0 to %cD step %c1 {{
        %v = memref.load %values[%kv, %s, %i] : {kvType}
        %a = memref.load %acc[%i] : {accType}
        %r = math.fma %p, %v, %a : f32
        memref.store %r, %acc[%i] : {accType}
      }}
    }}
    scf.for %i = %c0 to %cD step %c1 {{
      %a = memref.load %acc[%i] : {accType}
      %o = arith.mulf %a, %inverse0 : f32
      memref.store %o, %out[%t, %h, %i] : {queryType}
    }}
  }}
  return
}}
)mlir",
             fmt::arg("queryHeads", kernel.queryHeads), fmt::arg("accType", accType),
             fmt::arg("queryType", types.query), fmt::arg("kvType", types.kv),
             fmt::arg("softmax", softmax(0, "%max0")));
}

} // namespace

std::string attentionSource(const AttentionKernel &kernel) {
  const AttentionTypes types = typesOf(kernel);
  return kernel.headDim % kLanes == 0 ? vectorAttention(kernel, types)
                                      : scalarAttention(kernel, types);
}

} // namespace q3::cpu
