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
// the values as vectors times each lane's probability (a loop over tiles
// of 2 lanes x 8 vectors of accumulators for head_dim 128), and the softmax
// runs online, so each key and value row is read once per block and the
// scratch is fixed (~33 KiB per thread).
// With bf16Prefill (q3.lowering's matmul = avx512bf16) both loops run
// vdpbf16ps on bf16 pairs, half the steps: the queries paired by feature,
// each key block's rows rounded (a row is its feature pairs), the
// probabilities and the block's values paired by position; a workgroup
// leads two blocks of rows, which share each key block's rounded copies.
// Decode (one row) makes one pass over the keys and values, 512 positions
// at a time with an online softmax: it scores a block's keys, two positions
// per step for its P heads, then adds the block's values, so each streams
// as one long run, each row prefetched q3.lowering's prefetch_bytes ahead
// (the cache is on 4 KiB pages, where the hardware prefetchers stop); with
// decode splits a head group's positions go to several workgroups, merged
// by the last to finish (AttentionDecodeSplitSource.cpp). Other
// head sizes take a scalar template, one query head and one row per
// workgroup. A bf16 or f16 cache is widened exactly as it is loaded.
//
// Workgroup g is row g % rows of head group g / rows: head-major, so the
// consecutive workgroups a thread runs share their keys and values, which
// stay in L2 from one row block to the next.
//===----------------------------------------------------------------------===//
#include "backends/cpu/AttentionTemplates.h"
#include "backends/cpu/KernelSource.h"
#include "backends/cpu/KernelSourceUtil.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>

