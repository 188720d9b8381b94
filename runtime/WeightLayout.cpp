#include "runtime/WeightLayout.h"

#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace q3::runtime {

namespace {

/// Pairs [pairBegin, pairEnd) of one block, one (k, k+1) pair (4 bytes) at a time.
void packPairs(const uint16_t *in, uint16_t *out, int64_t columns, int64_t pairBegin,
               int64_t pairEnd) {
  for (int64_t pair = pairBegin; pair < pairEnd; ++pair)
    for (int64_t row = 0; row < kColumnBlockRows; ++row)
      std::memcpy(out + (pair * kColumnBlockRows + row) * 2, in + row * columns + pair * 2, 4);
}

#if defined(__SSE2__)
/// Four pairs of four rows: a 4 x 4 transpose of 32-bit (k, k+1) pairs.
inline void packFourByFour(const uint16_t *in, uint16_t *out, int64_t columns) {
  auto load = [&](int row) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i *>(in + row * columns));
  };
  const __m128i r0 = load(0), r1 = load(1), r2 = load(2), r3 = load(3);
  const __m128i t0 = _mm_unpacklo_epi32(r0, r1), t1 = _mm_unpacklo_epi32(r2, r3);
  const __m128i t2 = _mm_unpackhi_epi32(r0, r1), t3 = _mm_unpackhi_epi32(r2, r3);
  // Pair p of the four rows goes to out + p * 16 rows * 2 values.
  auto store = [&](int pair, __m128i v) {
    _mm_storeu_si128(reinterpret_cast<__m128i *>(out + pair * kColumnBlockRows * 2), v);
  };
  store(0, _mm_unpacklo_epi64(t0, t1));
  store(1, _mm_unpackhi_epi64(t0, t1));
  store(2, _mm_unpacklo_epi64(t2, t3));
  store(3, _mm_unpackhi_epi64(t2, t3));
}
#endif

} // namespace

void packColumnBlocks(const uint16_t *source, uint16_t *packed, int64_t columns, int64_t blockBegin,
                      int64_t blockEnd) {
  const int64_t pairs = columns / 2;
  for (int64_t block = blockBegin; block < blockEnd; ++block) {
    const uint16_t *in = source + block * kColumnBlockRows * columns;
    uint16_t *out = packed + block * kColumnBlockRows * columns;
    int64_t pair = 0;
#if defined(__SSE2__)
    // Loading is the cost (it runs at load time over the whole model): read
    // 16 bytes of each row at once instead of 4.
    for (; pair + 4 <= pairs; pair += 4)
      for (int64_t row = 0; row < kColumnBlockRows; row += 4)
        packFourByFour(in + row * columns + pair * 2, out + (pair * kColumnBlockRows + row) * 2,
                       columns);
#endif
    packPairs(in, out, columns, pair, pairs);
  }
}

} // namespace q3::runtime
