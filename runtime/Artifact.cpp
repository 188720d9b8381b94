// Opening an artifact file: mapped where its mapped sections allow, read
// whole otherwise (ArtifactReader.cpp validates the image), and checking
// its signature.
#include "runtime/Artifact.h"

#include "runtime/ArtifactFormat.h"
#include "runtime/HostBuffer.h"
#include "runtime/MappedFile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace q3::runtime {

using namespace artifact_format;

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
    throw LoadError(
        fmt::format("{}: cannot read: {} bytes do not fit in memory", printable(path), size));
  }
  read = readRange(path, fd, buffer->data(), 0, size);
  return std::shared_ptr<void>(buffer, buffer->data());
}

// The file mapped read-only, its checksummed prefix [0, prefix) replaced by a
// private copy read from the file: one contiguous image whose validated part
// cannot change, and whose mapped sections stay in the page cache.
std::shared_ptr<void> mapWithReadPrefix(const std::string &path, int fd, size_t size,
                                        size_t prefix) {
  // Not populated: what a CPU model streams is counted and mended first
  // (Artifact::mappedFolioCensus), which faults it in.
  void *base = mapFileReadOnly(fd, size, /*populate=*/false);
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
  if (mapped) {
    parsed->mappedPath_ = path;
    parsed->mappedFrom_ = size_t(prefix);
  }
  return adopt(std::move(parsed), std::move(image));
}

std::optional<FolioCensus> Artifact::mappedFolioCensus() const {
  if (mappedPath_.empty())
    return std::nullopt;
  const size_t first = (mappedFrom_ + kHugePageBytes - 1) / kHugePageBytes;
  return folioCensus(static_cast<const uint8_t *>(owned_.get()), imageSize_, first);
}

RereadResult Artifact::rereadSmallFolios(const FolioCensus &census, ThreadPool *pool,
                                         double minBytesPerSecond) const {
  if (mappedPath_.empty() || census.small.empty())
    return {};
  return rereadIntoHugeFolios(mappedPath_, static_cast<uint8_t *>(owned_.get()), imageSize_,
                              census.small, pool, minBytesPerSecond);
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
    throw fileError(displayName_,
                    fmt::format("signed by key {}, not by the required {}", keyId(signer), who));
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
