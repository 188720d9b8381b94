//===- CpuRelax.h - one step of a spinning wait ---------------------------===//
//
// What a thread does between two polls of a condition it expects to turn
// true soon (ThreadPool's workers, the Vulkan driver's fence wait): the
// x86 pause hint, which lets the sibling hyperthread run and does not flood
// the memory system with the poll's loads; elsewhere a yield.
//
//===----------------------------------------------------------------------===//
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#else
#include <thread>
#endif

namespace q3::runtime {

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

} // namespace q3::runtime
