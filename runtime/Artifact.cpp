#include "runtime/Artifact.h"

#include "runtime/AtomicFile.h"
#include "runtime/Checksum.h"
#include "runtime/HostBuffer.h"
#include "runtime/LittleEndian.h"
#include "runtime/MappedFile.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <system_error>
#include <thread>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace q3::runtime {

namespace {

using Json = nlohmann::json;

// Header field offsets (docs/artifact.md).
constexpr size_t kVersionOffset = 8;
constexpr size_t kHeaderSizeOffset = 12;
constexpr size_t kFileSizeOffset = 16;
constexpr size_t kSectionCountOffset = 24;
constexpr size_t kTableOffsetOffset = 32;
constexpr size_t kReservedOffset = 48;
// Section entry field offsets.
constexpr size_t kEntryKind = 0;
constexpr size_t kEntryFlags = 4;
constexpr size_t kEntryOffset = 8;
constexpr size_t kEntrySize = 16;
constexpr size_t kEntryName = 24;

LoadError fileError(const std::string &file, const std::string &what) {
  return LoadError(fmt::format("{}: {}", printable(file), what));
}

uint64_t alignUp(uint64_t value, uint64_t alignment = kArtifactAlignment) {
  return (value + alignment - 1) / alignment * alignment;
}

std::string describeKind(uint32_t kind) {
  switch (kind) {
  case uint32_t(SectionKind::Manifest):
    return "1 (manifest)";
  case uint32_t(SectionKind::Executable):
    return "2 (executable)";
  case uint32_t(SectionKind::Data):
    return "3 (data)";
  case uint32_t(SectionKind::Spirv):
    return "4 (spirv)";
  case uint32_t(SectionKind::Mapped):
    return "5 (mapped)";
  default:
    return std::to_string(kind);
  }
}

bool isKnownKind(uint32_t kind) {
  return kind >= uint32_t(SectionKind::Manifest) && kind <= uint32_t(SectionKind::Mapped);
}

// Length of the well-formed UTF-8 sequence at text[i] (lead byte >= 0x80), or 0.
size_t utf8SequenceLength(std::string_view text, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  unsigned char lead = byte(i);
  size_t length;
  unsigned char low = 0x80, high = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    low = lead == 0xe0 ? 0xa0 : 0x80;  // overlong
    high = lead == 0xed ? 0x9f : 0xbf; // surrogates
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    low = lead == 0xf0 ? 0x90 : 0x80;  // overlong
    high = lead == 0xf4 ? 0x8f : 0xbf; // above U+10FFFF
  } else {
    return 0;
  }
  if (length > text.size() - i || byte(i + 1) < low || byte(i + 1) > high)
    return 0;
  for (size_t k = 2; k < length; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xbf)
      return 0;
  return length;
}

// Why `name` cannot name a section ("" if it can). Shared by writer and reader.
std::string nameProblem(std::string_view name) {
  if (name.empty())
    return "expected a non-empty name, found an empty one";
  if (name.size() >= kArtifactNameField)
    return fmt::format("expected at most {} bytes, found {}", kArtifactNameField - 1, name.size());
  for (size_t i = 0; i < name.size();) {
    unsigned char c = static_cast<unsigned char>(name[i]);
    size_t length = c >= 0x80 ? utf8SequenceLength(name, i) : (c >= 0x20 && c != 0x7f);
    if (length == 0)
      return fmt::format("expected UTF-8 text without control characters, found \"{}\"",
                         printable(name));
    i += length;
  }
  return "";
}

// ---------------------------------------------------------------------------
// Reading

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

// Where the header checksum stops in a file of `fileSize` bytes: the first
// mapped payload as the table says (read before the table is validated, so
// that a corrupt table fails the checksum first), else the end of the file.
// The first `readable` bytes of the file are at `data`.
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
    throw reject(fmt::format("kind: 5 (mapped) needs format version 3, found version {}",
                             version));
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
    throw reject(fmt::format("size: expected whole 32-bit SPIR-V words, found {} bytes",
                             entry.size));
  return entry;
}

uint64_t hashChunks(uint64_t bytes) { return (bytes + kArtifactHashChunk - 1) / kArtifactHashChunk; }

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

