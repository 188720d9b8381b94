#include "runtime/MemoryBandwidth.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

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

} // namespace
} // namespace q3::runtime
