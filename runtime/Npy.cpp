#include "runtime/Npy.h"
#include "runtime/AtomicFile.h"
#include "runtime/LoadError.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <fstream>
#include <regex>

namespace q3::runtime {

static const char kMagic[] = "\x93NUMPY";

static std::string shapeTuple(const std::vector<int64_t> &shape) {
  std::string s = "(" + fmt::format("{}", fmt::join(shape, ", "));
  return s + (shape.size() == 1 ? ",)" : ")"); // Python spells a 1-tuple "(n,)"
}

void writeNpyF32(const std::string &path, const std::vector<int64_t> &shape,
                 const std::vector<float> &data) {
  std::string header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': " + shapeTuple(shape) + ", }";
  // Magic (6) + version (2) + length (2) + header + '\n' is padded to a multiple of 64.
  size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  AtomicFile out(path);
  out.write(kMagic, 6);
  const uint16_t length = uint16_t(header.size());
  const uint8_t versionAndLength[4] = {1, 0, uint8_t(length & 0xff), uint8_t(length >> 8)};
  out.write(versionAndLength, sizeof versionAndLength);
  out.write(header);
  out.write(data.data(), data.size() * 4);
  out.commit();
}

NpyArray readNpyF32(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw LoadError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  char prefix[10];
  if (!in.read(prefix, 10) || std::memcmp(prefix, kMagic, 6) != 0 || prefix[6] != 1)
    throw LoadError(fmt::format("{}: not a version 1.0 .npy file", path));
  size_t length = uint8_t(prefix[8]) | (size_t(uint8_t(prefix[9])) << 8);
  std::string header(length, '\0');
  if (!in.read(header.data(), std::streamsize(length)))
    throw LoadError(fmt::format("{}: truncated .npy header", path));
  if (header.find("'descr': '<f4'") == std::string::npos ||
      header.find("'fortran_order': False") == std::string::npos)
    throw LoadError(
        fmt::format("{}: expected a C-order float32 array, header is {}", path, header));
  std::smatch match;
  if (!std::regex_search(header, match, std::regex("'shape': \\(([0-9, ]*)\\)")))
    throw LoadError(fmt::format("{}: .npy header has no shape", path));
  NpyArray array;
  int64_t count = 1;
  std::string dims = match[1];
  const std::regex number("[0-9]+");
  for (std::sregex_iterator it(dims.begin(), dims.end(), number), end; it != end; ++it) {
    array.shape.push_back(std::stoll(it->str()));
    count *= array.shape.back();
  }
  array.data.resize(size_t(count));
  if (!in.read(reinterpret_cast<char *>(array.data.data()), std::streamsize(count * 4)))
    throw LoadError(
        fmt::format("{}: .npy data shorter than shape {}", path, shapeTuple(array.shape)));
  return array;
}

} // namespace q3::runtime
