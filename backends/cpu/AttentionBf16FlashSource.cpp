//===- AttentionBf16FlashSource.cpp - the flash prefill on bf16 pairs -----===//
//
// @<name>_flash_bf16 (q3.lowering's matmul = avx512bf16): vdpbf16ps on the
// queries paired by feature, each key block's rows rounded once, the
// probabilities and values paired by position; a workgroup runs
// prefillRowSets blocks of rows, which share each key block's copies and
// its broadcast keys.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/AttentionTemplates.h"
#include "backends/cpu/KernelSourceUtil.h"

#include <fmt/format.h>

namespace q3::cpu::attention {

using namespace detail;

/// The word interleave of two 16-word halves, [0, 16, 1, 17, .., 15, 31].
static std::string interleaveMask() {
  return listOf(2 * kLanes, [](int i) { return std::to_string(i % 2 ? kLanes + i / 2 : i / 2); });
}

/// `result` (vector<32xi16>): the 16 values of `low` then those of `high`
/// as bf16, rounded to nearest even by vcvtne2ps2bf16 (which reads
/// denormals as zero: no attention input comes near them). Inline assembly,
/// as the products' vdpbf16ps: LLVM 16 has no bf16 vectors to select.
static std::string bf16Halves(const std::string &result, const std::string &low,
                              const std::string &high) {
  return fmt::format("    {} = llvm.inline_asm asm_dialect = att \"vcvtne2ps2bf16 $2, $1, $0\", "
                     "\"=v,v,v\" {}, {} : (vector<16xf32>, vector<16xf32>) -> vector<32xi16>\n",
                     result, high, low);
}

std::string bf16Pairs(const std::string &result, const std::string &low, const std::string &high) {
  return bf16Halves(result + "_h", low, high) +
         fmt::format("    {0}_w = vector.shuffle {0}_h, {0}_h [{1}] : vector<32xi16>, "
                     "vector<32xi16>\n"
                     "    {0} = vector.bitcast {0}_w : vector<32xi16> to vector<16xi32>\n",
                     result, interleaveMask());
}

Bf16FlashScratch bf16FlashScratchTypes(const AttentionKernel &kernel) {
  const int64_t d = kernel.headDim;
  return {fmt::format("memref<{}x{}xi32>", d / 2, kLanes),
          fmt::format("memref<{}x{}xi16>", kLanes, d),
          fmt::format("memref<{}x{}xi32>", kLanes, d / 2),
          fmt::format("memref<{}x{}xi16>", kLanes / 2, 2 * d),
          fmt::format("memref<{}x{}xi32>", kLanes / 2, d),
          fmt::format("memref<{}x{}xi32>", kLanes / 2, kLanes),
          2 * kLanes * d,
          2 * kLanes * d,
          fmt::format("memref<{0}x{1}xi32, strided<[{1}, 1], offset: ?>>", kLanes, d / 2),
          fmt::format("memref<{0}x{1}xi32, strided<[{1}, 1], offset: ?>>", kLanes / 2, d)};
}

int64_t roundedRowsPerCall(const AttentionKernel &kernel) {
  constexpr int64_t kRoundedBytes = 512 * 1024;
  const int64_t rowBytes = 2 * 2 * kernel.headDim; // a key and a value row as bf16
  return kRoundedBytes / rowBytes / kLanes * kLanes;
}

int64_t roundedValuesOffset(const AttentionKernel &kernel) {
  return roundedRowsPerCall(kernel) * 2 * kernel.headDim; // a multiple of 16 rows of 32 bytes
}

/// The bf16 flash kernel's scratch shared by its row sets: a key block's
/// keys and values as bf16, one set's probabilities.
static std::string bf16FlashBuffers(const AttentionKernel &kernel) {
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

/// Where a key block's rounded rows go: the block's scratch (row p) or the
/// call's rounded rows (row %blockStart + p, and for values pair
/// %blockStart / 2 + j).
enum class RoundInto { Scratch, CallRows };

/// The key block as bf16 rows, from the clamped rows %blockRead<p>: into
/// %keyHalves, or %roundedKeyHalves. A bf16 cache is copied, the others
/// rounded.
static std::string bf16KeyCopy(const AttentionKernel &kernel, const AttentionTypes &types,
                               RoundInto into) {
  const Bf16FlashScratch scratch = bf16FlashScratchTypes(kernel);
  const bool bf16Cache = kernel.cache == DType::BF16;
  const bool callRows = into == RoundInto::CallRows;
  const std::string halvesType =
      callRows ? fmt::format("memref<?x{}xi16>", kernel.headDim) : scratch.keyHalves;
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
    keys += fmt::format("      vector.store {}, {}[{}{}, %kc] : {}, vector<32xi16>\n", row,
                        callRows ? "%roundedKeyHalves" : "%keyHalves",
                        callRows ? "%blockRow" : "%cP", p, halvesType);
  }
  return keys + "    }\n";
}

/// The key block's values with the positions paired: pair j of feature f
/// is (row 2j, row 2j + 1), into %valueHalves or %roundedValueHalves. Into
/// the scratch it is made after the scores, while which the rows were
/// prefetched.
static std::string bf16ValueCopy(const AttentionKernel &kernel, const AttentionTypes &types,
                                 RoundInto into) {
  const Bf16FlashScratch scratch = bf16FlashScratchTypes(kernel);
  const bool bf16Cache = kernel.cache == DType::BF16;
  const bool callRows = into == RoundInto::CallRows;
  const std::string halvesType =
      callRows ? fmt::format("memref<?x{}xi16>", 2 * kernel.headDim) : scratch.valueHalves;
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
    values += callRows
                  ? fmt::format("      %vpRow{0}c = arith.constant {0} : index\n"
                                "      %vpRow{0} = arith.addi %blockPair, %vpRow{0}c : index\n",
                                j)
                  : fmt::format("      %vpRow{0} = arith.constant {0} : index\n", j);
    values += fmt::format("      vector.store {}, {}[%vpRow{}, %vpHalves] : {}, vector<32xi16>\n",
                          pair, callRows ? "%roundedValueHalves" : "%valueHalves", j, halvesType);
  }
  return values + "    }\n";
}

