#include "runtime/WeightLayout.h"

#include <cstring>

namespace q3::runtime {

void packColumnBlocks(const uint16_t *source, uint16_t *packed, int64_t columns,
                      int64_t blockBegin, int64_t blockEnd) {
  const int64_t pairs = columns / 2;
  for (int64_t block = blockBegin; block < blockEnd; ++block) {
    uint16_t *out = packed + block * kColumnBlockRows * columns;
    for (int64_t row = 0; row < kColumnBlockRows; ++row) {
      const uint16_t *in = source + (block * kColumnBlockRows + row) * columns;
      // One (k, k+1) pair is 4 bytes: copy pairs, not single values.
      for (int64_t pair = 0; pair < pairs; ++pair)
        std::memcpy(out + (pair * kColumnBlockRows + row) * 2, in + pair * 2, 4);
    }
  }
}

} // namespace q3::runtime
