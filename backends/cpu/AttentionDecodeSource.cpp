//===- AttentionDecodeSource.cpp - attention of one row over the cache ----===//
//
// @<name>_decode: one pass over the keys and values of the workgroup's KV
// head, 512 positions at a time with an online softmax (AttentionSource.cpp
// says why), each block's keys and then its values read as q3.lowering's
// decode_streams runs side by side, its values in passes of
// decode_accumulators columns per head; the scalar template's softmax.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/AttentionTemplates.h"
#include "backends/cpu/KernelSourceUtil.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace q3::cpu::attention {

using namespace detail;

// Decode scores a block of this many positions, then sums its values: the
// keys and then the values stream as long runs (decode_streams of them side
// by side: the hardware prefetchers follow a few streams at once, and one
// left bandwidth unused on AMD family 26). Measured with one run on AMD
// family 26 (0.6B, decode after 2048 tokens, alternated): 16-position blocks
// with each value row prefetched while its key was scored (two streams at
// once) 12.2-12.4 ms of attention per token, 256 positions without the prefetch
// 11.5-11.6, 512 11.1-11.2, 1024 10.8-11.5. A C loop reading two regions in
// alternating 8 KiB runs streamed 51-58 GB/s against 67-68 for one region,
// 68-73 with 128 KiB runs.
constexpr int64_t kDecodeBlockPositions = 512;

int64_t decodeScoreSlots() { return kDecodeBlockPositions + kLanes; }

namespace {

/// A query vector of decode: row `row` (%t<row>, always 0) and head `head`
/// of the workgroup (%h<head>). Its scores go to %scores<k>.
struct Slot {
  int k, row, head;
};

/// The positions one step of a decode loop reads: position j of the step
/// whose induction variable is %<iv> is %<iv> + j x `stride`, and the loop
/// advances by `step`. Consecutive positions (stride %c1) read the cache as
/// one stream; runs a block apart read it as `count` streams side by side.
struct PositionRuns {
  int count;
  std::string stride, step; // index values

  /// The ops defining position(iv, j) for j > 0.
  std::string positions(const std::string &iv) const {
    std::string ops;
    for (int j = 1; j < count; ++j)
      ops += fmt::format("      %{0}_c{1} = arith.constant {1} : index\n"
                         "      %{0}_o{1} = arith.muli {2}, %{0}_c{1} : index\n"
                         "      %{0}_{1} = arith.addi %{0}, %{0}_o{1} : index\n",
                         iv, j, stride);
    return ops;
  }
  std::string position(const std::string &iv, int j) const {
    return j ? fmt::format("%{}_{}", iv, j) : "%" + iv;
  }
};

} // namespace

/// The decode row's query vectors, one per head of the workgroup.
static std::vector<Slot> decodeSlots(int heads) {
  std::vector<Slot> slots;
  for (int p = 0; p < heads; ++p)
    slots.push_back({p, 0, p});
  return slots;
}

