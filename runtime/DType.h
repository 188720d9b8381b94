//===- DType.h - the element types of weights, caches and checkpoints ----===//
//
// f32, f16 and bf16 as the runtime and the compiler-runtime contract name
// them: a safetensors tensor, a manifest's weights and KV cache, and the
// element a backend's kernels load (backends/common/DTypes.h reads it off an
// IR type). The enum and its spellings are inline, so the backends use it
// without linking the runtime; the exact conversions to and from float32 are
// in DType.cpp. (The frontend, which may not include the runtime, has its own
// frontend::WeightDType for a config's torch_dtype.)
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace q3::runtime {

enum class DType { F32, F16, BF16 };

inline constexpr DType kDTypes[] = {DType::F32, DType::F16, DType::BF16};

/// Bytes of one element.
constexpr size_t dtypeSize(DType type) { return type == DType::F32 ? 4 : 2; }

/// Safetensors spelling: "F32", "F16", "BF16".
constexpr const char *dtypeName(DType type) {
  switch (type) {
  case DType::F32:
    return "F32";
  case DType::F16:
    return "F16";
  case DType::BF16:
    return "BF16";
  }
  return "?";
}

/// MLIR's spelling, which the manifest and kernel names use too: "f32", "f16", "bf16".
constexpr const char *mlirName(DType type) {
  switch (type) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  }
  return "?";
}

/// The type named by its safetensors spelling.
inline std::optional<DType> parseDType(std::string_view safetensorsName) {
  for (DType type : kDTypes)
    if (safetensorsName == dtypeName(type))
      return type;
  return std::nullopt;
}

/// The type named by its MLIR spelling ("f32", "f16", "bf16").
inline std::optional<DType> parseMlirName(std::string_view name) {
  for (DType type : kDTypes)
    if (name == mlirName(type))
      return type;
  return std::nullopt;
}

// Round-to-nearest-even; NaN stays NaN (quiet), infinities are preserved.
float bf16ToFloat(uint16_t);
uint16_t floatToBf16(float);
// IEEE 754 binary16 including subnormals, infinities and NaN; RNE.
float f16ToFloat(uint16_t);
uint16_t floatToF16(float);

/// The largest finite f16. An f16 KV cache stores keys and values clamped to
/// +-kF16Max before rounding, so an outlier is cached as the largest value
/// rather than as an infinity that would turn attention's softmax into NaN.
inline constexpr float kF16Max = 65504.0f;
/// floatToF16 of `value` clamped to +-kF16Max; NaN stays NaN.
uint16_t floatToF16Saturating(float);

// `src`/`dst` need not be aligned; elements are little-endian in memory.
void convertToF32(DType, const void *src, float *dst, size_t count);
void convertFromF32(DType, const float *src, void *dst, size_t count);

} // namespace q3::runtime
