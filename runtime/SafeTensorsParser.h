// Internal: validation of a safetensors file image, separate from mapping it.
#pragma once

#include "runtime/TensorView.h"

#include <map>
#include <string>
#include <vector>

namespace q3::runtime {

struct SafeTensorsContents {
  std::vector<TensorView> tensors; // sorted by name, all bounds-checked
  std::map<std::string, std::string> metadata;
};

// Throws LoadError (message starts with `file`) on any malformed input.
SafeTensorsContents parseSafeTensorsImage(const std::string &file, const uint8_t *data,
                                          size_t size);

} // namespace q3::runtime
