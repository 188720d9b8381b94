//===- AttentionSource.cpp - the attention kernel templates ---------------===//
//
// Causal attention of rows over the cached positions of their KV head.
//
// With head_dim a multiple of 16 (every real Qwen3) a workgroup takes P query
// heads that share a KV head (P = 2 for Qwen3's GQA), and a prefill takes the
// rows in pairs (the even row's workgroup runs both): every key and value row
// is loaded once for all 2P query vectors. The scores run two positions at a
// time, so 4P dot products are independent FMA chains instead of one chain
// per position waiting on FMA latency; the softmax exponentials run 16
// positions at a time; the value sums run in column groups of at most 16
// accumulators. A last odd row and decode run alone (@<name>_rows1); decode
// also prefetches each value row while it scores the key. Other head sizes
// take a scalar template, one query head and one row per workgroup. A bf16
// cache (--kv-cache=bf16) is widened exactly as it is loaded.
//
// Workgroup g is row g % rows of head group g / rows: head-major, so the
// consecutive workgroups a thread runs share their keys and values, which
// stay in L2 from one row to the next (prefill attention -40% at 512 rows).
//
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
  WeightStorage cache; // the keys' and values' element type
};

AttentionTypes typesOf(const AttentionKernel &kernel) {
  // One layer of the cache: [kvHeads][capacity][D], each head's positions contiguous.
  return {
      fmt::format("memref<?x{}x{}xf32>", kernel.queryHeads, kernel.headDim),
      fmt::format("memref<{}x?x{}x{}>", kernel.kvHeads, kernel.headDim, storageType(kernel.cache)),
      kernel.cache};
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

/// The start of workgroup %g's body: its row %t and first query head %h0
/// (head-major: g = head group x rows + row), the KV head %kv they read and
/// the positions row %t sees, %count0.
std::string workgroupPrologue(int64_t headsPerWorkgroup, int64_t queryHeads) {
  return fmt::format(R"mlir(    %t = arith.remui %g, %rows : index
    %headGroup = arith.divui %g, %rows : index
    %cHeads = arith.constant {0} : index
    %h0 = arith.muli %headGroup, %cHeads : index
    %kv64 = memref.load %map[%h0] : memref<{1}xi64>
    %kv = arith.index_cast %kv64 : i64 to index
    %seen = arith.addi %cached, %t : index
    %count0 = arith.addi %seen, %c1 : index
)mlir",
                     headsPerWorkgroup, queryHeads);
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

/// A query vector of a block: row `row` of the block (%t<row>) and head
/// `head` of the workgroup (%h<head>). Its scores go to %scores<k>.
struct Slot {
  int k, row, head;
};

std::vector<Slot> slotsOf(int rows, int heads, int firstRow = 0) {
  std::vector<Slot> slots;
  for (int r = firstRow; r < rows; ++r)
    for (int p = 0; p < heads; ++p)
      slots.push_back({r * heads + p, r, p});
  return slots;
}

/// `%<out>:N = scf.for %<iv> = from to to step (positions)`: the scores of
/// `slots` over those positions, `positions` at a time (2 x slots independent
/// FMA chains), stored to %scores<k>; yields the running maxima, starting
/// from `initial(k)`. With `prefetchValues` each position's value row is
/// prefetched while its key is read (decode: the value sum reads it after the
/// softmax, from L2 by then).
template <typename Initial>
std::string scoreLoop(const std::vector<Slot> &slots, int positions, const AttentionTypes &types,
                      const std::string &out, const std::string &iv, const std::string &from,
                      const std::string &to, Initial initial, bool prefetchValues = false) {
  const int n = int(slots.size()), chains = n * positions;
  std::string offsets, body, reductions, iterArgs, yields;
  auto position = [&](int j) { return j ? fmt::format("%{}_{}", iv, j) : "%" + iv; };
  for (int j = 1; j < positions; ++j)
    offsets += fmt::format("      %{0}_c{1} = arith.constant {1} : index\n"
                           "      %{0}_{1} = arith.addi %{0}, %{0}_c{1} : index\n",
                           iv, j);
  for (int j = 0; j < positions; ++j) {
    body += "        " +
            vectorWidenedLoad(types.cache, fmt::format("%{}_k{}", iv, j), "%keys",
                              fmt::format("%kv, {}, %i", position(j)), types.kv) +
            "\n";
    if (prefetchValues)
      body += fmt::format(
          "        memref.prefetch %values[%kv, {}, %i], read, locality<2>, data : {}\n",
          position(j), types.kv);
  }
  for (int s = 0; s < n; ++s) {
    const Slot &slot = slots[size_t(s)];
    body +=
        fmt::format("        %{0}_q{1} = vector.load %q[%t{2}, %h{3}, %i] : {4}, vector<16xf32>\n",
                    iv, slot.k, slot.row, slot.head, types.query);
    iterArgs += fmt::format("{}%{}_m{} = {}", s ? ", " : "", iv, slot.k, initial(slot.k));
    std::string last = fmt::format("%{}_m{}", iv, slot.k);
    for (int j = 0; j < positions; ++j) {
      const int chain = s * positions + j;
      body += fmt::format("        %{0}_r{1} = vector.fma %{0}_q{2}, %{0}_k{3}, %{0}_a{1} : "
                          "vector<16xf32>\n",
                          iv, chain, slot.k, j);
      reductions += fmt::format(
          "      %{0}_dot{1} = vector.reduction <add>, %{0}_dots#{1} : vector<16xf32> into f32\n"
          "      %{0}_score{1} = arith.mulf %{0}_dot{1}, %scale : f32\n"
          "      memref.store %{0}_score{1}, %scores{2}[{3}] : memref<?xf32>\n"
          "      %{0}_max{1} = arith.maxf {4}, %{0}_score{1} : f32\n",
          iv, chain, slot.k, position(j), last);
      last = fmt::format("%{}_max{}", iv, chain);
    }
    yields += (s ? ", " : "") + last;
  }
  return fmt::format(
      R"mlir(    %{out}:{n} = scf.for %{iv} = {from} to {to} step %c{positions} iter_args({iterArgs}) -> ({maxTypes}) {{
{offsets}      %{iv}_dots:{chains} = scf.for %i = %c0 to %cD step %c16 iter_args({accArgs}) -> ({accTypes}) {{
{body}        scf.yield {accYields} : {accTypes}
      }}
{reductions}      scf.yield {yields} : {maxTypes}
    }}
)mlir",
      fmt::arg("out", out), fmt::arg("n", n), fmt::arg("iv", iv), fmt::arg("from", from),
      fmt::arg("to", to), fmt::arg("positions", positions), fmt::arg("iterArgs", iterArgs),
      fmt::arg("maxTypes", listOf(n, [](int) { return std::string("f32"); })),
      fmt::arg("offsets", offsets), fmt::arg("chains", chains),
      fmt::arg("accArgs",
               listOf(chains, [&](int c) { return fmt::format("%{}_a{} = %zeroV", iv, c); })),
      fmt::arg("accTypes", vectorTypes(chains)), fmt::arg("body", body),
      fmt::arg("accYields", listOf(chains, [&](int c) { return fmt::format("%{}_r{}", iv, c); })),
      fmt::arg("reductions", reductions), fmt::arg("yields", yields));
}

