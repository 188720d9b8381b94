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
