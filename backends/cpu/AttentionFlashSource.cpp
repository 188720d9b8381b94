//===- AttentionFlashSource.cpp - the flash prefill's pieces, f32 kernel --===//
//
// @<name>_flash and the pieces the bf16 kernel (AttentionBf16FlashSource.cpp)
// shares with it: the query transpose, the scores, the online softmax, the
// value sums and the output of one block of 16 query vectors.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/AttentionTemplates.h"
#include "backends/cpu/KernelSourceUtil.h"

#include <fmt/format.h>

#include <vector>

namespace q3::cpu::attention {

using namespace detail;

FlashScratch flashScratchTypes(const AttentionKernel &kernel) {
  return {fmt::format("memref<{}x{}xf32>", kernel.headDim, kLanes),
          fmt::format("memref<{}x{}xf32>", kLanes, kernel.headDim),
          fmt::format("memref<{0}x{0}xf32>", kLanes),
          fmt::format("memref<{}x{}xf32>", kLanes, kernel.headDim),
          fmt::format("memref<{}xf32>", kLanes)};
}

/// The type of a key block's view, [16][D] f32: the cache in place or the copy.
static std::string blockViewType(const AttentionKernel &kernel) {
  return fmt::format("memref<{}x{}xf32, strided<[{}, 1], offset: ?>>", kLanes, kernel.headDim,
                     kernel.headDim);
}

std::string clampedBlockRows(const std::string &prefix, const std::string &indent,
                             const std::string &lastRow) {
  std::string text;
  for (int p = 0; p < kLanes; ++p)
    text += fmt::format("{0}{1}Row{2} = arith.addi %blockStart, %cP{2} : index\n"
                        "{0}{1}Read{2} = arith.minui {1}Row{2}, {3} : index\n",
                        indent, prefix, p, lastRow);
  return text;
}

/// The copy of a key block: rows %blockStart .. + 15 of `cache` widened to
/// f32 into `copy`, rows past the last visible position reading that one
/// (their scores are masked and their probabilities 0, and no read passes
/// the written rows).
static std::string copyKeyBlock(const AttentionKernel &kernel, const AttentionTypes &types,
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
static std::string keyBlockView(const AttentionKernel &kernel, const AttentionTypes &types,
                                const std::string &cache, const std::string &copy) {
  const FlashScratch scratch = flashScratchTypes(kernel);
  const std::string view = blockViewType(kernel);
  const std::string copied = copyKeyBlock(kernel, types, cache, copy);
  auto copyView = [&](const std::string &result) {
    return fmt::format("%{}{} = memref.cast %{} : {} to {}", cache, result, copy, scratch.block,
                       view);
  };
  if (kernel.cache != DType::F32)
    return copied + "    " + copyView("Block") + "\n";
  return fmt::format(
      "    %{0}Block = scf.if %wholeBlock -> ({1}) {{\n"
      "      %{0}InPlace = memref.subview %{0}[%kv, %blockStart, 0] [1, {2}, {3}] [1, 1, 1] : "
      "{4} to {1}\n"
      "      scf.yield %{0}InPlace : {1}\n    }} else {{\n{5}        {6}\n"
      "        scf.yield %{0}Copy : {1}\n    }}\n",
      cache, view, kLanes, kernel.headDim, types.kv, copied, copyView("Copy"));
}

/// `result = acc + a . b`: with `bf16` one vdpbf16ps on the bf16 pairs of
/// `a` and `b` (vector<16xi32>), else an f32 FMA.
static std::string multiplyAdd(bool bf16, const std::string &result, const std::string &a,
                               const std::string &b, const std::string &acc) {
  if (bf16)
    return "      " + vdpbf16ps(result, a, b, acc) + "\n";
  return fmt::format("      {} = vector.fma {}, {}, {} : vector<16xf32>\n", result, a, b, acc);
}

std::string valueRowPrefetches(const AttentionKernel &kernel, const AttentionTypes &types) {
  const int64_t steps = kernel.bf16Prefill ? kernel.headDim / 2 : kernel.headDim;
  const int64_t linesPerStep = kernel.headDim / steps;
  std::string prefetches = fmt::format("      %lineVectors = arith.constant {} : index\n"
                                       "      %cLinesPerStep = arith.constant {} : index\n",
                                       kernel.headDim / kLanes, linesPerStep);
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
  return prefetches;
}

std::string flashScores(const AttentionKernel &kernel, const AttentionTypes &types) {
  const FlashScratch scratch = flashScratchTypes(kernel);
  std::string scoreBody, accArgs, accYields;
  for (int p = 0; p < kLanes; ++p) {
    scoreBody += fmt::format("      %k{0} = memref.load %keysBlock[%cP{0}, %i] : {1}\n"
                             "      %kb{0} = vector.broadcast %k{0} : f32 to vector<16xf32>\n"
                             "      %r{0} = vector.fma %kb{0}, %qi, %a{0} : vector<16xf32>\n",
                             p, blockViewType(kernel));
    accArgs += fmt::format("{}%a{} = %zeroV", p ? ", " : "", p);
    accYields += fmt::format("{}%r{}", p ? ", " : "", p);
  }
  return fmt::format(R"mlir(    %s:16 = scf.for %i = %c0 to %cD step %c1 iter_args({0}) -> ({1}) {{
{2}      %qi = vector.load %queryT[%i, %c0] : {3}, vector<16xf32>
{4}      scf.yield {5} : {1}
    }}
)mlir",
                     accArgs, vectorTypes(kLanes), valueRowPrefetches(kernel, types),
                     scratch.queryT, scoreBody, accYields);
}

