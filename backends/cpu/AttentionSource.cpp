//===- AttentionSource.cpp - the attention kernel templates ---------------===//
//
// Causal attention of rows over the cached positions of their KV head.
//
// With head_dim a multiple of 16 (every real Qwen3) a workgroup takes P query
// heads that share a KV head (P = the GQA ratio for Qwen3's 2, 4, 5 and 8;
// at most 8, and 16 / P rows use 15 or 16 lanes). A prefill runs
// flash-attention style on blocks of 16 / P rows: the block's 16 query
// vectors are the lanes of every vector, keys go by 16 positions at a time
// as outer products (a key scalar broadcast times the lanes' feature: no
// horizontal sums; the queries go in through 16 x 16 shuffle transposes),
// the values as vectors times each lane's probability (8 lanes x 2 vectors
// of accumulators), and the softmax runs online, so each key and value row
// is read once per block and the scratch is fixed (~33 KiB per thread).
// With bf16Prefill (q3.lowering's matmul = avx512bf16) both loops run
// vdpbf16ps on bf16 pairs, half the steps: the queries paired by feature,
// each key block's rows rounded (a row is its feature pairs), the
// probabilities and the block's values paired by position; a workgroup
// leads two blocks of rows, which share each key block's rounded copies.
// Decode (one row) makes one pass over the keys and values, 512 positions
// at a time with an online softmax: it scores a block's keys, two positions
// per step for its P heads, then adds the block's values, so each streams
// as one long run, each row prefetched q3.lowering's prefetch_bytes ahead
// (the cache is on 4 KiB pages, where the hardware prefetchers stop). Other
// head sizes take a scalar template, one query head and one row per
// workgroup. A bf16 or f16 cache is widened exactly as it is loaded.
//
// Workgroup g is row g % rows of head group g / rows: head-major, so the
// consecutive workgroups a thread runs share their keys and values, which
// stay in L2 from one row block to the next.
//
#include "backends/cpu/KernelSource.h"
#include "backends/cpu/KernelSourceUtil.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace q3::cpu {

using namespace detail;

int64_t AttentionKernel::headsPerWorkgroup() const {
  if (headDim % kLanes != 0)
    return 1;
  // The whole group of query heads on one KV head where it fits the
  // registers (8 at most) and the flash prefill's 16 lanes (16 / group rows
  // of a block, at most one lane idle): each key and value row is then read
  // once for all of them (Qwen3-4B/8B: 4 heads, 14B: 5, 32B: 8).
  for (int64_t group : {8, 5, 4, 3, 2}) {
    if (queryHeads % group != 0)
      continue;
    bool shared = true;
    for (int64_t h = 0; h < queryHeads && shared; ++h)
      shared = kvHeadMap.at(size_t(h)) == kvHeadMap.at(size_t(h - h % group));
    if (shared)
      return group;
  }
  return 1;
}

