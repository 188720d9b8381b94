// Writing an artifact (docs/artifact.md): the sections are checked and laid
// out first (a plan), then signed and checksummed over the plan, and only
// then written, through a temporary file renamed over the path.
#include "runtime/Artifact.h"

#include "runtime/ArtifactFormat.h"
#include "runtime/AtomicFile.h"
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

uint64_t alignUp(uint64_t value, uint64_t alignment = kArtifactAlignment) {
  return (value + alignment - 1) / alignment * alignment;
}

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
  std::vector<uint8_t> signature;     // the payload of the "signature" section, if signed
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
      throw writeError(
          path, section.name,
          fmt::format("size: expected whole 32-bit SPIR-V words, found {} bytes", section.size()));
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

} // namespace q3::runtime