/// The value loop's tile: `lanes` lanes x `vectors` feature vectors of the
/// output sums, at most 16 accumulators. Each step's value vectors then serve
/// `lanes` lanes and each probability `vectors` vectors.
struct ValueTile {
  int64_t lanes = 1, vectors = 1, columnGroups = 1;
  int64_t count() const { return kLanes / lanes * columnGroups; }
};

static ValueTile valueTile(const AttentionKernel &kernel) {
  constexpr int64_t kAccumulators = 16;
  ValueTile tile;
  const int64_t rowVectors = kernel.headDim / kLanes;
  tile.vectors = rowVectors; // the largest divisor of the row's vectors that fits
  while (tile.vectors > kAccumulators || rowVectors % tile.vectors != 0)
    --tile.vectors;
  tile.columnGroups = rowVectors / tile.vectors;
  while (tile.lanes * 2 * tile.vectors <= kAccumulators && tile.lanes * 2 <= kLanes)
    tile.lanes *= 2;
  return tile;
}

std::string flashValues(const AttentionKernel &kernel, const AttentionTypes &types) {
  const FlashScratch scratch = flashScratchTypes(kernel);
  const Bf16FlashScratch pairs = bf16FlashScratchTypes(kernel);
  const bool bf16 = kernel.bf16Prefill;
  const ValueTile tile = valueTile(kernel);
  const int steps = bf16 ? kLanes / 2 : kLanes;
  // The tile's first lane and column; the key lines prefetched for the next
  // block (one per row at the tile's share of the features).
  std::string body =
      fmt::format("      %laneTile = arith.divui %tile, %cColumnGroups : index\n"
                  "      %columnGroup = arith.remui %tile, %cColumnGroups : index\n"
                  "      %tileLane = arith.muli %laneTile, %cTileLanes : index\n"
                  "      %tileColumn = arith.muli %columnGroup, %cTileFeatures : index\n"
                  "      %tileFeatures = arith.muli %tile, %cD : index\n"
                  "      %prefetchColumn = arith.divui %tileFeatures, %cTiles : index\n");
  std::string keyPrefetches;
  for (int p = 0; p < kLanes; ++p)
    keyPrefetches += fmt::format("      %nextKey{0} = arith.addi %blockEnd, %cP{0} : index\n"
                                 "      memref.prefetch %keys[%kv, %nextKey{0}, %prefetchColumn], "
                                 "read, locality<3>, data : {1}\n",
                                 p, types.kv);
  body += bf16 ? nextBlockRoundedOr(kernel, keyPrefetches) : keyPrefetches;
  auto acc = [](int64_t lane, int64_t c, int step) {
    return fmt::format("%u{}_{}_{}", lane, c, step);
  };
  for (int64_t c = 0; c < tile.vectors; ++c)
    body += fmt::format("      %cColumn{0} = arith.constant {1} : index\n"
                        "      %column{0} = arith.addi %tileColumn, %cColumn{0} : index\n",
                        c, c * kLanes);
  for (int64_t lane = 0; lane < tile.lanes; ++lane) {
    body += fmt::format("      %lane{0} = arith.addi %tileLane, %cP{0} : index\n"
                        "      %alpha{0} = memref.load %laneScalars[%lane{0}] : {1}\n"
                        "      %alphaB{0} = vector.broadcast %alpha{0} : f32 to vector<16xf32>\n",
                        lane, scratch.laneScalars);
    for (int64_t c = 0; c < tile.vectors; ++c)
      body += fmt::format("      %o{0}_{1} = vector.load %outT[%lane{0}, %column{1}] : {2}, "
                          "vector<16xf32>\n"
                          "      {3} = arith.mulf %o{0}_{1}, %alphaB{0} : vector<16xf32>\n",
                          lane, c, scratch.outT, acc(lane, c, 0));
  }
  for (int p = 0; p < steps; ++p) {
    for (int64_t c = 0; c < tile.vectors; ++c)
      body += bf16 ? fmt::format("      %v{0}_{1} = vector.load %blockValuePairs[%cP{0}, "
                                 "%column{1}] : {2}, vector<16xi32>\n",
                                 p, c, pairs.valuePairsView)
                   : fmt::format("      %v{0}_{1} = vector.load %valuesBlock[%cP{0}, %column{1}] "
                                 ": {2}, vector<16xf32>\n",
                                 p, c, blockViewType(kernel));
    for (int64_t lane = 0; lane < tile.lanes; ++lane) {
      const std::string weight = fmt::format("%pb{}_{}", lane, p);
      body += bf16 ? fmt::format("      {0}s = memref.load %probabilityPairs[%cP{1}, %lane{2}] "
                                 ": {3}\n"
                                 "      {0} = vector.broadcast {0}s : i32 to vector<16xi32>\n",
                                 weight, p, lane, pairs.probabilityPairs)
                   : fmt::format("      {0}s = memref.load %probabilities[%cP{1}, %lane{2}] : "
                                 "{3}\n"
                                 "      {0} = vector.broadcast {0}s : f32 to vector<16xf32>\n",
                                 weight, p, lane, scratch.probabilities);
      for (int64_t c = 0; c < tile.vectors; ++c)
        body += multiplyAdd(bf16, acc(lane, c, p + 1), weight, fmt::format("%v{}_{}", p, c),
                            acc(lane, c, p));
    }
  }
  for (int64_t lane = 0; lane < tile.lanes; ++lane)
    for (int64_t c = 0; c < tile.vectors; ++c)
      body += fmt::format("      vector.store {}, %outT[%lane{}, %column{}] : {}, vector<16xf32>\n",
                          acc(lane, c, steps), lane, c, scratch.outT);
  return fmt::format("    vector.store %alpha, %laneScalars[%c0] : {}, vector<16xf32>\n"
                     "    %cTiles = arith.constant {} : index\n"
                     "    %cColumnGroups = arith.constant {} : index\n"
                     "    %cTileLanes = arith.constant {} : index\n"
                     "    %cTileFeatures = arith.constant {} : index\n"
                     "    scf.for %tile = %c0 to %cTiles step %c1 {{\n{}    }}\n",
                     scratch.laneScalars, tile.count(), tile.columnGroups, tile.lanes,
                     tile.vectors * kLanes, body);
}

