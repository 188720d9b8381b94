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
}

} // namespace
} // namespace q3::runtime
