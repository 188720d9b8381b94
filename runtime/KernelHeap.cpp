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
    mallopt(M_MMAP_THRESHOLD, int(kKernelScratchMmapThreshold));
    mallopt(M_TRIM_THRESHOLD, int(kKernelScratchTrimThreshold));
  });
#endif
}

} // namespace q3::runtime