/// exp(score - max) over %scores<k>[0, count) in place, 16 positions at a
/// time, and the inverse of their sum broadcast as %inverseV<k>.
std::string slotSoftmax(int k, const std::string &max, const std::string &count) {
  return fmt::format(R"mlir(    %maxV{0} = vector.broadcast {1} : f32 to vector<16xf32>
    %chunks{0} = arith.divui {2}, %c16 : index
    %vectorEnd{0} = arith.muli %chunks{0}, %c16 : index
    %sumV{0} = scf.for %e{0} = %c0 to %vectorEnd{0} step %c16 iter_args(%ea{0} = %zeroV) -> (vector<16xf32>) {{
      %scoreV{0} = vector.load %scores{0}[%e{0}] : memref<?xf32>, vector<16xf32>
      %shiftedV{0} = arith.subf %scoreV{0}, %maxV{0} : vector<16xf32>
      %expV{0} = math.exp %shiftedV{0} : vector<16xf32>
      vector.store %expV{0}, %scores{0}[%e{0}] : memref<?xf32>, vector<16xf32>
      %er{0} = arith.addf %ea{0}, %expV{0} : vector<16xf32>
      scf.yield %er{0} : vector<16xf32>
    }}
    %vectorSum{0} = vector.reduction <add>, %sumV{0} : vector<16xf32> into f32
    %total{0} = scf.for %f{0} = %vectorEnd{0} to {2} step %c1 iter_args(%fa{0} = %vectorSum{0}) -> (f32) {{
      %score{0} = memref.load %scores{0}[%f{0}] : memref<?xf32>
      %shifted{0} = arith.subf %score{0}, {1} : f32
      %exp{0} = math.exp %shifted{0} : f32
      memref.store %exp{0}, %scores{0}[%f{0}] : memref<?xf32>
      %fr{0} = arith.addf %fa{0}, %exp{0} : f32
      scf.yield %fr{0} : f32
    }}
    %inverse{0} = arith.divf %one, %total{0} : f32
    %inverseV{0} = vector.broadcast %inverse{0} : f32 to vector<16xf32>
)mlir",
                     k, max, count);
}

