//===- KernelHeapTest.cpp - kernel scratch reused without page faults -----===//
#include "runtime/KernelHeap.h"

#include <gtest/gtest.h>

#include <sys/resource.h>

#include <cstdlib>
#include <thread>
#include <vector>

namespace q3::runtime {
namespace {

long threadPageFaults() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_minflt;
}

/// One kernel call's scratch: two buffers of `bytes`, every page written,
/// freed in reverse order. Returns the page faults it took.
long scratchCall(size_t bytes) {
  const long before = threadPageFaults();
  std::vector<volatile char *> buffers;
  for (int i = 0; i < 2; ++i) {
    auto *buffer = static_cast<volatile char *>(std::malloc(bytes));
    if (!buffer)
      return -1;
    for (size_t at = 0; at < bytes; at += 4096)
      buffer[at] = 1;
    buffers.push_back(buffer);
  }
  for (size_t i = buffers.size(); i-- > 0;)
    std::free(const_cast<char *>(buffers[i]));
  return threadPageFaults() - before;
}

// From the second call on, a kernel's scratch comes back from the heap with
// its pages. With glibc's own thresholds the second call of two 192 KiB or
// two 3 MiB buffers faulted 96 or 1,440 pages in again (the first call's
// were fresh mappings, unmapped by its frees).
TEST(KernelHeap, ScratchFreedByOneCallIsReusedByTheNextWithoutPageFaults) {
  keepKernelScratchInHeap();
  for (size_t bytes : {size_t(192) << 10, size_t(3) << 20}) {
    long secondCall = -1;
    std::thread([&] {
      scratchCall(bytes);
      secondCall = scratchCall(bytes);
    }).join();
    EXPECT_EQ(secondCall, 0) << bytes << " bytes";
  }
}

} // namespace
} // namespace q3::runtime
