// A checkpoint's bytes are the same whether read in place or copied onto huge
// pages, and a copy keeps them through dropPages (which, on anonymous memory,
// would otherwise hand back zeros: weights silently lost).
#include "TestFiles.h"

#include "runtime/LoadError.h"
#include "runtime/MappedFile.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace q3::runtime {
namespace {

using testing::TempDir;

/// 5 MB and a bit: more than two huge pages, not a whole number of them.
std::vector<uint8_t> patternBytes() {
  std::vector<uint8_t> bytes((size_t(5) << 20) + 12345);
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = uint8_t(i * 2654435761u >> 13);
  return bytes;
}

std::vector<uint8_t> contents(const MappedFile &file) {
  return std::vector<uint8_t>(file.data(), file.data() + file.size());
}

TEST(MappedFile, ACopyOnHugePagesHoldsTheFilesBytes) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  const std::vector<uint8_t> bytes = patternBytes();
  testing::writeBytes(path, bytes);
  auto mapped = MappedFile::open(path);
  auto copied = MappedFile::open(path, FilePlacement::HugePageCopy);
  ASSERT_EQ(copied->size(), bytes.size());
  EXPECT_NE(copied->data(), mapped->data());
  EXPECT_EQ(contents(*mapped), bytes);
  EXPECT_EQ(contents(*copied), bytes);
}

TEST(MappedFile, DroppingPagesLosesNoBytes) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  const std::vector<uint8_t> bytes = patternBytes();
  testing::writeBytes(path, bytes);
  for (FilePlacement placement : {FilePlacement::Mapped, FilePlacement::HugePageCopy}) {
    auto file = MappedFile::open(path, placement);
    file->dropPages(file->data(), file->size());
    EXPECT_EQ(contents(*file), bytes) << "placement " << int(placement);
  }
}

TEST(MappedFile, EmptyAndMissingFilesAreTheSameEitherWay) {
  TempDir dir;
  const std::string empty = dir.file("empty.safetensors");
  testing::writeBytes(empty, {});
  const std::string missing = dir.file("missing.safetensors");
  for (FilePlacement placement : {FilePlacement::Mapped, FilePlacement::HugePageCopy}) {
    auto file = MappedFile::open(empty, placement);
    EXPECT_EQ(file->size(), 0u);
    EXPECT_EQ(file->data(), nullptr);
    try {
      MappedFile::open(missing, placement);
      ADD_FAILURE() << "opened a missing file";
    } catch (const LoadError &error) {
      EXPECT_NE(std::string(error.what()).find("missing.safetensors: cannot open"),
                std::string::npos)
          << error.what();
    }
  }
}

} // namespace
} // namespace q3::runtime
