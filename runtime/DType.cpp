#include "runtime/DType.h"

#include <cstring>

namespace q3::runtime {

namespace {

uint32_t floatBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

float floatFromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Mapped tensor data has no alignment guarantee, so elements are read and
// written through memcpy. The host is assumed little-endian (as are the files).
uint16_t loadU16(const uint8_t *p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void storeU16(uint8_t *p, uint16_t v) { std::memcpy(p, &v, sizeof v); }

} // namespace

float bf16ToFloat(uint16_t value) { return floatFromBits(uint32_t(value) << 16); }

uint16_t floatToBf16(float value) {
  uint32_t bits = floatBits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN: truncating could yield inf, so force quiet bit
    return uint16_t((bits >> 16) | 0x0040u);
  // Adding 0x7fff plus the lowest kept bit rounds to nearest, ties to even;
  // overflow into the exponent correctly produces infinity.
  uint32_t lsb = (bits >> 16) & 1u;
  return uint16_t((bits + 0x7fffu + lsb) >> 16);
}

float f16ToFloat(uint16_t value) {
  uint32_t sign = uint32_t(value & 0x8000u) << 16;
  uint32_t exponent = (value >> 10) & 0x1fu;
  uint32_t mantissa = value & 0x3ffu;
  if (exponent == 0x1f) // inf / NaN keep their payload
    return floatFromBits(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0)
    return floatFromBits(sign | ((exponent + 112) << 23) | (mantissa << 13));
  // Zero or subnormal: value = mantissa * 2^-24, exact in float.
  float magnitude = float(mantissa) * floatFromBits(0x33800000u); // 2^-24
  return sign ? -magnitude : magnitude;
}

uint16_t floatToF16(float value) {
  uint32_t bits = floatBits(value);
  uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
  uint32_t absBits = bits & 0x7fffffffu;
  if (absBits > 0x7f800000u) // NaN: keep top payload bits, force quiet
    return uint16_t(sign | 0x7e00u | ((absBits >> 13) & 0x3ffu));
  if (absBits >= 0x477ff000u) // >= 65520 rounds to infinity under RNE
    return uint16_t(sign | 0x7c00u);
  if (absBits >= 0x38800000u) { // normal half (>= 2^-14)
    // Rebias the exponent, then round the 13 dropped bits to nearest even;
    // a mantissa carry correctly bumps the exponent.
    uint32_t rebased = absBits - (112u << 23);
    uint32_t lsb = (rebased >> 13) & 1u;
    return uint16_t(sign | ((rebased + 0xfffu + lsb) >> 13));
  }
  if (absBits < 0x33000000u) // below half the smallest subnormal (2^-25): rounds to zero
    return sign;
  // Subnormal half: shift the full 24-bit significand into place and round RNE.
  uint32_t exponent = absBits >> 23;
  uint32_t significand = (absBits & 0x7fffffu) | 0x800000u;
  uint32_t shift = 126 - exponent; // 14..24 for this range
  uint32_t kept = significand >> shift;
  uint32_t remainder = significand & ((1u << shift) - 1u);
  uint32_t halfway = 1u << (shift - 1);
  if (remainder > halfway || (remainder == halfway && (kept & 1u)))
    ++kept; // may carry into the smallest normal, which is the right encoding
  return uint16_t(sign | kept);
}

uint16_t floatToF16Saturating(float value) {
  if (value > kF16Max)
    return floatToF16(kF16Max);
  if (value < -kF16Max)
    return floatToF16(-kF16Max);
  return floatToF16(value);
}

void convertToF32(DType type, const void *src, float *dst, size_t count) {
  const auto *bytes = static_cast<const uint8_t *>(src);
  switch (type) {
  case DType::F32:
    if (count != 0)
      std::memcpy(dst, bytes, count * sizeof(float));
    return;
  case DType::F16:
    for (size_t i = 0; i < count; ++i)
      dst[i] = f16ToFloat(loadU16(bytes + 2 * i));
    return;
  case DType::BF16:
    for (size_t i = 0; i < count; ++i)
      dst[i] = bf16ToFloat(loadU16(bytes + 2 * i));
    return;
  }
}

void convertFromF32(DType type, const float *src, void *dst, size_t count) {
  auto *bytes = static_cast<uint8_t *>(dst);
  switch (type) {
  case DType::F32:
    if (count != 0)
      std::memcpy(bytes, src, count * sizeof(float));
    return;
  case DType::F16:
    for (size_t i = 0; i < count; ++i)
      storeU16(bytes + 2 * i, floatToF16(src[i]));
    return;
  case DType::BF16:
    for (size_t i = 0; i < count; ++i)
      storeU16(bytes + 2 * i, floatToBf16(src[i]));
    return;
  }
}

} // namespace q3::runtime
