// Helpers shared by the runtime tests: scratch folders and hand-made images.
#pragma once

#include "runtime/DType.h"
#include "runtime/LoadError.h"
#include "runtime/SafeTensorsWriter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace q3::runtime::testing {

// A fresh folder under the system temp dir, removed with everything in it.
class TempDir {
public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "q3rt-XXXXXX").string();
    if (!::mkdtemp(pattern.data()))
      throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string file(const std::string &name) const { return (path_ / name).string(); }
  std::string path() const { return path_.string(); }

private:
  std::filesystem::path path_;
};

inline void writeBytes(const std::string &path, const std::vector<uint8_t> &bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size()));
}

inline void writeText(const std::string &path, const std::string &text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// Runs `statement` expecting a LoadError whose message contains `part`.
#define EXPECT_LOAD_ERROR(statement, part)                                                         \
  try {                                                                                            \
    statement;                                                                                     \
    ADD_FAILURE() << "expected LoadError containing: " << (part);                                  \
  } catch (const ::q3::runtime::LoadError &error) {                                                \
    EXPECT_NE(std::string(error.what()).find(part), std::string::npos) << error.what();            \
  }

// Runs `parse` expecting a LoadError whose message is one line starting with
// "<file>: "; returns the message ("" and a test failure if nothing is thrown).
template <typename Parse> std::string expectOneLineLoadError(const std::string &file, Parse parse) {
  try {
    parse();
  } catch (const LoadError &error) {
    std::string message = error.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << "message must be one line: " << message;
    EXPECT_EQ(message.rfind(file + ": ", 0), 0u) << "message must start with the file: " << message;
    return message;
  }
  ADD_FAILURE() << "expected a LoadError";
  return "";
}

// A file image with the given header text (not validated) and `dataBytes` of data.
inline std::vector<uint8_t> imageWithHeader(const std::string &header, size_t dataBytes) {
  // Sized once and filled in place: GCC 12 at -O3 reports a false
  // -Warray-bounds for vector::insert of a string range here.
  std::vector<uint8_t> image(8 + header.size() + dataBytes, 0xab);
  uint64_t length = header.size();
  for (int i = 0; i < 8; ++i)
    image[i] = uint8_t(length >> (8 * i));
  std::copy(header.begin(), header.end(), image.begin() + 8);
  return image;
}

// F32 tensor whose element i is `first + i`.
inline TensorToWrite f32Tensor(const std::string &name, std::vector<int64_t> shape,
                               float first = 0) {
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;
  std::vector<float> values(static_cast<size_t>(count));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = first + float(i);
  std::vector<uint8_t> bytes(values.size() * 4);
  if (!bytes.empty())
    std::memcpy(bytes.data(), values.data(), bytes.size());
  return TensorToWrite{name, DType::F32, std::move(shape), std::move(bytes)};
}

#ifdef Q3_TEST_KERNEL_LIBRARY
// The bytes of SharedLibraryTestKernel.c's shared object (built by CMake).
inline std::vector<uint8_t> testKernelBytes() {
  std::ifstream in(Q3_TEST_KERNEL_LIBRARY, std::ios::binary);
  EXPECT_TRUE(in) << "cannot open " << Q3_TEST_KERNEL_LIBRARY;
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}
#endif

} // namespace q3::runtime::testing