/// `%<out>:N = scf.for %<iv> = from to to step runs.step`: the scores of
/// `slots` over runs.count positions a step (runs.count x slots independent
/// FMA chains), stored to %scores<k>; yields the running maxima, starting
/// from `initial(k)`.
template <typename Initial>
static std::string scoreLoop(const std::vector<Slot> &slots, const PositionRuns &runs,
                             const AttentionTypes &types, bool prefetch, const std::string &out,
                             const std::string &iv, const std::string &from, const std::string &to,
                             Initial initial) {
  const int positions = runs.count, n = int(slots.size()), chains = n * positions;
  std::string offsets = runs.positions(iv), body, reductions, iterArgs, yields;
  auto position = [&](int j) { return runs.position(iv, j); };
  // Each key row is prefetched %ahead positions before it is scored (the
  // last visible position at most), unless prefetch_bytes = none.
  for (int j = 0; j < positions; ++j) {
    body += "        " +
            vectorWidenedLoad(types.cache, fmt::format("%{}_k{}", iv, j), "%keys",
                              fmt::format("%kv, {}, %i", position(j)), types.kv) +
            "\n";
    if (!prefetch)
      continue;
    offsets += fmt::format("      %{0}_pf{1}_ = arith.addi {2}, %ahead : index\n"
                           "      %{0}_pf{1} = arith.minui %{0}_pf{1}_, %lastPosition : index\n",
                           iv, j, position(j));
    body += fmt::format("        memref.prefetch %keys[%kv, %{0}_pf{1}, %i], read, locality<3>, "
                        "data : {2}\n",
                        iv, j, types.kv);
  }
  // The scores are stored at the position's place in the block.
  for (int j = 0; j < positions; ++j)
    offsets +=
        fmt::format("      %{0}_at{1} = arith.subi {2}, %blockStart : index\n", iv, j, position(j));
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
          "      memref.store %{0}_score{1}, %scores{2}[%{0}_at{3}] : memref<?xf32>\n"
          "      %{0}_max{1} = arith.maxf {4}, %{0}_score{1} : f32\n",
          iv, chain, slot.k, j, last);
      last = fmt::format("%{}_max{}", iv, chain);
    }
    yields += (s ? ", " : "") + last;
  }
  return fmt::format(
      R"mlir(    %{out}:{n} = scf.for %{iv} = {from} to {to} step {step} iter_args({iterArgs}) -> ({maxTypes}) {{
{offsets}      %{iv}_dots:{chains} = scf.for %i = %c0 to %cD step %c16 iter_args({accArgs}) -> ({accTypes}) {{
{body}        scf.yield {accYields} : {accTypes}
      }}
{reductions}      scf.yield {yields} : {maxTypes}
    }}
)mlir",
      fmt::arg("out", out), fmt::arg("n", n), fmt::arg("iv", iv), fmt::arg("from", from),
      fmt::arg("to", to), fmt::arg("step", runs.step), fmt::arg("iterArgs", iterArgs),
      fmt::arg("maxTypes", listOf(n, [](int) { return std::string("f32"); })),
      fmt::arg("offsets", offsets), fmt::arg("chains", chains),
      fmt::arg("accArgs",
               listOf(chains, [&](int c) { return fmt::format("%{}_a{} = %zeroV", iv, c); })),
      fmt::arg("accTypes", vectorTypes(chains)), fmt::arg("body", body),
      fmt::arg("accYields", listOf(chains, [&](int c) { return fmt::format("%{}_r{}", iv, c); })),
      fmt::arg("reductions", reductions), fmt::arg("yields", yields));
}

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

/// `%<out>:N = scf.for %<iv> = from to to step runs.step`: the
/// probability-weighted sum of the value columns `columns` for `slots`,
/// starting from `initial(k, c)`; each step adds the rows of runs.count
/// positions, in order, to the same sums.
template <typename Initial>
static std::string valueLoop(const std::vector<Slot> &slots, const std::vector<int64_t> &columns,
                             const PositionRuns &runs, const AttentionTypes &types, bool prefetch,
                             const std::string &out, const std::string &iv, const std::string &from,
                             const std::string &to, Initial initial) {
  std::string body = runs.positions(iv);
  for (int64_t c : columns)
    body += fmt::format("      %{0}_off{1} = arith.constant {2} : index\n", iv, c, c * kLanes);
  std::string iterArgs, yields;
  auto sum = [&](int k, int64_t c, int run) {
    return run < 0 ? fmt::format("%{}_b{}_{}", iv, k, c)
                   : fmt::format("%{}_u{}_{}_{}", iv, k, c, run);
  };
  for (int j = 0; j < runs.count; ++j) {
    const std::string position = runs.position(iv, j);
    // Each value row is prefetched %ahead positions before it is added (the
    // last visible position at most), unless prefetch_bytes = none.
    if (prefetch)
      body += fmt::format("      %{0}_pf{1}_ = arith.addi {2}, %ahead : index\n"
                          "      %{0}_pf{1} = arith.minui %{0}_pf{1}_, %lastPosition : index\n",
                          iv, j, position);
    for (int64_t c : columns) {
      body += "      " +
              vectorWidenedLoad(types.cache, fmt::format("%{}_v{}_{}", iv, c, j), "%values",
                                fmt::format("%kv, {}, %{}_off{}", position, iv, c), types.kv) +
              "\n";
      if (prefetch)
        body += fmt::format("      memref.prefetch %values[%kv, %{0}_pf{1}, %{0}_off{2}], read, "
                            "locality<3>, data : {3}\n",
                            iv, j, c, types.kv);
    }
    body +=
        fmt::format("      %{0}_at{1} = arith.subi {2}, %blockStart : index\n", iv, j, position);
    for (const Slot &slot : slots) {
      body +=
          fmt::format("      %{0}_p{1}_{2} = memref.load %scores{1}[%{0}_at{2}] : memref<?xf32>\n"
                      "      %{0}_pv{1}_{2} = vector.broadcast %{0}_p{1}_{2} : f32 to "
                      "vector<16xf32>\n",
                      iv, slot.k, j);
      for (int64_t c : columns)
        body += fmt::format("      {0} = vector.fma %{1}_pv{2}_{3}, %{1}_v{4}_{3}, {5} : "
                            "vector<16xf32>\n",
                            sum(slot.k, c, j), iv, slot.k, j, c, sum(slot.k, c, j - 1));
    }
  }
  int n = 0;
  for (const Slot &slot : slots)
    for (int64_t c : columns) {
      iterArgs += fmt::format("{}{} = {}", n ? ", " : "", sum(slot.k, c, -1), initial(slot.k, c));
      yields += fmt::format("{}{}", n ? ", " : "", sum(slot.k, c, runs.count - 1));
      ++n;
    }
  return fmt::format(
      R"mlir(    %{0}:{1} = scf.for %{2} = {3} to {4} step {9} iter_args({5}) -> ({6}) {{
{7}      scf.yield {8} : {6}
    }}
)mlir",
      out, n, iv, from, to, iterArgs, vectorTypes(n), body, yields, runs.step);
}

