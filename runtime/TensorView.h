// A tensor that lives inside a mapped (or caller-owned) safetensors image.
#pragma once

#include "runtime/DType.h"

#include <cstdint>
#include <string>
#include <vector>

namespace q3::runtime {

// Valid while the file it came from lives. The parser guarantees that
// byteSize == numElements() * dtypeSize(dtype) and that [data, data+byteSize)
// lies inside the file image.
struct TensorView {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const uint8_t *data;
  size_t byteSize;
  std::string file; // path (or display name) of the file it came from

  int64_t numElements() const;
};

// Float32 copy of a tensor (for the reference interpreter).
std::vector<float> readAsF32(const TensorView &);

} // namespace q3::runtime
