#include "runtime/ArtifactFormat.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <system_error>
#include <thread>

namespace q3::runtime::artifact_format {

LoadError fileError(const std::string &file, const std::string &what) {
  return LoadError(fmt::format("{}: {}", printable(file), what));
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

uint64_t hashChunks(uint64_t bytes) {
  return (bytes + kArtifactHashChunk - 1) / kArtifactHashChunk;
}

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

} // namespace q3::runtime::artifact_format
