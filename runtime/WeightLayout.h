//===- WeightLayout.h - weight layouts the kernels read -------------------===//
//
// "column blocks": a [N, K] matrix of 16-bit values (bf16) stored as
// [N/16][K/2][16][2]: block b holds rows 16b .. 16b+15, and for each pair of
// columns (k, k+1) the 16 rows' two values side by side. One 64-byte load then
// gives 16 output columns x 2 k, which the prefill and decode kernels widen to
// f32 exactly (a shift for the even k, a mask for the odd one) and multiply by
// a broadcast activation, so no horizontal sums are needed and each loaded
// weight serves a whole tile of prompt rows. docs/cpu-backend.md.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

namespace q3::runtime {

inline constexpr int64_t kColumnBlockRows = 16;

/// Whether a [rows, columns] matrix can be stored as column blocks.
inline bool fitsColumnBlocks(int64_t rows, int64_t columns) {
  return rows > 0 && columns > 0 && rows % kColumnBlockRows == 0 && columns % 2 == 0;
}

/// Writes blocks [blockBegin, blockEnd) of the column-block layout of the
/// row-major `source` ([rows, columns]) into `packed` (same element count).
void packColumnBlocks(const uint16_t *source, uint16_t *packed, int64_t columns, int64_t blockBegin,
                      int64_t blockEnd);

} // namespace q3::runtime