// XXH3-64 of each 4 MiB chunk of `data`, on up to `threads` threads.
std::vector<uint64_t> chunkHashes(const uint8_t *data, uint64_t size, unsigned threads) {
  std::vector<uint64_t> hashes(size_t(hashChunks(size)));
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < hashes.size();) {
      const uint64_t begin = i * kArtifactHashChunk;
      hashes[i] = XXH3_64bits(data + begin, size_t(std::min(kArtifactHashChunk, size - begin)));
    }
  };
  threads = std::max(1u, std::min<unsigned>(threads, unsigned(hashes.size())));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) {
    try {
      pool.emplace_back(work);
    } catch (const std::system_error &) {
      break; // no more threads here (a process limit): the others do it all
    }
  }
  work();
  for (std::thread &thread : pool)
    thread.join();
  return hashes;
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

// ---------------------------------------------------------------------------
// Writing

struct PlannedSection {
  std::string_view name;
  SectionKind kind;
  const uint8_t *data;
  size_t size;
  uint64_t offset;
};

// Everything a writer emits, validated and laid out; `head` is the header and
// section table with the checksum field still zero.
struct Plan {
  std::string manifestText;
  std::vector<uint8_t> signature; // the payload of the "signature" section, if signed
  std::vector<std::string> hashNames; // "<mapped>.xxh3" (reserved: views into it stay valid)
  std::vector<std::vector<uint8_t>> hashPayloads;
  std::vector<PlannedSection> sections;
  std::vector<uint8_t> head;
  uint64_t fileSize = 0;
  uint64_t checksumEnd = 0; // the first mapped payload, else fileSize
};

bool endsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

