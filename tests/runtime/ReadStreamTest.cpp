#include "runtime/ReadStream.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace q3::runtime {
namespace {

// Writes `text` to a temporary stream and reads it back from the start.
std::string roundTrip(const std::string &text) {
  std::FILE *file = std::tmpfile();
  EXPECT_NE(file, nullptr);
  EXPECT_EQ(std::fwrite(text.data(), 1, text.size(), file), text.size());
  std::rewind(file);
  std::string read = readToEnd(file);
  EXPECT_FALSE(std::ferror(file));
  std::fclose(file);
  return read;
}

TEST(ReadStream, ReadsEveryByteWhateverTheLength) {
  // Empty, short, exactly one and two of its 64 KiB reads, and between.
  for (size_t bytes : {size_t(0), size_t(1), size_t(65535), size_t(65536), size_t(65537),
                       size_t(131072), size_t(300001)}) {
    std::string text(bytes, '\0');
    for (size_t i = 0; i < bytes; ++i)
      text[i] = char(i * 131 + i / 7);
    EXPECT_EQ(roundTrip(text), text) << bytes << " bytes";
  }
}

TEST(ReadStream, ReadsWhatIsLeftFromWhereTheStreamIs) {
  std::FILE *file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  std::fputs("header\nbody", file);
  std::rewind(file);
  char line[16];
  ASSERT_NE(std::fgets(line, sizeof line, file), nullptr);
  EXPECT_EQ(readToEnd(file), "body");
  std::fclose(file);
}

} // namespace
} // namespace q3::runtime
