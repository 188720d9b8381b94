// NumPy .npy files (format version 1.0, little-endian float32, C order): the
// interchange format for logits between q3c, q3run and the Python reference.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace q3::runtime {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// Written atomically (runtime/AtomicFile.h); throws OutputError naming the
// path on I/O failure.
void writeNpyF32(const std::string &path, const std::vector<int64_t> &shape,
                 const std::vector<float> &data);
// Reads a float32 ('<f4') C-order array; anything else is a LoadError that says what was found.
NpyArray readNpyF32(const std::string &path);

} // namespace q3::runtime