/// The position of (slot, column) among a valueLoop's results.
static int64_t resultIndex(const std::vector<Slot> &slots, const std::vector<int64_t> &columns,
                           int k, int64_t column) {
  int64_t index = 0;
  for (const Slot &slot : slots)
    for (int64_t c : columns) {
      if (slot.k == k && c == column)
        return index;
      ++index;
    }
  return -1;
}

/// The positions decode prefetches ahead: kernel.prefetchBytes of rows (1
/// when it does not prefetch: the constant is then unused).
static int64_t aheadPositions(const AttentionKernel &kernel) {
  if (!kernel.prefetches())
    return 1;
  const int64_t rowBytes = kernel.headDim * dtypeBytes(kernel.cache);
  return std::max<int64_t>(1, (kernel.prefetchBytes + rowBytes - 1) / rowBytes);
}

std::string decodeFunction(const AttentionKernel &kernel, const AttentionTypes &types) {
  const int heads = int(kernel.headsPerWorkgroup());
  const int64_t columns = kernel.valueColumns();
  const std::vector<Slot> slots = decodeSlots(heads);
  const int64_t groupSize = std::clamp<int64_t>(kernel.decodeAccumulators, 1, columns);
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
  // With one stream, the scores go in pairs of positions, then the values
  // one at a time; with S, both go in S runs side by side over the block's
  // first S x (size / S) positions (%runsEnd), then one at a time.
  const int streams = int(kernel.decodeStreams);
  const PositionRuns single{1, "%c1", "%c1"};
  const PositionRuns scoreRuns =
      streams > 1 ? PositionRuns{streams, "%runLength", "%c1"} : PositionRuns{2, "%c1", "%c2"};
  const PositionRuns valueRuns = streams > 1 ? scoreRuns : single;
  body += fmt::format("    %blockFull = arith.addi %blockStart, %cBlock : index\n"
                      "    %blockEnd = arith.minui %blockFull, %to : index\n"
                      "    %blockSize = arith.subi %blockEnd, %blockStart : index\n"
                      "    %cRuns = arith.constant {0} : index\n"
                      "    %runLength = arith.divui %blockSize, %cRuns : index\n"
                      "    %runSpan = arith.muli %runLength, %cRuns : index\n"
                      "    %runsEnd = arith.addi %blockStart, %runLength : index\n"
                      "    %tailStart = arith.addi %blockStart, %runSpan : index\n",
                      scoreRuns.count);
  const std::string runsTo = streams > 1 ? "%runsEnd" : "%tailStart";
  body += scoreLoop(slots, scoreRuns, types, kernel.prefetches(), "runMax", "s", "%blockStart",
                    runsTo, [](int k) { return fmt::format("%m{}", k); });
  body += scoreLoop(slots, single, types, kernel.prefetches(), "oneMax", "s1", "%tailStart",
                    "%blockEnd", [](int k) { return fmt::format("%runMax#{}", k); });
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
        "      %eAt{0} = arith.subi %e, %blockStart : index\n"
        "      %scoreV{0} = vector.load %scores{0}[%eAt{0}] : memref<?xf32>, vector<16xf32>\n"
        "      %shiftedV{0} = arith.subf %scoreV{0}, %maxV{0} : vector<16xf32>\n"
        "      %expV{0} = math.exp %shiftedV{0} : vector<16xf32>\n"
        "      %probV{0} = arith.select %inBlock{0}, %expV{0}, %zeroV : vector<16xi1>, "
        "vector<16xf32>\n"
        "      vector.store %probV{0}, %scores{0}[%eAt{0}] : memref<?xf32>, vector<16xf32>\n"
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
    if (streams == 1) {
      body += valueLoop(slots, groups[g], single, types, kernel.prefetches(),
                        fmt::format("sums{}", g), fmt::format("v{}", g), "%blockStart", "%blockEnd",
                        [](int k, int64_t c) { return fmt::format("%kept{}_{}", k, c); });
      continue;
    }
    body += valueLoop(slots, groups[g], valueRuns, types, kernel.prefetches(),
                      fmt::format("runSums{}", g), fmt::format("w{}", g), "%blockStart", "%runsEnd",
                      [](int k, int64_t c) { return fmt::format("%kept{}_{}", k, c); });
    body +=
        valueLoop(slots, groups[g], single, types, kernel.prefetches(), fmt::format("sums{}", g),
                  fmt::format("v{}", g), "%tailStart", "%blockEnd", [&](int k, int64_t c) {
                    return fmt::format("%runSums{}#{}", g, resultIndex(slots, groups[g], k, c));
                  });
  }
  // The output: the value sums over the sums of the probabilities; or, for
  // a split of the positions, the maxima, sums and value sums as they are.
  for (const Slot &slot : slots)
    finish += fmt::format("  %inverse{0} = arith.divf %one, %final#{1} : f32\n"
                          "  %inverseV{0} = vector.broadcast %inverse{0} : f32 to vector<16xf32>\n",
                          slot.k, heads + slot.k);
  std::string partial;
  for (const Slot &slot : slots)
    partial += fmt::format("  %record{0} = arith.addi %record, %cSlot{0} : index\n"
                           "  memref.store %final#{0}, %partials[%record{0}, %c0] : {1}\n"
                           "  memref.store %final#{2}, %partials[%record{0}, %c1] : {1}\n",
                           slot.k, partialsType(kernel), heads + slot.k);
  int index = 2 * heads;
  for (size_t g = 0; g < groups.size(); ++g)
    for (const Slot &slot : slots)
      for (int64_t c : groups[g]) {
        finish += fmt::format("  %o{0}_{1} = arith.mulf %final#{2}, %inverseV{0} : vector<16xf32>\n"
                              "  %oOff{0}_{1} = arith.constant {3} : index\n"
                              "  vector.store %o{0}_{1}, %out[%t0, %h{4}, %oOff{0}_{1}] : {5}, "
                              "vector<16xf32>\n",
                              slot.k, c, index, c * kLanes, slot.head, types.query);
        partial += fmt::format("  %pOff{0}_{1} = arith.constant {2} : index\n"
                               "  vector.store %final#{3}, %partials[%record{0}, %pOff{0}_{1}] : "
                               "{4}, vector<16xf32>\n",
                               slot.k, c, AttentionKernel::kSplitRecordHeader + c * kLanes, index,
                               partialsType(kernel));
        ++index;
      }
  std::string scoreParams, lanes, splitParams;
  for (int k = 0; k < heads; ++k)
    scoreParams += fmt::format(", %scores{}: memref<?xf32>", k);
  if (kernel.decodeSplits > 1) {
    // Normalized when this workgroup holds all the positions, else partial.
    for (int k = 0; k < heads; ++k)
      setup += fmt::format("  %cSlot{0} = arith.constant {0} : index\n", k);
    splitParams = fmt::format(", %direct: i1, %partials: {}, %record: index", partialsType(kernel));
    finish = "  scf.if %direct {\n" + indented(finish, "  ") + "  } else {\n" +
             indented(partial, "  ") + "  }\n";
  }
  for (int lane = 0; lane < kLanes; ++lane)
    lanes += fmt::format("{}{}", lane ? ", " : "", lane);
  return fmt::format(
      R"mlir(
func.func private @{name}_decode(%q: {queryType}, %keys: {kvType}, %values: {kvType}, %out: {queryType}{scoreParams}, %t0: index, %h0: index, %kv: index, %count0: index, %from: index, %to: index{splitParams}) {{
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
{setup}  %final:{carried} = scf.for %blockStart = %from to %to step %cBlock iter_args({iterArgs}) -> ({iterTypes}) {{
{body}    scf.yield {yields} : {iterTypes}
  }}
{finish}  return
}}
)mlir",
      fmt::arg("name", kernel.name), fmt::arg("queryType", types.query),
      fmt::arg("kvType", types.kv), fmt::arg("scoreParams", scoreParams),
      fmt::arg("splitParams", splitParams), fmt::arg("d", kernel.headDim),
      fmt::arg("scale", kernel.scale), fmt::arg("setup", setup), fmt::arg("lanes", lanes),
      fmt::arg("block", kDecodeBlockPositions), fmt::arg("ahead", aheadPositions(kernel)),
      fmt::arg("carried", carried), fmt::arg("iterArgs", iterArgs),
      fmt::arg("iterTypes", iterTypes), fmt::arg("body", body), fmt::arg("yields", yields),
      fmt::arg("finish", finish));
}

} // namespace q3::cpu::attention