/// `%<out>:N = scf.for %<iv> = from to to`: the probability-weighted sum of
/// the value columns `columns` for `slots`, starting from `initial(k, c)`.
template <typename Initial>
std::string valueLoop(const std::vector<Slot> &slots, const std::vector<int64_t> &columns,
                      const AttentionTypes &types, const std::string &out, const std::string &iv,
                      const std::string &from, const std::string &to, Initial initial) {
  std::string body, iterArgs, yields;
  for (int64_t c : columns)
    body +=
        fmt::format("      %{0}_off{1} = arith.constant {2} : index\n      ", iv, c, c * kLanes) +
        vectorWidenedLoad(types.cache, fmt::format("%{}_v{}", iv, c), "%values",
                          fmt::format("%kv, %{0}, %{0}_off{1}", iv, c), types.kv) +
        "\n";
  int n = 0;
  for (const Slot &slot : slots) {
    body += fmt::format("      %{0}_p{1} = memref.load %scores{1}[%{0}] : memref<?xf32>\n"
                        "      %{0}_pv{1} = vector.broadcast %{0}_p{1} : f32 to vector<16xf32>\n",
                        iv, slot.k);
    for (int64_t c : columns) {
      body += fmt::format("      %{0}_u{1}_{2} = vector.fma %{0}_pv{1}, %{0}_v{2}, %{0}_b{1}_{2} : "
                          "vector<16xf32>\n",
                          iv, slot.k, c);
      iterArgs +=
          fmt::format("{}%{}_b{}_{} = {}", n ? ", " : "", iv, slot.k, c, initial(slot.k, c));
      yields += fmt::format("{}%{}_u{}_{}", n ? ", " : "", iv, slot.k, c);
      ++n;
    }
  }
  return fmt::format(
      R"mlir(    %{0}:{1} = scf.for %{2} = {3} to {4} step %c1 iter_args({5}) -> ({6}) {{
{7}      scf.yield {8} : {6}
    }}
)mlir",
      out, n, iv, from, to, iterArgs, vectorTypes(n), body, yields);
}

/// The position of (slot, column) among a valueLoop's results.
int64_t resultIndex(const std::vector<Slot> &slots, const std::vector<int64_t> &columns, int k,
                    int64_t column) {
  int64_t index = 0;
  for (const Slot &slot : slots)
    for (int64_t c : columns) {
      if (slot.k == k && c == column)
        return index;
      ++index;
    }
  return -1;
}

