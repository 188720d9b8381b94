//===- ColumnBlockLinear.h - pieces of fused_linear on column blocks ------===//
//
// What the column-block fused_linear (ColumnBlockLinearSource.cpp) shares
// with its AMX prefill (AmxLinearSource.cpp): the weight's view, the epilogue
// that stores 16 columns, and the activations rounded to bf16.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "backends/cpu/KernelSource.h"

#include <string>
#include <vector>

namespace q3::cpu::detail {

/// Output columns of one weight block ([N/16][K/2][16][2]).
inline constexpr int64_t kBlock = 16;

struct ColumnBlockLayout {
  int64_t k, pairs, blocks, outBlocks;
  std::string xType, yType, weightType, flatType;
  std::string pairType;  // bf16-rounded activations, (k, k+1) per i32
  std::string roundType; // the same, one i16 per k
};
ColumnBlockLayout columnBlockLayout(const FusedLinearKernel &kernel);

/// @<name>_tile<R>[_bf16](x, w, t0, b0, b1) -> 2R accumulators, row-major
/// (row r: block b0, then block b1) of rows t0 .. t0+R-1 against blocks b0
/// and b1 of `w` (l.weightType). With `bf16`, x is the [rows][K/2] i32 pairs
/// of bf16-rounded activations. With `prefetchNext` (@<name>_tile<R>[_bf16]
/// _prefetching), the function also takes the next pair's two blocks as i32
/// memrefs and first elements (pfA, pfBaseA, pfB, pfBaseB; a line is 16
/// elements) and this tile's share of their lines (pfFirst, pfShift,
/// pfEnd): every 2^pfShift k steps, step kp prefetches line
/// min(pfFirst + kp >> pfShift, pfEnd) of both blocks (prefetchShare).
std::string tileFunction(const FusedLinearKernel &kernel, const ColumnBlockLayout &l, int rows,
                         bool bf16, bool prefetchNext = false);

/// The share of the next block pair's K/2 lines per block (one per k pair)
/// each of the %tiles row tiles prefetches (%pfLinesPerTile) and the shift
/// that spreads it over a tile's k loop once (%pfShift: the largest with
/// 2^s k steps per line); defines %cLastLine for pfEnd. Expects %tiles
/// and %c1.
std::string prefetchShare(const ColumnBlockLayout &l);

/// In the loop over block pairs (%bA, %bB, `step` blocks apart from the
/// next): the next pair's blocks %nextA and %nextB, clamped to
/// %cLastBlock, whose lines the row tiles prefetch.
std::string nextBlockPair(const std::string &step);

/// In the loop over row tiles (%t, step %cTileRows): %pfFirst, the first
/// line of this tile's share.
std::string prefetchFirstLine();

/// A prefetching tile's arguments after its `blocks`: the next pair's
/// blocks `a` and `b` (i32 views) from elements `baseA` and `baseB`, and
/// the share (prefetchShare, prefetchFirstLine).
std::string prefetchArguments(const std::string &a, const std::string &baseA,
                              const std::string &b, const std::string &baseB);

/// The calls that run one tile of `rows` rows from row %t and store it; the
/// tile function's arguments after x are `blocks` (weight view, row, the two
/// blocks), then `prefetch` when given (the prefetching tile's arguments).
/// SwiGLU stores gate*up into output block %bA; plain kernels store both
/// blocks (the second only when %pairFull).
std::string tileAndStore(const FusedLinearKernel &kernel, const ColumnBlockLayout &l, int rows,
                         bool bf16, const std::string &x, const std::string &residual,
                         const std::string &blocks, const std::string &prefetch = "");

/// The heights of the tiles that run the rows R-row tiles leave (fewer than
/// R): the powers of two below R, largest first. Any leftover count is a
/// sum of distinct ones (7 = 4 + 2 + 1), so at most log2(R) passes over the
/// weights serve them, where 1-row tiles took one pass per row.
std::vector<int> leftoverTileRows(int tileRows);

/// The tiles (leftoverTileRows) that run rows %tiledRows .. %rows - 1, as
/// tileAndStore without prefetch: the tile of p rows runs when bit p of
/// %rows - %tiledRows is set, from %tiledRows plus the larger tiles' rows.
std::string leftoverTiles(const FusedLinearKernel &kernel, const ColumnBlockLayout &l, int tileRows,
                          bool bf16, const std::string &x, const std::string &residual,
                          const std::string &blocks);

/// @<name>_store(v, up, scale, t, column, y, res): 16 columns of row t from
/// their accumulator(s): the norm scale, SwiGLU with the up accumulator, the
/// residual.
std::string storeFunction(const FusedLinearKernel &kernel, const ColumnBlockLayout &l);

/// The call of @<name>_store for accumulator `v` (and `up`), row scale
/// `scale`, row `row` and first column `column`.
std::string storeCall(const FusedLinearKernel &kernel, const ColumnBlockLayout &l,
                      const std::string &v, const std::string &up, const std::string &scale,
                      const std::string &row, const std::string &column,
                      const std::string &residual);

/// Decode's runs: MLIR that cuts [`begin`, `end`) into `runs` runs of
/// %runLength read side by side (`cut`: %cRuns, %runLength and `rest`, the
/// first index the runs leave), and, in a loop body over %i in [0,
/// %runLength), the runs' indices %run0 .. %run<runs-1> (`indices`).
struct DecodeRunCut {
  std::string cut, indices;
};
DecodeRunCut decodeRunCut(const std::string &begin, const std::string &end, int runs,
                          const std::string &rest);

/// Rows [0, `rows`) of the frame's %x, times its %gain where the kernel
/// has a prologue gain, rounded to bf16 (to nearest even) into
/// `allocatedRows` rows of the thread scratch from %roundedAt (the rows past
/// `rows` are zero; KernelFrame): its views %xh (roundType, one i16 per k)
/// and %xp (pairType), and the address %xhAt (i64). `helpers` is the
/// private function it calls.
struct RoundedActivations {
  std::string helpers, opening;
};
RoundedActivations roundedActivations(const FusedLinearKernel &kernel, const ColumnBlockLayout &l,
                                      const std::string &rows, const std::string &allocatedRows);

/// The pairing of output blocks that a step of the block loop (%bA) handles:
/// sets %bB and %pairFull. SwiGLU pairs gate block b with up block b + N/32;
/// plain kernels pair neighbouring blocks (the second may be past %bEnd).
std::string blockPairing(const FusedLinearKernel &kernel, const ColumnBlockLayout &l);

/// The kernel for a row-major bf16 weight that packs its panels per call
/// (kernel.panelsPerCall); PanelLinearSource.cpp.
std::string panelLinearSource(const FusedLinearKernel &kernel);

/// The private functions of the AMX prefill (AmxLinearSource.cpp).
std::string amxFunctions(const FusedLinearKernel &kernel, const ColumnBlockLayout &l);

/// The AMX prefill of all %rows rows (kernel.amxFits()): rounds them to bf16,
/// then for each block pair of the workgroups runs 32 x 32 tiles and their
/// epilogue. Expects the kernel frame's values and %w, %bBegin, %bEnd.
std::string amxPrefill(const FusedLinearKernel &kernel, const ColumnBlockLayout &l,
                       const std::string &residual);

} // namespace q3::cpu::detail
