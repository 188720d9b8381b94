#include "runtime/KernelHeap.h"

#include <mutex>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace q3::runtime {

void keepKernelScratchInHeap() {
#if defined(__GLIBC__)
  static std::once_flag once;
  std::call_once(once, [] {
    // Fixed thresholds also stop glibc's adjusting them to what was freed.
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
  });
#endif
}

} // namespace q3::runtime
