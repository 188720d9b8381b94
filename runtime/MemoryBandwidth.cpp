#include "runtime/MemoryBandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <stdexcept>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace q3::runtime {

// The buffer is read in 64-byte cache lines; a tail shorter than a line is
// not read (it cannot change the rate).
static constexpr int64_t kLine = 64;

namespace {

#if defined(__x86_64__)
// Bytes ahead of the loads that the read kernel prefetches. The hardware
// prefetchers alone left ~20% of the bandwidth unused on the 2-core machine
// (20.3 vs 24.9 GB/s); the weight-streaming kernels prefetch as far ahead, so
// the floor they are compared with is the best read we know, not an easy one.
static constexpr int64_t kPrefetchBytes = 8192;

// Four independent accumulators keep several loads in flight; the sum is
// returned so the loads cannot be optimized away. No -march flag: the AVX2
// variant is chosen at run time, so the binary still runs on any x86-64.
__attribute__((target("avx2"))) uint64_t sumLinesAvx2(const uint8_t *data, int64_t lines) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  const __m256i *p = reinterpret_cast<const __m256i *>(data);
  const int64_t prefetchEnd = lines - kPrefetchBytes / kLine; // never touch past the buffer
  int64_t i = 0;
  for (; i + 2 <= lines; i += 2, p += 4) { // two lines per iteration
    if (i < prefetchEnd) {
      const char *ahead = reinterpret_cast<const char *>(p) + kPrefetchBytes;
      _mm_prefetch(ahead, _MM_HINT_T1);
      _mm_prefetch(ahead + kLine, _MM_HINT_T1);
    }
    a = _mm256_add_epi64(a, _mm256_load_si256(p));
    b = _mm256_add_epi64(b, _mm256_load_si256(p + 1));
    c = _mm256_add_epi64(c, _mm256_load_si256(p + 2));
    d = _mm256_add_epi64(d, _mm256_load_si256(p + 3));
  }
  if (i < lines) {
    a = _mm256_add_epi64(a, _mm256_load_si256(p));
    b = _mm256_add_epi64(b, _mm256_load_si256(p + 1));
  }
  __m256i sum = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i *>(lanes), sum);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

// The lines cut into kReadStreams runs read side by side, one line of each
// per step, as the decode products read their weight rows with
// q3.lowering's decode_streams = 4: one stream per thread read 57-62 GB/s
// on two threads of an AMD EPYC family 26 VM, four 72-78, so a one-stream
// floor was one the kernels could beat; on another host of that family one
// stream read fastest. The probe reads both ways and keeps the best.
constexpr int kReadStreams = kProbeReadStreams;

__attribute__((target("avx2"))) uint64_t sumStreamsAvx2(const uint8_t *data, int64_t lines) {
  const int64_t run = lines / kReadStreams;
  const int64_t prefetchEnd = run - kPrefetchBytes / kLine; // never touch past a run
  __m256i sums[kReadStreams][2];
  for (auto &pair : sums)
    pair[0] = pair[1] = _mm256_setzero_si256();
  for (int64_t i = 0; i < run; ++i)
    for (int s = 0; s < kReadStreams; ++s) {
      const uint8_t *line = data + (s * run + i) * kLine;
      if (i < prefetchEnd)
        _mm_prefetch(reinterpret_cast<const char *>(line) + kPrefetchBytes, _MM_HINT_T1);
      const __m256i *p = reinterpret_cast<const __m256i *>(line);
      sums[s][0] = _mm256_add_epi64(sums[s][0], _mm256_load_si256(p));
      sums[s][1] = _mm256_add_epi64(sums[s][1], _mm256_load_si256(p + 1));
    }
  __m256i sum = _mm256_setzero_si256();
  for (auto &pair : sums)
    sum = _mm256_add_epi64(sum, _mm256_add_epi64(pair[0], pair[1]));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i *>(lanes), sum);
  const int64_t rest = lines - kReadStreams * run;
  return lanes[0] + lanes[1] + lanes[2] + lanes[3] +
         sumLinesAvx2(data + kReadStreams * run * kLine, rest);
}

uint64_t sumLinesSse2(const uint8_t *data, int64_t lines) {
  __m128i a = _mm_setzero_si128(), b = a, c = a, d = a;
  for (int64_t i = 0; i < lines; ++i) {
    const __m128i *p = reinterpret_cast<const __m128i *>(data + i * kLine);
    a = _mm_add_epi64(a, _mm_load_si128(p));
    b = _mm_add_epi64(b, _mm_load_si128(p + 1));
    c = _mm_add_epi64(c, _mm_load_si128(p + 2));
    d = _mm_add_epi64(d, _mm_load_si128(p + 3));
  }
  __m128i sum = _mm_add_epi64(_mm_add_epi64(a, b), _mm_add_epi64(c, d));
  alignas(16) uint64_t lanes[2];
  _mm_store_si128(reinterpret_cast<__m128i *>(lanes), sum);
  return lanes[0] + lanes[1];
}

