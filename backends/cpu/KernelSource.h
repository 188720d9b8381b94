//===- KernelSource.h - MLIR source of the CPU kernels --------------------===//
//
// Each kernel kind is an MLIR function over scf/vector/memref/arith/math,
// specialized to the model's shapes and written as text (one template per
// kind), so the generated kernel can be dumped and read like any other IR.
// Every kernel follows the buffer convention of runtime/KernelABI.h: tensor
// arguments are raw byte buffers (memref<?xi8>) viewed at their real types.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "backends/common/DTypes.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace q3::cpu {

using backends::DType;
using backends::dtypeBytes;

/// The instructions of the prefill products (FusedLinearKernel::prefillMatmul).
enum class PrefillMatmul { F32, Avx512Bf16, Amx };

/// How far ahead of its loads a one-row loop prefetches what it streams
/// (q3.lowering's prefetch_bytes; `q3c compile --tune` measures it), as
/// `memref.prefetch`. On the first 2-core machine a bf16 matrix-vector
/// product streamed ~15.6 GB/s from DRAM with the hardware prefetchers alone
/// and 22.7-25 GB/s with 8 KiB ahead; on AMD family 26 decode attention after
/// 2048 tokens took 13.1-14.4 ms per token without a prefetch and 11.0-12.2
/// with 2 to 32 KiB ahead (the KV cache is on 4 KiB pages, where the hardware
/// prefetchers stop). On an AMD EPYC family 26 VM whose weights sat on huge
/// pages the products decoded 15% faster with no prefetch at all, so the
/// tuner measures that too.
inline constexpr int64_t kDefaultPrefetchBytes = 8192;
/// prefetch_bytes = none: the loop issues no prefetch (the value of
/// ir::LoweringConfigAttr::kNoPrefetch, which this header cannot include).
inline constexpr int64_t kNoPrefetch = -1;
/// Runs of memory a one-row (decode) loop reads side by side when nothing
/// was measured (q3.lowering's decode_streams, cpu-set-decode-streams; the
/// decode tuner's default candidate).
inline constexpr int64_t kDefaultDecodeStreams = 4;

/// Memory one call of a kernel takes beside its operands, on the thread that
/// runs it: `fixedBytes` plus `rowBytes` per row of the dispatch
/// (q3.lowering's thread_scratch; the runtime passes each thread's region
/// as the kernel's last buffer, runtime/KernelABI.h).
struct ThreadScratch {
  int64_t fixedBytes = 0, rowBytes = 0;
  bool empty() const { return fixedBytes == 0 && rowBytes == 0; }
  int64_t bytesFor(int64_t rows) const { return fixedBytes + rowBytes * rows; }
};

/// Where each part of a thread's scratch starts is a multiple of this.
inline constexpr int64_t kScratchAlignment = 64;

/// The weight rows a product's decode loop reads side by side at
/// `streams` (q3.lowering's decode_streams): SwiGLU reads a gate and an up
/// row for each output, so at least two.
inline int64_t decodeRowsSideBySide(bool swiglu, int64_t streams) {
  return swiglu ? std::max<int64_t>(2, streams) : streams;
}

