#include "runtime/Checksum.h"

namespace q3::runtime {

uint64_t fnv1a64(const void *data, size_t size, uint64_t state) {
  const uint8_t *bytes = static_cast<const uint8_t *>(data);
  for (size_t i = 0; i < size; ++i)
    state = (state ^ bytes[i]) * kFnv1a64Prime;
  return state;
}

uint64_t fnv1a64Zeros(size_t count, uint64_t state) {
  for (size_t i = 0; i < count; ++i)
    state *= kFnv1a64Prime; // state ^ 0 == state
  return state;
}

} // namespace q3::runtime