/// `%sm#0` .. `%sm#15`: the block's scores with the positions a lane may not
/// see at the lowest float. Only a block that crosses the causal diagonal (or
/// the last position) is masked: a block every lane sees entirely (position
/// %j15 before the first lane's count, the smallest) keeps its scores.
static std::string maskedScores(const std::vector<std::string> &scores) {
  std::string masked, plain, yields;
  for (int p = 0; p < kLanes; ++p) {
    masked +=
        fmt::format("      %pos{0} = arith.index_cast %j{0} : index to i32\n"
                    "      %posV{0} = vector.broadcast %pos{0} : i32 to vector<16xi32>\n"
                    "      %sees{0} = arith.cmpi slt, %posV{0}, %countV : vector<16xi32>\n"
                    "      %masked{0} = arith.select %sees{0}, {1}, %lowestV : vector<16xi1>, "
                    "vector<16xf32>\n",
                    p, scores[size_t(p)]);
    plain += fmt::format("{}{}", p ? ", " : "", scores[size_t(p)]);
    yields += fmt::format("{}%masked{}", p ? ", " : "", p);
  }
  return fmt::format(
      "    %firstCount = vector.extractelement %countV[%c0 : index] : vector<16xi32>\n"
      "    %lastPos = arith.index_cast %j{5} : index to i32\n"
      "    %allSee = arith.cmpi slt, %lastPos, %firstCount : i32\n"
      "    %sm:{0} = scf.if %allSee -> ({1}) {{\n"
      "      scf.yield {2} : {1}\n"
      "    }} else {{\n{3}      scf.yield {4} : {1}\n"
      "    }}\n",
      kLanes, vectorTypes(kLanes), plain, masked, yields, kLanes - 1);
}