/// The shape of one q3.fused_linear kernel (q3.linear is the plain case).
struct FusedLinearKernel {
  std::string name;        // symbol suffix: q3_kernel_<name>
  int64_t inFeatures = 0;  // K
  int64_t outFeatures = 0; // columns of the result
  DType weight = DType::F32;
  std::optional<double> normEps; // RMSNorm prologue
  bool swiglu = false;           // weight has 2 x outFeatures rows: gate over up
  bool residual = false;
  /// Apply the RMSNorm gain to the input in the prologue (x * gain, a `gain`
  /// buffer after the weight) instead of reading a weight with the gain folded
  /// in: exact, and the weight keeps the checkpoint's (narrower) dtype.
  std::optional<DType> prologueGain;
  /// The weight is bound in the column-block layout of runtime/WeightLayout.h
  /// (bf16 or f16; weightRows() % 16 == 0, inFeatures % 2 == 0): the prefill
  /// and decode loops then run as 6 x 32 and 1 x 32 register tiles without
  /// horizontal sums. See columnBlocksFit().
  bool columnBlocks = false;
  /// The weight stays row-major (the checkpoint's bytes, mapped at load) and
  /// each prefill packs the column blocks it multiplies, two blocks of 16 rows
  /// at a time, into a buffer the register tiles then read from cache;
  /// decode reads the rows directly. Load copies nothing, prefill pays the
  /// packing once per call (bf16 or f16, like columnBlocks).
  bool panelsPerCall = false;
  /// The rows of each buffer the weight comes in, when it is a concatenation
  /// the kernel reads part by part (cpu-sink-weight-concat; each a multiple of
  /// 16): packed per call, or row-major (not with columnBlocks). Empty: one
  /// buffer.
  std::vector<int64_t> weightParts;
  /// How prefill (rows > 1) multiplies a column-block weight. F32: 6-row
  /// register tiles of f32 FMAs on the exactly widened weights. The others
  /// round the activations to bf16 (as Hugging Face's bf16 inference does) and
  /// multiply bf16 pairs with f32 accumulation: Avx512Bf16 with vdpbf16ps in
  /// the same 6-row tiles (twice the multiply-adds per instruction); Amx with
  /// the tile unit of AMX-BF16 on 32 x 32 output tiles, for 16 rows or more
  /// (needs inFeatures % 32 == 0, see amxFits()). Decode and the rows the
  /// tiles leave stay f32 either way. An f16 weight takes F32 only (its
  /// halves widened exactly by vcvtph2ps).
  PrefillMatmul prefillMatmul = PrefillMatmul::F32;
  /// Rows of the column-block prefill register tile (each weight load serves
  /// this many rows x 2 blocks of 16 outputs; the q3.lowering tile).
  int64_t prefillTileRows = 6;
  /// Decode prefetches the weight this many bytes ahead of its loads
  /// (kNoPrefetch: not at all).
  int64_t prefetchBytes = kDefaultPrefetchBytes;
  bool prefetches() const { return prefetchBytes != kNoPrefetch; }
  /// Decode reads this many weight rows side by side (q3.lowering's
  /// decode_streams: 1, 2 or 4); SwiGLU reads a gate and an up row for each
  /// output, so at least two.
  int64_t decodeStreams = kDefaultDecodeStreams;
  /// Vector accumulators (16 f32 lanes each) decode's row loop sums each
  /// weight row into: 4, 2 or 1 (q3.lowering's decode_accumulators; its
  /// 64-element steps add their four 16-element products into accumulator
  /// i % this). Not with columnBlocks, whose decode sums column blocks.
  int64_t decodeAccumulators = 4;
  int decodeRowsSideBySide() const { return int(cpu::decodeRowsSideBySide(swiglu, decodeStreams)); }
  /// The output columns one side-by-side read serves.
  int decodeRuns() const { return swiglu ? decodeRowsSideBySide() / 2 : decodeRowsSideBySide(); }
  bool amxFits() const {
    return columnBlocks && weight == DType::BF16 && inFeatures % kAmxDepth == 0;
  }
  static constexpr int64_t kAmxDepth = 32; // k per AMX step: 16 rows of 64 bytes
  static constexpr int64_t kColumnsPerWorkgroup = 64;
  bool columnBlocksFit() const {
    return weight != DType::F32 && outFeatures % 16 == 0 && inFeatures % 2 == 0;
  }
  /// The rows of each weight buffer (one entry unless weightParts).
  std::vector<int64_t> partRows() const {
    return weightParts.empty() ? std::vector<int64_t>{weightRows()} : weightParts;
  }
  /// Whether the prefill runs the column-block register tiles.
  bool tiledPrefill() const { return columnBlocks || panelsPerCall; }
  int64_t weightRows() const { return swiglu ? 2 * outFeatures : outFeatures; }
  int64_t workgroups() const {
    return (outFeatures + kColumnsPerWorkgroup - 1) / kColumnsPerWorkgroup;
  }
  /// Whether prefill rounds its activations to bf16 (vdpbf16ps or AMX tiles).
  bool roundsActivations() const { return tiledPrefill() && prefillMatmul != PrefillMatmul::F32; }
  /// The most rows a prefill multiplies against the weight rows in place,
  /// one pass over them for all its rows (vdpbf16ps on k pairs, no panels),
  /// instead of packing panels: the third entry of the q3.lowering tile
  /// (cpu-select-in-place-rows); 1: every prefill packs.
  int64_t inPlacePrefillRows = 1;
  /// Whether the kernel can: a per-call bf16 weight with the avx512bf16
  /// prefill whose K/2 is a multiple of 16.
  bool inPlacePrefillFits() const {
    return panelsPerCall && prefillMatmul == PrefillMatmul::Avx512Bf16 && weight == DType::BF16 &&
           (inFeatures / 2) % 16 == 0;
  }
  /// The most it may be: 7 rows x 4 weight rows read side by side are 28
  /// accumulators of the 32 vector registers.
  static constexpr int64_t kMaxInPlacePrefillRows = 7;
  static constexpr int64_t kAmxTileRows = 32; // AMX rounds its rows up to a multiple