/// @<name>_rows<R>[_decode]: attention of rows %t0 .. %t0 + R - 1 for the
/// workgroup's heads %h0 .. (one KV head, %kv). Every key and value row is
/// loaded once for all R x heads query vectors; row r sees %count0 + r
/// positions. The value sums run in column groups small enough for the
/// registers (16 accumulators).
std::string blockFunction(const AttentionKernel &kernel, const AttentionTypes &types, int rows,
                          bool decode) {
  const int heads = int(kernel.headsPerWorkgroup());
  const int64_t columns = kernel.headDim / kLanes;
  const std::vector<Slot> all = slotsOf(rows, heads);
  const std::vector<Slot> laterRows = slotsOf(rows, heads, 1);
  const int n = int(all.size());
  std::string setup, text;
  for (int r = 1; r < rows; ++r)
    setup += fmt::format("  %cRow{0} = arith.constant {0} : index\n"
                         "  %t{0} = arith.addi %t0, %cRow{0} : index\n"
                         "  %count{0} = arith.addi %count0, %cRow{0} : index\n",
                         r);
  for (int p = 1; p < heads; ++p)
    setup += fmt::format("  %cHead{0} = arith.constant {0} : index\n"
                         "  %h{0} = arith.addi %h0, %cHead{0} : index\n",
                         p);
  // Scores: every slot over the positions all rows see, pairs then one; then
  // the positions only the later rows see.
  text += "    %steps = arith.divui %count0, %c2 : index\n"
          "    %stepEnd = arith.muli %steps, %c2 : index\n";
  text += scoreLoop(
      all, kPositionsPerStep, types, "pairMax", "s", "%c0", "%stepEnd",
      [](int) { return std::string("%lowest"); }, decode);
  text += scoreLoop(all, 1, types, "oneMax", "s1", "%stepEnd", "%count0",
                    [](int k) { return fmt::format("%pairMax#{}", k); });
  auto finalMax = [&](const Slot &slot) { return fmt::format("%oneMax#{}", slot.k); };
  if (rows == 2) {
    text += scoreLoop(laterRows, 1, types, "laterMax", "s2", "%count0", "%count1",
                      [&](int k) { return fmt::format("%oneMax#{}", k); });
  }
  for (const Slot &slot : all)
    text += slotSoftmax(
        slot.k, slot.row == 0 ? finalMax(slot) : fmt::format("%laterMax#{}", slot.k - heads),
        fmt::format("%count{}", slot.row));
  // Value sums, a column group at a time.
  const int64_t groupSize = std::max<int64_t>(1, std::min<int64_t>(columns, 16 / n));
  for (int64_t first = 0, group = 0; first < columns; first += groupSize, ++group) {
    std::vector<int64_t> cols;
    for (int64_t c = first; c < std::min(columns, first + groupSize); ++c)
      cols.push_back(c);
    const std::string sums = fmt::format("sums{}", group), later = fmt::format("later{}", group);
    text += valueLoop(all, cols, types, sums, fmt::format("v{}", group), "%c0", "%count0",
                      [](int, int64_t) { return std::string("%zeroV"); });
    if (rows == 2)
      text += valueLoop(laterRows, cols, types, later, fmt::format("w{}", group), "%count0",
                        "%count1", [&](int k, int64_t c) {
                          return fmt::format("%{}#{}", sums, resultIndex(all, cols, k, c));
                        });
    for (const Slot &slot : all)
      for (int64_t c : cols) {
        const std::string sum =
            slot.row == 0 ? fmt::format("%{}#{}", sums, resultIndex(all, cols, slot.k, c))
                          : fmt::format("%{}#{}", later, resultIndex(laterRows, cols, slot.k, c));
        text += fmt::format("    %o{0}_{1} = arith.mulf {2}, %inverseV{0} : vector<16xf32>\n"
                            "    %oOff{0}_{1} = arith.constant {3} : index\n"
                            "    vector.store %o{0}_{1}, %out[%t{4}, %h{5}, %oOff{0}_{1}] : {6}, "
                            "vector<16xf32>\n",
                            slot.k, c, sum, c * kLanes, slot.row, slot.head, types.query);
      }
  }
  std::string scoreParams;
  for (int k = 0; k < n; ++k)
    scoreParams += fmt::format(", %scores{}: memref<?xf32>", k);
  return fmt::format(
      R"mlir(
func.func private @{name}_rows{rows}{variant}(%q: {queryType}, %keys: {kvType}, %values: {kvType}, %out: {queryType}{scoreParams}, %t0: index, %h0: index, %kv: index, %count0: index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c16 = arith.constant 16 : index
  %cD = arith.constant {d} : index
  %one = arith.constant 1.0 : f32
  %lowest = arith.constant 0xFF800000 : f32
  %scale = arith.constant {scale:e} : f32
  %zeroV = arith.constant dense<0.0> : vector<16xf32>
{setup}{text}  return
}}
)mlir",
      fmt::arg("name", kernel.name), fmt::arg("rows", rows),
      fmt::arg("variant", decode ? "_decode" : ""), fmt::arg("queryType", types.query),
      fmt::arg("kvType", types.kv), fmt::arg("scoreParams", scoreParams),
      fmt::arg("d", kernel.headDim), fmt::arg("scale", kernel.scale), fmt::arg("setup", setup),
      fmt::arg("text", text));
}

