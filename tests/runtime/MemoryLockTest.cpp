// lockInMemory: what q3run --mlock does with the weights.
#include "runtime/MemoryLock.h"
#include "runtime/ResourceLimits.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <sys/mman.h>
#include <unistd.h>

namespace q3::testing {
namespace {

using runtime::MemoryRange;

/// VmLck of /proc/self/status: the bytes this process has locked.
uint64_t lockedByThisProcess() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmLck:", 0) == 0)
      return std::stoull(line.substr(6)) * 1024;
  return 0;
}

struct Pages {
  explicit Pages(size_t count) : bytes(count * size_t(::sysconf(_SC_PAGESIZE))) {
    base = static_cast<uint8_t *>(
        ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  }
  ~Pages() { ::munmap(base, bytes); }
  uint8_t *base;
  size_t bytes;
};

TEST(MemoryLock, LocksWholePagesOnceAndUnlocksWhenDestroyed) {
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  Pages pages(4);
  ASSERT_NE(pages.base, MAP_FAILED);
  const uint64_t before = lockedByThisProcess();
  {
    // Two weights that share a page, one that starts mid-page, an empty one:
    // pages 0-2 are locked, each once.
    runtime::LockedMemory locked = runtime::lockInMemory(
        {{pages.base + 10, page}, {pages.base + page + 5, 20}, {pages.base + 2 * page + 1, 3},
         {pages.base + 3 * page, 0}, {nullptr, 64}},
        "weights");
    EXPECT_EQ(locked.bytes(), 3 * page);
    EXPECT_EQ(lockedByThisProcess(), before + 3 * page);
    runtime::LockedMemory moved = std::move(locked);
    EXPECT_EQ(locked.bytes(), 0u);
    EXPECT_EQ(moved.bytes(), 3 * page);
  }
  EXPECT_EQ(lockedByThisProcess(), before);
}

TEST(MemoryLock, AFailureNamesWhatAndLeavesNothingLocked) {
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  Pages pages(2);
  ASSERT_NE(pages.base, MAP_FAILED);
  // The second page is no longer mapped: the first locks, the second fails.
  ASSERT_EQ(::munmap(pages.base + page, page), 0);
  const uint64_t before = lockedByThisProcess();
  try {
    runtime::lockInMemory({{pages.base, page}, {pages.base + page, page}}, "/models/x: the weights");
    FAIL() << "locking an unmapped page succeeded";
  } catch (const runtime::ResourceError &error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("/models/x: the weights: cannot lock"), std::string::npos) << message;
  }
  EXPECT_EQ(lockedByThisProcess(), before);
  pages.bytes = page; // the destructor unmaps what is left
}

} // namespace
} // namespace q3::testing
