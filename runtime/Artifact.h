// The q3c artifact: the one file the compiler writes per compiled model and the
// runtime (q3run) maps and runs. A fixed 64-byte header, a table of up to 64
// named sections, and the section payloads, each 64-byte aligned. One section
// is the manifest (a JSON object); the others hold executable code (an ELF
// shared object), SPIR-V modules or raw data. Byte layout, versioning and every check the
// reader makes: docs/artifact.md.
#pragma once

#include "runtime/LoadError.h"
#include "runtime/Signature.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "runtime/MappedFile.h"
#include "runtime/PageCacheFolios.h"
#include <string>
#include <string_view>
#include <vector>

namespace q3::runtime {

// Spirv: one SPIR-V module (a whole number of little-endian 32-bit words).
// Mapped: raw bytes the reader maps in place instead of reading (weights an
// artifact embeds): page-aligned, after every other payload, outside the
// header checksum and covered instead by XXH3 hashes of their 4 MiB chunks in
// a companion data section "<name>.xxh3" that the writer adds.
enum class SectionKind : uint32_t { Manifest = 1, Executable = 2, Data = 3, Spirv = 4, Mapped = 5 };

struct ArtifactSection {
  std::string name; // 1..39 bytes of UTF-8 without control characters, unique
  SectionKind kind; // Executable, Data, Spirv or Mapped; the writer adds the Manifest
  std::vector<uint8_t> bytes;
  // A payload held elsewhere (a large Mapped section), used instead of
  // `bytes` when set; it must stay valid until the writer returns.
  const uint8_t *external = nullptr;
  size_t externalSize = 0;
  const uint8_t *data() const { return external ? external : bytes.data(); }
  size_t size() const { return external ? externalSize : bytes.size(); }
};

constexpr uint32_t kArtifactFormatVersion = 3; // 3: mapped sections (kind 5)
// Files without mapped sections are written as version 2 (SPIR-V sections,
// kind 4), which q3run of before version 3 reads too; both are read.
constexpr uint32_t kArtifactOldestVersion = 2;
constexpr uint64_t kArtifactMappedAlignment = 4096; // of a mapped section's offset
constexpr uint64_t kArtifactHashChunk = uint64_t(4) << 20; // bytes per XXH3 hash
constexpr const char *kArtifactHashSuffix = ".xxh3";
constexpr char kArtifactMagic[8] = {'Q', '3', 'C', 'A', 'R', 'T', '\r', '\n'};
constexpr uint64_t kArtifactHeaderSize = 64;
constexpr uint64_t kArtifactSectionEntrySize = 64;
constexpr uint64_t kArtifactMaxSections = 64;
constexpr uint64_t kArtifactAlignment = 64;    // of every section's file offset
constexpr size_t kArtifactNameField = 40;      // bytes; names are at most 39 plus a NUL
constexpr size_t kArtifactChecksumOffset = 40; // the u64 checksum field in the header
constexpr const char *kManifestSectionName = "manifest";
// The optional signature (docs/artifact.md, "Signatures"): a data section of
// this name holding kArtifactSignatureMagic, the signer's public key and an
// Ed25519ph signature of the file with this payload and the checksum field
// taken as zero. Version-1 readers that do not check signatures ignore it.
constexpr const char *kSignatureSectionName = "signature";
constexpr char kArtifactSignatureMagic[8] = {'Q', '3', 'C', 'S', 'I', 'G', 'v', '1'};
constexpr size_t kArtifactSignaturePayload = 8 + kPublicKeyBytes + kSignatureBytes;

// 64-bit FNV-1a of `image` with the 8 checksum bytes [40, 48) taken as zero
// (whatever `size` is): the value the header's checksum field must hold when
// `size` is where the checksummed part ends (the first mapped payload, else
// the end of the file).
uint64_t artifactChecksum(const uint8_t *image, size_t size);

// Where the checksummed part of `image` ends: the first mapped payload its
// section table names, else `size` (read leniently: for a malformed table
// it is `size`, and validation reports what is wrong).
uint64_t artifactChecksummedEnd(const uint8_t *image, size_t size);

// Writes `manifest` (a JSON object, serialized with dump()) as the section
// "manifest", followed by `sections` in the given order, except that mapped
// sections go last, each after its hash section. Throws LoadError
// naming `path` on bad names or kinds, too many sections, a manifest that is
// not an object or not valid UTF-8; OutputError on I/O errors. The file is
// written atomically (runtime/AtomicFile.h): a failure leaves what was at
// `path` untouched.
// With `signer`, a "signature" section is added last (the name is reserved
// either way).
void writeArtifact(const std::string &path, const nlohmann::json &manifest,
                   const std::vector<ArtifactSection> &sections,
                   const SecretKey *signer = nullptr);
// The same file image in memory (tests, fuzzer seeds). `displayName` goes in errors.
std::vector<uint8_t> serializeArtifact(const std::string &displayName,
                                       const nlohmann::json &manifest,
                                       const std::vector<ArtifactSection> &sections,
                                       const SecretKey *signer = nullptr);

// A validated, read-only artifact. Every Section points inside the file image.
class Artifact {
public:
  struct Section {
    std::string name;
    SectionKind kind;
    const uint8_t *data; // 64-byte aligned relative to the image start (mmap: page aligned)
    size_t size;
  };