namespace {

constexpr int kPositionsPerStep = 2; // of the vector score loop

// Decode scores a block of this many positions, then sums its values: the
// keys and then the values stream as long runs, which the hardware
// prefetchers follow as one stream at a time. Measured on AMD family 26
// (0.6B, decode after 2048 tokens, alternated): 16-position blocks with each
// value row prefetched while its key was scored (two streams at once) 12.2-
// 12.4 ms of attention per token, 256 positions without the prefetch
// 11.5-11.6, 512 11.1-11.2, 1024 10.8-11.5. A C loop reading two regions in
// alternating 8 KiB runs streamed 51-58 GB/s against 67-68 for one region,
// 68-73 with 128 KiB runs.
constexpr int64_t kDecodeBlockPositions = 512;

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

/// A query vector of decode: row `row` (%t<row>, always 0) and head `head`
/// of the workgroup (%h<head>). Its scores go to %scores<k>.
struct Slot {
  int k, row, head;
};

/// The decode row's query vectors, one per head of the workgroup.
std::vector<Slot> decodeSlots(int heads) {
  std::vector<Slot> slots;
  for (int p = 0; p < heads; ++p)
    slots.push_back({p, 0, p});
  return slots;
}

/// `%<out>:N = scf.for %<iv> = from to to step (positions)`: the scores of
/// `slots` over those positions, `positions` at a time (2 x slots independent
/// FMA chains), stored to %scores<k>; yields the running maxima, starting
/// from `initial(k)`.
template <typename Initial>
std::string scoreLoop(const std::vector<Slot> &slots, int positions, const AttentionTypes &types,
                      const std::string &out, const std::string &iv, const std::string &from,
                      const std::string &to, Initial initial) {
  const int n = int(slots.size()), chains = n * positions;
  std::string offsets, body, reductions, iterArgs, yields;
  auto position = [&](int j) { return j ? fmt::format("%{}_{}", iv, j) : "%" + iv; };
  for (int j = 1; j < positions; ++j)
    offsets += fmt::format("      %{0}_c{1} = arith.constant {1} : index\n"
                           "      %{0}_{1} = arith.addi %{0}, %{0}_c{1} : index\n",
                           iv, j);
  // Each key row is prefetched %ahead positions before it is scored (the
  // last visible position at most).
  for (int j = 0; j < positions; ++j) {
    offsets += fmt::format("      %{0}_pf{1}_ = arith.addi {2}, %ahead : index\n"
                           "      %{0}_pf{1} = arith.minui %{0}_pf{1}_, %lastPosition : index\n",
                           iv, j, position(j));
    body += "        " +
            vectorWidenedLoad(types.cache, fmt::format("%{}_k{}", iv, j), "%keys",
                              fmt::format("%kv, {}, %i", position(j)), types.kv) +
            "\n" +
            fmt::format("        memref.prefetch %keys[%kv, %{0}_pf{1}, %i], read, locality<3>, "
                        "data : {2}\n",
                        iv, j, types.kv);
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
  // Each value row is prefetched %ahead positions before it is added (the
  // last visible position at most).
  std::string body = fmt::format("      %{0}_pf_ = arith.addi %{0}, %ahead : index\n"
                                 "      %{0}_pf = arith.minui %{0}_pf_, %lastPosition : index\n",
                                 iv);
  std::string iterArgs, yields;
  for (int64_t c : columns)
    body +=
        fmt::format("      %{0}_off{1} = arith.constant {2} : index\n      ", iv, c, c * kLanes) +
        vectorWidenedLoad(types.cache, fmt::format("%{}_v{}", iv, c), "%values",
                          fmt::format("%kv, %{0}, %{0}_off{1}", iv, c), types.kv) +
        "\n" +
        fmt::format("      memref.prefetch %values[%kv, %{0}_pf, %{0}_off{1}], read, locality<3>, "
                    "data : {2}\n",
                    iv, c, types.kv);
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

/// The positions decode prefetches ahead: kernel.prefetchBytes of rows.
int64_t aheadPositions(const AttentionKernel &kernel) {
  const int64_t rowBytes = kernel.headDim * (kernel.cache == WeightStorage::F32 ? 4 : 2);
  return std::max<int64_t>(1, (kernel.prefetchBytes + rowBytes - 1) / rowBytes);
}

/// @<name>_decode: attention of the one row %t0 for the workgroup's heads
/// %h0 .. (one KV head, %kv), over %count0 positions in one pass,
/// kDecodeBlockPositions at a time with an online softmax: a block's keys
/// are scored (two positions per step), the running maximum, sum and value
/// sums are rescaled when the maximum rises, and the block's values added.
/// Every key and value row is read once for all the heads; the value sums
/// stay in registers across the blocks (16 accumulators per column group).
std::string decodeFunction(const AttentionKernel &kernel, const AttentionTypes &types) {
  const int heads = int(kernel.headsPerWorkgroup());
  const int64_t columns = kernel.headDim / kLanes;
  const std::vector<Slot> slots = decodeSlots(heads);
  const int64_t groupSize = std::max<int64_t>(1, std::min<int64_t>(columns, 16 / heads));
  std::vector<std::vector<int64_t>> groups;
  for (int64_t first = 0; first < columns; first += groupSize) {
    groups.emplace_back();
    for (int64_t c = first; c < std::min(columns, first + groupSize); ++c)
      groups.back().push_back(c);
  }
  auto sumName = [](int k, int64_t c) { return fmt::format("%acc{}_{}", k, c); };
  std::string setup, iterArgs, iterTypes, yields, body, finish;
  for (int p = 1; p < heads; ++p)
    setup += fmt::format("  %cHead{0} = arith.constant {0} : index\n"
                         "  %h{0} = arith.addi %h0, %cHead{0} : index\n",
                         p);
  // Loop-carried: each head's running maximum and sum, then its value sums.
  int carried = 0;
  auto carry = [&](const std::string &name, const std::string &initial, const std::string &type,
                   const std::string &next) {
    iterArgs += fmt::format("{}{} = {}", carried ? ", " : "", name, initial);
    iterTypes += fmt::format("{}{}", carried ? ", " : "", type);
    yields += fmt::format("{}{}", carried ? ", " : "", next);
    ++carried;
  };
  for (const Slot &slot : slots)
    carry(fmt::format("%m{}", slot.k), "%lowest", "f32", fmt::format("%oneMax#{}", slot.k));
  for (const Slot &slot : slots)
    carry(fmt::format("%l{}", slot.k), "%zero", "f32", fmt::format("%lNew{}", slot.k));
  for (size_t g = 0; g < groups.size(); ++g)
    for (const Slot &slot : slots)
      for (int64_t c : groups[g])
        carry(sumName(slot.k, c), "%zeroV", "vector<16xf32>",
              fmt::format("%sums{}#{}", g, resultIndex(slots, groups[g], slot.k, c)));
  // The block's scores (positions in pairs, then a last one), from the
  // running maxima, so the loops yield the new maxima.
  body += "    %blockFull = arith.addi %blockStart, %cBlock : index\n"
          "    %blockEnd = arith.minui %blockFull, %count0 : index\n"
          "    %blockSize = arith.subi %blockEnd, %blockStart : index\n"
          "    %pairs = arith.divui %blockSize, %c2 : index\n"
          "    %pairSpan = arith.muli %pairs, %c2 : index\n"
          "    %pairEnd = arith.addi %blockStart, %pairSpan : index\n";
  body += scoreLoop(
      slots, kPositionsPerStep, types, "pairMax", "s", "%blockStart", "%pairEnd",
      [](int k) { return fmt::format("%m{}", k); });
  body += scoreLoop(slots, 1, types, "oneMax", "s1", "%pairEnd", "%blockEnd",
                    [](int k) { return fmt::format("%pairMax#{}", k); });
  // Probabilities of the block, 16 at a time (lanes past its end 0), and
  // the rescaled sums.
  for (const Slot &slot : slots)
    body += fmt::format(
        "    %maxV{0} = vector.broadcast %oneMax#{0} : f32 to vector<16xf32>\n"
        "    %sumV{0} = scf.for %e = %blockStart to %blockEnd step %c16 iter_args(%ea{0} = %zeroV) "
        "-> (vector<16xf32>) {{\n"
        "      %left{0} = arith.subi %blockEnd, %e : index\n"
        "      %left32{0} = arith.index_cast %left{0} : index to i32\n"
        "      %leftV{0} = vector.broadcast %left32{0} : i32 to vector<16xi32>\n"
        "      %inBlock{0} = arith.cmpi slt, %laneIndex, %leftV{0} : vector<16xi32>\n"
        "      %scoreV{0} = vector.load %scores{0}[%e] : memref<?xf32>, vector<16xf32>\n"
        "      %shiftedV{0} = arith.subf %scoreV{0}, %maxV{0} : vector<16xf32>\n"
        "      %expV{0} = math.exp %shiftedV{0} : vector<16xf32>\n"
        "      %probV{0} = arith.select %inBlock{0}, %expV{0}, %zeroV : vector<16xi1>, "
        "vector<16xf32>\n"
        "      vector.store %probV{0}, %scores{0}[%e] : memref<?xf32>, vector<16xf32>\n"
        "      %er{0} = arith.addf %ea{0}, %probV{0} : vector<16xf32>\n"
        "      scf.yield %er{0} : vector<16xf32>\n"
        "    }}\n"
        "    %blockSum{0} = vector.reduction <add>, %sumV{0} : vector<16xf32> into f32\n"
        "    %maxDrop{0} = arith.subf %m{0}, %oneMax#{0} : f32\n"
        "    %alpha{0} = math.exp %maxDrop{0} : f32\n"
        "    %alphaV{0} = vector.broadcast %alpha{0} : f32 to vector<16xf32>\n"
        "    %lKept{0} = arith.mulf %l{0}, %alpha{0} : f32\n"
        "    %lNew{0} = arith.addf %lKept{0}, %blockSum{0} : f32\n",
        slot.k);
  for (size_t g = 0; g < groups.size(); ++g) {
    for (const Slot &slot : slots)
      for (int64_t c : groups[g])
        body += fmt::format("    %kept{0}_{1} = arith.mulf {2}, %alphaV{0} : vector<16xf32>\n",
                            slot.k, c, sumName(slot.k, c));
    body += valueLoop(slots, groups[g], types, fmt::format("sums{}", g),
                      fmt::format("v{}", g), "%blockStart", "%blockEnd", [](int k, int64_t c) {
                        return fmt::format("%kept{}_{}", k, c);
                      });
  }
  // The output: the value sums over the sums of the probabilities.
  for (const Slot &slot : slots)
    finish += fmt::format("  %inverse{0} = arith.divf %one, %final#{1} : f32\n"
                          "  %inverseV{0} = vector.broadcast %inverse{0} : f32 to vector<16xf32>\n",
                          slot.k, heads + slot.k);
  int index = 2 * heads;
  for (size_t g = 0; g < groups.size(); ++g)
    for (const Slot &slot : slots)
      for (int64_t c : groups[g])
        finish += fmt::format("  %o{0}_{1} = arith.mulf %final#{2}, %inverseV{0} : vector<16xf32>\n"
                              "  %oOff{0}_{1} = arith.constant {3} : index\n"
                              "  vector.store %o{0}_{1}, %out[%t0, %h{4}, %oOff{0}_{1}] : {5}, "
                              "vector<16xf32>\n",
                              slot.k, c, index++, c * kLanes, slot.head, types.query);
  std::string scoreParams, lanes;
  for (int k = 0; k < heads; ++k)
    scoreParams += fmt::format(", %scores{}: memref<?xf32>", k);
  for (int lane = 0; lane < kLanes; ++lane)
    lanes += fmt::format("{}{}", lane ? ", " : "", lane);
  return fmt::format(
      R"mlir(
func.func private @{name}_decode(%q: {queryType}, %keys: {kvType}, %values: {kvType}, %out: {queryType}{scoreParams}, %t0: index, %h0: index, %kv: index, %count0: index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c16 = arith.constant 16 : index
  %cD = arith.constant {d} : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %lowest = arith.constant 0xFF800000 : f32
  %scale = arith.constant {scale:e} : f32
  %zeroV = arith.constant dense<0.0> : vector<16xf32>
  %laneIndex = arith.constant dense<[{lanes}]> : vector<16xi32>
  %cBlock = arith.constant {block} : index
  %ahead = arith.constant {ahead} : index
  %lastPosition = arith.subi %count0, %c1 : index
{setup}  %final:{carried} = scf.for %blockStart = %c0 to %count0 step %cBlock iter_args({iterArgs}) -> ({iterTypes}) {{
{body}    scf.yield {yields} : {iterTypes}
  }}
{finish}  return
}}
)mlir",
      fmt::arg("name", kernel.name), fmt::arg("queryType", types.query),
      fmt::arg("kvType", types.kv), fmt::arg("scoreParams", scoreParams),
      fmt::arg("d", kernel.headDim), fmt::arg("scale", kernel.scale), fmt::arg("setup", setup),
      fmt::arg("lanes", lanes), fmt::arg("block", kDecodeBlockPositions),
      fmt::arg("ahead", aheadPositions(kernel)), fmt::arg("carried", carried),
      fmt::arg("iterArgs", iterArgs), fmt::arg("iterTypes", iterTypes), fmt::arg("body", body),
      fmt::arg("yields", yields), fmt::arg("finish", finish));
}

/// The flash kernel's scratch, one set per thread (every buffer L1-sized):
/// the block's query vectors transposed and scaled, [D][lane]; the output
/// sums, [lane][D]; one key block's probabilities, [position][lane]; a key
/// block's keys and values as f32 when they are not read in place; and a
/// value per lane (the rescale factors, then the inverse sums).
struct FlashScratch {
  std::string queryT, outT, probabilities, block, laneScalars;
};

FlashScratch flashScratchTypes(const AttentionKernel &kernel) {
  return {fmt::format("memref<{}x{}xf32>", kernel.headDim, kLanes),
          fmt::format("memref<{}x{}xf32>", kLanes, kernel.headDim),
          fmt::format("memref<{0}x{0}xf32>", kLanes),
          fmt::format("memref<{}x{}xf32>", kLanes, kernel.headDim),
          fmt::format("memref<{}xf32>", kLanes)};
}

/// The type of a key block's view, [16][D] f32: the cache in place or the copy.
std::string blockViewType(const AttentionKernel &kernel) {
  return fmt::format("memref<{}x{}xf32, strided<[{}, 1], offset: ?>>", kLanes, kernel.headDim,
                     kernel.headDim);
}

/// The rows %blockStart .. + 15 a flash key block reads, %<prefix>Read<p>:
/// rows past the last visible position read that one (their scores are
/// masked and their probabilities 0, and no read passes the written rows).
std::string clampedBlockRows(const std::string &prefix, const std::string &indent) {
  std::string text;
  for (int p = 0; p < kLanes; ++p)
    text += fmt::format("{0}{1}Row{2} = arith.addi %blockStart, %cP{2} : index\n"
                        "{0}{1}Read{2} = arith.minui {1}Row{2}, %lastPosition : index\n",
                        indent, prefix, p);
  return text;
}

/// The copy of a key block: rows %blockStart .. + 15 of `cache` widened to
/// f32 into `copy`, rows past the last visible position reading that one
/// (their scores are masked and their probabilities 0, and no read passes
/// the written rows).
std::string copyKeyBlock(const AttentionKernel &kernel, const AttentionTypes &types,
                         const std::string &cache, const std::string &copy) {
  const FlashScratch scratch = flashScratchTypes(kernel);
  std::string text = clampedBlockRows("%" + cache, "        ");
  text += "        scf.for %wc = %c0 to %cD step %c16 {\n";
  for (int p = 0; p < kLanes; ++p) {
    const std::string value = fmt::format("%w{}{}", cache, p);
    text += "        " +
            vectorWidenedLoad(kernel.cache, value, "%" + cache,
                              fmt::format("%kv, %{}Read{}, %wc", cache, p), types.kv) +
            fmt::format("\n          vector.store {0}, %{1}[%cP{2}, %wc] : {3}, vector<16xf32>\n",
                        value, copy, p, scratch.block);
  }
  return text + "        }\n";
}

/// `%<cache>Block`: the key block's view of `cache` (keys or values). An f32
/// cache is read in place when all 16 positions are visible to some row of
/// the block; other blocks, and every block of a bf16 or f16 cache, are read
/// from a widened copy.
std::string keyBlockView(const AttentionKernel &kernel, const AttentionTypes &types,
                         const std::string &cache, const std::string &copy) {
  const FlashScratch scratch = flashScratchTypes(kernel);
  const std::string view = blockViewType(kernel);
  const std::string copied = copyKeyBlock(kernel, types, cache, copy);
  auto copyView = [&](const std::string &result) {
    return fmt::format("%{}{} = memref.cast %{} : {} to {}", cache, result, copy, scratch.block,
                       view);
  };
  if (kernel.cache != WeightStorage::F32)
    return copied + "    " + copyView("Block") + "\n";
  return fmt::format(
      "    %{0}Block = scf.if %wholeBlock -> ({1}) {{\n"
      "      %{0}InPlace = memref.subview %{0}[%kv, %blockStart, 0] [1, {2}, {3}] [1, 1, 1] : "
      "{4} to {1}\n"
      "      scf.yield %{0}InPlace : {1}\n    }} else {{\n{5}        {6}\n"
      "        scf.yield %{0}Copy : {1}\n    }}\n",
      cache, view, kLanes, kernel.headDim, types.kv, copied, copyView("Copy"));
}

/// The word interleave of two 16-word halves, [0, 16, 1, 17, .., 15, 31].
std::string interleaveMask() {
  return listOf(2 * kLanes, [](int i) { return std::to_string(i % 2 ? kLanes + i / 2 : i / 2); });
}

/// `result` (vector<32xi16>): the 16 values of `low` then those of `high`
/// as bf16, rounded to nearest even by vcvtne2ps2bf16 (which reads
/// denormals as zero: no attention input comes near them). Inline assembly,
/// as the products' vdpbf16ps: LLVM 16 has no bf16 vectors to select.
std::string bf16Halves(const std::string &result, const std::string &low, const std::string &high) {
  return fmt::format("    {} = llvm.inline_asm asm_dialect = att \"vcvtne2ps2bf16 $2, $1, $0\", "
                     "\"=v,v,v\" {}, {} : (vector<16xf32>, vector<16xf32>) -> vector<32xi16>\n",
                     result, high, low);
}

/// `result` (vector<16xi32>): lane i is the bf16 pair (low[i], high[i]),
/// the low one in the lower half (the pair vdpbf16ps multiplies).
std::string bf16Pairs(const std::string &result, const std::string &low, const std::string &high) {
  return bf16Halves(result + "_h", low, high) +
         fmt::format("    {0}_w = vector.shuffle {0}_h, {0}_h [{1}] : vector<32xi16>, "
                     "vector<32xi16>\n"
                     "    {0} = vector.bitcast {0}_w : vector<32xi16> to vector<16xi32>\n",
                     result, interleaveMask());
}

/// `result = acc + a . b`: with `bf16` one vdpbf16ps on the bf16 pairs of
/// `a` and `b` (vector<16xi32>), else an f32 FMA.
std::string multiplyAdd(bool bf16, const std::string &result, const std::string &a,
                        const std::string &b, const std::string &acc) {
  if (bf16)
    return "      " + vdpbf16ps(result, a, b, acc) + "\n";
  return fmt::format("      {} = vector.fma {}, {}, {} : vector<16xf32>\n", result, a, b, acc);
}

/// The bf16 flash kernel's scratch (bf16Prefill): the block's queries as
/// pairs of features, [D / 2][lane]; a key block's rows as bf16, [16][D]
/// (pairs: [16][D / 2]); its values with the positions paired, [8][D] pairs
/// (bf16: [8][2 D]); one key block's probabilities with the positions
/// paired, [8][lane].
struct Bf16FlashScratch {
  std::string queryPairs, keyHalves, keyPairs, valueHalves, valuePairs, probabilityPairs;
  int64_t keyBytes, valueBytes;
};

Bf16FlashScratch bf16FlashScratchTypes(const AttentionKernel &kernel) {
  const int64_t d = kernel.headDim;
  return {fmt::format("memref<{}x{}xi32>", d / 2, kLanes),
          fmt::format("memref<{}x{}xi16>", kLanes, d),
          fmt::format("memref<{}x{}xi32>", kLanes, d / 2),
          fmt::format("memref<{}x{}xi16>", kLanes / 2, 2 * d),
          fmt::format("memref<{}x{}xi32>", kLanes / 2, d),
          fmt::format("memref<{}x{}xi32>", kLanes / 2, kLanes),
          2 * kLanes * d,
          2 * kLanes * d};
}

/// The bf16 flash kernel's scratch shared by its row sets: a key block's
/// keys and values as bf16, one set's probabilities.
std::string bf16FlashBuffers(const AttentionKernel &kernel) {
  const Bf16FlashScratch scratch = bf16FlashScratchTypes(kernel);
  return fmt::format("  %c32 = arith.constant 32 : index\n"
                     "  %keyBytes = memref.alloca() {{alignment = 64 : i64}} : memref<{0}xi8>\n"
                     "  %keyHalves = memref.view %keyBytes[%c0][] : memref<{0}xi8> to {1}\n"
                     "  %keyPairs = memref.view %keyBytes[%c0][] : memref<{0}xi8> to {2}\n"
                     "  %valueBytes = memref.alloca() {{alignment = 64 : i64}} : memref<{3}xi8>\n"
                     "  %valueHalves = memref.view %valueBytes[%c0][] : memref<{3}xi8> to {4}\n"
                     "  %valuePairs = memref.view %valueBytes[%c0][] : memref<{3}xi8> to {5}\n"
                     "  %probabilityPairs = memref.alloca() {{alignment = 64 : i64}} : {6}\n",
                     scratch.keyBytes, scratch.keyHalves, scratch.keyPairs, scratch.valueBytes,
                     scratch.valueHalves, scratch.valuePairs, scratch.probabilityPairs);
}

/// The key block as bf16 rows (%keyHalves), from the clamped rows. A bf16
/// cache is copied, the others rounded.
std::string bf16KeyCopy(const AttentionKernel &kernel, const AttentionTypes &types) {
  const Bf16FlashScratch scratch = bf16FlashScratchTypes(kernel);
  const bool bf16Cache = kernel.cache == WeightStorage::BF16;
  std::string keys = "    scf.for %kc = %c0 to %cD step %c32 {\n"
                     "      %kcHigh = arith.addi %kc, %c16 : index\n";
  for (int p = 0; p < kLanes; ++p) {
    const std::string row = fmt::format("%kh{}", p);
    if (bf16Cache) {
      keys += fmt::format("      {} = vector.load %keys[%kv, %blockRead{}, %kc] : {}, "
                          "vector<32xi16>\n",
                          row, p, types.kv);
    } else {
      keys += "    " +
              vectorWidenedLoad(kernel.cache, row + "l", "%keys",
                                fmt::format("%kv, %blockRead{}, %kc", p), types.kv) +
              "\n    " +
              vectorWidenedLoad(kernel.cache, row + "u", "%keys",
                                fmt::format("%kv, %blockRead{}, %kcHigh", p), types.kv) +
              "\n" + bf16Halves(row, row + "l", row + "u");
    }
    keys += fmt::format("      vector.store {}, %keyHalves[%cP{}, %kc] : {}, vector<32xi16>\n", row,
                        p, scratch.keyHalves);
  }
  return clampedBlockRows("%block", "    ") + keys + "    }\n";
}

/// The key block's values with the positions paired (%valueHalves): pair j
/// of feature f is (row 2j, row 2j + 1). Made after the scores, while which
/// the rows were prefetched.
std::string bf16ValueCopy(const AttentionKernel &kernel, const AttentionTypes &types) {
  const Bf16FlashScratch scratch = bf16FlashScratchTypes(kernel);
  const bool bf16Cache = kernel.cache == WeightStorage::BF16;
  std::string values = "    scf.for %vp = %c0 to %cD step %c16 {\n"
                       "      %vpHalves = arith.muli %vp, %c2 : index\n";
  for (int j = 0; j < kLanes / 2; ++j) {
    const std::string pair = fmt::format("%vw{}", j);
    if (bf16Cache) {
      values += fmt::format(
          "      {0}e = vector.load %values[%kv, %blockRead{1}, %vp] : {3}, vector<16xi16>\n"
          "      {0}o = vector.load %values[%kv, %blockRead{2}, %vp] : {3}, vector<16xi16>\n"
          "      {0} = vector.shuffle {0}e, {0}o [{4}] : vector<16xi16>, vector<16xi16>\n",
          pair, 2 * j, 2 * j + 1, types.kv, interleaveMask());
    } else {
      values += "    " +
                vectorWidenedLoad(kernel.cache, pair + "e", "%values",
                                  fmt::format("%kv, %blockRead{}, %vp", 2 * j), types.kv) +
                "\n    " +
                vectorWidenedLoad(kernel.cache, pair + "o", "%values",
                                  fmt::format("%kv, %blockRead{}, %vp", 2 * j + 1), types.kv) +
                "\n" + bf16Halves(pair + "h", pair + "e", pair + "o") +
                fmt::format("    {0} = vector.shuffle {0}h, {0}h [{1}] : vector<32xi16>, "
                            "vector<32xi16>\n",
                            pair, interleaveMask());
    }
    values += fmt::format(
        "      %vpRow{0} = arith.constant {0} : index\n"
        "      vector.store {1}, %valueHalves[%vpRow{0}, %vpHalves] : {2}, vector<32xi16>\n",
        j, pair, scratch.valueHalves);
  }
  return values + "    }\n";
}

/// `%s:16`: the 16 lanes' scores of positions %blockStart .. + 15 as outer
/// products (a key's feature broadcast times the lanes' query feature): f32
/// FMAs one feature at a time, or vdpbf16ps on pairs of features (bf16Prefill).
std::string flashScores(const AttentionKernel &kernel, const AttentionTypes &types) {
  const FlashScratch scratch = flashScratchTypes(kernel);
  const Bf16FlashScratch pairs = bf16FlashScratchTypes(kernel);
  const bool bf16 = kernel.bf16Prefill;
  std::string scoreBody, accArgs, accYields;
  for (int p = 0; p < kLanes; ++p) {
    if (bf16)
      scoreBody += fmt::format("      %k{0} = memref.load %keyPairs[%cP{0}, %i] : {1}\n"
                               "      %kb{0} = vector.broadcast %k{0} : i32 to vector<16xi32>\n",
                               p, pairs.keyPairs);
    else
      scoreBody += fmt::format("      %k{0} = memref.load %keysBlock[%cP{0}, %i] : {1}\n"
                               "      %kb{0} = vector.broadcast %k{0} : f32 to vector<16xf32>\n",
                               p, blockViewType(kernel));
    scoreBody += multiplyAdd(bf16, fmt::format("%r{}", p), fmt::format("%kb{}", p), "%qi",
                             fmt::format("%a{}", p));
    accArgs += fmt::format("{}%a{} = %zeroV", p ? ", " : "", p);
    accYields += fmt::format("{}%r{}", p ? ", " : "", p);
  }
  // While the keys are scored, the block's value rows are prefetched, 16
  // rows x D / 16 lines = D lines over the D (f32) or D / 2 (bf16) steps.
  const int64_t steps = bf16 ? kernel.headDim / 2 : kernel.headDim;
  const int64_t linesPerStep = kernel.headDim / steps;
  std::string prefetches;
  for (int64_t l = 0; l < linesPerStep; ++l)
    prefetches += fmt::format(
        "      %lineStep{0} = arith.muli %i, %cLinesPerStep : index\n"
        "      %cLine{0} = arith.constant {0} : index\n"
        "      %line{0} = arith.addi %lineStep{0}, %cLine{0} : index\n"
        "      %lineRow{0} = arith.divui %line{0}, %lineVectors : index\n"
        "      %lineVector{0} = arith.remui %line{0}, %lineVectors : index\n"
        "      %lineColumn{0} = arith.muli %lineVector{0}, %c16 : index\n"
        "      %linePosition{0} = arith.addi %blockStart, %lineRow{0} : index\n"
        "      memref.prefetch %values[%kv, %linePosition{0}, %lineColumn{0}], read, locality<3>, "
        "data : {1}\n",
        l, types.kv);
  const std::string queryLoad =
      bf16 ? fmt::format("      %qi = vector.load %queryPairs[%i, %c0] : {}, vector<16xi32>\n",
                         pairs.queryPairs)
           : fmt::format("      %qi = vector.load %queryT[%i, %c0] : {}, vector<16xf32>\n",
                         scratch.queryT);
  return fmt::format(R"mlir(    %lineVectors = arith.constant {0} : index
    %cLinesPerStep = arith.constant {1} : index
    %cSteps = arith.constant {2} : index
    %s:16 = scf.for %i = %c0 to %cSteps step %c1 iter_args({3}) -> ({4}) {{
{5}{6}{7}      scf.yield {8} : {4}
    }}
)mlir",
                     kernel.headDim / kLanes, linesPerStep, steps, accArgs, vectorTypes(kLanes),
                     prefetches, queryLoad, scoreBody, accYields);
}

