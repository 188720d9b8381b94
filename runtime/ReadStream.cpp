#include "runtime/ReadStream.h"

namespace q3::runtime {

std::string readToEnd(std::FILE *file) {
  constexpr size_t kChunk = size_t(1) << 16;
  std::string text;
  size_t used = 0;
  for (;;) {
    text.resize(used + kChunk);
    const size_t got = std::fread(text.data() + used, 1, kChunk, file);
    used += got;
    if (got < kChunk) // the end, or an error
      break;
  }
  text.resize(used);
  return text;
}

} // namespace q3::runtime
