// The artifact container: write/read round trips, and one LoadError line for
// every malformed input. Corruptions that target a check after the checksum
// re-seal the checksum so that exactly that check is reached.
#include "ArtifactBytes.h"
#include "TestFiles.h"

#include "runtime/Artifact.h"
#include "runtime/AtomicFile.h"
#include "runtime/Checksum.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

namespace q3::runtime {
namespace {

using Json = nlohmann::json;
using testing::entry;
using testing::getU32;
using testing::getU64;
using testing::pattern;
using testing::setU32;
using testing::setU64;
using testing::TempDir;
using testing::writeBytes;

const std::string kFile = "model.q3c";

std::vector<uint8_t> bytesOf(const std::string &text) { return {text.begin(), text.end()}; }

const Json kManifest = {{"model", "tiny"}, {"dispatches", {1, 2, 3}}};

std::vector<ArtifactSection> threeSections() {
  std::vector<uint8_t> elf = bytesOf("\x7f"
                                     "ELF");
  std::vector<uint8_t> code = pattern(100, 3);
  elf.insert(elf.end(), code.begin(), code.end());
  return {ArtifactSection{"kernels", SectionKind::Executable, elf},
          ArtifactSection{"constants", SectionKind::Data, pattern(70, 11)}};
}

// Valid image: manifest, "kernels" (executable), "constants" (data).
std::vector<uint8_t> validImage() { return serializeArtifact(kFile, kManifest, threeSections()); }

void reseal(std::vector<uint8_t> &image) {
  setU64(image, 40, artifactChecksum(image.data(), image.size()));
}

// Section table entry i and its fields.
size_t kindAt(size_t i) { return entry(i); }
size_t flagsAt(size_t i) { return entry(i) + 4; }
size_t offsetAt(size_t i) { return entry(i) + 8; }
size_t sizeAt(size_t i) { return entry(i) + 16; }
size_t nameAt(size_t i) { return entry(i) + 24; }

void setName(std::vector<uint8_t> &image, size_t i, const std::string &name) {
  std::memset(&image[nameAt(i)], 0, 40);
  std::memcpy(&image[nameAt(i)], name.data(), std::min<size_t>(name.size(), 40));
}

// Parses `image` expecting failure; returns the one-line message.
std::string parseError(const std::vector<uint8_t> &image) {
  return testing::expectOneLineLoadError(kFile, [&] { Artifact::parse(kFile, image.data(), image.size()); });
}

// Same, after re-sealing the checksum.
std::string sealedError(std::vector<uint8_t> image) {
  reseal(image);
  return parseError(image);
}

std::string writeError(const Json &manifest, const std::vector<ArtifactSection> &sections) {
  try {
    serializeArtifact(kFile, manifest, sections);
  } catch (const LoadError &error) {
    std::string message = error.what();
    EXPECT_EQ(message.rfind(kFile + ": ", 0), 0u) << message;
    return message;
  }
  ADD_FAILURE() << "expected a LoadError";
  return "";
}

std::vector<uint8_t> readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// ---------------------------------------------------------------------------

TEST(Checksum, KnownFnv1aValues) {
  EXPECT_EQ(fnv1a64("", 0), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a", 1), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar", 6), 0x85944171f73967e8ull);
  EXPECT_EQ(fnv1a64Zeros(3, kFnv1a64Basis), fnv1a64("\0\0\0", 3));
}

TEST(Checksum, IgnoresTheChecksumField) {
  std::vector<uint8_t> image = validImage();
  uint64_t sum = artifactChecksum(image.data(), image.size());
  for (size_t i = 40; i < 48; ++i)
    image[i] ^= 0xff;
  EXPECT_EQ(artifactChecksum(image.data(), image.size()), sum);
  image[100] ^= 1;
  EXPECT_NE(artifactChecksum(image.data(), image.size()), sum);
}

TEST(ArtifactRoundTrip, WriteThenOpen) {
  TempDir dir;
  std::string path = dir.file("model.q3c");
  std::vector<ArtifactSection> sections = threeSections();
  writeArtifact(path, kManifest, sections);

  std::unique_ptr<Artifact> artifact = Artifact::open(path);
  EXPECT_EQ(artifact->formatVersion(), kArtifactOldestVersion);
  EXPECT_EQ(artifact->displayName(), path);
  EXPECT_EQ(artifact->manifest(), kManifest);
  ASSERT_EQ(artifact->sections().size(), 3u);

  const Artifact::Section &manifest = artifact->sections()[0];
  EXPECT_EQ(manifest.name, "manifest");
  EXPECT_EQ(manifest.kind, SectionKind::Manifest);
  EXPECT_EQ(std::string(reinterpret_cast<const char *>(manifest.data), manifest.size),
            kManifest.dump());
  for (size_t i = 0; i < sections.size(); ++i) {
    const Artifact::Section &read = artifact->sections()[i + 1];
    EXPECT_EQ(read.name, sections[i].name);
    EXPECT_EQ(read.kind, sections[i].kind);
    EXPECT_EQ(std::vector<uint8_t>(read.data, read.data + read.size), sections[i].bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(read.data) % 64, 0u) << read.name;
    EXPECT_EQ(artifact->find(sections[i].name), &read);
  }
  EXPECT_EQ(artifact->find("manifest"), &manifest);
  EXPECT_EQ(artifact->find("missing"), nullptr);
  EXPECT_EQ(artifact->find(""), nullptr);
}

TEST(ArtifactRoundTrip, FileEqualsSerializedImage) {
  TempDir dir;
  std::string path = dir.file("model.q3c");
  writeArtifact(path, kManifest, threeSections());
  EXPECT_EQ(readFile(path), validImage());
}

TEST(ArtifactRoundTrip, HeaderAndTableLayout) {
  std::vector<uint8_t> image = validImage();
  EXPECT_EQ(std::memcmp(image.data(), "Q3CART\r\n", 8), 0);
  EXPECT_EQ(getU32(image, 8), kArtifactOldestVersion);
  EXPECT_EQ(getU32(image, 12), 64u);
  EXPECT_EQ(getU64(image, 16), image.size());
  EXPECT_EQ(getU64(image, 24), 3u);
  EXPECT_EQ(getU64(image, 32), 64u);
  EXPECT_EQ(getU64(image, 40), artifactChecksum(image.data(), image.size()));
  for (size_t i = 48; i < 64; ++i)
    EXPECT_EQ(image[i], 0) << i;
  // Manifest first, right after the table; payloads in order, each aligned.
  EXPECT_EQ(getU32(image, kindAt(0)), 1u);
  EXPECT_EQ(getU64(image, offsetAt(0)), 256u);
  EXPECT_EQ(getU64(image, sizeAt(0)), kManifest.dump().size());
  EXPECT_EQ(std::string(reinterpret_cast<const char *>(&image[nameAt(0)])), "manifest");
  uint64_t previousEnd = 256;
  for (size_t i = 0; i < 3; ++i) {
    uint64_t offset = getU64(image, offsetAt(i));
    EXPECT_EQ(offset % 64, 0u);
    EXPECT_GE(offset, previousEnd);
    EXPECT_LT(offset, previousEnd + 64);
    previousEnd = offset + getU64(image, sizeAt(i));
    EXPECT_EQ(getU32(image, flagsAt(i)), 0u);
  }
  EXPECT_EQ(previousEnd, image.size()); // no trailing padding
}

TEST(ArtifactRoundTrip, ManifestOnlyAndEmptySections) {
  std::vector<uint8_t> lone = serializeArtifact(kFile, Json::object(), {});
  auto artifact = Artifact::parse(kFile, lone.data(), lone.size());
  EXPECT_EQ(artifact->manifest(), Json::object());
  EXPECT_EQ(artifact->sections().size(), 1u);

  // Empty sections: first, between, and last (the file is padded to its aligned offset).
  std::vector<ArtifactSection> sections = {{"a", SectionKind::Data, {}},
                                           {"b", SectionKind::Executable, pattern(5, 1)},
                                           {"c", SectionKind::Data, {}},
                                           {"d", SectionKind::Data, pattern(64, 2)},
                                           {"e", SectionKind::Data, {}}};
  std::vector<uint8_t> image = serializeArtifact(kFile, kManifest, sections);
  artifact = Artifact::parse(kFile, image.data(), image.size());
  ASSERT_EQ(artifact->sections().size(), 6u);
  for (size_t i = 0; i < sections.size(); ++i) {
    const Artifact::Section &read = artifact->sections()[i + 1];
    EXPECT_EQ(read.name, sections[i].name);
    EXPECT_EQ(std::vector<uint8_t>(read.data, read.data + read.size), sections[i].bytes);
  }
}

TEST(ArtifactRoundTrip, Utf8NamesAndMaxSizes) {
  std::vector<ArtifactSection> sections;
  sections.push_back({"gewichte-\xc3\xbc-\xe2\x82\xac", SectionKind::Data, pattern(3, 0)});
  sections.push_back({std::string(39, 'x'), SectionKind::Data, pattern(1, 0)});
  for (int i = 0; i < 61; ++i) // 63 besides the manifest: the limit
    sections.push_back({"s" + std::to_string(i), SectionKind::Data, pattern(size_t(i), 5)});
  std::vector<uint8_t> image = serializeArtifact(kFile, kManifest, sections);
  auto artifact = Artifact::parse(kFile, image.data(), image.size());
  EXPECT_EQ(artifact->sections().size(), 64u);
  EXPECT_NE(artifact->find(std::string(39, 'x')), nullptr);
  EXPECT_NE(artifact->find("gewichte-\xc3\xbc-\xe2\x82\xac"), nullptr);
}

// --- header -----------------------------------------------------------------

TEST(ArtifactValidation, TooShortForTheHeader) {
  EXPECT_CONTAINS(parseError({}), "too short for the artifact header: expected at least 64 "
                                  "bytes, found 0");
  std::vector<uint8_t> image = validImage();
  image.resize(63);
  EXPECT_CONTAINS(parseError(image), "expected at least 64 bytes, found 63");
}

TEST(ArtifactValidation, BadMagic) {
  std::vector<uint8_t> image = validImage();
  image[0] = 'P';
  EXPECT_CONTAINS(parseError(image), "not a q3c artifact: expected magic \"Q3CART\\x0d\\n\", "
                                     "found \"P3CART\\x0d\\n\"");
  // Text-mode mangling: \r\n -> \n.
  image = validImage();
  image.erase(image.begin() + 6);
  EXPECT_CONTAINS(parseError(image), "not a q3c artifact");
}

TEST(ArtifactValidation, OtherFormatVersion) {
  std::vector<uint8_t> image = validImage();
  setU32(image, 8, 7);
  EXPECT_CONTAINS(parseError(image), "model.q3c: artifact format version 7, this q3run reads "
                                     "versions 2 to 3: recompile the model with a matching q3c");
  setU32(image, 8, 0);
  EXPECT_CONTAINS(parseError(image), "artifact format version 0, this q3run reads versions 2 to 3");
  // Version 1, before SPIR-V sections: refused the same way.
  setU32(image, 8, 1);
  EXPECT_CONTAINS(parseError(image), "artifact format version 1, this q3run reads versions 2 to 3");
}

TEST(ArtifactValidation, HeaderSize) {
  std::vector<uint8_t> image = validImage();
  setU32(image, 12, 128);
  EXPECT_CONTAINS(parseError(image), "header_size: expected 64, found 128");
}

TEST(ArtifactValidation, TruncatedOrExtended) {
  std::vector<uint8_t> image = validImage();
  size_t size = image.size();
  image.resize(size - 10);
  EXPECT_CONTAINS(parseError(image), fmt::format("truncated or extended: header says {} bytes, "
                                                 "file has {}",
                                                 size, size - 10));
  image = validImage();
  image.push_back(0);
  EXPECT_CONTAINS(parseError(image),
                  fmt::format("header says {} bytes, file has {}", size, size + 1));
}

TEST(ArtifactValidation, ChecksumMismatch) {
  std::vector<uint8_t> image = validImage();
  image.back() ^= 0x10; // a payload byte
  EXPECT_CONTAINS(parseError(image), "checksum mismatch: the file is corrupt: expected 0x");
  image = validImage();
  image[nameAt(1)] = 'K'; // a table byte
  EXPECT_CONTAINS(parseError(image), "checksum mismatch");
  image = validImage();
  image[40] ^= 1; // the checksum itself
  EXPECT_CONTAINS(parseError(image), "checksum mismatch");
}

TEST(ArtifactValidation, ReservedBytes) {
  std::vector<uint8_t> image = validImage();
  image[50] = 0x2a;
  EXPECT_CONTAINS(sealedError(image), "reserved header bytes 48..63: expected zero, found 0x2a "
                                      "at byte 50");
  image = validImage();
  image[63] = 1;
  EXPECT_CONTAINS(sealedError(image), "found 0x01 at byte 63");
}

TEST(ArtifactValidation, SectionCount) {
  std::vector<uint8_t> image = validImage();
  setU64(image, 24, 65);
  EXPECT_CONTAINS(sealedError(image), "section_count: expected at most 64, found 65");
  setU64(image, 24, ~0ull);
  EXPECT_CONTAINS(sealedError(image), "found 18446744073709551615");
}

TEST(ArtifactValidation, SectionTableOffset) {
  std::vector<uint8_t> image = validImage();
  setU64(image, 32, 128);
  EXPECT_CONTAINS(sealedError(image), "section_table_offset: expected 64, found 128");
}

TEST(ArtifactValidation, SectionTableOutsideTheFile) {
  std::vector<uint8_t> image = validImage();
  setU64(image, 24, 64); // 64 + 64 * 64 = 4160 > file size
  EXPECT_CONTAINS(sealedError(image),
                  fmt::format("section table of 64 entries: expected it to end within the "
                              "{}-byte file, found it ends at byte 4160",
                              image.size()));
}

// --- section entries --------------------------------------------------------

TEST(ArtifactValidation, UnknownKindAndFlags) {
  std::vector<uint8_t> image = validImage();
  setU32(image, kindAt(1), 9);
  EXPECT_CONTAINS(sealedError(image), "section 1 'kernels': kind: expected 1 (manifest), 2 "
                                      "(executable), 3 (data), 4 (spirv) or 5 (mapped), found 9");
  image = validImage();
  setU32(image, kindAt(2), 0);
  EXPECT_CONTAINS(sealedError(image), "section 2 'constants': kind: expected");
  image = validImage();
  setU32(image, flagsAt(2), 4);
  EXPECT_CONTAINS(sealedError(image), "section 2 'constants': flags: expected 0, found 0x4");
  // A SPIR-V section is whole 32-bit words.
  image = validImage();
  setU32(image, kindAt(2), 4);
  EXPECT_CONTAINS(sealedError(image),
                  "section 2 'constants': size: expected whole 32-bit SPIR-V words, found 70 bytes");
}

TEST(ArtifactValidation, SectionOutsideTheFile) {
  std::vector<uint8_t> image = validImage();
  uint64_t offset = getU64(image, offsetAt(2));
  setU64(image, sizeAt(2), image.size() - offset + 1);
  EXPECT_CONTAINS(sealedError(image),
                  fmt::format("section 2 'constants': offset {} + size {}: expected an end "
                              "within the {}-byte file, found end {}",
                              offset, image.size() - offset + 1, image.size(), image.size() + 1));
  image = validImage();
  setU64(image, sizeAt(2), ~0ull);
  EXPECT_CONTAINS(sealedError(image), "found an overflow");
  image = validImage();
  setU64(image, offsetAt(2), 1ull << 40);
  setU64(image, sizeAt(2), 0); // even an empty section must lie in the file
  EXPECT_CONTAINS(sealedError(image), "section 2 'constants': offset 1099511627776 + size 0");
}

TEST(ArtifactValidation, SectionOverlappingTheTableOrHeader) {
  std::vector<uint8_t> image = validImage();
  setU64(image, offsetAt(1), 192);
  EXPECT_CONTAINS(sealedError(image), "section 1 'kernels': offset: expected at least 256 "
                                      "(after the section table), found 192");
  setU64(image, offsetAt(1), 0);
  EXPECT_CONTAINS(sealedError(image), "expected at least 256 (after the section table), found 0");
}

TEST(ArtifactValidation, MisalignedSection) {
  std::vector<uint8_t> image = validImage();
  uint64_t offset = getU64(image, offsetAt(2));
  setU64(image, offsetAt(2), offset + 8);
  setU64(image, sizeAt(2), 8);
  EXPECT_CONTAINS(sealedError(image), fmt::format("section 2 'constants': offset: expected a "
                                                  "multiple of 64, found {}",
                                                  offset + 8));
}

TEST(ArtifactValidation, OverlappingSections) {
  std::vector<uint8_t> image = validImage();
  uint64_t kernels = getU64(image, offsetAt(1));
  setU64(image, offsetAt(2), kernels + 64); // inside "kernels" (104 bytes)
  setU64(image, sizeAt(2), 8);
  EXPECT_CONTAINS(sealedError(image),
                  fmt::format("section 2 'constants' [{}, {}): expected no overlap, found it "
                              "overlaps section 1 'kernels' [{}, {})",
                              kernels + 64, kernels + 72, kernels, kernels + 104));
  // Identical ranges; and an empty section inside another counts as overlapping.
  image = validImage();
  setU64(image, offsetAt(2), kernels);
  EXPECT_CONTAINS(sealedError(image), "expected no overlap");
  setU64(image, offsetAt(2), kernels + 64);
  setU64(image, sizeAt(2), 0);
  EXPECT_CONTAINS(sealedError(image), "expected no overlap");
}

TEST(ArtifactValidation, BadNames) {
  std::vector<uint8_t> image = validImage();
  setName(image, 1, "");
  EXPECT_CONTAINS(sealedError(image), "section 1: name: expected a non-empty name, found an "
                                      "empty one");
  setName(image, 1, "bad\xff");
  EXPECT_CONTAINS(sealedError(image), "section 1 'bad\\xff': name: expected UTF-8 text without "
                                      "control characters, found \"bad\\xff\"");
  setName(image, 1, "\xc0\xaf"); // overlong '/'
  EXPECT_CONTAINS(sealedError(image), "expected UTF-8 text");
  setName(image, 1, "tab\there");
  EXPECT_CONTAINS(sealedError(image), "found \"tab\\there\"");
  setName(image, 1, "kernels");
  image[nameAt(1) + 20] = 'z';
  EXPECT_CONTAINS(sealedError(image), "section 1 'kernels': name: expected NUL padding after the "
                                      "name, found 0x7a at name byte 20");
  setName(image, 1, std::string(40, 'n'));
  EXPECT_CONTAINS(sealedError(image), "name: expected at most 39 bytes and a NUL, found 40 bytes "
                                      "without one");
}

TEST(ArtifactValidation, DuplicateNames) {
  std::vector<uint8_t> image = validImage();
  setName(image, 2, "kernels");
  EXPECT_CONTAINS(sealedError(image), "section 2 'kernels': name: expected a unique name, found "
                                      "it also at section 1");
}

TEST(ArtifactValidation, ManifestSectionCount) {
  std::vector<uint8_t> image = validImage();
  setU32(image, kindAt(0), 3);
  setName(image, 0, "notes");
  EXPECT_CONTAINS(sealedError(image), "manifest section: expected exactly one (kind 1, named "
                                      "\"manifest\"), found none");
  image = validImage();
  setU32(image, kindAt(2), 1);
  setName(image, 2, "manifest");
  EXPECT_CONTAINS(sealedError(image), "manifest section: expected exactly one, found two "
                                      "(sections 0 and 2)");
}

TEST(ArtifactValidation, ManifestKindAndNameDisagree) {
  std::vector<uint8_t> image = validImage();
  setU32(image, kindAt(2), 1);
  EXPECT_CONTAINS(sealedError(image), "section 2 'constants': name: expected \"manifest\" for a "
                                      "section of kind 1 (manifest), found 'constants'");
  image = validImage();
  setU32(image, kindAt(0), 3);
  EXPECT_CONTAINS(sealedError(image), "section 0 'manifest': kind: expected 1 (manifest) for the "
                                      "section named \"manifest\", found 3 (data)");
}

// Overwrites the manifest payload with same-length `text`.
std::vector<uint8_t> withManifestText(const std::string &text) {
  std::vector<uint8_t> image =
      serializeArtifact(kFile, Json{{"k", std::string(text.size() - 8, 'v')}}, threeSections());
  EXPECT_EQ(getU64(image, sizeAt(0)), text.size());
  std::memcpy(&image[getU64(image, offsetAt(0))], text.data(), text.size());
  reseal(image);
  return image;
}

TEST(ArtifactValidation, ManifestNotAJsonObject) {
  EXPECT_CONTAINS(parseError(withManifestText("[1, 2, 3, 4, 5, 6]")),
                  "manifest: expected a JSON object, found array");
  EXPECT_CONTAINS(parseError(withManifestText("\"just a string\"   ")),
                  "manifest: expected a JSON object, found string");
  std::string message = parseError(withManifestText("{\"k\":\n \"vvv\" x}"));
  EXPECT_CONTAINS(message, "manifest: expected a JSON object, found invalid JSON: parse error at "
                           "line 2, column");
  EXPECT_CONTAINS(parseError(withManifestText("{\"k\": \"\xff\xfe\"}  ")), "invalid JSON");
  EXPECT_CONTAINS(parseError(withManifestText("{\"k\": 1}{\"k\": 2}")), "invalid JSON");
}

// --- open() and the writer ----------------------------------------------------

TEST(ArtifactOpen, FileErrors) {
  TempDir dir;
  try {
    Artifact::open(dir.file("missing.q3c"));
    ADD_FAILURE() << "expected a LoadError";
  } catch (const LoadError &error) {
    EXPECT_CONTAINS(std::string(error.what()), "missing.q3c: cannot open: No such file");
  }
  try {
    Artifact::open(dir.path());
    ADD_FAILURE() << "expected a LoadError";
  } catch (const LoadError &error) {
    EXPECT_CONTAINS(std::string(error.what()), "not a regular file");
  }
  writeBytes(dir.file("empty.q3c"), {});
  try {
    Artifact::open(dir.file("empty.q3c"));
    ADD_FAILURE() << "expected a LoadError";
  } catch (const LoadError &error) {
    EXPECT_CONTAINS(std::string(error.what()), "empty.q3c: too short for the artifact header");
  }
  std::vector<uint8_t> image = validImage();
  image[300] ^= 1;
  writeBytes(dir.file("corrupt.q3c"), image);
  try {
    Artifact::open(dir.file("corrupt.q3c"));
    ADD_FAILURE() << "expected a LoadError";
  } catch (const LoadError &error) {
    EXPECT_CONTAINS(std::string(error.what()), "corrupt.q3c: checksum mismatch");
  }
}

TEST(ArtifactWriter, RejectsBadInput) {
  EXPECT_CONTAINS(writeError(Json::array(), {}), "manifest: expected a JSON object, found array");
  EXPECT_CONTAINS(writeError(Json{{"k", "\xff"}}, {}), "manifest: cannot encode as JSON");
  EXPECT_CONTAINS(writeError(kManifest, {{"", SectionKind::Data, {}}}),
                  "section '': name: expected a non-empty name");
  EXPECT_CONTAINS(writeError(kManifest, {{std::string(40, 'x'), SectionKind::Data, {}}}),
                  "name: expected at most 39 bytes, found 40");
  EXPECT_CONTAINS(writeError(kManifest, {{std::string("a\0b", 3), SectionKind::Data, {}}}),
                  "expected UTF-8 text without control characters");
  EXPECT_CONTAINS(writeError(kManifest, {{"manifest", SectionKind::Data, {}}}),
                  "section 'manifest': name: reserved for the manifest");
  EXPECT_CONTAINS(
      writeError(kManifest, {{"a", SectionKind::Data, {}}, {"a", SectionKind::Data, {}}}),
      "section 'a': name: expected a unique name, found it twice");
  EXPECT_CONTAINS(writeError(kManifest, {{"m", SectionKind::Manifest, {}}}),
                  "section 'm': kind: expected 2 (executable), 3 (data), 4 (spirv) or 5 "
                  "(mapped), found 1 (manifest)");
  EXPECT_CONTAINS(writeError(kManifest, {{"s", SectionKind::Spirv, pattern(6, 1)}}),
                  "section 's': size: expected whole 32-bit SPIR-V words, found 6 bytes");
  EXPECT_CONTAINS(writeError(kManifest, {{"m", SectionKind(7), {}}}), "found 7");
  std::vector<ArtifactSection> many;
  for (int i = 0; i < 64; ++i)
    many.push_back({"s" + std::to_string(i), SectionKind::Data, {}});
  EXPECT_CONTAINS(writeError(kManifest, many),
                  "sections: expected at most 63 besides the manifest, found 64");
}

TEST(ArtifactWriter, IoErrorNamesThePath) {
  TempDir dir;
  std::string path = dir.file("no-such-dir/model.q3c");
  try {
    writeArtifact(path, kManifest, {});
    ADD_FAILURE() << "expected an OutputError";
  } catch (const OutputError &error) {
    EXPECT_CONTAINS(std::string(error.what()), path + ": cannot create a temporary file in ");
    EXPECT_CONTAINS(std::string(error.what()), "No such file or directory");
  }
}

} // namespace
} // namespace q3::runtime