/// The value loop: the output sums %outT ([lane][D]) rescaled by the lanes'
/// %alpha and added the block's values times each lane's probability. A
/// column group of C vectors (C = 2 where D allows) for 8 lanes at a time
/// holds 8 x C accumulators; each step adds C value vectors times a lane's
/// probability (broadcast): f32 FMAs position by position, or vdpbf16ps on
/// pairs of positions (bf16Prefill). Meanwhile the next block's key rows
/// are prefetched, a line of each row per 16 features.
std::string flashValues(const AttentionKernel &kernel, const AttentionTypes &types) {
  const FlashScratch scratch = flashScratchTypes(kernel);
  const Bf16FlashScratch pairs = bf16FlashScratchTypes(kernel);
  const bool bf16 = kernel.bf16Prefill;
  const int64_t vectorsPerGroup = kernel.headDim % (2 * kLanes) == 0 ? 2 : 1;
  const int64_t groupFeatures = vectorsPerGroup * kLanes;
  constexpr int kLanesPerPass = 8;
  const int steps = bf16 ? kLanes / 2 : kLanes;
  const std::string columnsType = fmt::format("memref<{}x{}xf32, strided<[{}, 1], offset: ?>>",
                                              kLanes, groupFeatures, kernel.headDim);
  std::string valueBody =
      fmt::format("      %ocols = memref.subview %outT[0, %vc] [{0}, {1}] [1, 1] : {2} to {3}\n",
                  kLanes, groupFeatures, scratch.outT, columnsType);
  if (!bf16)
    valueBody += fmt::format(
        "      %vcols = memref.subview %valuesBlock[0, %vc] [{0}, {1}] [1, 1] : {2} to {3}\n",
        kLanes, groupFeatures, blockViewType(kernel), columnsType);
  for (int64_t c = 0; c < vectorsPerGroup; ++c) {
    valueBody += fmt::format("      %cCol{0} = arith.constant {1} : index\n"
                             "      %nextColumn{0} = arith.addi %vc, %cCol{0} : index\n",
                             c, c * kLanes);
    for (int p = 0; p < kLanes; ++p)
      valueBody += fmt::format("      %nextKey{0}_{1} = arith.addi %blockEnd, %cP{0} : index\n"
                               "      memref.prefetch %keys[%kv, %nextKey{0}_{1}, %nextColumn{1}], "
                               "read, locality<3>, data : {2}\n",
                               p, c, types.kv);
  }
  // Step p's value vector c, and lane `lane`'s weight of step p, broadcast.
  auto loadValue = [&](const std::string &result, int p, int64_t c) {
    if (bf16)
      return fmt::format("      {} = vector.load %valuePairs[%cP{}, %nextColumn{}] : {}, "
                         "vector<16xi32>\n",
                         result, p, c, pairs.valuePairs);
    return fmt::format("      {} = vector.load %vcols[%cP{}, %cCol{}] : {}, vector<16xf32>\n",
                       result, p, c, columnsType);
  };
  auto loadWeight = [&](const std::string &result, int p, int lane) {
    if (bf16)
      return fmt::format("      {0}s = memref.load %probabilityPairs[%cP{1}, %cP{2}] : {3}\n"
                         "      {0} = vector.broadcast {0}s : i32 to vector<16xi32>\n",
                         result, p, lane, pairs.probabilityPairs);
    return fmt::format("      {0}s = memref.load %probabilities[%cP{1}, %cP{2}] : {3}\n"
                       "      {0} = vector.broadcast {0}s : f32 to vector<16xf32>\n",
                       result, p, lane, scratch.probabilities);
  };
  for (int first = 0; first < kLanes; first += kLanesPerPass) {
    auto acc = [&](int lane, int64_t c, int step) {
      return fmt::format("%u{}_{}_{}", lane, c, step);
    };
    for (int lane = first; lane < first + kLanesPerPass; ++lane) {
      valueBody += fmt::format(
          "      %alpha{0} = memref.load %laneScalars[%cP{0}] : {1}\n"
          "      %alphaB{0} = vector.broadcast %alpha{0} : f32 to vector<16xf32>\n",
          lane, scratch.laneScalars);
      for (int64_t c = 0; c < vectorsPerGroup; ++c)
        valueBody += fmt::format(
            "      %o{0}_{1} = vector.load %ocols[%cP{0}, %cCol{1}] : {2}, vector<16xf32>\n"
            "      {3} = arith.mulf %o{0}_{1}, %alphaB{0} : vector<16xf32>\n",
            lane, c, columnsType, acc(lane, c, 0));
    }
    for (int p = 0; p < steps; ++p) {
      for (int64_t c = 0; c < vectorsPerGroup; ++c)
        valueBody += loadValue(fmt::format("%v{}_{}_{}", first, p, c), p, c);
      for (int lane = first; lane < first + kLanesPerPass; ++lane) {
        const std::string weight = fmt::format("%pb{}_{}", lane, p);
        valueBody += loadWeight(weight, p, lane);
        for (int64_t c = 0; c < vectorsPerGroup; ++c)
          valueBody += multiplyAdd(bf16, acc(lane, c, p + 1), weight,
                                   fmt::format("%v{}_{}_{}", first, p, c), acc(lane, c, p));
      }
    }
    for (int lane = first; lane < first + kLanesPerPass; ++lane)
      for (int64_t c = 0; c < vectorsPerGroup; ++c)
        valueBody +=
            fmt::format("      vector.store {}, %ocols[%cP{}, %cCol{}] : {}, vector<16xf32>\n",
                        acc(lane, c, steps), lane, c, columnsType);
  }
  return fmt::format("    vector.store %alpha, %laneScalars[%c0] : {}, vector<16xf32>\n"
                     "    %cGroup = arith.constant {} : index\n"
                     "    scf.for %vc = %c0 to %cD step %cGroup {{\n{}    }}\n",
                     scratch.laneScalars, groupFeatures, valueBody);
}

