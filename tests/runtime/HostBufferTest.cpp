#include "runtime/HostBuffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

namespace q3::runtime {
namespace {

constexpr size_t kMiB = size_t(1) << 20;

bool allZero(const HostBuffer &buffer) {
  for (size_t i = 0; i < buffer.size(); i += 4096)
    if (buffer.data()[i] != 0)
      return false;
  return buffer.data()[buffer.size() - 1] == 0;
}

TEST(HostBuffer, HugeBuffersStartOnAHugePageBoundaryAndReadAsZeros) {
  HostBuffer buffer(5 * kMiB + 3, HostBuffer::Pages::Huge);
  ASSERT_NE(buffer.data(), nullptr);
  EXPECT_EQ(buffer.size(), 5 * kMiB + 3);
  // THP can back only 2 MB-aligned stretches.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer.data()) % (2 * kMiB), 0u);
  EXPECT_TRUE(allZero(buffer));
  buffer.data()[buffer.size() - 1] = 7; // the whole size is writable
  EXPECT_EQ(buffer.data()[buffer.size() - 1], 7);
}

/// The bracketed mode of /sys/kernel/mm/transparent_hugepage/enabled
/// ("always", "madvise", "never"), or "" without THP.
std::string transparentHugePageMode() {
  std::ifstream file("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string text;
  std::getline(file, text);
  const size_t open = text.find('['), close = text.find(']');
  return open == std::string::npos || close < open ? "" : text.substr(open + 1, close - open - 1);
}

// Decode's speed and the bandwidth floor bench compares it with rest on this:
// a huge buffer, once written, is on huge pages, and the buffer says so.
TEST(HostBuffer, WrittenHugeBuffersAreOnHugePages) {
  const std::string mode = transparentHugePageMode();
  if (mode != "always" && mode != "madvise")
    GTEST_SKIP() << "transparent huge pages are off here";
  HostBuffer huge(8 * kMiB, HostBuffer::Pages::Huge);
  std::memset(huge.data(), 1, huge.size());
  ASSERT_TRUE(huge.hugePageShare().has_value());
  EXPECT_GE(*huge.hugePageShare(), 0.5) << "the kernel gave small pages";
  if (mode == "madvise") {
    HostBuffer small(8 * kMiB, HostBuffer::Pages::Small);
    std::memset(small.data(), 1, small.size());
    EXPECT_EQ(small.hugePageShare().value_or(0), 0.0);
  }
  EXPECT_EQ(HostBuffer().hugePageShare(), std::nullopt);
}

TEST(HostBuffer, SmallAndSmallPagedBuffersReadAsZeros) {
  for (HostBuffer::Pages pages : {HostBuffer::Pages::Small, HostBuffer::Pages::Huge}) {
    HostBuffer small(100, pages);
    EXPECT_EQ(small.size(), 100u);
    EXPECT_TRUE(allZero(small));
  }
  HostBuffer big(9 * kMiB, HostBuffer::Pages::Small);
  EXPECT_TRUE(allZero(big));
}

TEST(HostBuffer, MovesOwnershipAndResetsTheSource) {
  HostBuffer a(3 * kMiB, HostBuffer::Pages::Huge);
  a.data()[0] = 42;
  uint8_t *data = a.data();
  HostBuffer b(std::move(a));
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(b.data(), data);
  EXPECT_EQ(b.data()[0], 42);
  HostBuffer c(10);
  c = std::move(b);
  EXPECT_EQ(c.data(), data);
  c.reset();
  EXPECT_TRUE(c.empty());
}

TEST(HostBuffer, ZeroBytesIsEmpty) {
  HostBuffer empty(0, HostBuffer::Pages::Huge);
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty.data(), nullptr);
}

} // namespace
} // namespace q3::runtime
