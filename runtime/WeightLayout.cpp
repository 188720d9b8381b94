#include "runtime/WeightLayout.h"

#include <cstring>

namespace q3::runtime {

void packColumnBlocks(const uint16_t *source, uint16_t *packed, int64_t columns, int64_t blockBegin,
                      int64_t blockEnd) {
  const int64_t pairs = columns / 2;
  for (int64_t block = blockBegin; block < blockEnd; ++block) {
    const uint16_t *in = source + block * kColumnBlockRows * columns;
    uint16_t *out = packed + block * kColumnBlockRows * columns;
    // Writes in order (64 bytes per pair), reads 16 row streams; one (k, k+1)
    // pair is 4 bytes, so pairs are copied whole.
    for (int64_t pair = 0; pair < pairs; ++pair, out += 2 * kColumnBlockRows)
      for (int64_t row = 0; row < kColumnBlockRows; ++row)
        std::memcpy(out + row * 2, in + row * columns + pair * 2, 4);
  }
}

} // namespace q3::runtime