/// The causal mask of the block's scores %s, the online softmax update of
/// the running maxima %m and sums %l (%mNew, %lNew, and the rescale %alpha
/// of the old sums), and the block's probabilities: f32 in %probabilities,
/// or (bf16Prefill) as bf16 pairs of positions in %probabilityPairs.
std::string flashSoftmax(const AttentionKernel &kernel) {
  const FlashScratch scratch = flashScratchTypes(kernel);
  const Bf16FlashScratch pairs = bf16FlashScratchTypes(kernel);
  std::string text;
  for (int p = 0; p < kLanes; ++p)
    text += fmt::format(
        "    %pos{0} = arith.index_cast %j{0} : index to i32\n"
        "    %posV{0} = vector.broadcast %pos{0} : i32 to vector<16xi32>\n"
        "    %sees{0} = arith.cmpi slt, %posV{0}, %countV : vector<16xi32>\n"
        "    %sm{0} = arith.select %sees{0}, %s#{0}, %lowestV : vector<16xi1>, vector<16xf32>\n",
        p);
  std::string last = "%sm0";
  for (int p = 1; p < kLanes; ++p) {
    text += fmt::format("    %bm{0} = arith.maxf {1}, %sm{0} : vector<16xf32>\n", p, last);
    last = fmt::format("%bm{}", p);
  }
  text += fmt::format("    %mNew = arith.maxf %m, {} : vector<16xf32>\n"
                      "    %mDrop = arith.subf %m, %mNew : vector<16xf32>\n"
                      "    %alpha = math.exp %mDrop : vector<16xf32>\n",
                      last);
  std::string sum = "%lScaled";
  text += "    %lScaled = arith.mulf %l, %alpha : vector<16xf32>\n";
  for (int p = 0; p < kLanes; ++p) {
    text += fmt::format("    %d{0} = arith.subf %sm{0}, %mNew : vector<16xf32>\n"
                        "    %e{0} = math.exp %d{0} : vector<16xf32>\n"
                        "    %ls{0} = arith.addf {1}, %e{0} : vector<16xf32>\n",
                        p, sum);
    if (!kernel.bf16Prefill)
      text +=
          fmt::format("    vector.store %e{0}, %probabilities[%cP{0}, %c0] : {1}, vector<16xf32>\n",
                      p, scratch.probabilities);
    else if (p % 2 == 1)
      text += bf16Pairs(fmt::format("%ep{}", p / 2), fmt::format("%e{}", p - 1),
                        fmt::format("%e{}", p)) +
              fmt::format("    vector.store %ep{0}, %probabilityPairs[%cP{0}, %c0] : {1}, "
                          "vector<16xi32>\n",
                          p / 2, pairs.probabilityPairs);
    sum = fmt::format("%ls{}", p);
  }
  return text + fmt::format("    %lNew = arith.addf {}, %zeroV : vector<16xf32>\n", sum);
}

