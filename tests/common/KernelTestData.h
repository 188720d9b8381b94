//===- KernelTestData.h - inputs of the backends' kernel tests ------------===//
//
// What the CPU and Vulkan kernel tests both make: random inputs.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <random>
#include <vector>

namespace q3::testing {

/// `count` values uniform in [-scale, scale].
inline std::vector<float> randomValues(size_t count, std::mt19937 &rng, float scale = 1.0f) {
  std::uniform_real_distribution<float> uniform(-scale, scale);
  std::vector<float> values(count);
  for (float &v : values)
    v = uniform(rng);
  return values;
}

} // namespace q3::testing
