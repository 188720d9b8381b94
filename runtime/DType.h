// Element types that q3c can read from and write to safetensors files, and
// exact conversions between them and float32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace q3::runtime {

enum class DType { F32, F16, BF16 };

// Safetensors spelling: "F32", "F16", "BF16".
const char *dtypeName(DType);
std::optional<DType> parseDType(std::string_view safetensorsName);
size_t dtypeSize(DType);

// Round-to-nearest-even; NaN stays NaN (quiet), infinities are preserved.
float bf16ToFloat(uint16_t);
uint16_t floatToBf16(float);
// IEEE 754 binary16 including subnormals, infinities and NaN; RNE.
float f16ToFloat(uint16_t);
uint16_t floatToF16(float);

// `src`/`dst` need not be aligned; elements are little-endian in memory.
void convertToF32(DType, const void *src, float *dst, size_t count);
void convertFromF32(DType, const float *src, void *dst, size_t count);

} // namespace q3::runtime