/// The positions of the key block, %j0 .. %j15.
std::string blockPositions() {
  std::string text;
  for (int p = 0; p < kLanes; ++p)
    text += fmt::format("    %j{0} = arith.addi %blockStart, %cP{0} : index\n", p);
  return text;
}

/// One key block of the f32 flash kernel: the 16 lanes' scores of positions
/// %blockStart .. + 15 (flashScores), the mask and online softmax
/// (flashSoftmax), and the probability-weighted values added to the output
/// sums (flashValues).
std::string flashKeyBlock(const AttentionKernel &kernel, const AttentionTypes &types) {
  std::string text = "    %blockEnd = arith.addi %blockStart, %c16 : index\n"
                     "    %wholeBlock = arith.cmpi ule, %blockEnd, %maxCount : index\n";
  text += keyBlockView(kernel, types, "keys", "keysF");
  text += keyBlockView(kernel, types, "values", "valuesF");
  text += blockPositions();
  text += flashScores(kernel, types) + flashSoftmax(kernel);
  return text + flashValues(kernel, types);
}

/// `%<out>0` .. `%<out>15` = the 16 x 16 transpose of `rows` (16
/// vector<16xf32> values): element j of output i is element i of row j. Four
/// rounds of two-source shuffles, each swapping one bit of the row and lane
/// indices (64 shuffles).
std::string transpose16(const std::vector<std::string> &rows, const std::string &out) {
  std::string text;
  std::vector<std::string> current = rows;
  int round = 0;
  for (int size = kLanes / 2; size >= 1; size /= 2, ++round) {
    std::vector<std::string> next(current.size());
    std::string low, high;
    for (int c = 0; c < kLanes; ++c) {
      const bool upper = (c & size) != 0;
      low += fmt::format("{}{}", c ? ", " : "", upper ? kLanes + c - size : c);
      high += fmt::format("{}{}", c ? ", " : "", upper ? kLanes + c : c + size);
    }
    for (int i = 0; i < kLanes; ++i) {
      if (i & size)
        continue;
      const bool last = size == 1;
      next[size_t(i)] = last ? fmt::format("%{}{}", out, i) : fmt::format("%{}T{}_{}", out, round, i);
      next[size_t(i + size)] = last ? fmt::format("%{}{}", out, i + size)
                                    : fmt::format("%{}T{}_{}", out, round, i + size);
      for (const auto &[name, mask] : {std::pair{next[size_t(i)], low},
                                       std::pair{next[size_t(i + size)], high}})
        text += fmt::format("    {} = vector.shuffle {}, {} [{}] : vector<16xf32>, "
                            "vector<16xf32>\n",
                            name, current[size_t(i)], current[size_t(i + size)], mask);
    }
    current = next;
  }
  return text;
}

