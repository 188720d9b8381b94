//===- KernelTestData.h - inputs of the backends' kernel tests ------------===//
//
// What the CPU and Vulkan kernel tests both make: random inputs, and the
// runtime's dtype of a weight or cache stored as a backend's Storage.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "backends/common/Storage.h"
#include "runtime/DType.h"

#include <cstddef>
#include <random>
#include <vector>

namespace q3::testing {

inline runtime::DType runtimeType(backends::Storage storage) {
  switch (storage) {
  case backends::Storage::F32:
    return runtime::DType::F32;
  case backends::Storage::F16:
    return runtime::DType::F16;
  case backends::Storage::BF16:
    return runtime::DType::BF16;
  }
  return runtime::DType::F32;
}

/// `count` values uniform in [-scale, scale].
inline std::vector<float> randomValues(size_t count, std::mt19937 &rng, float scale = 1.0f) {
  std::uniform_real_distribution<float> uniform(-scale, scale);
  std::vector<float> values(count);
  for (float &v : values)
    v = uniform(rng);
  return values;
}

} // namespace q3::testing
