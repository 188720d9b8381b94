// Built as a shared object that SharedLibraryTest loads from memory.
int q3_test_add(int a, int b) { return a + b + 1000; }

// A kernel with the ABI of runtime/KernelABI.h, for CpuDriverTest:
// out[w] = in[w] * scalars[3] for workgroups w in [begin, end).
#include <stdint.h>
void q3_kernel_scale(void *const *buffers, const int64_t *bytes, const int64_t *scalars,
                     int64_t begin, int64_t end) {
  (void)bytes;
  const float *in = (const float *)buffers[0];
  float *out = (float *)buffers[1];
  for (int64_t w = begin; w < end; ++w)
    out[w] = in[w] * (float)scalars[3];
}

// For CpuDriverTest: buffers[1] is the calling thread's scratch (after the
// one result). Workgroup w writes w over the scratch's first 64 bytes,
// works a while, reads them back, and records in out[4w ..] the scratch's
// address, its size, whether it still held w (no other thread wrote it)
// and the calling thread's id.
#include <sys/syscall.h>
#include <unistd.h>
void q3_kernel_scratch_probe(void *const *buffers, const int64_t *bytes, const int64_t *scalars,
                             int64_t begin, int64_t end) {
  (void)scalars;
  uint64_t *out = (uint64_t *)buffers[0];
  volatile int64_t *scratch = (volatile int64_t *)buffers[1];
  for (int64_t w = begin; w < end; ++w) {
    for (int i = 0; i < 8; ++i)
      scratch[i] = w;
    int64_t held = 1;
    for (int round = 0; round < 2000; ++round)
      held &= scratch[round % 8] == w;
    out[4 * w] = (uint64_t)(uintptr_t)buffers[1];
    out[4 * w + 1] = (uint64_t)bytes[1];
    out[4 * w + 2] = (uint64_t)held;
    out[4 * w + 3] = (uint64_t)syscall(SYS_gettid);
  }
}