/// Reads the lines as one stream (`streams` 1) or as kReadStreams side by side.
uint64_t sumLines(const uint8_t *data, int64_t lines, int streams) {
  static const bool hasAvx2 = __builtin_cpu_supports("avx2");
  if (!hasAvx2)
    return sumLinesSse2(data, lines);
  return streams == 1 ? sumLinesAvx2(data, lines) : sumStreamsAvx2(data, lines);
}
constexpr int kReadPatterns[] = {1, kReadStreams};
#else
constexpr int kReadPatterns[] = {1};
uint64_t sumLines(const uint8_t *data, int64_t lines, int) {
  const uint64_t *words = reinterpret_cast<const uint64_t *>(data);
  uint64_t a = 0, b = 0, c = 0, d = 0;
  for (int64_t i = 0; i < lines * (kLine / 8); i += 4) {
    a += words[i];
    b += words[i + 1];
    c += words[i + 2];
    d += words[i + 3];
  }
  return a + b + c + d;
}
#endif

} // namespace

uint64_t readLines(const uint8_t *data, int64_t bytes, int streams) {
  return sumLines(data, bytes / kLine, streams);
}

ReadBandwidthProbe::ReadBandwidthProbe(ThreadPool &pool, int64_t bytes)
    : pool_(pool), bytes_(bytes), lines_(std::max<int64_t>(1, bytes / kLine)) {
  if (bytes < 1)
    throw std::invalid_argument("ReadBandwidthProbe: bytes must be >= 1");
  buffer_ = HostBuffer(size_t(lines_ * kLine), HostBuffer::Pages::Huge);
  data_ = buffer_.data();
  // Same split as the timed loop, so each thread faults in exactly what it reads.
  pool_.parallelFor(lines_, [&](int64_t begin, int64_t end) {
    std::memset(data_ + begin * kLine, 1, size_t((end - begin) * kLine));
  });
}

BandwidthResult ReadBandwidthProbe::measure(int repetitions) {
  if (repetitions < 1)
    throw std::invalid_argument("ReadBandwidthProbe: repetitions must be >= 1");
  BandwidthResult result =
      measureRegionsReadBandwidth(pool_, {{data_, lines_ * kLine}}, repetitions);
  result.bytes = bytes_;
  return result;
}

BandwidthResult measureRegionsReadBandwidth(ThreadPool &pool,
                                            const std::vector<MemoryRegion> &regions,
                                            int repetitions) {
  // Each region's whole lines (the loads are aligned); firstLine[i] counts
  // the lines before region i.
  std::vector<const uint8_t *> starts;
  std::vector<int64_t> firstLine = {0};
  for (const MemoryRegion &region : regions) {
    const auto begin = (reinterpret_cast<uintptr_t>(region.data) + kLine - 1) / kLine * kLine;
    const auto end =
        (reinterpret_cast<uintptr_t>(region.data) + uintptr_t(region.bytes)) / kLine * kLine;
    if (region.bytes <= 0 || end <= begin)
      continue;
    starts.push_back(reinterpret_cast<const uint8_t *>(begin));
    firstLine.push_back(firstLine.back() + int64_t(end - begin) / kLine);
  }
  const int64_t lines = firstLine.back();
  if (lines < 1 || repetitions < 1)
    throw std::invalid_argument("measureRegionsReadBandwidth: no whole line, or repetitions < 1");
  std::atomic<uint64_t> checksum{0};
  double bestSeconds = 0;
  for (int rep = 0; rep < repetitions; ++rep)
    for (int streams : kReadPatterns) {
      const auto start = std::chrono::steady_clock::now();
      pool.parallelFor(lines, [&](int64_t begin, int64_t end) {
        uint64_t sum = 0;
        size_t r = size_t(std::upper_bound(firstLine.begin(), firstLine.end(), begin) -
                          firstLine.begin() - 1);
        for (int64_t line = begin; line < end; ++r) {
          const int64_t upTo = std::min(end, firstLine[r + 1]);
          sum += sumLines(starts[r] + (line - firstLine[r]) * kLine, upTo - line, streams);
          line = upTo;
        }
        checksum.fetch_add(sum, std::memory_order_relaxed);
      });
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (bestSeconds == 0 || seconds < bestSeconds)
        bestSeconds = seconds;
    }
  const uint64_t sum = checksum.load();
  asm volatile("" : : "r"(sum) : "memory");
  bestSeconds = std::max(bestSeconds, 1e-9);
  return BandwidthResult{double(lines * kLine) / bestSeconds / 1e9, lines * kLine, pool.size()};
}

BandwidthResult measureReadBandwidth(ThreadPool &pool, int64_t bytes, int repetitions) {
  if (bytes < 1 || repetitions < 1)
    throw std::invalid_argument("measureReadBandwidth: bytes and repetitions must be >= 1");
  return ReadBandwidthProbe(pool, bytes).measure(repetitions);
}

} // namespace q3::runtime