namespace q3::cpu {

using namespace detail;
using namespace attention;

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

namespace attention {

AttentionTypes typesOf(const AttentionKernel &kernel) {
  // One layer of the cache: [kvHeads][capacity][D], each head's positions contiguous.
  return {
      fmt::format("memref<?x{}x{}xf32>", kernel.queryHeads, kernel.headDim),
      fmt::format("memref<{}x?x{}x{}>", kernel.kvHeads, kernel.headDim, storageType(kernel.cache)),
      kernel.cache};
}

/// The kernel's signature, constants and views (%q, %keys, %values, %out,
/// %map), shared by both templates.
static std::string attentionOpening(const AttentionKernel &kernel, const AttentionTypes &types) {
  return fmt::format(
      R"mlir(
memref.global "private" constant @{name}_kv_head_map : memref<{queryHeads}xi64> = dense<[{map}]>

func.func @q3k_{name}(%qb: memref<?xi8>, %kb: memref<?xi8>, %vb: memref<?xi8>, %ob: memref<?xi8>{workspace}{scratch}, %rows: index, %visible: index, %capacity: index, %wgBegin: index, %wgEnd: index) {{
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
{workspaceViews})mlir",
      fmt::arg("name", kernel.name),
      fmt::arg("workspace", kernel.decodeSplits > 1 ? ", %wb: memref<?xi8>" : ""),
      fmt::arg("scratch", kernel.threadScratch().empty() ? "" : ", %scratch: memref<?xi8>"),
      fmt::arg("workspaceViews", kernel.decodeSplits > 1 ? splitWorkspaceViews(kernel) : ""),
      fmt::arg("queryHeads", kernel.queryHeads), fmt::arg("map", fmt::join(kernel.kvHeadMap, ", ")),
      fmt::arg("d", kernel.headDim), fmt::arg("scale", kernel.scale),
      fmt::arg("queryType", types.query), fmt::arg("kvType", types.kv));
}

/// The start of workgroup %g's body: its row %t and first query head %h0
/// (head-major: g = head group x rows + row, or with decode splits
/// g = (head group x splits + split) x rows + row), the KV head %kv they read
/// and the positions row %t sees, %count0.
static std::string workgroupPrologue(int64_t headsPerWorkgroup, int64_t queryHeads,
                                     int64_t splits = 1) {
  const std::string headGroup =
      splits > 1 ? fmt::format("    %headSplit = arith.divui %g, %rows : index\n"
                               "    %cSplitCount = arith.constant {} : index\n"
                               "    %headGroup = arith.divui %headSplit, %cSplitCount : index\n"
                               "    %split = arith.remui %headSplit, %cSplitCount : index\n",
                               splits)
                 : "    %headGroup = arith.divui %g, %rows : index\n";
  return fmt::format(R"mlir(    %t = arith.remui %g, %rows : index
{2}    %cHeads = arith.constant {0} : index
    %h0 = arith.muli %headGroup, %cHeads : index
    %kv64 = memref.load %map[%h0] : memref<{1}xi64>
    %kv = arith.index_cast %kv64 : i64 to index
    %seen = arith.addi %cached, %t : index
    %count0 = arith.addi %seen, %c1 : index
)mlir",
                     headsPerWorkgroup, queryHeads, headGroup);
}

/// The decode branch of workgroup %g: @<name>_decode over all %count0
/// positions, or (decodeSplits > 1) over its split's run, then the arrival
/// count and the merge (splitDecode). `scores` and `scoreTypes` are the
/// per-head score buffers' arguments and types.
static std::string decodeBranch(const AttentionKernel &kernel, const AttentionTypes &types,
                                const std::string &scores, const std::string &scoreTypes) {
  const bool splits = kernel.decodeSplits > 1;
  const std::string call = fmt::format(
      "func.call @{0}_decode(%q, %keys, %values, %out{1}, %t, %h0, %kv, %count0, {5}) : "
      "({2}, {3}, {3}, {2}{4}, index, index, index, index, {6}) -> ()",
      kernel.name, scores, types.query, types.kv, scoreTypes,
      splits ? "%from, %to, %direct, %partials, %record" : "%c0, %count0",
      splits ? "index, index, i1, " + partialsType(kernel) + ", index" : "index, index");
  return splits ? splitDecode(kernel, call) : "      " + call + "\n";
}

/// %leads: whether workgroup %g runs the prefill block of row %t (the block's
/// first row; with decode splits, in split 0 of its head group).
static std::string prefillLead(const AttentionKernel &kernel) {
  if (kernel.decodeSplits == 1)
    return "      %leads = arith.cmpi eq, %blockOffset, %c0 : index\n";
  return "      %blockLead = arith.cmpi eq, %blockOffset, %c0 : index\n"
         "      %firstSplit = arith.cmpi eq, %split, %c0 : index\n"
         "      %leads = arith.andi %blockLead, %firstSplit : i1\n";
}

/// The bf16 flash prefill's rounded rows for the call's workgroups (see
/// roundedRowsPerCall), in the thread scratch (AttentionKernel::
/// threadScratch): the visible positions' blocks up to that many, none
/// rounded yet (%roundedState: no KV head, no rows).
static std::string roundedRowsBuffers(const AttentionKernel &kernel) {
  return fmt::format(
      "  %capacityBlocks = arith.constant {0} : index\n"
      "  %c15 = arith.constant 15 : index\n"
      "  %visibleUp = arith.addi %visible, %c15 : index\n"
      "  %visibleBlocks = arith.divui %visibleUp, %c16 : index\n"
      "  %roundedBlocks = arith.minui %visibleBlocks, %capacityBlocks : index\n"
      "  %cRoundedBlockBytes = arith.constant {1} : index\n"
      "  %roundedBytes = arith.muli %roundedBlocks, %cRoundedBlockBytes : index\n"
      "  %cRoundedValuesAt = arith.constant {2} : index\n"
      "  %roundedKeyBytes = memref.view %scratch[%c0][%roundedBytes] : memref<?xi8> to "
      "memref<?xi8>\n"
      "  %roundedValueBytes = memref.view %scratch[%cRoundedValuesAt][%roundedBytes] : "
      "memref<?xi8> to memref<?xi8>\n"
      "  %roundedState = memref.alloca() : memref<2xindex>\n"
      "  %noKvHead = arith.constant -1 : index\n"
      "  memref.store %noKvHead, %roundedState[%c0] : memref<2xindex>\n"
      "  memref.store %c0, %roundedState[%c1] : memref<2xindex>\n",
      roundedRowsPerCall(kernel) / 16, 16 * 2 * kernel.headDim, roundedValuesOffset(kernel));
}

/// A prefill runs @<name>_flash on blocks of 16 / heads rows, or
/// @<name>_flash_bf16 on prefillRowSets such blocks (the workgroup of the
/// first row does them, in split 0 of its head group, the others nothing);
/// decode runs @<name>_decode (decodeBranch). A source of one path
/// (AttentionKernel::paths) skips the other's rows.
static std::string vectorAttention(const AttentionKernel &kernel, const AttentionTypes &types) {
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
  const std::string flash = fmt::format(
      "func.call @{0}_flash(%q, %keys, %values, %out, %queryT, %outT, %probabilities, "
      "%laneScalars, %keysF, %valuesF, %t, %h0, %kv, %count0, %blockRows) : ({1}, {2}, {2}, "
      "{1}, {3}, {4}, {5}, {6}, {7}, {7}, index, index, index, index, index) -> ()",
      kernel.name, types.query, types.kv, scratch.queryT, scratch.outT, scratch.probabilities,
      scratch.laneScalars, scratch.block);
  const std::string flashBf16 = fmt::format(
      "func.call @{0}_flash_bf16(%q, %keys, %values, %out, %roundedKeyBytes, %roundedValueBytes, "
      "%roundedState, %roundedBlocks, %visible, %t, %h0, %kv, %count0, %blockRows) : ({1}, {2}, "
      "{2}, {1}, memref<?xi8>, memref<?xi8>, memref<2xindex>, index, index, index, index, index, "
      "index, index) -> ()",
      kernel.name, types.query, types.kv);
  if (kernel.hasPrefill() && kernel.bf16Prefill)
    buffers += roundedRowsBuffers(kernel);
  const int64_t leadRows = kernel.prefillBlockRows() * kernel.prefillRowSets;
  std::string functions;
  if (kernel.hasDecode())
    functions +=
        decodeFunction(kernel, types) + (kernel.decodeSplits > 1 ? splitMergeFunction(kernel) : "");
  if (kernel.hasPrefill())
    functions +=
        kernel.bf16Prefill ? bf16FlashFunction(kernel, types) : flashFunction(kernel, types);
  const std::string prefill =
      fmt::format(R"mlir(      %blockOffset = arith.remui %t, %cBlock : index
{leads}      scf.if %leads {{
        %rowsLeft = arith.subi %rows, %t : index
        %blockRows = arith.minui %rowsLeft, %cBlock : index
        {flash}
      }}
)mlir",
                  fmt::arg("leads", prefillLead(kernel)),
                  fmt::arg("flash", kernel.bf16Prefill ? flashBf16 : flash));
  return functions + attentionOpening(kernel, types) +
         fmt::format(
             R"mlir(  %cBlock = arith.constant {blockRows} : index
  %oneRow = arith.cmpi eq, %rows, %c1 : index
  %c16 = arith.constant 16 : index
  %scoreSlots = arith.constant {scoreSlots} : index
{buffers}  scf.for %g = %wgBegin to %wgEnd step %c1 {{
{prologue}    scf.if %oneRow {{
{decode}    }} else {{
{prefill}    }}
  }}
  return
}}
)mlir",
             fmt::arg("blockRows", leadRows), fmt::arg("buffers", buffers),
             fmt::arg("scoreSlots", decodeScoreSlots()),
             fmt::arg("prologue", workgroupPrologue(heads, kernel.queryHeads, kernel.decodeSplits)),
             fmt::arg("decode", kernel.hasDecode()
                                    ? decodeBranch(kernel, types, decodeScores, decodeScoreTypes)
                                    : ""),
             fmt::arg("prefill", kernel.hasPrefill() ? prefill : ""));
}