/// `rounded` where `inRounded` (an i1: a key block is in the call's rounded
/// rows), else `scratch`: the prefetches of the rows each path reads next.
static std::string roundedOr(const std::string &inRounded, const std::string &rounded,
                             const std::string &scratch) {
  return "      scf.if " + inRounded + " {\n" + rounded + "      } else {\n" + scratch +
         "      }\n";
}

/// The prefetch a score step %i issues of the block's rounded value pairs:
/// 8 pair rows of D / 16 lines each, one line per step of the D / 2.
static std::string valuePairPrefetch(const AttentionKernel &kernel) {
  return fmt::format("        %pfRowLines = arith.constant {0} : index\n"
                     "        %pfPairIn = arith.divui %i, %pfRowLines : index\n"
                     "        %pfPair = arith.addi %blockPair, %pfPairIn : index\n"
                     "        %pfLineIn = arith.remui %i, %pfRowLines : index\n"
                     "        %pfColumn = arith.muli %pfLineIn, %c16 : index\n"
                     "        memref.prefetch %roundedValuePairs[%pfPair, %pfColumn], read, "
                     "locality<3>, data : memref<?x{1}xi32>\n",
                     kernel.headDim / kLanes, kernel.headDim);
}

std::string nextBlockRoundedOr(const AttentionKernel &kernel, const std::string &scratch) {
  std::string rounded = "        %prefetchPairs = arith.divui %prefetchColumn, %c2 : index\n";
  for (int p = 0; p < kLanes; ++p)
    rounded += fmt::format("        %nextRoundedKey{0} = arith.addi %blockEnd, %cP{0} : index\n"
                           "        memref.prefetch %roundedKeyPairs[%nextRoundedKey{0}, "
                           "%prefetchPairs], read, locality<3>, data : memref<?x{1}xi32>\n",
                           p, kernel.headDim / 2);
  return "      %nextBlockIndex = arith.addi %blockIndex, %c1 : index\n"
         "      %nextInRounded = arith.cmpi ult, %nextBlockIndex, %roundedBlocks : index\n" +
         roundedOr("%nextInRounded", rounded, scratch);
}

/// Keys each pass of the sets' score loop scores: their accumulators for
/// every set (at most 24) fit in the 32 vector registers beside the sets'
/// query vectors and a broadcast key.
static int64_t keysPerScorePass(int64_t sets) {
  int64_t keys = kLanes;
  while (keys * sets > 24)
    keys /= 2;
  return keys;
}