/// `values` folded pairwise by `operation` (an arith op taking two
/// vector<16xf32>, its attributes after the operands) into one; returns its
/// name. A tree, not a chain: 4 steps of latency for 16 values instead of 15.
static std::string pairwise(std::string &text, const std::string &prefix,
                            const std::string &operation, std::vector<std::string> values) {
  for (int level = 0; values.size() > 1; ++level) {
    std::vector<std::string> next;
    for (size_t i = 0; i + 1 < values.size(); i += 2) {
      next.push_back(fmt::format("{}{}_{}", prefix, level, i / 2));
      text += fmt::format("    {} = {} : vector<16xf32>\n", next.back(),
                          fmt::format(fmt::runtime(operation), values[i], values[i + 1]));
    }
    if (values.size() % 2)
      next.push_back(values.back());
    values = std::move(next);
  }
  return values[0];
}

std::string flashSoftmax(const AttentionKernel &kernel,
                         const std::vector<std::string> &blockScores) {
  const FlashScratch scratch = flashScratchTypes(kernel);
  const Bf16FlashScratch pairs = bf16FlashScratchTypes(kernel);
  std::vector<std::string> scores;
  for (int p = 0; p < kLanes; ++p)
    scores.push_back(fmt::format("%sm#{}", p));
  std::string text = maskedScores(blockScores);
  // Maxima without NaN propagation (vmaxps alone): a NaN score still reaches
  // the output through its exponential.
  const std::string blockMax = pairwise(text, "%bm", "arith.maxf {}, {} fastmath<nnan>", scores);
  text += fmt::format("    %mNew = arith.maxf %m, {} fastmath<nnan> : vector<16xf32>\n"
                      "    %mDrop = arith.subf %m, %mNew : vector<16xf32>\n"
                      "    %alpha = math.exp %mDrop : vector<16xf32>\n",
                      blockMax);
  std::vector<std::string> exponentials;
  for (int p = 0; p < kLanes; ++p) {
    text += fmt::format("    %d{0} = arith.subf %sm#{0}, %mNew : vector<16xf32>\n"
                        "    %e{0} = math.exp %d{0} : vector<16xf32>\n",
                        p);
    exponentials.push_back(fmt::format("%e{}", p));
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
  }
  const std::string blockSum = pairwise(text, "%bs", "arith.addf {}, {}", exponentials);
  return text + fmt::format("    %lScaled = arith.mulf %l, %alpha : vector<16xf32>\n"
                            "    %lNew = arith.addf %lScaled, {} : vector<16xf32>\n",
                            blockSum);
}

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
static std::string flashKeyBlock(const AttentionKernel &kernel, const AttentionTypes &types) {
  std::string text = "    %blockEnd = arith.addi %blockStart, %c16 : index\n"
                     "    %wholeBlock = arith.cmpi ule, %blockEnd, %maxCount : index\n";
  text += keyBlockView(kernel, types, "keys", "keysF");
  text += keyBlockView(kernel, types, "values", "valuesF");
  text += blockPositions();
  std::vector<std::string> scores;
  for (int p = 0; p < kLanes; ++p)
    scores.push_back(fmt::format("%s#{}", p));
  text += flashScores(kernel, types) + flashSoftmax(kernel, scores);
  return text + flashValues(kernel, types);
}