/// One query head per workgroup, one feature at a time: head sizes that are
/// not a multiple of 16.
static std::string scalarAttention(const AttentionKernel &kernel, const AttentionTypes &types) {
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

} // namespace attention

ThreadScratch AttentionKernel::threadScratch() const {
  ThreadScratch scratch;
  if (bf16Prefill && hasPrefill())
    scratch.fixedBytes = 2 * roundedValuesOffset(*this); // the keys, then as many values
  return scratch;
}

std::string attentionSource(const AttentionKernel &kernel) {
  if (kernel.decodeSplits < 1 || kernel.decodeSplits > AttentionKernel::kMaxDecodeSplits ||
      (kernel.decodeSplits > 1 && !kernel.vectorized()))
    throw std::invalid_argument("attention: " + std::to_string(kernel.decodeSplits) +
                                " decode splits for head_dim " + std::to_string(kernel.headDim) +
                                " (1 to 16, and 1 unless head_dim is a multiple of 16)");
  if (!kernel.vectorized() && kernel.paths != AttentionKernel::Paths::PrefillAndDecode)
    throw std::invalid_argument("attention: only the vector template (head_dim a multiple of 16, "
                                "not " +
                                std::to_string(kernel.headDim) + ") runs one path alone");
  const AttentionTypes types = typesOf(kernel);
  return kernel.vectorized() ? vectorAttention(kernel, types) : scalarAttention(kernel, types);
}

} // namespace q3::cpu