/// Causal prefill takes the rows of a head group in pairs (the even row's
/// workgroup does both, the odd one's nothing): each key and value row then
/// serves twice the query vectors, halving the cache traffic. A last odd row,
/// and decode, run alone; decode prefetches the value rows.
std::string vectorAttention(const AttentionKernel &kernel, const AttentionTypes &types) {
  const int heads = int(kernel.headsPerWorkgroup());
  const int maxSlots = 2 * heads;
  std::string buffers, argTypes;
  auto call = [&](int rows, bool decode) {
    std::string scores, scoreTypes;
    for (int k = 0; k < rows * heads; ++k) {
      scores += fmt::format(", %scores{}", k);
      scoreTypes += ", memref<?xf32>";
    }
    return fmt::format("func.call @{0}_rows{1}{2}(%q, %keys, %values, %out{3}, %t, %h0, %kv, "
                       "%count0) : ({4}, {5}, {5}, {4}{6}, index, index, index, index) -> ()",
                       kernel.name, rows, decode ? "_decode" : "", scores, types.query, types.kv,
                       scoreTypes);
  };
  for (int k = 0; k < maxSlots; ++k)
    buffers += fmt::format("  %scores{} = memref.alloca(%visible) : memref<?xf32>\n", k);
  return blockFunction(kernel, types, 1, false) + blockFunction(kernel, types, 1, true) +
         blockFunction(kernel, types, 2, false) + attentionOpening(kernel, types) +
         fmt::format(
             R"mlir(  %c2 = arith.constant 2 : index
  %oneRow = arith.cmpi eq, %rows, %c1 : index
{buffers}  scf.for %g = %wgBegin to %wgEnd step %c1 {{
{prologue}    %parity = arith.remui %t, %c2 : index
    %even = arith.cmpi eq, %parity, %c0 : index
    %next = arith.addi %t, %c1 : index
    %hasNext = arith.cmpi ult, %next, %rows : index
    scf.if %even {{
      scf.if %hasNext {{
        {pair}
      }} else {{
        scf.if %oneRow {{
          {decode}
        }} else {{
          {single}
        }}
      }}
    }}
  }}
  return
}}
)mlir",
             fmt::arg("buffers", buffers),
             fmt::arg("prologue", workgroupPrologue(heads, kernel.queryHeads)),
             fmt::arg("pair", call(2, false)), fmt::arg("decode", call(1, true)),
             fmt::arg("single", call(1, false)));
}

/// One query head per workgroup, one feature at a time: head sizes that are
/// not a multiple of 16.
std::string scalarAttention(const AttentionKernel &kernel, const AttentionTypes &types) {
  const std::string accType = fmt::format("memref<{}xf32>", kernel.headDim);
  return attentionOpening(kernel, types) +
         fmt::format(
             R"mlir(  %c16 = arith.constant 16 : index
  %zeroV = arith.constant dense<0.0> : vector<16xf32>
  %scores0 = memref.alloca(%visible) : memref<?xf32>
  %acc = memref.alloca() : {accType}
  scf.for %g = %wgBegin to %wgEnd step %c1 {{
{prologue}    %max0 = scf.for %s = %c0 to %count0 step %c1 iter_args(%m = %lowest) -> (f32) {{
      %dot = scf.for %i = %c0 to %cD step %c1 iter_args(%a = %zero) -> (f32) {{
        %qv = memref.load %q[%t, %h0, %i] : {queryType}
        {loadKey}
        %r = math.fma %qv, %kv_, %a : f32
        scf.yield %r : f32
      }}
      %score = arith.mulf %dot, %scale : f32
      memref.store %score, %scores0[%s] : memref<?xf32>
      %m2 = arith.maxf %m, %score : f32
      scf.yield %m2 : f32
    }}
{softmax}    scf.for %i = %c0 to %cD step %c1 {{
      memref.store %zero, %acc[%i] : {accType}
    }}
    scf.for %s = %c0 to %count0 step %c1 {{
      %p = memref.load %scores0[%s] : memref<?xf32>
      scf.for %i = %c0 to %cD step %c1 {{
        {loadValue}
        %a = memref.load %acc[%i] : {accType}
        %r = math.fma %p, %v, %a : f32
        memref.store %r, %acc[%i] : {accType}
      }}
    }}
    scf.for %i = %c0 to %cD step %c1 {{
      %a = memref.load %acc[%i] : {accType}
      %o = arith.mulf %a, %inverse0 : f32
      memref.store %o, %out[%t, %h0, %i] : {queryType}
    }}
  }}
  return
}}
)mlir",
             fmt::arg("prologue", workgroupPrologue(1, kernel.queryHeads)),
             fmt::arg("accType", accType), fmt::arg("queryType", types.query),
             fmt::arg("softmax", slotSoftmax(0, "%max0", "%count0")),
             fmt::arg("loadKey",
                      widenedLoad(types.cache, "%kv_", "%keys", "%kv, %s, %i", types.kv)),
             fmt::arg("loadValue",
                      widenedLoad(types.cache, "%v", "%values", "%kv, %s, %i", types.kv)));
}

} // namespace

std::string attentionSource(const AttentionKernel &kernel) {
  const AttentionTypes types = typesOf(kernel);
  return kernel.headDim % kLanes == 0 ? vectorAttention(kernel, types)
                                      : scalarAttention(kernel, types);
}

} // namespace q3::cpu