/// Set `set`'s score of the block's position `p` after bf16SetScores.
static std::string setScore(const AttentionKernel &kernel, int64_t set, int p) {
  const int64_t keys = keysPerScorePass(kernel.prefillRowSets);
  return fmt::format("%scores{}#{}", p / keys, p % keys * kernel.prefillRowSets + set);
}

/// Every set's scores of the key block, `%scores<pass>`: each broadcast key
/// pair serves all the sets' query pairs (with 2 sets a step loads 10
/// values for 16 vdpbf16ps instead of 17; the kernel ran 5% faster with 2
/// and 3 sets than with a score loop per set on AMD family 26). The keys go
/// in passes when the sets' accumulators of all 16 would not fit; the first
/// pass prefetches the block's value rows.
static std::string bf16SetScores(const AttentionKernel &kernel, const AttentionTypes &types) {
  const Bf16FlashScratch pairs = bf16FlashScratchTypes(kernel);
  const int64_t sets = kernel.prefillRowSets;
  const int64_t keys = keysPerScorePass(sets);
  std::string text =
      fmt::format("    %cPairSteps = arith.constant {} : index\n", kernel.headDim / 2);
  for (int64_t pass = 0; pass < kLanes / keys; ++pass) {
    std::string body = pass == 0 ? roundedOr("%inRounded", valuePairPrefetch(kernel),
                                             valueRowPrefetches(kernel, types))
                                 : "";
    std::string accArgs, accYields;
    for (int64_t set = 0; set < sets; ++set)
      body += fmt::format("      %qi{0} = vector.load %queryPairs{0}[%i, %c0] : {1}, "
                          "vector<16xi32>\n",
                          set, pairs.queryPairs);
    for (int64_t k = 0; k < keys; ++k) {
      body += fmt::format("      %k{0} = memref.load %blockKeyPairs[%cP{1}, %i] : {2}\n"
                          "      %kb{0} = vector.broadcast %k{0} : i32 to vector<16xi32>\n",
                          k, pass * keys + k, pairs.keyPairsView);
      for (int64_t set = 0; set < sets; ++set) {
        const std::string acc = fmt::format("{}_{}", k, set);
        body +=
            "      " +
            vdpbf16ps("%r" + acc, fmt::format("%kb{}", k), fmt::format("%qi{}", set), "%a" + acc) +
            "\n";
        accArgs += fmt::format("{}%a{} = %zeroV", accArgs.empty() ? "" : ", ", acc);
        accYields += fmt::format("{}%r{}", accYields.empty() ? "" : ", ", acc);
      }
    }
    text += fmt::format("    %scores{0}:{1} = scf.for %i = %c0 to %cPairSteps step %c1 "
                        "iter_args({2}) -> ({3}) {{\n{4}      scf.yield {5} : {3}\n    }}\n",
                        pass, keys * sets, accArgs, vectorTypes(int(keys * sets)), body, accYields);
  }
  return text;
}

/// The call's rounded rows (%roundedKeyHalves and pairs, %roundedValueHalves
/// and pairs: roundedRowsPerCall() of each at most, %roundedBlocks blocks of
/// them here), from the bytes the kernel's call gave, and the rows already
/// rounded, %rounded0: those of %roundedState when it holds this KV head's
/// (the call's earlier workgroups rounded them), else none.
static std::string roundedRows(const AttentionKernel &kernel) {
  const int64_t d = kernel.headDim;
  return fmt::format(
      "  %roundedRows = arith.muli %roundedBlocks, %c16 : index\n"
      "  %roundedPairRows = arith.divui %roundedRows, %c2 : index\n"
      "  %roundedKeyHalves = memref.view %roundedKeyBytes[%c0][%roundedRows] : memref<?xi8> to "
      "memref<?x{0}xi16>\n"
      "  %roundedKeyPairs = memref.view %roundedKeyBytes[%c0][%roundedRows] : memref<?xi8> to "
      "memref<?x{1}xi32>\n"
      "  %roundedValueHalves = memref.view %roundedValueBytes[%c0][%roundedPairRows] : "
      "memref<?xi8> to memref<?x{2}xi16>\n"
      "  %roundedValuePairs = memref.view %roundedValueBytes[%c0][%roundedPairRows] : "
      "memref<?xi8> to memref<?x{0}xi32>\n"
      "  %roundedKv = memref.load %roundedState[%c0] : memref<2xindex>\n"
      "  %roundedBefore = memref.load %roundedState[%c1] : memref<2xindex>\n"
      "  %sameKv = arith.cmpi eq, %roundedKv, %kv : index\n"
      "  %rounded0 = arith.select %sameKv, %roundedBefore, %c0 : index\n"
      "  memref.store %kv, %roundedState[%c0] : memref<2xindex>\n"
      "  %lastVisible = arith.subi %visible, %c1 : index\n",
      d, d / 2, 2 * d);
}

