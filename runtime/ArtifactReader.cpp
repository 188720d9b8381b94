// Reading and validating an artifact image (docs/artifact.md): every field
// of the header and the section table is checked against the format, and a
// failure names the file, the section and what was expected.
#include "runtime/Artifact.h"

#include "runtime/ArtifactFormat.h"
#include "runtime/Checksum.h"
#include "runtime/LittleEndian.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <thread>

namespace q3::runtime {

using namespace artifact_format;

namespace {

using Json = nlohmann::json;

struct Entry {
  size_t index;
  std::string name;
  uint32_t kind;
  uint64_t offset;
  uint64_t size;
};

std::string label(const Entry &entry) {
  return fmt::format("section {} '{}'", entry.index, printable(entry.name));
}

// Checks the fixed header; returns the section count.
uint64_t checkHeader(const std::string &file, const uint8_t *data, size_t size) {
  if (size < kArtifactHeaderSize)
    throw fileError(file,
                    fmt::format("too short for the artifact header: expected at least {} bytes, "
                                "found {}",
                                kArtifactHeaderSize, size));
  if (std::memcmp(data, kArtifactMagic, sizeof kArtifactMagic) != 0)
    throw fileError(
        file, fmt::format("not a q3c artifact: expected magic \"{}\", found \"{}\"",
                          printable(std::string_view(kArtifactMagic, sizeof kArtifactMagic)),
                          printable(std::string_view(reinterpret_cast<const char *>(data), 8))));
  uint32_t version = loadLittleEndianU32(data + kVersionOffset);
  if (version < kArtifactOldestVersion || version > kArtifactFormatVersion)
    throw fileError(file, fmt::format("artifact format version {}, this q3run reads versions {} "
                                      "to {}: recompile the model with a matching q3c",
                                      version, kArtifactOldestVersion, kArtifactFormatVersion));
  uint32_t headerSize = loadLittleEndianU32(data + kHeaderSizeOffset);
  if (headerSize != kArtifactHeaderSize)
    throw fileError(
        file, fmt::format("header_size: expected {}, found {}", kArtifactHeaderSize, headerSize));
  uint64_t fileSize = loadLittleEndianU64(data + kFileSizeOffset);
  if (fileSize != size)
    throw fileError(file, fmt::format("truncated or extended: header says {} bytes, file has {}",
                                      fileSize, size));
  uint64_t stored = loadLittleEndianU64(data + kArtifactChecksumOffset);
  uint64_t computed = artifactChecksum(data, size_t(checksummedEnd(data, size, size)));
  if (stored != computed)
    throw fileError(file, fmt::format("checksum mismatch: the file is corrupt: expected "
                                      "{:#018x} (header), found {:#018x} (contents)",
                                      stored, computed));
  for (size_t i = kReservedOffset; i < kArtifactHeaderSize; ++i)
    if (data[i] != 0)
      throw fileError(file, fmt::format("reserved header bytes {}..{}: expected zero, found "
                                        "{:#04x} at byte {}",
                                        kReservedOffset, kArtifactHeaderSize - 1, data[i], i));
  uint64_t count = loadLittleEndianU64(data + kSectionCountOffset);
  if (count > kArtifactMaxSections)
    throw fileError(file, fmt::format("section_count: expected at most {}, found {}",
                                      kArtifactMaxSections, count));
  uint64_t tableOffset = loadLittleEndianU64(data + kTableOffsetOffset);
  if (tableOffset != kArtifactHeaderSize)
    throw fileError(file, fmt::format("section_table_offset: expected {}, found {}",
                                      kArtifactHeaderSize, tableOffset));
  uint64_t tableEnd = tableOffset + count * kArtifactSectionEntrySize; // both small: no overflow
  if (tableEnd > size)
    throw fileError(file, fmt::format("section table of {} entries: expected it to end within "
                                      "the {}-byte file, found it ends at byte {}",
                                      count, size, tableEnd));
  return count;
}

std::string readName(const std::string &file, size_t index, const uint8_t *field) {
  const char *chars = reinterpret_cast<const char *>(field);
  size_t length = std::find(chars, chars + kArtifactNameField, '\0') - chars;
  std::string name(chars, length);
  auto reject = [&](const std::string &what) {
    std::string who = name.empty() ? fmt::format("section {}", index)
                                   : fmt::format("section {} '{}'", index, printable(name));
    return fileError(file, fmt::format("{}: name: {}", who, what));
  };
  if (length == kArtifactNameField)
    throw reject(fmt::format("expected at most {} bytes and a NUL, found {} bytes without one",
                             kArtifactNameField - 1, kArtifactNameField));
  for (size_t i = length + 1; i < kArtifactNameField; ++i)
    if (field[i] != 0)
      throw reject(fmt::format("expected NUL padding after the name, found {:#04x} at name "
                               "byte {}",
                               field[i], i));
  if (std::string problem = nameProblem(name); !problem.empty())
    throw reject(problem);
  return name;
}

Entry readEntry(const std::string &file, size_t index, const uint8_t *bytes, uint64_t tableEnd,
                uint64_t fileSize, uint32_t version) {
  Entry entry{index, readName(file, index, bytes + kEntryName),
              loadLittleEndianU32(bytes + kEntryKind), loadLittleEndianU64(bytes + kEntryOffset),
              loadLittleEndianU64(bytes + kEntrySize)};
  auto reject = [&](const std::string &what) {
    return fileError(file, fmt::format("{}: {}", label(entry), what));
  };
  if (!isKnownKind(entry.kind))
    throw reject(fmt::format("kind: expected 1 (manifest), 2 (executable), 3 (data), 4 (spirv) "
                             "or 5 (mapped), found {}",
                             entry.kind));
  const bool mapped = entry.kind == uint32_t(SectionKind::Mapped);
  if (mapped && version < 3)
    throw reject(fmt::format("kind: 5 (mapped) needs format version 3, found version {}", version));
  bool namedManifest = entry.name == kManifestSectionName;
  bool isManifest = entry.kind == uint32_t(SectionKind::Manifest);
  if (isManifest && !namedManifest)
    throw reject(fmt::format("name: expected \"{}\" for a section of kind 1 (manifest), "
                             "found '{}'",
                             kManifestSectionName, printable(entry.name)));
  if (namedManifest && !isManifest)
    throw reject(fmt::format("kind: expected 1 (manifest) for the section named \"{}\", found {}",
                             kManifestSectionName, describeKind(entry.kind)));
  uint32_t flags = loadLittleEndianU32(bytes + kEntryFlags);
  if (flags != 0)
    throw reject(fmt::format("flags: expected 0, found {:#x}", flags));
  if (entry.offset < tableEnd)
    throw reject(fmt::format("offset: expected at least {} (after the section table), found {}",
                             tableEnd, entry.offset));
  uint64_t end;
  if (__builtin_add_overflow(entry.offset, entry.size, &end))
    throw reject(fmt::format("offset {} + size {}: expected an end within the {}-byte file, "
                             "found an overflow",
                             entry.offset, entry.size, fileSize));
  if (end > fileSize)
    throw reject(fmt::format("offset {} + size {}: expected an end within the {}-byte file, "
                             "found end {}",
                             entry.offset, entry.size, fileSize, end));
  if (entry.offset % kArtifactAlignment != 0)
    throw reject(fmt::format("offset: expected a multiple of {}, found {}", kArtifactAlignment,
                             entry.offset));
  if (mapped && entry.offset % kArtifactMappedAlignment != 0)
    throw reject(fmt::format("offset: expected a multiple of {} for a mapped section, found {}",
                             kArtifactMappedAlignment, entry.offset));
  if (entry.kind == uint32_t(SectionKind::Spirv) && entry.size % 4 != 0)
    throw reject(
        fmt::format("size: expected whole 32-bit SPIR-V words, found {} bytes", entry.size));
  return entry;
}

// Mapped payloads lie after every other one: the checksummed part of the
// file is then one prefix, and the rest can be mapped instead of read.
void checkMappedTail(const std::string &file, const std::vector<Entry> &entries) {
  const Entry *firstMapped = nullptr;
  for (const Entry &entry : entries)
    if (entry.kind == uint32_t(SectionKind::Mapped) &&
        (!firstMapped || entry.offset < firstMapped->offset))
      firstMapped = &entry;
  if (!firstMapped)
    return;
  for (const Entry &entry : entries)
    if (entry.kind != uint32_t(SectionKind::Mapped) &&
        entry.offset + entry.size > firstMapped->offset)
      throw fileError(file, fmt::format("{}: expected it to end before the mapped {} at byte {}, "
                                        "found it ends at byte {}",
                                        label(entry), label(*firstMapped), firstMapped->offset,
                                        entry.offset + entry.size));
}

// Each mapped section's chunks against its "<name>.xxh3" data section.
void checkMappedHashes(const std::string &file, const uint8_t *data,
                       const std::vector<Entry> &entries) {
  for (const Entry &entry : entries) {
    if (entry.kind != uint32_t(SectionKind::Mapped))
      continue;
    const std::string hashName = entry.name + kArtifactHashSuffix;
    auto hashEntry = std::find_if(entries.begin(), entries.end(), [&](const Entry &other) {
      return other.name == hashName && other.kind == uint32_t(SectionKind::Data);
    });
    if (hashEntry == entries.end())
      throw fileError(file, fmt::format("{}: expected a data section '{}' with the XXH3 hashes of "
                                        "its 4 MiB chunks, found none",
                                        label(entry), printable(hashName)));
    const uint64_t chunks = hashChunks(entry.size);
    if (hashEntry->size != chunks * 8)
      throw fileError(file, fmt::format("{}: size: expected {} bytes (one 8-byte hash per 4 MiB "
                                        "chunk of the {}-byte '{}'), found {}",
                                        label(*hashEntry), chunks * 8, entry.size,
                                        printable(entry.name), hashEntry->size));
    const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
    const std::vector<uint64_t> hashes = chunkHashes(data + entry.offset, entry.size, cpus);
    for (size_t i = 0; i < hashes.size(); ++i) {
      const uint64_t stored = loadLittleEndianU64(data + hashEntry->offset + 8 * i);
      if (stored != hashes[i])
        throw fileError(
            file, fmt::format("{}: bytes {}..{}: checksum mismatch: the file is corrupt: expected "
                              "XXH3 {:#018x} ('{}'), found {:#018x}",
                              label(entry), i * kArtifactHashChunk,
                              std::min((i + 1) * kArtifactHashChunk, entry.size), stored,
                              printable(hashName), hashes[i]));
    }
  }
}

void checkUniqueNames(const std::string &file, const std::vector<Entry> &entries) {
  std::map<std::string_view, size_t> seen;
  for (const Entry &entry : entries) {
    auto [it, inserted] = seen.emplace(entry.name, entry.index);
    if (inserted)
      continue;
    if (entry.name == kManifestSectionName)
      throw fileError(file, fmt::format("manifest section: expected exactly one, found two "
                                        "(sections {} and {})",
                                        it->second, entry.index));
    throw fileError(file, fmt::format("{}: name: expected a unique name, found it also at "
                                      "section {}",
                                      label(entry), it->second));
  }
}

void checkNoOverlap(const std::string &file, const std::vector<Entry> &entries) {
  std::vector<const Entry *> sorted;
  for (const Entry &entry : entries)
    sorted.push_back(&entry);
  std::sort(sorted.begin(), sorted.end(), [](const Entry *a, const Entry *b) {
    return a->offset != b->offset ? a->offset < b->offset : a->size < b->size;
  });
  for (size_t i = 1; i < sorted.size(); ++i) {
    const Entry &before = *sorted[i - 1], &after = *sorted[i];
    uint64_t beforeEnd = before.offset + before.size; // checked against the file size already
    if (after.offset < beforeEnd)
      throw fileError(file, fmt::format("{} [{}, {}): expected no overlap, found it overlaps "
                                        "{} [{}, {})",
                                        label(after), after.offset, after.offset + after.size,
                                        label(before), before.offset, beforeEnd));
  }
}

Json parseManifest(const std::string &file, const uint8_t *data, size_t size) {
  Json manifest;
  try {
    manifest = Json::parse(data, data + size);
  } catch (const Json::exception &error) {
    throw fileError(file, "manifest: expected a JSON object, found invalid JSON: " +
                              describeJsonError(error));
  }
  if (!manifest.is_object())
    throw fileError(
        file, fmt::format("manifest: expected a JSON object, found {}", manifest.type_name()));
  return manifest;
}

} // namespace

namespace artifact_format {

// The first mapped payload as the table says (read before the table is validated, so
// that a corrupt table fails the checksum first), else the end of the file.
uint64_t checksummedEnd(const uint8_t *data, size_t readable, uint64_t fileSize) {
  if (readable < kArtifactHeaderSize)
    return fileSize;
  const uint64_t count = loadLittleEndianU64(data + kSectionCountOffset);
  if (count > kArtifactMaxSections ||
      kArtifactHeaderSize + count * kArtifactSectionEntrySize > readable)
    return fileSize;
  const uint64_t tableEnd = kArtifactHeaderSize + count * kArtifactSectionEntrySize;
  uint64_t end = fileSize;
  for (uint64_t i = 0; i < count; ++i) {
    const uint8_t *entry = data + kArtifactHeaderSize + i * kArtifactSectionEntrySize;
    if (loadLittleEndianU32(entry + kEntryKind) == uint32_t(SectionKind::Mapped))
      end = std::min(end, std::max(loadLittleEndianU64(entry + kEntryOffset), tableEnd));
  }
  return end;
}

} // namespace artifact_format

uint64_t artifactChecksummedEnd(const uint8_t *image, size_t size) {
  return checksummedEnd(image, size, size);
}

uint64_t artifactChecksum(const uint8_t *image, size_t size) {
  size_t before = std::min(size, kArtifactChecksumOffset);
  size_t fieldEnd = kArtifactChecksumOffset + 8;
  uint64_t hash = fnv1a64(image, before);
  hash = fnv1a64Zeros(std::min(size, fieldEnd) - before, hash);
  if (size > fieldEnd)
    hash = fnv1a64(image + fieldEnd, size - fieldEnd, hash);
  return hash;
}

std::unique_ptr<Artifact> Artifact::parse(const std::string &displayName, const uint8_t *data,
                                          size_t size) {
  uint64_t count = checkHeader(displayName, data, size);
  const uint32_t version = loadLittleEndianU32(data + kVersionOffset);
  uint64_t tableEnd = kArtifactHeaderSize + count * kArtifactSectionEntrySize;
  std::vector<Entry> entries;
  for (size_t i = 0; i < count; ++i)
    entries.push_back(readEntry(displayName, i,
                                data + kArtifactHeaderSize + i * kArtifactSectionEntrySize,
                                tableEnd, size, version));
  checkUniqueNames(displayName, entries);
  checkNoOverlap(displayName, entries);
  checkMappedTail(displayName, entries);
  checkMappedHashes(displayName, data, entries);
  auto manifestEntry = std::find_if(entries.begin(), entries.end(), [](const Entry &entry) {
    return entry.kind == uint32_t(SectionKind::Manifest);
  });
  if (manifestEntry == entries.end())
    throw fileError(displayName, "manifest section: expected exactly one (kind 1, named "
                                 "\"manifest\"), found none");

  std::unique_ptr<Artifact> artifact(new Artifact());
  artifact->displayName_ = displayName;
  artifact->image_ = data;
  artifact->imageSize_ = size;
  artifact->formatVersion_ = version;
  artifact->manifest_ =
      parseManifest(displayName, data + manifestEntry->offset, size_t(manifestEntry->size));
  for (const Entry &entry : entries)
    artifact->sections_.push_back(
        Section{entry.name, SectionKind(entry.kind), data + entry.offset, size_t(entry.size)});
  return artifact;
}

} // namespace q3::runtime