/// The block's query vectors, scaled, as %queryT [D][lane], 16 features at a
/// time through a transpose. Lanes past the block's rows repeat its last row
/// (their results are not stored).
std::string flashQueryTranspose(const AttentionKernel &kernel, const AttentionTypes &types) {
  const int64_t heads = kernel.headsPerWorkgroup();
  const FlashScratch scratch = flashScratchTypes(kernel);
  std::string text = "  scf.for %qc = %c0 to %cD step %c16 {\n";
  std::vector<std::string> rows;
  for (int lane = 0; lane < kLanes; ++lane) {
    text += fmt::format("    %qr{0} = arith.minui %cP{1}, %lastRow : index\n"
                        "    %qRow{0} = arith.addi %t0, %qr{0} : index\n"
                        "    %qHead{0} = arith.addi %h0, %cP{2} : index\n"
                        "    %qv{0} = vector.load %q[%qRow{0}, %qHead{0}, %qc] : {3}, vector<16xf32>\n"
                        "    %qs{0} = arith.mulf %qv{0}, %scaleV : vector<16xf32>\n",
                        lane, lane / heads, lane % heads, types.query);
    rows.push_back(fmt::format("%qs{}", lane));
  }
  text += transpose16(rows, "qt");
  if (kernel.bf16Prefill) {
    // Feature pairs: row qc / 2 + e holds features qc + 2e and qc + 2e + 1.
    const std::string pairsType = bf16FlashScratchTypes(kernel).queryPairs;
    text += "    %qcPairs = arith.divui %qc, %c2 : index\n";
    for (int e = 0; e < kLanes / 2; ++e)
      text += bf16Pairs(fmt::format("%qp{}", e), fmt::format("%qt{}", 2 * e),
                        fmt::format("%qt{}", 2 * e + 1)) +
              fmt::format("    %qpRow{0} = arith.addi %qcPairs, %cP{0} : index\n"
                          "    vector.store %qp{0}, %queryPairs[%qpRow{0}, %c0] : {1}, "
                          "vector<16xi32>\n",
                          e, pairsType);
    return text + "  }\n";
  }
  for (int e = 0; e < kLanes; ++e)
    text += fmt::format("    %qtRow{0} = arith.addi %qc, %cP{0} : index\n"
                        "    vector.store %qt{0}, %queryT[%qtRow{0}, %c0] : {1}, vector<16xf32>\n",
                        e, scratch.queryT);
  return text + "  }\n";
}

/// The output: each lane of the block's rows gets its sums times its
/// inverse sum.
std::string flashOutput(const AttentionKernel &kernel, const AttentionTypes &types) {
  const int64_t heads = kernel.headsPerWorkgroup();
  const FlashScratch scratch = flashScratchTypes(kernel);
  std::string text = fmt::format(
      "  vector.store %inverseV, %laneScalars[%c0] : {}, vector<16xf32>\n", scratch.laneScalars);
  for (int lane = 0; lane < kLanes; ++lane)
    text += fmt::format(
        "  %oIn{0} = arith.cmpi ult, %cP{1}, %blockRows : index\n"
        "  scf.if %oIn{0} {{\n"
        "    %oRow{0} = arith.addi %t0, %cP{1} : index\n"
        "    %oHead{0} = arith.addi %h0, %cP{2} : index\n"
        "    %oInverse{0} = memref.load %laneScalars[%cP{0}] : {3}\n"
        "    %oInverseV{0} = vector.broadcast %oInverse{0} : f32 to vector<16xf32>\n"
        "    scf.for %oc = %c0 to %cD step %c16 {{\n"
        "      %oSum{0} = vector.load %outT[%cP{0}, %oc] : {4}, vector<16xf32>\n"
        "      %oValue{0} = arith.mulf %oSum{0}, %oInverseV{0} : vector<16xf32>\n"
        "      vector.store %oValue{0}, %out[%oRow{0}, %oHead{0}, %oc] : {5}, vector<16xf32>\n"
        "    }}\n"
        "  }}\n",
        lane, lane / heads, lane % heads, scratch.laneScalars, scratch.outT, types.query);
  return text;
}

