// Little-endian integers in byte buffers, whatever the host's order: the
// file formats q3c reads and writes (artifacts, safetensors, the compiled
// tokenizer) are little-endian and their fields need not be aligned.
#pragma once

#include <cstdint>

namespace q3::runtime {

inline uint32_t loadLittleEndianU32(const uint8_t *bytes) {
  uint32_t value = 0;
  for (int i = 3; i >= 0; --i)
    value = (value << 8) | bytes[i];
  return value;
}

inline uint64_t loadLittleEndianU64(const uint8_t *bytes) {
  return uint64_t(loadLittleEndianU32(bytes + 4)) << 32 | loadLittleEndianU32(bytes);
}

inline void storeLittleEndianU32(uint8_t *bytes, uint32_t value) {
  for (int i = 0; i < 4; ++i)
    bytes[i] = uint8_t(value >> (8 * i));
}

inline void storeLittleEndianU64(uint8_t *bytes, uint64_t value) {
  storeLittleEndianU32(bytes, uint32_t(value));
  storeLittleEndianU32(bytes + 4, uint32_t(value >> 32));
}

} // namespace q3::runtime
