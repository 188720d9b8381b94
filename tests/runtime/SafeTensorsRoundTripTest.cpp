#include "TestFiles.h"

#include "runtime/AtomicFile.h"

#include "runtime/SafeTensors.h"
#include "runtime/SafeTensorsWriter.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

namespace q3::runtime {
namespace {

using testing::f32Tensor;
using testing::TempDir;

std::vector<uint8_t> readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

TensorToWrite tensorOf(DType type, const std::string &name, std::vector<int64_t> shape,
                       const std::vector<float> &values) {
  TensorToWrite tensor{name, type, std::move(shape),
                       std::vector<uint8_t>(values.size() * dtypeSize(type))};
  convertFromF32(type, values.data(), tensor.bytes.data(), values.size());
  return tensor;
}

class RoundTrip : public ::testing::TestWithParam<DType> {};

TEST_P(RoundTrip, WriterThenReaderGivesBackEveryTensor) {
  DType type = GetParam();
  TempDir dir;
  std::string path = dir.file("model.safetensors");
  std::vector<float> values = {1.0f, -2.0f, 0.5f, 0.25f, 8.0f, -0.125f};
  // Deliberately unsorted input, an empty tensor and a scalar.
  writeSafeTensors(path,
                   {tensorOf(type, "z.weight", {2, 3}, values),
                    tensorOf(type, "a.bias", {3}, {7, 8, 9}), tensorOf(type, "empty", {0, 4}, {}),
                    tensorOf(type, "scalar", {}, {42})},
                   {{"origin", "test"}});

  auto file = SafeTensorsFile::open(path);
  ASSERT_EQ(file->tensors().size(), 4u);
  EXPECT_EQ(file->tensors()[0].name, "a.bias"); // sorted by name
  EXPECT_EQ(file->metadata().at("format"), "pt");
  EXPECT_EQ(file->metadata().at("origin"), "test");

  const TensorView *weight = file->find("z.weight");
  ASSERT_NE(weight, nullptr);
  EXPECT_EQ(weight->dtype, type);
  EXPECT_EQ(weight->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(weight->numElements(), 6);
  EXPECT_EQ(weight->byteSize, 6 * dtypeSize(type));
  EXPECT_EQ(weight->file, path);
  EXPECT_EQ(readAsF32(*weight), values);
  EXPECT_EQ(readAsF32(*file->find("a.bias")), (std::vector<float>{7, 8, 9}));
  EXPECT_EQ(readAsF32(*file->find("scalar")), (std::vector<float>{42}));
  EXPECT_EQ(file->find("empty")->numElements(), 0);
  EXPECT_TRUE(readAsF32(*file->find("empty")).empty());
  EXPECT_EQ(file->find("missing"), nullptr);
  EXPECT_EQ(file->find("a"), nullptr);
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, RoundTrip,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const auto &info) { return std::string(dtypeName(info.param)); });

TEST(SafeTensorsWriter, LayoutFollowsTheSpec) {
  TempDir dir;
  std::string path = dir.file("x.safetensors");
  writeSafeTensors(path, {f32Tensor("b", {2}), f32Tensor("a", {1}, 5)});
  std::vector<uint8_t> bytes = readFile(path);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t headerLength = 0;
  for (int i = 7; i >= 0; --i)
    headerLength = (headerLength << 8) | bytes[i];
  EXPECT_EQ(headerLength % 8, 0u);
  ASSERT_EQ(bytes.size(), 8 + headerLength + 12);
  std::string header(bytes.begin() + 8, bytes.begin() + 8 + long(headerLength));
  EXPECT_NE(header.find("\"a\":{\"data_offsets\":[0,4]"), std::string::npos) << header;
  EXPECT_NE(header.find("\"b\":{\"data_offsets\":[4,12]"), std::string::npos) << header;
  EXPECT_NE(header.find("\"__metadata__\":{\"format\":\"pt\"}"), std::string::npos) << header;
  float first;
  std::memcpy(&first, bytes.data() + 8 + headerLength, 4);
  EXPECT_EQ(first, 5.0f); // "a" comes first in the data
}

TEST(SafeTensorsWriter, RejectsBytesThatDoNotMatchTheShape) {
  TempDir dir;
  TensorToWrite bad = f32Tensor("w", {2, 2});
  bad.bytes.pop_back();
  try {
    writeSafeTensors(dir.file("bad.safetensors"), {bad});
    FAIL() << "expected LoadError";
  } catch (const LoadError &error) {
    EXPECT_STREQ(error.what(), (dir.file("bad.safetensors") +
                                ": tensor 'w': has 15 bytes but shape [2, 2] x F32 needs 16")
                                   .c_str());
  }
}

TEST(SafeTensorsWriter, RejectsDuplicateNamesAndUnwritablePaths) {
  TempDir dir;
  EXPECT_THROW(
      writeSafeTensors(dir.file("d.safetensors"), {f32Tensor("w", {1}), f32Tensor("w", {1})}),
      LoadError);
  try {
    writeSafeTensors(dir.file("no/such/dir/x.safetensors"), {f32Tensor("w", {1})});
    FAIL() << "expected OutputError";
  } catch (const OutputError &error) {
    EXPECT_NE(std::string(error.what())
                  .find("no/such/dir/x.safetensors: cannot create a temporary file in "),
              std::string::npos)
        << error.what();
  }
}

TEST(SafeTensorsFile, OpenReportsMissingFilesAndFolders) {
  TempDir dir;
  try {
    SafeTensorsFile::open(dir.file("nope.safetensors"));
    FAIL() << "expected LoadError";
  } catch (const LoadError &error) {
    EXPECT_EQ(std::string(error.what()),
              dir.file("nope.safetensors") + ": cannot open: No such file or directory");
  }
  EXPECT_THROW(SafeTensorsFile::open(dir.path()), LoadError);
  testing::writeBytes(dir.file("empty.safetensors"), {});
  try {
    SafeTensorsFile::open(dir.file("empty.safetensors"));
    FAIL() << "expected LoadError";
  } catch (const LoadError &error) {
    EXPECT_NE(std::string(error.what()).find("empty.safetensors: file is 0 bytes"),
              std::string::npos)
        << error.what();
  }
}

} // namespace
} // namespace q3::runtime
