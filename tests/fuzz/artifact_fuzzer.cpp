// Feeds arbitrary bytes to the artifact reader. LoadError is the only
// acceptable failure; any other exception escapes and aborts (a bug). For a
// successful parse every section byte is read so ASan checks the bounds.
//
// Random bytes almost never carry a matching checksum, so each input is parsed
// twice: as is (the header checks), and with file_size and the checksum fixed
// up (re-sealed, as an attacker would, up to the first mapped payload), which lets the fuzzer reach the
// section table, the manifest, the signature section and what the runtime
// reads from the manifest before allocating (the memory estimate) and the
// typed manifest's reader and validation (manifest_fuzzer.cpp goes deeper).
#include "runtime/Artifact.h"
#include "runtime/Manifest.h"
#include "runtime/ModelMemory.h"

#include <cstddef>
#include <cstdint>
#include <vector>

using q3::runtime::Artifact;
using q3::runtime::LoadError;

namespace {

void setU64(std::vector<uint8_t> &image, size_t at, uint64_t value) {
  for (int i = 0; i < 8; ++i)
    image[at + i] = uint8_t(value >> (8 * i));
}

void check(const uint8_t *data, size_t size) {
  try {
    auto artifact = Artifact::parse("fuzz", data, size);
    if (!artifact->manifest().is_object())
      __builtin_trap();
    volatile unsigned sink = 0;
    for (const Artifact::Section &section : artifact->sections()) {
      if (section.data < data || section.size > size_t(data + size - section.data) ||
          (section.data - data) % q3::runtime::kArtifactAlignment != 0)
        __builtin_trap(); // the reader promised bounds and alignment
      unsigned sum = 0;
      for (size_t i = 0; i < section.size; ++i)
        sum += section.data[i];
      sink = sink + sum;
      if (artifact->find(section.name) != &section)
        __builtin_trap(); // names are unique
    }
    // The typed manifest: ManifestError is its only failure; a valid one
    // has a memory estimate, never a crash or an exception.
    try {
      const q3::manifest::Manifest m = q3::manifest::manifestFromJson(artifact->manifest());
      q3::manifest::validateManifest(m);
      for (int64_t context : {int64_t(1), int64_t(4096), int64_t(1) << 40})
        for (const q3::runtime::MemoryPart &part : q3::runtime::estimateModelMemory(m, context, 64))
          sink = sink + unsigned(part.bytes);
    } catch (const q3::manifest::ManifestError &) {
    }
    // A signature section that is present is checked without crashing.
    if (artifact->find(q3::runtime::kSignatureSectionName)) {
      q3::runtime::PublicKey key;
      try {
        artifact->verifySignature(key);
      } catch (const LoadError &) {
      }
    }
  } catch (const LoadError &) {
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  check(data, size);
  if (size >= q3::runtime::kArtifactHeaderSize) {
    std::vector<uint8_t> sealed(data, data + size);
    setU64(sealed, 16, size);
    setU64(sealed, q3::runtime::kArtifactChecksumOffset,
           q3::runtime::artifactChecksum(
               sealed.data(),
               size_t(q3::runtime::artifactChecksummedEnd(sealed.data(), sealed.size()))));
    check(sealed.data(), sealed.size());
  }
  return 0;
}
