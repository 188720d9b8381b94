// Every malformed input must give one LoadError line naming the file, the
// tensor or field at fault, and what was expected versus found.
#include "TestFiles.h"

#include "runtime/SafeTensors.h"

#include <gtest/gtest.h>

namespace q3::runtime {
namespace {

using testing::imageWithHeader;

const std::string kFile = "bad.safetensors";

// Parses `image` expecting failure; returns the message.
std::string parseError(const std::vector<uint8_t> &image) {
  return testing::expectOneLineLoadError(kFile,
                                [&] { SafeTensorsFile::parse(kFile, image.data(), image.size()); });
}

std::string headerError(const std::string &header, size_t dataBytes = 0) {
  return parseError(imageWithHeader(header, dataBytes));
}

#define EXPECT_CONTAINS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST(SafeTensorsValidation, TooShortForTheLengthField) {
  EXPECT_CONTAINS(parseError({1, 2, 3}), "file is 3 bytes, shorter than the 8-byte header length");
  EXPECT_CONTAINS(parseError({}), "file is 0 bytes");
}

TEST(SafeTensorsValidation, BadHeaderLengths) {
  EXPECT_CONTAINS(parseError({0, 0, 0, 0, 0, 0, 0, 0, '{', '}'}), "header length is 0");
  std::vector<uint8_t> huge = {0, 0, 0, 0x40, 0, 0, 0, 0, '{', '}'}; // 1 GiB
  EXPECT_CONTAINS(parseError(huge), "header length 1073741824 exceeds the 104857600-byte limit");
  std::vector<uint8_t> max = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  EXPECT_CONTAINS(parseError(max), "header length 18446744073709551615 exceeds");
  std::vector<uint8_t> beyond = {3, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
  EXPECT_CONTAINS(parseError(beyond), "header length 3 exceeds the 2 bytes after the length field");
}

TEST(SafeTensorsValidation, HeaderNotJson) {
  std::string message = headerError("{\"a\": [1,2,}");
  EXPECT_CONTAINS(message, "header is not valid JSON");
  EXPECT_CONTAINS(message, "line 1, column 12");
  EXPECT_CONTAINS(headerError("{\"a\":\n\n  nope}"), "line 3, column");
}

TEST(SafeTensorsValidation, HeaderNotAnObject) {
  EXPECT_CONTAINS(headerError("[1, 2]"), "header must be a JSON object, found array");
}

TEST(SafeTensorsValidation, EntryNotAnObject) {
  EXPECT_CONTAINS(headerError(R"({"w": 5})"), "tensor 'w': entry must be an object, found number");
}

TEST(SafeTensorsValidation, MissingFields) {
  EXPECT_CONTAINS(headerError(R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", 4),
                  "tensor 'w': missing field 'dtype'");
  EXPECT_CONTAINS(headerError(R"({"w": {"dtype": "F32", "data_offsets": [0, 4]}})", 4),
                  "tensor 'w': missing field 'shape'");
  EXPECT_CONTAINS(headerError(R"({"w": {"dtype": "F32", "shape": [1]}})", 4),
                  "tensor 'w': missing field 'data_offsets'");
}

TEST(SafeTensorsValidation, WrongTypedFields) {
  EXPECT_CONTAINS(headerError(R"({"w": {"dtype": 3, "shape": [1], "data_offsets": [0, 4]}})", 4),
                  "tensor 'w': 'dtype' must be a string, found number");
  EXPECT_CONTAINS(
      headerError(R"({"w": {"dtype": "F32", "shape": "1", "data_offsets": [0, 4]}})", 4),
      "tensor 'w': 'shape' must be an array, found string");
  EXPECT_CONTAINS(
      headerError(R"({"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", 4),
      "tensor 'w': shape[0] must be an integer, found 1.5");
  EXPECT_CONTAINS(headerError(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 4),
                  "tensor 'w': 'data_offsets' must be an array of two integers, found [0]");
  EXPECT_CONTAINS(
      headerError(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": {"a": 1}}})", 4),
      "tensor 'w': 'data_offsets' must be an array of two integers");
  EXPECT_CONTAINS(
      headerError(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, "4"]}})", 4),
      "tensor 'w': data_offsets[1] must be an integer, found \"4\"");
}

TEST(SafeTensorsValidation, UnsupportedDType) {
  std::string message =
      headerError(R"({"ids": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})", 8);
  EXPECT_CONTAINS(message, "tensor 'ids': unsupported dtype I64 (supported: F32, F16, BF16)");
}

TEST(SafeTensorsValidation, NegativeAndOverflowingShapes) {
  EXPECT_CONTAINS(
      headerError(R"({"w": {"dtype": "F32", "shape": [2, -1], "data_offsets": [0, 0]}})"),
      "tensor 'w': shape[1] must be non-negative, found -1");
  EXPECT_CONTAINS(
      headerError(
          R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})"),
      "tensor 'w': shape [4294967296, 4294967296] x F32 overflows");
  EXPECT_CONTAINS(
      headerError(
          R"({"w": {"dtype": "BF16", "shape": [9223372036854775807], "data_offsets": [0, 0]}})"),
      "tensor 'w': shape [9223372036854775807] x BF16 overflows");
  EXPECT_CONTAINS(
      headerError(
          R"({"w": {"dtype": "F32", "shape": [9223372036854775808], "data_offsets": [0, 0]}})"),
      "tensor 'w': shape[0] = 9223372036854775808 is too large");
}

