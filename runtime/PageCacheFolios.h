//===- PageCacheFolios.h - the page cache's folios under a file mapping ---===//
//
// A read-only file mapping streams at full speed only where the page cache
// holds the file in huge (2 MB) folios, which the kernel maps with one PMD:
// one TLB entry and one fault per 2 MB. Small folios are mapped 4 KB at a
// time; in a VM whose page tables the hypervisor shadows each first touch
// of such a page costs a fault of its own (docs/cpu-backend.md, "Where the
// checkpoint's bytes live"). A file written or read() in small pieces stays
// cached in small folios, wholly or in parts; one read back through a
// mapping advised for huge pages mostly in huge ones.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace q3::runtime {

class ThreadPool;

/// Which of a file's whole 2 MB stretches the page cache holds in small
/// folios (folioCensus).
struct FolioCensus {
  size_t stretches = 0;      // whole 2 MB stretches of the file
  std::vector<size_t> small; // their indices (ascending) where the folios are small
  double hugeShare() const {
    return stretches ? 1.0 - double(small.size()) / double(stretches) : 1.0;
  }
};

/// The share of huge stretches over all the measured `censuses` (one per
/// file); nullopt when none was measured.
std::optional<double> combinedHugeShare(const std::vector<std::optional<FolioCensus>> &censuses);

/// What rereadIntoHugeFolios did.
struct RereadResult {
  uint64_t bytes = 0;       // read back from storage
  double seconds = 0;       // wall time, the eviction included
  bool slowStorage = false; // stopped after the first piece: storage read slower than asked
  bool noHugeFolios = false; // the first 64 MB came back in small folios again: stopped there
};

/// The census of the whole 2 MB stretches of the file mapped read-only at
/// `mapping` (its first byte the file's, `size` bytes, advised for huge
/// pages) from stretch `first` on. It unmaps those stretches' pages first
/// (clean file pages: a later read faults them in again), reads the first
/// byte of every stretch and asks /proc/self/pagemap whether the stretch's
/// last page came mapped with it: a fault on a huge folio maps the whole
/// stretch, one on small folios only the pages around the byte. Every
/// stretch counts small on a mapping the kernel did not put on a 2 MB
/// boundary (its folios cannot be mapped whole). nullopt when there is no
/// such stretch or pagemap cannot be read.
std::optional<FolioCensus> folioCensus(const uint8_t *mapping, size_t size, size_t first = 0);

/// Asks the kernel to drop the cached pages of the file at `path` (`size`
/// bytes, mapped at `mapping` as for folioCensus) in the whole 2 MB
/// stretches `stretches` names (ascending), and reads them back through a
/// mapping advised for huge pages, so the page cache holds them in huge
/// folios from then on, for this load and every later one. Only clean pages
/// no other process maps are dropped. The first 64 MB go first and are
/// timed: when they read slower than `minBytesPerSecond` (a disk, not a fast
/// SSD or the host's cache), or came back in small folios again (a kernel
/// that caches this file in small folios only), the rest is left as it was,
/// else the rest is dropped at once and read back 64 MB at a time by
/// `pool`'s threads (when given). The bytes stay the file's; `mapping`'s
/// pages there are unmapped and faulted in again as they are read. Nothing
/// for a mapping off a 2 MB boundary, a file gone or replaced since it was
/// mapped, or a kernel without transparent huge pages.
RereadResult rereadIntoHugeFolios(const std::string &path, uint8_t *mapping, size_t size,
                                  const std::vector<size_t> &stretches, ThreadPool *pool,
                                  double minBytesPerSecond);

} // namespace q3::runtime