/// The key block's pairs, %blockKeyPairs, and the rows rounded after it,
/// %roundedNext. A block within the call's rounded rows is rounded there by
/// the first workgroup of the call that reads it, keys and values together,
/// and read from there by the others (a call's workgroups are consecutive
/// blocks of rows of one KV head, which read the same blocks of keys); a
/// block past them is rounded into the scratch, as each workgroup did before.
/// Rows read are clamped to the last visible position of the whole prompt,
/// so a block's rounded rows are the same whichever workgroup rounds it.
static std::string blockKeyPairs(const AttentionKernel &kernel, const AttentionTypes &types) {
  const Bf16FlashScratch scratch = bf16FlashScratchTypes(kernel);
  return clampedBlockRows("%block", "    ", "%lastVisible") +
         fmt::format("    %blockIndex = arith.divui %blockStart, %c16 : index\n"
                     "    %blockPair = arith.divui %blockStart, %c2 : index\n"
                     "    %inRounded = arith.cmpi ult, %blockIndex, %roundedBlocks : index\n"
                     "    %notYet = arith.cmpi uge, %blockIndex, %rounded : index\n"
                     "    %roundHere = arith.andi %inRounded, %notYet : i1\n"
                     "    %roundedNext = scf.if %roundHere -> (index) {{\n"
                     "{0}{1}"
                     "      %afterBlock = arith.addi %blockIndex, %c1 : index\n"
                     "      scf.yield %afterBlock : index\n"
                     "    }} else {{\n"
                     "      scf.yield %rounded : index\n"
                     "    }}\n"
                     "    %blockKeyPairs = scf.if %inRounded -> ({2}) {{\n"
                     "      %roundedBlockKeys = memref.subview %roundedKeyPairs[%blockStart, 0] "
                     "[{3}, {4}] [1, 1] : memref<?x{4}xi32> to {2}\n"
                     "      scf.yield %roundedBlockKeys : {2}\n"
                     "    }} else {{\n"
                     "{5}"
                     "      %scratchKeys = memref.cast %keyPairs : {6} to {2}\n"
                     "      scf.yield %scratchKeys : {2}\n"
                     "    }}\n",
                     bf16KeyCopy(kernel, types, RoundInto::CallRows),
                     bf16ValueCopy(kernel, types, RoundInto::CallRows), scratch.keyPairsView,
                     kLanes, kernel.headDim / 2, bf16KeyCopy(kernel, types, RoundInto::Scratch),
                     scratch.keyPairs);
}

/// The key block's value pairs, %blockValuePairs: the call's rounded rows
/// or (a block past them) the scratch, made now that the scores are done.
static std::string blockValuePairs(const AttentionKernel &kernel, const AttentionTypes &types) {
  const Bf16FlashScratch scratch = bf16FlashScratchTypes(kernel);
  return fmt::format("    %blockValuePairs = scf.if %inRounded -> ({0}) {{\n"
                     "      %roundedBlockValues = memref.subview "
                     "%roundedValuePairs[%blockPair, 0] [{1}, {2}] [1, 1] : memref<?x{2}xi32> "
                     "to {0}\n"
                     "      scf.yield %roundedBlockValues : {0}\n"
                     "    }} else {{\n"
                     "{3}"
                     "      %scratchValues = memref.cast %valuePairs : {4} to {0}\n"
                     "      scf.yield %scratchValues : {0}\n"
                     "    }}\n",
                     scratch.valuePairsView, kLanes / 2, kernel.headDim,
                     bf16ValueCopy(kernel, types, RoundInto::Scratch), scratch.valuePairs);
}

