#include "runtime/MemoryBandwidth.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <iterator>
#include <stdexcept>
#include <vector>

namespace q3::runtime {
namespace {

// Speed depends on the machine; only check that the result is well-formed.
TEST(MemoryBandwidth, SmallBufferGivesAFinitePositiveRate) {
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    for (int64_t bytes : {int64_t(1), int64_t(1000), int64_t(4) << 20}) {
      BandwidthResult result = measureReadBandwidth(pool, bytes, 2);
      EXPECT_GT(result.gigabytesPerSecond, 0);
      EXPECT_TRUE(std::isfinite(result.gigabytesPerSecond));
      EXPECT_EQ(result.bytes, bytes);
      EXPECT_EQ(result.threads, threads);
    }
  }
}

TEST(MemoryBandwidth, RejectsEmptyMeasurements) {
  ThreadPool pool(1);
  EXPECT_THROW(measureReadBandwidth(pool, 0), std::invalid_argument);
  EXPECT_THROW(measureReadBandwidth(pool, 1024, 0), std::invalid_argument);
  EXPECT_THROW(ReadBandwidthProbe(pool, 0), std::invalid_argument);
  ReadBandwidthProbe probe(pool, 1024);
  EXPECT_THROW(probe.measure(0), std::invalid_argument);
}

// q3run bench reads one probe's buffer between its repetitions.
TEST(MemoryBandwidth, ProbeMeasuresItsBufferRepeatedly) {
  ThreadPool pool(2);
  ReadBandwidthProbe probe(pool, int64_t(1) << 20);
  EXPECT_EQ(probe.bytes(), int64_t(1) << 20);
  for (int i = 0; i < 3; ++i) {
    BandwidthResult result = probe.measure(2);
    EXPECT_GT(result.gigabytesPerSecond, 0);
    EXPECT_TRUE(std::isfinite(result.gigabytesPerSecond));
    EXPECT_EQ(result.bytes, int64_t(1) << 20);
    EXPECT_EQ(result.threads, 2);
  }
}

// q3run bench reads the weights where they lie: regions at any address
// and of any size, of which it reads (and counts) the whole 64-byte lines.
TEST(MemoryBandwidth, RegionsAreReadAsTheirWholeLines) {
  alignas(64) static uint8_t memory[64 * 100];
  const std::vector<MemoryRegion> regions = {
      {memory + 8, 64 * 10},      // 9 whole lines after its first 56 bytes
      {memory + 64 * 20, 64 * 7}, // 7, aligned
      {memory + 64 * 40, 63},     // none: shorter than a line
      {memory + 64 * 50, 64 * 40 + 5}};
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    const BandwidthResult result = measureRegionsReadBandwidth(pool, regions, 2);
    EXPECT_EQ(result.bytes, 64 * (9 + 7 + 40)) << threads;
    EXPECT_GT(result.gigabytesPerSecond, 0);
    EXPECT_TRUE(std::isfinite(result.gigabytesPerSecond));
  }
  ThreadPool pool(1);
  EXPECT_THROW(measureRegionsReadBandwidth(pool, {{memory + 1, 64}}, 1), std::invalid_argument);
  EXPECT_THROW(measureRegionsReadBandwidth(pool, {}, 1), std::invalid_argument);
  EXPECT_THROW(measureRegionsReadBandwidth(pool, regions, 0), std::invalid_argument);
}

// The decode tuner times readLines over the products' weights as the floor
// they approach: it must read every whole line once, in either pattern (the
// sum it returns is that of the 64-bit words read), and nothing past them.
TEST(MemoryBandwidth, ReadLinesReadsEveryWholeLineOnce) {
  constexpr int64_t kLines = 4 * 37 + 3;             // runs of 37 lines, and 3 left over
  alignas(64) static uint64_t words[kLines * 8 + 8]; // readLines loads aligned
  for (size_t i = 0; i < std::size(words); ++i)
    words[i] = i * 0x9e3779b97f4a7c15ull + 1;
  auto sumOfWords = [&](int64_t lines) {
    uint64_t sum = 0;
    for (int64_t i = 0; i < lines * 8; ++i)
      sum += words[i];
    return sum;
  };
  const auto *data = reinterpret_cast<const uint8_t *>(words);
  for (int streams : {1, kProbeReadStreams}) {
    EXPECT_EQ(readLines(data, kLines * 64, streams), sumOfWords(kLines)) << streams;
    // A tail shorter than a line is not read.
    EXPECT_EQ(readLines(data, kLines * 64 + 40, streams), sumOfWords(kLines)) << streams;
    EXPECT_EQ(readLines(data, 3 * 64, streams), sumOfWords(3)) << streams;
    EXPECT_EQ(readLines(data, 63, streams), 0u) << streams;
  }
}

} // namespace
} // namespace q3::runtime
