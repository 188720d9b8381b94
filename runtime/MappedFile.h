// Files as the runtime reads them: mapped read-only (or copied onto huge
// pages), with one-line errors.
#pragma once

#include "runtime/HostBuffer.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace q3::runtime {

class ThreadPool;

/// "<path>: cannot <action>: <strerror(error)>"
std::string systemError(const std::string &path, const char *action, int error);

/// Closes a descriptor on every path out of a scope.
struct FileDescriptor {
  explicit FileDescriptor(int fd) : fd(fd) {}
  FileDescriptor(FileDescriptor &&other) noexcept : fd(other.fd) { other.fd = -1; }
  FileDescriptor(const FileDescriptor &) = delete;
  FileDescriptor &operator=(const FileDescriptor &) = delete;
  ~FileDescriptor();
  int fd;
};

/// `path` opened read-only, and its size; throws LoadError naming the path
/// when it cannot be opened or is not a regular file.
struct OpenedFile {
  FileDescriptor file;
  size_t size;
};
OpenedFile openRegularFile(const std::string &path);

/// Maps `size` bytes of the file `fd` read-only (MAP_PRIVATE), advised for
/// huge pages (MADV_HUGEPAGE, where the kernel has them): a fault on a part
/// the page cache no longer holds reads it back in a 2 MB folio, not in the
/// small ones a plain mapping's read-ahead makes (a VM that evicts the cache
/// of files no process maps otherwise leaves a checkpoint in 4 KiB folios
/// after a few loads). With `populate`, the pages are faulted in before
/// this returns where the kernel can (MADV_POPULATE_READ; else read ahead),
/// never by touching them. MAP_FAILED when mmap fails (errno says why).
void *mapFileReadOnly(int fd, size_t size, bool populate);

/// Where a file's bytes are read from: the page cache, mapped (no copy, no
/// load time; small pages unless the file system gave the file huge
/// folios), or a copy in anonymous memory on transparent huge pages (a read
/// of the whole file at load; the kernels' streams then miss the TLB less).
enum class FilePlacement { Mapped, HugePageCopy };

/// Which of a file's whole 2 MB stretches the page cache holds in small
/// folios (MappedFile::folioCensus).
struct FolioCensus {
  size_t stretches = 0;      // whole 2 MB stretches of the file
  std::vector<size_t> small; // their indices (ascending) where the folios are small
  double hugeShare() const {
    return stretches ? 1.0 - double(small.size()) / double(stretches) : 1.0;
  }
};

/// What MappedFile::rereadIntoHugeFolios did.
struct RereadResult {
  uint64_t bytes = 0;       // read back from storage
  double seconds = 0;       // wall time, the eviction included
  bool slowStorage = false; // stopped after the first piece: storage read slower than asked
};

/// A regular file's bytes, read-only, for as long as this lives: mapped
/// (MAP_PRIVATE) or copied (FilePlacement). An empty file has no bytes
/// (data() is null). Throws LoadError naming the path and the failing call.
/// A SIGBUS on a read of the mapping is one line naming the file once
/// installFatalSignalHandlers() ran (runtime/FatalSignals.h).
class MappedFile {
public:
  /// A copy is read by `pool`'s threads when given (each faults in and
  /// fills its own huge pages), else by the calling thread.
  static std::unique_ptr<MappedFile> open(const std::string &path,
                                          FilePlacement placement = FilePlacement::Mapped,
                                          ThreadPool *pool = nullptr);
  const uint8_t *data() const { return static_cast<const uint8_t *>(mapping_); }
  size_t size() const { return size_; }
  /// Lets the kernel drop the resident pages wholly inside [begin, begin +
  /// bytes) of this mapping: they stop counting in RSS and are read from the
  /// page cache again if touched. For bytes copied elsewhere (packed weights).
  /// Nothing for a copy, whose pages have no file to come back from.
  void dropPages(const uint8_t *begin, size_t bytes) const;
  /// For a mapping: which of the file's whole 2 MB stretches (from offset 0)
  /// the page cache holds in huge folios, which the kernel maps with one
  /// TLB entry each. It unmaps the mapping's pages first (clean file pages:
  /// a later read faults them in again), reads the first byte of every
  /// stretch and asks /proc/self/pagemap whether the stretch's last page
  /// came mapped with it: a fault on a huge folio maps the whole stretch,
  /// one on small folios only the pages around the byte. A file written or
  /// read() in small pieces stays cached in small folios, wholly or in
  /// parts; one read back through a mapping advised for huge pages mostly
  /// in huge ones. Every stretch counts small on a mapping the kernel did
  /// not put on a 2 MB boundary (its folios cannot be mapped whole). A copy
  /// has none small; nullopt when the file has no whole stretch or pagemap
  /// cannot be read.
  std::optional<FolioCensus> folioCensus() const;
  /// folioCensus()'s share of huge stretches (1 for a copy).
  std::optional<double> hugePageShare() const;
  /// For a mapping: asks the kernel to drop the file's cached pages of the
  /// whole 2 MB stretches `stretches` names (ascending; every whole stretch
  /// when null) and reads them back through a mapping advised for huge
  /// pages, so the page cache holds them in huge folios from then on, for
  /// this load and every later one. Only clean pages no other process maps
  /// are dropped. The first 64 MB go first and are timed: when they read
  /// slower than `minBytesPerSecond` (a disk, not a fast SSD or the host's
  /// cache) the rest is left as it was, else the rest is dropped at once and
  /// read back 64 MB at a time by `pool`'s threads (when given). The bytes
  /// stay the file's; this mapping's pages are faulted in again as they are
  /// read. Nothing for a copy, a file under 2 MB, a mapping off a 2 MB
  /// boundary, a file gone or replaced since it was mapped, or a kernel
  /// without transparent huge pages.
  RereadResult rereadIntoHugeFolios(ThreadPool *pool, double minBytesPerSecond,
                                    const std::vector<size_t> *stretches = nullptr);
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;
  ~MappedFile();

private:
  MappedFile() = default;
  /// Reads the whole file into copy_ (huge pages); LoadError on a short read.
  void copyFrom(const FileDescriptor &file, const std::string &path, ThreadPool *pool);
  std::string path_;
  void *mapping_ = nullptr; // the mapping, or copy_'s bytes
  HostBuffer copy_;
  size_t size_ = 0;
  int guard_ = -1; // runtime/FatalSignals.h
};

} // namespace q3::runtime