TEST(SafeTensorsValidation, BadDataOffsets) {
  EXPECT_CONTAINS(
      headerError(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", 4),
      "tensor 'w': data_offsets[0] must be non-negative, found -4");
  EXPECT_CONTAINS(
      headerError(R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [4, 0]}})", 4),
      "tensor 'w': data_offsets [4, 0] begin after end");
  EXPECT_CONTAINS(
      headerError(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 4),
      "tensor 'w': data_offsets [0, 8] end beyond the 4-byte data region");
  EXPECT_CONTAINS(
      headerError(
          R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [18446744073709551615, 18446744073709551615]}})",
          4),
      "end beyond the 4-byte data region");
}

TEST(SafeTensorsValidation, ByteSizeMustMatchShape) {
  std::string message = headerError(
      R"({"model.norm.weight": {"dtype": "BF16", "shape": [1024], "data_offsets": [0, 10]}})", 16);
  EXPECT_EQ(message,
            "bad.safetensors: tensor 'model.norm.weight': data_offsets [0, 10] span 10 bytes but "
            "shape [1024] x BF16 needs 2048");
}

TEST(SafeTensorsValidation, OverlappingTensors) {
  std::string message = headerError(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                         "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                                    12);
  EXPECT_CONTAINS(message, "tensor 'b': data_offsets [4, 12] overlap tensor 'a' at [0, 8]");
  // Same start, listed in the other order by name.
  EXPECT_CONTAINS(headerError(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                                  "b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
                              8),
                  "overlap tensor");
}

TEST(SafeTensorsValidation, EmptyTensorsAndGapsAreAllowed) {
  auto image = imageWithHeader(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                                   "e": {"dtype": "F16", "shape": [3, 0], "data_offsets": [2, 2]},
                                   "z": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                               12);
  auto file = SafeTensorsFile::parse(kFile, image.data(), image.size());
  ASSERT_EQ(file->tensors().size(), 3u);
  EXPECT_EQ(file->find("e")->byteSize, 0u);
  EXPECT_TRUE(file->metadata().empty());
}

TEST(SafeTensorsValidation, DuplicateTensorNames) {
  EXPECT_CONTAINS(headerError(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                                  "w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                              8),
                  "tensor 'w': appears more than once in the header");
}

TEST(SafeTensorsValidation, NamesMustBeUtf8) {
  std::string message =
      headerError("{\"bad\xff\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [0, 0]}}");
  EXPECT_CONTAINS(message, "header is not valid JSON");
  EXPECT_CONTAINS(message, "UTF-8");
  EXPECT_CONTAINS(message, "\\xff"); // the raw byte is escaped, not pasted into the message
}

TEST(SafeTensorsValidation, NamesWithControlCharactersStayOnOneLine) {
  std::string message = headerError(R"({"a\nb": 1})");
  EXPECT_CONTAINS(message, "tensor 'a\\nb': entry must be an object");
}

TEST(SafeTensorsValidation, MetadataMustBeAnObjectOfStrings) {
  EXPECT_CONTAINS(headerError(R"({"__metadata__": ["pt"]})"),
                  "'__metadata__' must be an object of strings, found array");
  EXPECT_CONTAINS(headerError(R"({"__metadata__": {"format": 1}})"),
                  "'__metadata__' entry 'format' must be a string, found number");
}

// Error messages must not dump() a value recursively: a crafted header could
// nest deeply enough to overflow the stack.
TEST(SafeTensorsValidation, DeeplyNestedValuesDoNotOverflowTheStack) {
  const size_t depth = 500000;
  std::string header = R"({"w": {"dtype": "F32", "shape": [)" + std::string(depth, '[') +
                       std::string(depth, ']') + R"(], "data_offsets": [0, 0]}})";
  EXPECT_CONTAINS(headerError(header),
                  "tensor 'w': shape[0] must be an integer, found array of 1 elements");
  EXPECT_CONTAINS(headerError(std::string(depth, '[') + std::string(depth, ']')),
                  "header must be a JSON object, found array");
}

// A long found value is cut for the message; the cut may not break UTF-8 handling.
TEST(SafeTensorsValidation, LongStringValuesAreShortenedSafely) {
  std::string accents;
  for (int i = 0; i < 40; ++i)
    accents += "\xc3\xa9"; // é: the 64-byte cut falls inside one
  std::string message = headerError(R"({"w": {"dtype": "F32", "shape": [")" + accents +
                                    R"("], "data_offsets": [0, 0]}})");
  EXPECT_CONTAINS(message, "tensor 'w': shape[0] must be an integer, found \"");
}

TEST(SafeTensorsValidation, OpenNamesThePathInErrors) {
  testing::TempDir dir;
  std::string path = dir.file("short.safetensors");
  testing::writeBytes(path, {1, 2});
  try {
    SafeTensorsFile::open(path);
    FAIL() << "expected LoadError";
  } catch (const LoadError &error) {
    EXPECT_EQ(std::string(error.what()),
              path + ": file is 2 bytes, shorter than the 8-byte header length");
  }
}

} // namespace
} // namespace q3::runtime