std::vector<uint8_t> encodeHashes(const uint8_t *data, size_t size) {
  const std::vector<uint64_t> hashes =
      chunkHashes(data, size, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<uint8_t> bytes(hashes.size() * 8);
  for (size_t i = 0; i < hashes.size(); ++i)
    storeLittleEndianU64(bytes.data() + 8 * i, hashes[i]);
  return bytes;
}

LoadError writeError(const std::string &path, std::string_view section, const std::string &what) {
  return LoadError(fmt::format("{}: section '{}': {}", printable(path), printable(section), what));
}

std::string encodeManifest(const std::string &path, const Json &manifest) {
  if (!manifest.is_object())
    throw fileError(
        path, fmt::format("manifest: expected a JSON object, found {}", manifest.type_name()));
  try {
    return manifest.dump();
  } catch (const Json::exception &error) { // strings that are not valid UTF-8
    throw fileError(path, "manifest: cannot encode as JSON: " + describeJsonError(error));
  }
}

Plan planArtifact(const std::string &path, const Json &manifest,
                  const std::vector<ArtifactSection> &sections, bool signing) {
  Plan plan;
  plan.manifestText = encodeManifest(path, manifest);
  const size_t reserved = signing ? 2 : 1; // the manifest, the signature
  if (sections.size() + reserved > kArtifactMaxSections)
    throw fileError(path, fmt::format("sections: expected at most {} besides the manifest{}, "
                                      "found {}",
                                      kArtifactMaxSections - reserved,
                                      signing ? " and the signature" : "", sections.size()));
  plan.sections.push_back(PlannedSection{
      kManifestSectionName, SectionKind::Manifest,
      reinterpret_cast<const uint8_t *>(plan.manifestText.data()), plan.manifestText.size(), 0});
  std::map<std::string_view, bool> names{{kManifestSectionName, true}};
  std::vector<const ArtifactSection *> mapped;
  for (const ArtifactSection &section : sections) {
    if (std::string problem = nameProblem(section.name); !problem.empty())
      throw writeError(path, section.name, "name: " + problem);
    if (section.kind != SectionKind::Executable && section.kind != SectionKind::Data &&
        section.kind != SectionKind::Spirv && section.kind != SectionKind::Mapped)
      throw writeError(path, section.name,
                       fmt::format("kind: expected 2 (executable), 3 (data), 4 (spirv) or "
                                   "5 (mapped), found {}",
                                   describeKind(uint32_t(section.kind))));
    if (section.name == kSignatureSectionName)
      throw writeError(path, section.name, "name: reserved for the signature");
    if (endsWith(section.name, kArtifactHashSuffix))
      throw writeError(path, section.name,
                       fmt::format("name: names ending in \"{}\" are reserved for the hashes of "
                                   "mapped sections",
                                   kArtifactHashSuffix));
    if (section.kind == SectionKind::Spirv && section.size() % 4 != 0)
      throw writeError(path, section.name,
                       fmt::format("size: expected whole 32-bit SPIR-V words, found {} bytes",
                                   section.size()));
    if (section.kind == SectionKind::Mapped &&
        section.name.size() + std::strlen(kArtifactHashSuffix) >= kArtifactNameField)
      throw writeError(path, section.name,
                       fmt::format("name: expected at most {} bytes for a mapped section (its "
                                   "hash section adds \"{}\"), found {}",
                                   kArtifactNameField - 1 - std::strlen(kArtifactHashSuffix),
                                   kArtifactHashSuffix, section.name.size()));
    if (!names.emplace(section.name, true).second)
      throw writeError(path, section.name,
                       section.name == kManifestSectionName
                           ? "name: reserved for the manifest"
                           : "name: expected a unique name, found it twice");
    if (section.kind == SectionKind::Mapped) {
      mapped.push_back(&section);
      continue;
    }
    plan.sections.push_back(
        PlannedSection{section.name, section.kind, section.data(), section.size(), 0});
  }
  // Every mapped section's hashes, then the signature, then the mapped
  // payloads: the checksummed prefix ends where the first of them starts.
  plan.hashNames.reserve(mapped.size());
  plan.hashPayloads.reserve(mapped.size());
  for (const ArtifactSection *section : mapped) {
    plan.hashNames.push_back(section->name + kArtifactHashSuffix);
    plan.hashPayloads.push_back(encodeHashes(section->data(), section->size()));
    plan.sections.push_back(PlannedSection{plan.hashNames.back(), SectionKind::Data,
                                           plan.hashPayloads.back().data(),
                                           plan.hashPayloads.back().size(), 0});
  }
  if (plan.sections.size() + mapped.size() + (signing ? 1 : 0) > kArtifactMaxSections)
    throw fileError(path, fmt::format("sections: expected at most {} with the manifest, the "
                                      "signature and one hash section per mapped section, "
                                      "found {}",
                                      kArtifactMaxSections,
                                      plan.sections.size() + mapped.size() + (signing ? 1 : 0)));
  if (signing) { // zeros until sign() fills them in
    plan.signature.assign(kArtifactSignaturePayload, 0);
    plan.sections.push_back(PlannedSection{kSignatureSectionName, SectionKind::Data,
                                           plan.signature.data(), plan.signature.size(), 0});
  }
  for (const ArtifactSection *section : mapped)
    plan.sections.push_back(
        PlannedSection{section->name, SectionKind::Mapped, section->data(), section->size(), 0});

  uint64_t tableEnd = kArtifactHeaderSize + plan.sections.size() * kArtifactSectionEntrySize;
  uint64_t cursor = tableEnd;
  plan.checksumEnd = 0;
  for (PlannedSection &section : plan.sections) {
    const bool isMapped = section.kind == SectionKind::Mapped;
    section.offset = alignUp(cursor, isMapped ? kArtifactMappedAlignment : kArtifactAlignment);
    if (isMapped && plan.checksumEnd == 0)
      plan.checksumEnd = section.offset;
    cursor = section.offset + section.size;
  }
  plan.fileSize = cursor;
  if (plan.checksumEnd == 0)
    plan.checksumEnd = plan.fileSize;

  plan.head.assign(tableEnd, 0);
  uint8_t *header = plan.head.data();
  std::memcpy(header, kArtifactMagic, sizeof kArtifactMagic);
  storeLittleEndianU32(header + kVersionOffset,
                       mapped.empty() ? kArtifactOldestVersion : kArtifactFormatVersion);
  storeLittleEndianU32(header + kHeaderSizeOffset, uint32_t(kArtifactHeaderSize));
  storeLittleEndianU64(header + kFileSizeOffset, plan.fileSize);
  storeLittleEndianU64(header + kSectionCountOffset, plan.sections.size());
  storeLittleEndianU64(header + kTableOffsetOffset, kArtifactHeaderSize);
  for (size_t i = 0; i < plan.sections.size(); ++i) {
    const PlannedSection &section = plan.sections[i];
    uint8_t *entry = header + kArtifactHeaderSize + i * kArtifactSectionEntrySize;
    storeLittleEndianU32(entry + kEntryKind, uint32_t(section.kind));
    storeLittleEndianU64(entry + kEntryOffset, section.offset);
    storeLittleEndianU64(entry + kEntrySize, section.size);
    std::memcpy(entry + kEntryName, section.name.data(), section.name.size());
  }
  return plan;
}

// Feeds the whole file image, in order, to `sink(const uint8_t *, size_t)`.
template <typename Sink> void emit(const Plan &plan, Sink &&sink) {
  static const uint8_t zeros[kArtifactAlignment] = {};
  uint64_t cursor = 0;
  auto padTo = [&](uint64_t offset) {
    while (cursor < offset) {
      size_t chunk = size_t(std::min<uint64_t>(offset - cursor, sizeof zeros));
      sink(zeros, chunk);
      cursor += chunk;
    }
  };
  sink(plan.head.data(), plan.head.size());
  cursor = plan.head.size();
  for (const PlannedSection &section : plan.sections) {
    padTo(section.offset);
    if (section.size != 0)
      sink(section.data, section.size);
    cursor += section.size;
  }
  padTo(plan.fileSize);
}

// What a signature covers, after this prefix: the file image with the
// checksum field and the signature payload taken as zero.
constexpr char kSignatureDomain[] = "q3c artifact signature v1";

// Signs the image while the checksum field and the payload are still zero.
void sign(Plan &plan, const SecretKey &key) {
  SignatureStream stream;
  stream.update(reinterpret_cast<const uint8_t *>(kSignatureDomain), sizeof kSignatureDomain);
  emit(plan, [&](const uint8_t *bytes, size_t size) { stream.update(bytes, size); });
  const std::array<uint8_t, kSignatureBytes> signature = stream.sign(key);
  const PublicKey publicKey = key.publicKey();
  uint8_t *payload = plan.signature.data();
  std::memcpy(payload, kArtifactSignatureMagic, sizeof kArtifactSignatureMagic);
  std::memcpy(payload + 8, publicKey.bytes.data(), kPublicKeyBytes);
  std::memcpy(payload + 8 + kPublicKeyBytes, signature.data(), kSignatureBytes);
}

void sealChecksum(Plan &plan) {
  uint64_t hash = kFnv1a64Basis; // the checksum field in `head` is still zero
  uint64_t position = 0;         // mapped payloads are covered by their hashes instead
  emit(plan, [&](const uint8_t *bytes, size_t size) {
    if (position < plan.checksumEnd)
      hash = fnv1a64(bytes, size_t(std::min<uint64_t>(size, plan.checksumEnd - position)), hash);
    position += size;
  });
  storeLittleEndianU64(plan.head.data() + kArtifactChecksumOffset, hash);
}

} // namespace

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

