//===- Smaps.h - what /proc/self/smaps says about one mapping -------------===//
//
// Whether memory is really on huge pages decides decode speed (a stream
// on small pages misses the TLB, and in a VM each miss walks two page
// tables), so the runtime checks what the kernel gave rather than what it
// asked for: FilePmdMapped for a mapped checkpoint, AnonHugePages for its
// own buffers.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace q3::runtime {

/// The kB that `smaps` (the text of /proc/PID/smaps) gives the mapping
/// starting at `start` in `field` ("FilePmdMapped", "AnonHugePages"), or
/// nullopt when no mapping starts there or it has no such field.
std::optional<uint64_t> smapsFieldKb(std::string_view smaps, uintptr_t start,
                                     std::string_view field);

/// /proc/self/smaps, or nullopt where it cannot be read.
std::optional<std::string> readSelfSmaps();

} // namespace q3::runtime