/// `%<name> = scf.execute_region ...`: `body` in a region of its own, where
/// the text templates' names (%queryPairs, %outT, %countV, %m, ...) are the
/// set's: `aliases` define them from the set's values.
static std::string inRegion(const std::string &results, const std::string &types,
                            const std::string &aliases, const std::string &body,
                            const std::string &yields) {
  return fmt::format("    {}scf.execute_region{} {{\n{}{}      scf.yield {}\n    }}\n",
                     results.empty() ? "" : results + " = ",
                     types.empty() ? "" : " -> (" + types + ")", aliases, body,
                     yields.empty() ? "" : yields + " : " + types);
}

std::string bf16FlashFunction(const AttentionKernel &kernel, const AttentionTypes &types) {
  const int64_t setRows = kernel.prefillBlockRows();
  const FlashScratch scratch = flashScratchTypes(kernel);
  const Bf16FlashScratch pairs = bf16FlashScratchTypes(kernel);
  std::string sets, blockSets, carried, carriedTypes, yields, outputs;
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
    // The set's softmax of its scores, then (after the first set's, the
    // value rows prefetched by now) the value pairs, then its values: the
    // sets take turns with the one probability buffer.
    std::vector<std::string> scores;
    for (int p = 0; p < kLanes; ++p)
      scores.push_back(setScore(kernel, set, p));
    blockSets +=
        inRegion(fmt::format("%set{}", set) + ":3", fmt::format("{0}, {0}, {0}", vector),
                 fmt::format("      %countV = arith.addi %countV{0}, %zeroI : vector<16xi32>\n"
                             "      %m = arith.bitcast %m{0} : {1} to {1}\n"
                             "      %l = arith.bitcast %l{0} : {1} to {1}\n",
                             set, vector),
                 flashSoftmax(kernel, scores), "%mNew, %lNew, %alpha");
    if (set == 0)
      blockSets += blockValuePairs(kernel, types);
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
func.func private @{name}_flash_bf16(%q: {queryType}, %keys: {kvType}, %values: {kvType}, %out: {queryType}, %roundedKeyBytes: memref<?xi8>, %roundedValueBytes: memref<?xi8>, %roundedState: memref<2xindex>, %roundedBlocks: index, %visible: index, %tBase: index, %h0: index, %kv: index, %count0: index, %blockRowsAll: index) {{
{constants}  %cSetRows = arith.constant {setRows} : index
  %zeroI = arith.constant dense<0> : vector<16xi32>
{buffers}{roundedRows}  %lastRowAll = arith.subi %blockRowsAll, %c1 : index
  %maxCount = arith.addi %count0, %lastRowAll : index
{sets}  %final:{carriedCount} = scf.for %blockStart = %c0 to %maxCount step %c16 iter_args({carried}, %rounded = %rounded0) -> ({carriedTypes}, index) {{
    %blockEnd = arith.addi %blockStart, %c16 : index
{keyPairs}{blockPositions}{scores}{blockSets}    scf.yield {yields}, %roundedNext : {carriedTypes}, index
  }}
  memref.store %final#{roundedResult}, %roundedState[%c1] : memref<2xindex>
{outputs}  return
}}
)mlir",
      fmt::arg("name", kernel.name), fmt::arg("queryType", types.query),
      fmt::arg("kvType", types.kv), fmt::arg("constants", flashConstants(kernel)),
      fmt::arg("setRows", setRows), fmt::arg("buffers", bf16FlashBuffers(kernel)),
      fmt::arg("sets", sets), fmt::arg("carriedCount", 2 * kernel.prefillRowSets + 1),
      fmt::arg("carried", carried), fmt::arg("carriedTypes", carriedTypes),
      fmt::arg("roundedRows", roundedRows(kernel)),
      fmt::arg("roundedResult", 2 * kernel.prefillRowSets),
      fmt::arg("keyPairs", blockKeyPairs(kernel, types)),
      fmt::arg("blockPositions", blockPositions()),
      fmt::arg("scores", bf16SetScores(kernel, types)), fmt::arg("blockSets", blockSets),
      fmt::arg("yields", yields), fmt::arg("outputs", outputs));
}

} // namespace q3::cpu::attention