std::vector<uint8_t> serializeArtifact(const std::string &displayName, const Json &manifest,
                                       const std::vector<ArtifactSection> &sections,
                                       const SecretKey *signer) {
  Plan plan = planArtifact(displayName, manifest, sections, signer != nullptr);
  if (signer)
    sign(plan, *signer);
  sealChecksum(plan);
  std::vector<uint8_t> image;
  image.reserve(plan.fileSize);
  emit(plan,
       [&](const uint8_t *bytes, size_t size) { image.insert(image.end(), bytes, bytes + size); });
  return image;
}

void writeArtifact(const std::string &path, const Json &manifest,
                   const std::vector<ArtifactSection> &sections, const SecretKey *signer) {
  Plan plan = planArtifact(path, manifest, sections, signer != nullptr);
  if (signer)
    sign(plan, *signer);
  sealChecksum(plan);
  // Whatever was at `path` stays until the complete file replaces it.
  AtomicFile file(path);
  emit(plan, [&](const uint8_t *bytes, size_t size) { file.write(bytes, size); });
  file.commit();
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

namespace {

// Reads [begin, end) of `file` into `into`; returns the bytes read (fewer if
// the file shrank since it was measured).
size_t readRange(const std::string &path, int fd, uint8_t *into, size_t begin, size_t end) {
  size_t done = begin;
  while (done < end) {
    ssize_t n = ::pread(fd, into + done, end - done, off_t(done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      throw LoadError(systemError(path, "read", errno));
    if (n == 0)
      break;
    done += size_t(n);
  }
  return done;
}

// The whole file in page-aligned memory of its own, on transparent huge
// pages: fresh memory costs most of a read in a VM, page by page (the 4.3 MB
// 0.6B artifact: `q3run tokenize` 0.04 s against 0.06 s on 4 KiB pages).
std::shared_ptr<void> readWholeFile(const std::string &path, int fd, size_t size, size_t &read) {
  std::shared_ptr<HostBuffer> buffer;
  try {
    buffer = std::make_shared<HostBuffer>(std::max<size_t>(size, 1), HostBuffer::Pages::Huge);
  } catch (const std::bad_alloc &) {
    throw LoadError(fmt::format("{}: cannot read: {} bytes do not fit in memory", printable(path),
                                size));
  }
  read = readRange(path, fd, buffer->data(), 0, size);
  return std::shared_ptr<void>(buffer, buffer->data());
}

// The file mapped read-only, its checksummed prefix [0, prefix) replaced by a
// private copy read from the file: one contiguous image whose validated part
// cannot change, and whose mapped sections stay in the page cache.
std::shared_ptr<void> mapWithReadPrefix(const std::string &path, int fd, size_t size,
                                        size_t prefix) {
  void *base = mapFileReadOnly(fd, size, /*populate=*/true);
  if (base == MAP_FAILED)
    throw LoadError(systemError(path, "map", errno));
  std::shared_ptr<void> owned(base, [size](void *p) { ::munmap(p, size); });
  uint8_t *image = static_cast<uint8_t *>(base);
  if (::mmap(image, prefix, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
             0) == MAP_FAILED)
    throw LoadError(systemError(path, "map", errno));
  if (readRange(path, fd, image, 0, prefix) != prefix)
    throw fileError(path, fmt::format("truncated while read: expected at least {} bytes", prefix));
  ::mprotect(image, prefix, PROT_READ);
  return owned;
}

} // namespace

std::unique_ptr<Artifact> Artifact::open(const std::string &path) {
  const OpenedFile opened = openRegularFile(path);
  const int fd = opened.file.fd;
  const size_t size = opened.size;
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  // The header and table say where the checksummed part ends; a file with
  // mapped sections at page offsets is mapped, anything else read whole (a
  // malformed one then fails validation with its own message).
  std::vector<uint8_t> head(std::min<size_t>(
      size, kArtifactHeaderSize + kArtifactMaxSections * kArtifactSectionEntrySize));
  head.resize(readRange(path, fd, head.data(), 0, head.size()));
  const uint64_t prefix = checksummedEnd(head.data(), head.size(), size);
  const bool mapped = prefix < size && prefix % page == 0;
  size_t read = size;
  std::shared_ptr<void> image = mapped ? mapWithReadPrefix(path, fd, size, size_t(prefix))
                                       : readWholeFile(path, fd, size, read);
  std::unique_ptr<Artifact> parsed = parse(path, static_cast<const uint8_t *>(image.get()), read);
  return adopt(std::move(parsed), std::move(image));
}

std::unique_ptr<Artifact> Artifact::adopt(std::unique_ptr<Artifact> artifact,
                                          std::shared_ptr<void> image) {
  artifact->owned_ = std::move(image);
  return artifact;
}

void Artifact::verifySignature(const PublicKey &key) const {
  const std::string who = fmt::format("key {} ({})", keyId(key), printable(key.source));
  const Section *section = find(kSignatureSectionName);
  if (!section)
    throw fileError(displayName_, fmt::format("not signed, but a signature by {} is required: "
                                              "sign it with q3c compile --sign",
                                              who));
  if (section->size != kArtifactSignaturePayload ||
      std::memcmp(section->data, kArtifactSignatureMagic, sizeof kArtifactSignatureMagic) != 0)
    throw fileError(displayName_,
                    fmt::format("section 'signature': expected {} bytes starting with \"{}\", "
                                "found {} bytes",
                                kArtifactSignaturePayload,
                                printable(std::string_view(kArtifactSignatureMagic, 8)),
                                section->size));
  const size_t offset = size_t(section->data - image_);
  SignatureStream stream;
  stream.update(reinterpret_cast<const uint8_t *>(kSignatureDomain), sizeof kSignatureDomain);
  stream.update(image_, kArtifactChecksumOffset);
  stream.updateZeros(8);
  stream.update(image_ + kArtifactChecksumOffset + 8, offset - kArtifactChecksumOffset - 8);
  stream.updateZeros(section->size);
  stream.update(image_ + offset + section->size, imageSize_ - offset - section->size);
  if (stream.verify(section->data + 8 + kPublicKeyBytes, key))
    return;
  PublicKey signer;
  std::memcpy(signer.bytes.data(), section->data + 8, kPublicKeyBytes);
  if (signer.bytes != key.bytes)
    throw fileError(displayName_, fmt::format("signed by key {}, not by the required {}",
                                              keyId(signer), who));
  throw fileError(displayName_, fmt::format("the signature does not verify with {}: the "
                                            "artifact was changed after it was signed",
                                            who));
}

const Artifact::Section *Artifact::find(std::string_view name) const {
  for (const Section &section : sections_)
    if (section.name == name)
      return &section;
  return nullptr;
}

Artifact::~Artifact() = default;

} // namespace q3::runtime