/// @<name>_flash: causal attention of rows %t0 .. %t0 + %blockRows - 1 for
/// the workgroup's heads (one KV head, %kv), flash-attention style: the
/// block's (row, head) query vectors are the 16 lanes of every vector (lane
/// = row x heads + head), the keys go by in blocks of 16 positions, and the
/// softmax runs online (a running maximum and sum per lane, the output sums
/// rescaled when the maximum rises), so each key and value row is read once
/// for all 16 query vectors, no horizontal sums are needed, and the scratch
/// does not grow with the context. Row r sees %count0 + r positions.
std::string flashFunction(const AttentionKernel &kernel, const AttentionTypes &types) {
  const int64_t heads = kernel.headsPerWorkgroup();
  const FlashScratch scratch = flashScratchTypes(kernel);
  std::string laneRows, positions;
  for (int lane = 0; lane < kLanes; ++lane)
    laneRows += fmt::format("{}{}", lane ? ", " : "", lane / heads);
  for (int p = 0; p < kLanes; ++p)
    positions += fmt::format("  %cP{0} = arith.constant {0} : index\n", p);
  const std::string copyParams = fmt::format(", %keysF: {0}, %valuesF: {0}", scratch.block);
  return fmt::format(
      R"mlir(
func.func private @{name}_flash(%q: {queryType}, %keys: {kvType}, %values: {kvType}, %out: {queryType}, %queryT: {queryTType}, %outT: {outTType}, %probabilities: {pType}, %laneScalars: {laneType}{copyParams}, %t0: index, %h0: index, %kv: index, %count0: index, %blockRows: index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c16 = arith.constant 16 : index
  %cD = arith.constant {d} : index
  %scaleV = arith.constant dense<{scale:e}> : vector<16xf32>
  %zeroV = arith.constant dense<0.0> : vector<16xf32>
  %oneV = arith.constant dense<1.0> : vector<16xf32>
  %lowestV = arith.constant dense<0xFF800000> : vector<16xf32>
  %laneRows = arith.constant dense<[{laneRows}]> : vector<16xi32>
{positions}  %lastRow = arith.subi %blockRows, %c1 : index
  %maxCount = arith.addi %count0, %lastRow : index
  %lastPosition = arith.subi %maxCount, %c1 : index
  %count0i = arith.index_cast %count0 : index to i32
  %count0V = vector.broadcast %count0i : i32 to vector<16xi32>
  %countV = arith.addi %count0V, %laneRows : vector<16xi32>
{queryTranspose}  scf.for %zl = %c0 to %c16 step %c1 {{
    scf.for %zc = %c0 to %cD step %c16 {{
      vector.store %zeroV, %outT[%zl, %zc] : {outTType}, vector<16xf32>
    }}
  }}
  %final:2 = scf.for %blockStart = %c0 to %maxCount step %c16 iter_args(%m = %lowestV, %l = %zeroV) -> (vector<16xf32>, vector<16xf32>) {{
{keyBlock}    scf.yield %mNew, %lNew : vector<16xf32>, vector<16xf32>
  }}
  %inverseV = arith.divf %oneV, %final#1 : vector<16xf32>
{output}  return
}}
)mlir",
      fmt::arg("name", kernel.name), fmt::arg("queryType", types.query),
      fmt::arg("kvType", types.kv), fmt::arg("queryTType", scratch.queryT),
      fmt::arg("outTType", scratch.outT), fmt::arg("pType", scratch.probabilities),
      fmt::arg("laneType", scratch.laneScalars), fmt::arg("copyParams", copyParams),
      fmt::arg("d", kernel.headDim), fmt::arg("scale", kernel.scale),
      fmt::arg("laneRows", laneRows), fmt::arg("positions", positions),
      fmt::arg("keyBlock", flashKeyBlock(kernel, types)),
      fmt::arg("queryTranspose", flashQueryTranspose(kernel, types)),
      fmt::arg("output", flashOutput(kernel, types)));
}

/// `%<name> = scf.execute_region ...`: `body` in a region of its own, where
/// the text templates' names (%queryPairs, %outT, %countV, %m, ...) are the
/// set's: `aliases` define them from the set's values.
std::string inRegion(const std::string &results, const std::string &types,
                     const std::string &aliases, const std::string &body,
                     const std::string &yields) {
  return fmt::format("    {}scf.execute_region{} {{\n{}{}      scf.yield {}\n    }}\n",
                     results.empty() ? "" : results + " = ",
                     types.empty() ? "" : " -> (" + types + ")", aliases, body,
                     yields.empty() ? "" : yields + " : " + types);
}

/// @<name>_flash_bf16: the bf16 prefill (bf16Prefill) of rows %tBase ..
/// %tBase + %blockRowsAll - 1, up to prefillRowSets blocks of 16 / heads rows:
/// per key block the keys are rounded once (and, after the first set's
/// scores, the values paired once) for every set; each set scores, runs its
/// online softmax and adds its values in its own region. A set past the
/// rows repeats the first set's rows and stores nothing.
std::string bf16FlashFunction(const AttentionKernel &kernel, const AttentionTypes &types) {
  const int64_t heads = kernel.headsPerWorkgroup(), setRows = kernel.prefillBlockRows();
  const FlashScratch scratch = flashScratchTypes(kernel);
  const Bf16FlashScratch pairs = bf16FlashScratchTypes(kernel);
  std::string laneRows, positions, sets, blockSets, carried, carriedTypes, yields, outputs;
  for (int lane = 0; lane < kLanes; ++lane)
    laneRows += fmt::format("{}{}", lane ? ", " : "", lane / heads);
  for (int p = 0; p < kLanes; ++p)
    positions += fmt::format("  %cP{0} = arith.constant {0} : index\n", p);
  const std::string vector = "vector<16xf32>";
  for (int64_t set = 0; set < kernel.prefillRowSets; ++set) {
    // The set's rows: offset set x 16 / heads, or (no rows there) the first
    // set's again, with nothing to store.
    sets += fmt::format("  %cOffset{0} = arith.constant {1} : index\n"
                        "  %hasRows{0} = arith.cmpi ugt, %blockRowsAll, %cOffset{0} : index\n"
                        "  %offset{0} = arith.select %hasRows{0}, %cOffset{0}, %c0 : index\n"
                        "  %t0_{0} = arith.addi %tBase, %offset{0} : index\n"
                        "  %rowsFrom{0} = arith.subi %blockRowsAll, %offset{0} : index\n"
                        "  %setRows{0} = arith.minui %rowsFrom{0}, %cSetRows : index\n"
                        "  %storedRows{0} = arith.select %hasRows{0}, %setRows{0}, %c0 : index\n"
                        "  %lastRow{0} = arith.subi %setRows{0}, %c1 : index\n"
                        "  %setCount{0} = arith.addi %count0, %offset{0} : index\n"
                        "  %setCount{0}i = arith.index_cast %setCount{0} : index to i32\n"
                        "  %setCount{0}V = vector.broadcast %setCount{0}i : i32 to vector<16xi32>\n"
                        "  %countV{0} = arith.addi %setCount{0}V, %laneRows : vector<16xi32>\n"
                        "  %queryPairs{0} = memref.alloca() {{alignment = 64 : i64}} : {2}\n"
                        "  %outT{0} = memref.alloca() {{alignment = 64 : i64}} : {3}\n"
                        "  %laneScalars{0} = memref.alloca() {{alignment = 64 : i64}} : {4}\n"
                        "  scf.for %zl = %c0 to %c16 step %c1 {{\n"
                        "    scf.for %zc = %c0 to %cD step %c16 {{\n"
                        "      vector.store %zeroV, %outT{0}[%zl, %zc] : {3}, vector<16xf32>\n"
                        "    }}\n"
                        "  }}\n",
                        set, set * setRows, pairs.queryPairs, scratch.outT, scratch.laneScalars);
    sets += inRegion("", "",
                     fmt::format("      %t0 = arith.addi %t0_{0}, %c0 : index\n"
                                 "      %lastRow = arith.addi %lastRow{0}, %c0 : index\n"
                                 "      %queryPairs = memref.cast %queryPairs{0} : {1} to {1}\n",
                                 set, pairs.queryPairs),
                     flashQueryTranspose(kernel, types), "");
    // Scores and softmax, then (after the first set's, when its rows have
    // been prefetched) the value pairs, then the values.
    blockSets +=
        inRegion(fmt::format("%set{}", set) + ":3", fmt::format("{0}, {0}, {0}", vector),
                 fmt::format("      %queryPairs = memref.cast %queryPairs{0} : {1} to {1}\n"
                             "      %countV = arith.addi %countV{0}, %zeroI : vector<16xi32>\n"
                             "      %m = arith.bitcast %m{0} : {2} to {2}\n"
                             "      %l = arith.bitcast %l{0} : {2} to {2}\n",
                             set, pairs.queryPairs, vector),
                 flashScores(kernel, types) + flashSoftmax(kernel), "%mNew, %lNew, %alpha");
    if (set == 0)
      blockSets += bf16ValueCopy(kernel, types);
    blockSets +=
        inRegion("", "",
                 fmt::format("      %outT = memref.cast %outT{0} : {1} to {1}\n"
                             "      %laneScalars = memref.cast %laneScalars{0} : {2} to {2}\n"
                             "      %alpha = arith.bitcast %set{0}#2 : {3} to {3}\n",
                             set, scratch.outT, scratch.laneScalars, vector),
                 flashValues(kernel, types), "");
    carried += fmt::format("{0}%m{1} = %lowestV, %l{1} = %zeroV", set ? ", " : "", set);
    carriedTypes += fmt::format("{0}{1}, {1}", set ? ", " : "", vector);
    yields += fmt::format("{0}%set{1}#0, %set{1}#1", set ? ", " : "", set);
    outputs +=
        inRegion("", "",
                 fmt::format("      %inverseV = arith.divf %oneV, %final#{1} : {2}\n"
                             "      %t0 = arith.addi %t0_{0}, %c0 : index\n"
                             "      %blockRows = arith.addi %storedRows{0}, %c0 : index\n"
                             "      %outT = memref.cast %outT{0} : {3} to {3}\n"
                             "      %laneScalars = memref.cast %laneScalars{0} : {4} to {4}\n",
                             set, 2 * set + 1, vector, scratch.outT, scratch.laneScalars),
                 flashOutput(kernel, types), "");
  }
  return fmt::format(
      R"mlir(
func.func private @{name}_flash_bf16(%q: {queryType}, %keys: {kvType}, %values: {kvType}, %out: {queryType}, %tBase: index, %h0: index, %kv: index, %count0: index, %blockRowsAll: index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c16 = arith.constant 16 : index
  %cD = arith.constant {d} : index
  %cSetRows = arith.constant {setRows} : index
{buffers}  %scaleV = arith.constant dense<{scale:e}> : vector<16xf32>
  %zeroV = arith.constant dense<0.0> : vector<16xf32>
  %zeroI = arith.constant dense<0> : vector<16xi32>
  %oneV = arith.constant dense<1.0> : vector<16xf32>
  %lowestV = arith.constant dense<0xFF800000> : vector<16xf32>
  %laneRows = arith.constant dense<[{laneRows}]> : vector<16xi32>
{positions}  %lastRowAll = arith.subi %blockRowsAll, %c1 : index
  %maxCount = arith.addi %count0, %lastRowAll : index
  %lastPosition = arith.subi %maxCount, %c1 : index
{sets}  %final:{carriedCount} = scf.for %blockStart = %c0 to %maxCount step %c16 iter_args({carried}) -> ({carriedTypes}) {{
    %blockEnd = arith.addi %blockStart, %c16 : index
{keyCopy}{blockPositions}{blockSets}    scf.yield {yields} : {carriedTypes}
  }}
{outputs}  return
}}
)mlir",
      fmt::arg("name", kernel.name), fmt::arg("queryType", types.query),
      fmt::arg("kvType", types.kv), fmt::arg("d", kernel.headDim), fmt::arg("setRows", setRows),
      fmt::arg("buffers", bf16FlashBuffers(kernel)), fmt::arg("scale", kernel.scale),
      fmt::arg("laneRows", laneRows), fmt::arg("positions", positions), fmt::arg("sets", sets),
      fmt::arg("carriedCount", 2 * kernel.prefillRowSets), fmt::arg("carried", carried),
      fmt::arg("carriedTypes", carriedTypes), fmt::arg("keyCopy", bf16KeyCopy(kernel, types)),
      fmt::arg("blockPositions", blockPositions()), fmt::arg("blockSets", blockSets),
      fmt::arg("yields", yields), fmt::arg("outputs", outputs));
}

