#include "runtime/HostBuffer.h"

#include <gtest/gtest.h>

#include <cstdint>
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