  // Reads `path` into memory and validates it. Read, not mapped: what is
  // validated (and signature-checked) is what runs, even if the file changes
  // afterwards, and a truncated file cannot fault later. Mapped sections are
  // the exception: they are mapped read-only from the file (and their hashes
  // checked on all CPUs), so a file changed while it runs changes them.
  static std::unique_ptr<Artifact> open(const std::string &path);
  // Validates an in-memory image, which must outlive the result (nothing big is
  // copied). `displayName` starts every error message.
  static std::unique_ptr<Artifact> parse(const std::string &displayName, const uint8_t *data,
                                         size_t size);

  uint32_t formatVersion() const { return formatVersion_; }
  const nlohmann::json &manifest() const { return manifest_; } // always an object
  const std::vector<Section> &sections() const {
    return sections_;
  } // table order, manifest included
  const Section *find(std::string_view name) const;
  const std::string &displayName() const { return displayName_; }

  // For an artifact opened with its mapped sections mapped (not read whole,
  // not parsed from memory): the census of the page cache's folios under
  // them (runtime::folioCensus of the file's whole 2 MB stretches after the
  // checksummed part, which it unmaps to count), and the read back of the
  // small ones `census` (mappedFolioCensus()'s) names into huge folios
  // (runtime::rereadIntoHugeFolios); nullopt and nothing otherwise.
  std::optional<FolioCensus> mappedFolioCensus() const;
  RereadResult rereadSmallFolios(const FolioCensus &census, ThreadPool *pool,
                                 double minBytesPerSecond) const;

  // Throws LoadError unless the artifact carries a signature that verifies
  // with `key`: no signature, another signer, and bytes changed after
  // signing each get their own message.
  void verifySignature(const PublicKey &key) const;

  Artifact(const Artifact &) = delete;
  Artifact &operator=(const Artifact &) = delete;
  ~Artifact();

private:
  Artifact() = default;
  static std::unique_ptr<Artifact> adopt(std::unique_ptr<Artifact> artifact,
                                         std::shared_ptr<void> image);

  std::string displayName_;
  uint32_t formatVersion_ = 0;
  nlohmann::json manifest_;
  std::vector<Section> sections_;
  const uint8_t *image_ = nullptr;
  size_t imageSize_ = 0;
  std::shared_ptr<void> owned_; // the image; set only by open()
  std::string mappedPath_;      // the file open() mapped, when it mapped it
  size_t mappedFrom_ = 0;       // where its mapped part starts (the checksummed part's end)
};

} // namespace q3::runtime
