// Writing spec-conformant .safetensors files (tests, golden data, tools).
#pragma once

#include "runtime/DType.h"
#include "runtime/LoadError.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace q3::runtime {

struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes; // little-endian elements, exactly product(shape) * dtypeSize(dtype)
};

// Layout: u64 LE header length, JSON header (tensors sorted by name, offsets
// contiguous from 0, "__metadata__": {"format": "pt"} plus `metadata`), header
// padded with spaces to a multiple of 8, then the tensor bytes.
// Throws LoadError on bytes/shape mismatches and bad names, OutputError on
// I/O errors; the file is written atomically (runtime/AtomicFile.h).
void writeSafeTensors(const std::string &path, const std::vector<TensorToWrite> &tensors,
                      const std::map<std::string, std::string> &metadata = {});

} // namespace q3::runtime
