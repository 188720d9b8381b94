//===- WeightLayoutTest.cpp - the column-block layout ---------------------===//
#include "runtime/WeightLayout.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace q3::runtime {
namespace {

// Element (row n, column k) of a 32 x K matrix lands at
// [n / 16][k / 2][n % 16][k % 2], and packing in two ranges of blocks (as two
// threads do) gives the same bytes as one. K = 6 and 22 leave pairs beyond
// the last group of four (the vector path's tail); K = 16 leaves none.
TEST(WeightLayout, ColumnBlocksPlaceEveryElement) {
  for (const int64_t columns : {6, 16, 22}) {
    const int64_t rows = 32;
    std::vector<uint16_t> source(rows * columns);
    for (int64_t n = 0; n < rows; ++n)
      for (int64_t k = 0; k < columns; ++k)
        source[n * columns + k] = uint16_t(n * 100 + k);
    std::vector<uint16_t> whole(source.size(), 0xFFFF), split(source.size(), 0xFFFF);
    packColumnBlocks(source.data(), whole.data(), columns, 0, rows / kColumnBlockRows);
    packColumnBlocks(source.data(), split.data(), columns, 1, 2);
    packColumnBlocks(source.data(), split.data(), columns, 0, 1);
    EXPECT_EQ(whole, split) << columns << " columns";
    for (int64_t n = 0; n < rows; ++n)
      for (int64_t k = 0; k < columns; ++k) {
        const int64_t at = ((n / 16 * (columns / 2) + k / 2) * 16 + n % 16) * 2 + k % 2;
        EXPECT_EQ(whole[at], n * 100 + k) << "row " << n << " column " << k << " of " << columns;
      }
  }
}

TEST(WeightLayout, FitsOnlyWholeBlocksAndPairs) {
  EXPECT_TRUE(fitsColumnBlocks(16, 2));
  EXPECT_TRUE(fitsColumnBlocks(4096, 1024));
  EXPECT_FALSE(fitsColumnBlocks(152, 32)); // a vocabulary that is not a multiple of 16
  EXPECT_FALSE(fitsColumnBlocks(64, 33));
  EXPECT_FALSE(fitsColumnBlocks(0, 2));
}

} // namespace
} // namespace q3::runtime