  /// The thread scratch of one call, in this order: the panel a per-call
  /// prefill packs a pair of column blocks into (2 x K x 32 bytes), at 0;
  /// the gain-scaled activations at gainScratchOffset() (K f32 per row of
  /// the call, or one row, decode's, where the prefill rounds: it scales as
  /// it rounds); the bf16-rounded activations (rows x K i16; AMX: rows
  /// rounded up to 32) at roundedScratchOffset(). Offsets are multiples of
  /// kScratchAlignment.
  ThreadScratch threadScratch() const;
  int64_t panelBytes() const { return panelsPerCall ? 64 * inFeatures : 0; }
  int64_t gainScratchOffset() const;
  int64_t roundedScratchOffset() const;
};

/// MLIR source of `func.func @q3k_<name>(x, w, [gain,] [residual,] y, rows, visible,
/// capacity, wgBegin, wgEnd)` and its private helpers. Grid: column tiles (workgroups()).
std::string fusedLinearSource(const FusedLinearKernel &kernel);

/// q3.embedding: rows of a [vocab, hidden] table, widened to f32. Grid: rows.
/// Token ids are checked by the runtime before the dispatch.
struct EmbeddingKernel {
  std::string name;
  int64_t vocab = 0, hidden = 0;
  DType table = DType::F32;
};
/// `@q3k_<name>(table, tokens: i32, y, rows, visible, capacity, wgBegin, wgEnd)`: the
/// operand order of q3.embedding, like every kernel here.
std::string embeddingSource(const EmbeddingKernel &kernel);

/// q3.qk_norm_rope_cache. The K and V caches are [layers][kvHeads][capacity][headDim]
/// of `cache` (F32, or BF16 rounded to nearest even). Grid: rows x query heads;
/// workgroup (t, h) also handles KV head h if h < kvHeads.
struct QKNormRopeCacheKernel {
  std::string name;
  int64_t queryHeads = 0, kvHeads = 0, headDim = 0;
  DType gains = DType::F32;
  double eps = 1e-6, theta = 10000.0;
  DType cache = DType::F32;
};
/// `@q3k_<name>(qkv, q_gain, k_gain, k_cache, v_cache, query, rows, visible, capacity,
/// layer, start_pos, wgBegin, wgEnd)`.
std::string qkNormRopeCacheSource(const QKNormRopeCacheKernel &kernel);

