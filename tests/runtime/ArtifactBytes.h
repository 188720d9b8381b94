// Reading and patching the bytes of an artifact image in tests: its
// little-endian fields and section table entries (docs/artifact.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace q3::runtime::testing {

#define EXPECT_CONTAINS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

/// `size` bytes of a repeating, seed-dependent pattern.
inline std::vector<uint8_t> pattern(size_t size, uint8_t seed) {
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i)
    bytes[i] = uint8_t(seed + i * 7);
  return bytes;
}

inline uint64_t getU64(const std::vector<uint8_t> &image, size_t at) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i)
    value = (value << 8) | image[at + i];
  return value;
}
inline uint32_t getU32(const std::vector<uint8_t> &image, size_t at) {
  return uint32_t(getU64(image, at) & 0xffffffffu);
}
inline void setU32(std::vector<uint8_t> &image, size_t at, uint32_t value) {
  for (int i = 0; i < 4; ++i)
    image[at + i] = uint8_t(value >> (8 * i));
}
inline void setU64(std::vector<uint8_t> &image, size_t at, uint64_t value) {
  for (int i = 0; i < 8; ++i)
    image[at + i] = uint8_t(value >> (8 * i));
}

/// Byte offset of section table entry `i`.
inline size_t entry(size_t i) { return 64 + 64 * i; }

} // namespace q3::runtime::testing
