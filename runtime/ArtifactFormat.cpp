#include "runtime/ArtifactFormat.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <system_error>
#include <thread>

namespace q3::runtime::artifact_format {
namespace {

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

} // namespace

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