/// q3.attention over one layer's cached keys and values ([kvHeads][capacity][headDim];
/// each KV head's positions are contiguous, so the scores stream them).
/// Grid: rows x workgroupsPerRow(), head-major (workgroup g is row g % rows of
/// head group and split (g / rows) / decodeSplits, (g / rows) % decodeSplits);
/// a workgroup handles headsPerWorkgroup() query heads that share one KV
/// head, so each key and value load serves them all, and a prefill's rows go
/// in blocks of prefillBlockRows(), prefillRowSets blocks to the split-0
/// workgroup of their first row.
struct AttentionKernel {
  std::string name;
  int64_t queryHeads = 0, kvHeads = 0, headDim = 0;
  std::vector<int64_t> kvHeadMap; // query head -> KV head
  double scale = 1.0;
  DType cache = DType::F32; // of the keys and values (F32, BF16 or F16)
  /// Decode prefetches the keys and values this many bytes ahead of its
  /// loads (kNoPrefetch: not at all).
  int64_t prefetchBytes = kDefaultPrefetchBytes;
  bool prefetches() const { return prefetchBytes != kNoPrefetch; }
  /// Decode reads each block's keys, then its values, as this many runs side
  /// by side (q3.lowering's decode_streams); 1: one run, keys in pairs of
  /// positions. Needs vectorized().
  int64_t decodeStreams = kDefaultDecodeStreams;
  /// Decode sums this many 16-lane value columns of each head per pass over
  /// a block's values (q3.lowering's decode_accumulators; at most
  /// valueColumns()): heads x this many accumulators stay in registers, the rest
  /// of a value row waits for the next pass. Needs vectorized().
  int64_t decodeAccumulators = 8;
  /// The flash prefill multiplies bf16 pairs with vdpbf16ps (q3.lowering's
  /// `matmul = avx512bf16`): the scaled queries, keys, probabilities and
  /// values are rounded to bf16 (as Hugging Face's bf16 inference does), the
  /// sums and the softmax stay f32. Needs bf16Flashable().
  bool bf16Prefill = false;
  /// Blocks of prefill rows one workgroup runs (q3.lowering's third tile
  /// entry): the bf16 flash kernel's sets share each key block's rounded
  /// copies; the f32 one runs one block.
  int64_t prefillRowSets = 1;
  static constexpr int64_t kMaxPrefillRowSets = 4;
  /// The sets cpu-assign-grids gives the bf16 flash kernel unless q3c
  /// compile's tuner measured another count faster: with one, the key and
  /// value copies were ~17% of attention's time; two cut attention at
  /// pp2048 by ~17% (0.6B shape, AMD family 26).
  static constexpr int64_t kBf16PrefillRowSets = 2;
  /// head_dim a multiple of 32: a key row is whole 32-feature vectors of pairs.
  bool bf16Flashable() const { return vectorized() && headDim % 32 == 0; }
  /// With head_dim a multiple of 16: the largest of 8, 5, 4, 3 and 2 such
  /// that every aligned run of that many query heads shares its KV head (the
  /// whole GQA group for Qwen3's ratios 2, 4, 5 and 8), else 1.
  int64_t headsPerWorkgroup() const;
  /// Decode's splits of the positions (q3.lowering's fourth tile entry): a
  /// head group's positions go to this many workgroups, in runs of at least
  /// splitPositions, so more threads than head groups stream the cache; each
  /// writes its running maxima, sums and value sums to the workspace, and
  /// the last to finish (an atomic count per head group) merges them into
  /// the output and resets the count. A context of at most splitPositions
  /// runs in one workgroup, as without splits. Needs vectorized().
  int64_t decodeSplits = 1;
  static constexpr int64_t kMaxDecodeSplits = 16;
  /// The fewest positions a decode split takes: below ~512 the partial
  /// results and the merge cost more than another thread saves.
  int64_t splitPositions = kDecodeSplitPositions;
  static constexpr int64_t kDecodeSplitPositions = 512;
  int64_t headGroups() const { return queryHeads / headsPerWorkgroup(); }
  int64_t workgroupsPerRow() const { return headGroups() * decodeSplits; }
  /// The splits that cover `threads` threads with the head groups, at most
  /// kMaxDecodeSplits (cpu-split-decode-attention's choice unless measured).
  int64_t coveringDecodeSplits(int64_t threads) const;
  /// The workspace decode splits need (q3.lowering's workspace_bytes): an
  /// arrival count per head group (a cache line each), then a record of
  /// kSplitRecordHeader + headDim floats per head group, split and head; 0
  /// without splits.
  int64_t workspaceBytes() const;
  /// The thread scratch of one call (q3.lowering's thread_scratch): the bf16
  /// flash prefill's rounded key rows, then its rounded value rows, as many
  /// as a call rounds at most (roundedRowsPerCall); nothing otherwise.
  ThreadScratch threadScratch() const;
  static constexpr int64_t kSplitRecordHeader = 16; // floats: the maximum, the sum, padding
  /// The rows of one prefill block: with head_dim a multiple of 16, 16 /
  /// headsPerWorkgroup() (its query vectors are the 16 lanes of the flash
  /// kernel's vectors); other head sizes run a row at a time.
  int64_t prefillBlockRows() const { return vectorized() ? 16 / headsPerWorkgroup() : 1; }
  /// head_dim a multiple of 16: the vector templates (flash prefill, one-pass
  /// decode that prefetches prefetchBytes ahead); else the scalar one.
  bool vectorized() const { return headDim % 16 == 0; }
  /// The 16-lane columns of a key or value row (the vector templates').
  int64_t valueColumns() const { return headDim / 16; }
  /// What the vector template's source holds. A model's kernel runs both; a
  /// tuner measures one path alone and compiles it in about half the time
  /// (0.34 against 0.85 s for decode attention's four candidates on 2
  /// threads, AMD family 25). The other path's rows are skipped.
  enum class Paths { PrefillAndDecode, PrefillOnly, DecodeOnly };
  Paths paths = Paths::PrefillAndDecode;
  bool hasPrefill() const { return paths != Paths::DecodeOnly; }
  bool hasDecode() const { return paths != Paths::PrefillOnly; }
};
/// `@q3k_<name>(query, keys, values, out, rows, visible, capacity, wgBegin, wgEnd)`;
/// with decode splits, the workspace after `out`; with a thread scratch, it
/// after them.
std::string attentionSource(const AttentionKernel &kernel);

} // namespace q3::cpu
