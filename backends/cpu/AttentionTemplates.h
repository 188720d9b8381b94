//===- AttentionTemplates.h - the pieces of the attention templates -------===//
//
// Internal to the attention kernel's source (AttentionSource.cpp and the
// decode, flash and bf16 flash files): scratch types and the text pieces
// one file builds and another uses.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "backends/cpu/KernelSource.h"

#include <cstdint>
#include <string>
#include <vector>

namespace q3::cpu::attention {

struct AttentionTypes {
  std::string query, kv;
  DType cache; // the keys' and values' element type
};

/// A comma-separated list of `count` items made by `item(i)`.
template <typename Item> std::string listOf(int count, Item item) {
  std::string text;
  for (int i = 0; i < count; ++i)
    text += (i ? ", " : "") + item(i);
  return text;
}

inline std::string vectorTypes(int count) {
  return listOf(count, [](int) { return std::string("vector<16xf32>"); });
}

/// The flash kernel's scratch, one set per thread (every buffer L1-sized):
/// the block's query vectors transposed and scaled, [D][lane]; the output
/// sums, [lane][D]; one key block's probabilities, [position][lane]; a key
/// block's keys and values as f32 when they are not read in place; and a
/// value per lane (the rescale factors, then the inverse sums).
struct FlashScratch {
  std::string queryT, outT, probabilities, block, laneScalars;
};

/// The bf16 flash kernel's scratch (bf16Prefill): the block's queries as
/// pairs of features, [D / 2][lane]; a key block's rows as bf16, [16][D]
/// (pairs: [16][D / 2]); its values with the positions paired, [8][D] pairs
/// (bf16: [8][2 D]); one key block's probabilities with the positions
/// paired, [8][lane]. The score and value loops read a key block's pairs
/// and its value pairs through views of either the scratch or the call's
/// rounded rows (keyPairsView, valuePairsView).
struct Bf16FlashScratch {
  std::string queryPairs, keyHalves, keyPairs, valueHalves, valuePairs, probabilityPairs;
  int64_t keyBytes, valueBytes;
  std::string keyPairsView, valuePairsView;
};

/// Rows of keys and of values a bf16 flash prefill keeps rounded for the
/// workgroups of one kernel call (a run of workgroups on one thread): 512
/// KiB of the thread scratch, 1024 positions for head_dim 128.
int64_t roundedRowsPerCall(const AttentionKernel &kernel);
/// Where the rounded values start in the thread scratch (the keys at 0).
int64_t roundedValuesOffset(const AttentionKernel &kernel);

/// The memref types of `kernel`'s query and cache views.
AttentionTypes typesOf(const AttentionKernel &kernel);

/// exp(score - max) over %scores<k>[0, count) in place, 16 positions at a
/// time, and the inverse of their sum broadcast as %inverseV<k>.
std::string slotSoftmax(int k, const std::string &max, const std::string &count);

/// @<name>_decode: attention of the one row %t0 for the workgroup's heads
/// %h0 .. (one KV head, %kv), over positions %from .. %to of %count0 in one pass,
/// kDecodeBlockPositions at a time with an online softmax: a block's keys
/// are scored (two positions per step), the running maximum, sum and value
/// sums are rescaled when the maximum rises, and the block's values added.
/// Every key and value row is read once for all the heads; the value sums
/// stay in registers across the blocks: the values pass over a block once
/// per group of kernel.decodeAccumulators columns, heads x that many
/// accumulators each.
/// With decodeSplits > 1 it also takes %direct, %partials and %record: the
/// output when %direct, else its records (splitDecode). Its %scores<k> hold
/// one block's scores, at their place in the block.
std::string decodeFunction(const AttentionKernel &kernel, const AttentionTypes &types);

/// Floats in each of decode's %scores<k>: a block's positions and the lanes
/// of the last vector read past its end. So decode's stack does not grow
/// with the context.
int64_t decodeScoreSlots();

/// The workspace's records of decode splits: [record][kSplitRecordHeader +
/// head_dim] f32, the maximum at 0, the sum at 1, the value sums from
/// kSplitRecordHeader.
std::string partialsType(const AttentionKernel &kernel);

/// The kernel's views of its workspace %wb (decodeSplits > 1): the head
/// groups' arrival counters %counters (i32, a cache line apart) and the
/// records %partials.
std::string splitWorkspaceViews(const AttentionKernel &kernel);

/// Workgroup %g's decode with splits: its run of positions (split %split of
/// head group %headGroup), `decodeCall` (@<name>_decode over %from .. %to,
/// normalized when %direct, else to its records from %record), then the
/// arrival count and, for the last to arrive, the merge.
std::string splitDecode(const AttentionKernel &kernel, const std::string &decodeCall);

/// @<name>_merge: head group records to the output rows (decodeSplits > 1).
std::string splitMergeFunction(const AttentionKernel &kernel);

/// The f32 flash kernel's scratch types for `kernel`'s head size.
FlashScratch flashScratchTypes(const AttentionKernel &kernel);

/// The rows %blockStart .. + 15 a flash key block reads, %<prefix>Row<p>
/// clamped to `lastRow` as %<prefix>Read<p>: rows past the last visible
/// position read that one (their scores are masked and their probabilities
/// 0, and no read passes the written rows).
std::string clampedBlockRows(const std::string &prefix, const std::string &indent,
                             const std::string &lastRow = "%lastPosition");

/// `result` (vector<16xi32>): lane i is the bf16 pair (low[i], high[i]),
/// the low one in the lower half (the pair vdpbf16ps multiplies).
std::string bf16Pairs(const std::string &result, const std::string &low, const std::string &high);

/// The bf16 flash kernel's scratch types and sizes for `kernel`'s head size.
Bf16FlashScratch bf16FlashScratchTypes(const AttentionKernel &kernel);

/// The prefetches of the key block's value rows (%blockStart .. + 15) that a
/// score loop step %i issues: over the loop's D (f32) or D / 2 (bf16) steps,
/// 16 rows x D / 16 lines, so the values are in L1 when the scores are done.
std::string valueRowPrefetches(const AttentionKernel &kernel, const AttentionTypes &types);

/// `%s:16`: the 16 lanes' scores of positions %blockStart .. + 15 as outer
/// products with f32 FMAs, one feature at a time (a key's feature broadcast
/// times the lanes' query feature).
std::string flashScores(const AttentionKernel &kernel, const AttentionTypes &types);

/// The bf16 value loop's prefetches of the next key block: of the call's
/// rounded key rows where the next block is among them, else `scratch` (the
/// cache rows it will be rounded from).
std::string nextBlockRoundedOr(const AttentionKernel &kernel, const std::string &scratch);

/// The value loop: the output sums %outT ([lane][D]) rescaled by the lanes'
/// %alpha and added the block's values times each lane's probability, one
/// tile of lanes x vectors (2 x 8 for D = 128: 16 accumulators) per
/// iteration of a loop over the tiles. Each step loads the tile's value
/// vectors once for its lanes and broadcasts each lane's probability from
/// memory for its vectors: f32 FMAs position by position, or vdpbf16ps on
/// pairs of positions (bf16Prefill). (Lanes unrolled in the text let LLVM
/// hoist every broadcast out of a column loop and spill them: 1.25x slower.)
/// Meanwhile the next block's key rows are prefetched, each tile its share
/// of the features.
std::string flashValues(const AttentionKernel &kernel, const AttentionTypes &types);

/// The causal mask of the block's `scores` (16 vector<16xf32> values, one
/// per position; masked only where the block crosses the diagonal), the
/// online softmax update of the running maxima %m and sums %l (%mNew, %lNew,
/// and the rescale %alpha of the old sums), and the block's probabilities:
/// f32 in %probabilities, or (bf16Prefill) as bf16 pairs of positions in
/// %probabilityPairs.
std::string flashSoftmax(const AttentionKernel &kernel, const std::vector<std::string> &scores);

/// The positions of the key block, %j0 .. %j15.
std::string blockPositions();

/// The block's query vectors, scaled, as %queryT [D][lane], 16 features at a
/// time through a transpose. Lanes past the block's rows repeat its last row
/// (their results are not stored).
std::string flashQueryTranspose(const AttentionKernel &kernel, const AttentionTypes &types);

/// The output: each lane of the block's rows gets its sums times its
/// inverse sum.
std::string flashOutput(const AttentionKernel &kernel, const AttentionTypes &types);

/// The constants both flash kernels start with: %c0, %c1, %c2, %c16, %cD
/// (head_dim), %scaleV, %zeroV, %oneV, %lowestV (-inf), %laneRows (each
/// lane's row in the block) and the positions %cP0 .. %cP15.
std::string flashConstants(const AttentionKernel &kernel);

/// @<name>_flash: causal attention of rows %t0 .. %t0 + %blockRows - 1 for
/// the workgroup's heads (one KV head, %kv), flash-attention style: the
/// block's (row, head) query vectors are the 16 lanes of every vector (lane
/// = row x heads + head), the keys go by in blocks of 16 positions, and the
/// softmax runs online (a running maximum and sum per lane, the output sums
/// rescaled when the maximum rises), so each key and value row is read once
/// for all 16 query vectors, no horizontal sums are needed, and the scratch
/// does not grow with the context. Row r sees %count0 + r positions.
std::string flashFunction(const AttentionKernel &kernel, const AttentionTypes &types);

/// @<name>_flash_bf16: the bf16 prefill (bf16Prefill) of rows %tBase ..
/// %tBase + %blockRowsAll - 1, up to prefillRowSets blocks of 16 / heads rows:
/// per key block the keys are rounded once (and, after the scores, the
/// values paired once) for every set; one loop scores the keys for all the
/// sets, then each set runs its online softmax and adds its values in its
/// own region. A set past the rows repeats the first set's rows and stores
/// nothing. Key blocks within the call's rounded rows (%roundedKeyBytes,
/// %roundedValueBytes: %roundedBlocks blocks; %roundedState holds the KV
/// head and the blocks rounded so far) are rounded once per call, keys and
/// values together, by the first of its workgroups to read them.
std::string bf16FlashFunction(const AttentionKernel &kernel, const AttentionTypes &types);

} // namespace q3::cpu::attention
