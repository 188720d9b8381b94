// Feeds arbitrary bytes to the safetensors parser. LoadError is the only
// acceptable failure; any other exception escapes and aborts (a bug). For a
// successful parse every tensor's bytes are touched so ASan checks the bounds.
#include "runtime/SafeTensors.h"

#include <cstddef>
#include <cstdint>
#include <string>

using q3::runtime::LoadError;
using q3::runtime::SafeTensorsFile;
using q3::runtime::TensorView;

namespace {

// Converting big tensors would only slow the fuzzer down; their first and
// last bytes are still read.
constexpr size_t kMaxConvertedBytes = 4096;

unsigned touch(const TensorView &tensor) {
  unsigned sum = 0;
  if (tensor.byteSize != 0)
    sum += tensor.data[0] + tensor.data[tensor.byteSize - 1];
  if (tensor.byteSize <= kMaxConvertedBytes)
    for (float value : q3::runtime::readAsF32(tensor))
      sum += value == value ? 1u : 0u;
  if (tensor.numElements() < 0)
    __builtin_trap(); // the parser promised a valid shape
  return sum;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    auto file = SafeTensorsFile::parse("fuzz", data, size);
    volatile unsigned sink = 0;
    for (const TensorView &tensor : file->tensors()) {
      sink = sink + touch(tensor);
      if (file->find(tensor.name) != &tensor)
        __builtin_trap();
    }
    for (const auto &entry : file->metadata())
      sink = sink + unsigned(entry.second.size());
  } catch (const LoadError &) {
  }
  return 0;
}