/// A prefill runs @<name>_flash on blocks of 16 / heads rows, or
/// @<name>_flash_bf16 on prefillRowSets such blocks (the workgroup of the
/// first row does them, the others nothing); decode runs @<name>_decode.
std::string vectorAttention(const AttentionKernel &kernel, const AttentionTypes &types) {
  const int64_t heads = kernel.headsPerWorkgroup();
  const FlashScratch scratch = flashScratchTypes(kernel);
  std::string buffers, decodeScores, decodeScoreTypes;
  for (int64_t k = 0; k < heads; ++k) {
    buffers += fmt::format("  %scores{} = memref.alloca(%scoreSlots) : memref<?xf32>\n", k);
    decodeScores += fmt::format(", %scores{}", k);
    decodeScoreTypes += ", memref<?xf32>";
  }
  buffers += fmt::format("  %queryT = memref.alloca() : {0}\n"
                         "  %outT = memref.alloca() : {1}\n"
                         "  %probabilities = memref.alloca() : {2}\n"
                         "  %laneScalars = memref.alloca() : {3}\n",
                         scratch.queryT, scratch.outT, scratch.probabilities, scratch.laneScalars);
  buffers += fmt::format("  %keysF = memref.alloca() : {0}\n"
                         "  %valuesF = memref.alloca() : {0}\n",
                         scratch.block);
  const std::string decode = fmt::format(
      "func.call @{0}_decode(%q, %keys, %values, %out{1}, %t, %h0, %kv, %count0) : "
      "({2}, {3}, {3}, {2}{4}, index, index, index, index) -> ()",
      kernel.name, decodeScores, types.query, types.kv, decodeScoreTypes);
  const std::string flash = fmt::format(
      "func.call @{0}_flash(%q, %keys, %values, %out, %queryT, %outT, %probabilities, "
      "%laneScalars, %keysF, %valuesF, %t, %h0, %kv, %count0, %blockRows) : ({1}, {2}, {2}, "
      "{1}, {3}, {4}, {5}, {6}, {7}, {7}, index, index, index, index, index) -> ()",
      kernel.name, types.query, types.kv, scratch.queryT, scratch.outT, scratch.probabilities,
      scratch.laneScalars, scratch.block);
  const std::string flashBf16 = fmt::format(
      "func.call @{0}_flash_bf16(%q, %keys, %values, %out, %t, %h0, %kv, %count0, %blockRows) : "
      "({1}, {2}, {2}, {1}, index, index, index, index, index) -> ()",
      kernel.name, types.query, types.kv);
  const int64_t leadRows = kernel.prefillBlockRows() * kernel.prefillRowSets;
  return decodeFunction(kernel, types) +
         (kernel.bf16Prefill ? bf16FlashFunction(kernel, types) : flashFunction(kernel, types)) +
         attentionOpening(kernel, types) +
         fmt::format(
             R"mlir(  %cBlock = arith.constant {blockRows} : index
  %oneRow = arith.cmpi eq, %rows, %c1 : index
  %c16 = arith.constant 16 : index
  %scoreSlots = arith.addi %visible, %c16 : index
{buffers}  scf.for %g = %wgBegin to %wgEnd step %c1 {{
{prologue}    scf.if %oneRow {{
      {decode}
    }} else {{
      %blockOffset = arith.remui %t, %cBlock : index
      %leads = arith.cmpi eq, %blockOffset, %c0 : index
      scf.if %leads {{
        %rowsLeft = arith.subi %rows, %t : index
        %blockRows = arith.minui %rowsLeft, %cBlock : index
        {flash}
      }}
    }}
  }}
  return
}}
)mlir",
             fmt::arg("blockRows", leadRows), fmt::arg("buffers", buffers),
             fmt::arg("prologue", workgroupPrologue(heads, kernel.queryHeads)),
             fmt::arg("decode", decode), fmt::arg("flash", kernel.bf16Prefill ? flashBf16 : flash));
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
  return kernel.vectorized() ? vectorAttention(kernel, types) : scalarAttention(kernel, types);
}

} // namespace q3::cpu
