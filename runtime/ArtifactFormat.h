//===- ArtifactFormat.h - the artifact format's shared pieces (internal) --===//
//
// What runtime/Artifact*.cpp share, and nothing else includes: the header
// and section-table field offsets (docs/artifact.md), the name and kind
// rules both the writer and the reader enforce, the chunk hashes of mapped
// sections, where the checksummed prefix ends, and the signature's domain.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Artifact.h"
#include "runtime/LoadError.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace q3::runtime::artifact_format {

// Header field offsets (docs/artifact.md).
inline constexpr size_t kVersionOffset = 8;
inline constexpr size_t kHeaderSizeOffset = 12;
inline constexpr size_t kFileSizeOffset = 16;
inline constexpr size_t kSectionCountOffset = 24;
inline constexpr size_t kTableOffsetOffset = 32;
inline constexpr size_t kReservedOffset = 48;
// Section entry field offsets.
inline constexpr size_t kEntryKind = 0;
inline constexpr size_t kEntryFlags = 4;
inline constexpr size_t kEntryOffset = 8;
inline constexpr size_t kEntrySize = 16;
inline constexpr size_t kEntryName = 24;

// What a signature covers, after this prefix: the file image with the
// checksum field and the signature payload taken as zero.
inline constexpr char kSignatureDomain[] = "q3c artifact signature v1";

/// "<file>: <what>", the file name made printable.
LoadError fileError(const std::string &file, const std::string &what);

/// "2 (executable)" and the like; the bare number for an unknown kind.
std::string describeKind(uint32_t kind);
bool isKnownKind(uint32_t kind);

/// Why `name` cannot name a section ("" if it can).
std::string nameProblem(std::string_view name);

/// The 4 MiB chunks of a mapped section of `bytes`.
uint64_t hashChunks(uint64_t bytes);
/// XXH3-64 of each 4 MiB chunk of `data`, on up to `threads` threads.
std::vector<uint64_t> chunkHashes(const uint8_t *data, uint64_t size, unsigned threads);

/// Where the header checksum stops in a file of `fileSize` bytes whose first
/// `readable` bytes are at `data` (ArtifactReader.cpp).
uint64_t checksummedEnd(const uint8_t *data, size_t readable, uint64_t fileSize);

} // namespace q3::runtime::artifact_format