/// `%<out>0` .. `%<out>15` = the 16 x 16 transpose of `rows` (16
/// vector<16xf32> values): element j of output i is element i of row j. Four
/// rounds of two-source shuffles, each swapping one bit of the row and lane
/// indices (64 shuffles).
static std::string transpose16(const std::vector<std::string> &rows, const std::string &out) {
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
      next[size_t(i)] =
          last ? fmt::format("%{}{}", out, i) : fmt::format("%{}T{}_{}", out, round, i);
      next[size_t(i + size)] = last ? fmt::format("%{}{}", out, i + size)
                                    : fmt::format("%{}T{}_{}", out, round, i + size);
      for (const auto &[name, mask] :
           {std::pair{next[size_t(i)], low}, std::pair{next[size_t(i + size)], high}})
        text += fmt::format("    {} = vector.shuffle {}, {} [{}] : vector<16xf32>, "
                            "vector<16xf32>\n",
                            name, current[size_t(i)], current[size_t(i + size)], mask);
    }
    current = next;
  }
  return text;
}

std::string flashQueryTranspose(const AttentionKernel &kernel, const AttentionTypes &types) {
  const int64_t heads = kernel.headsPerWorkgroup();
  const FlashScratch scratch = flashScratchTypes(kernel);
  std::string text = "  scf.for %qc = %c0 to %cD step %c16 {\n";
  std::vector<std::string> rows;
  for (int lane = 0; lane < kLanes; ++lane) {
    text +=
        fmt::format("    %qr{0} = arith.minui %cP{1}, %lastRow : index\n"
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

std::string flashConstants(const AttentionKernel &kernel) {
  const int64_t heads = kernel.headsPerWorkgroup();
  std::string text =
      fmt::format("  %c0 = arith.constant 0 : index\n"
                  "  %c1 = arith.constant 1 : index\n"
                  "  %c2 = arith.constant 2 : index\n"
                  "  %c16 = arith.constant 16 : index\n"
                  "  %cD = arith.constant {} : index\n"
                  "  %scaleV = arith.constant dense<{:e}> : vector<16xf32>\n"
                  "  %zeroV = arith.constant dense<0.0> : vector<16xf32>\n"
                  "  %oneV = arith.constant dense<1.0> : vector<16xf32>\n"
                  "  %lowestV = arith.constant dense<0xFF800000> : vector<16xf32>\n"
                  "  %laneRows = arith.constant dense<[{}]> : vector<16xi32>\n",
                  kernel.headDim, kernel.scale,
                  listOf(kLanes, [&](int lane) { return std::to_string(lane / heads); }));
  for (int p = 0; p < kLanes; ++p)
    text += fmt::format("  %cP{0} = arith.constant {0} : index\n", p);
  return text;
}

std::string flashFunction(const AttentionKernel &kernel, const AttentionTypes &types) {
  const FlashScratch scratch = flashScratchTypes(kernel);
  const std::string copyParams = fmt::format(", %keysF: {0}, %valuesF: {0}", scratch.block);
  return fmt::format(
      R"mlir(
func.func private @{name}_flash(%q: {queryType}, %keys: {kvType}, %values: {kvType}, %out: {queryType}, %queryT: {queryTType}, %outT: {outTType}, %probabilities: {pType}, %laneScalars: {laneType}{copyParams}, %t0: index, %h0: index, %kv: index, %count0: index, %blockRows: index) {{
{constants}  %lastRow = arith.subi %blockRows, %c1 : index
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
      fmt::arg("constants", flashConstants(kernel)),
      fmt::arg("keyBlock", flashKeyBlock(kernel, types)),
      fmt::arg("queryTranspose", flashQueryTranspose(kernel, types)),
      fmt::arg("output", flashOutput(kernel, types)));
}

} // namespace q3::cpu::attention
