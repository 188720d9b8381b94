// Files as the runtime reads them: mapped read-only (or copied onto huge
// pages), with one-line errors.
#pragma once

#include "runtime/HostBuffer.h"
#include "runtime/PageCacheFolios.h"

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
  /// For a mapping: the census of the file's whole 2 MB stretches
  /// (runtime::folioCensus, which unmaps the mapping's pages to count). A
  /// copy has none small; nullopt when the file has no whole stretch or
  /// pagemap cannot be read.
  std::optional<FolioCensus> folioCensus() const;
  /// folioCensus()'s share of huge stretches (1 for a copy).
  std::optional<double> hugePageShare() const;
  /// For a mapping: runtime::rereadIntoHugeFolios of the stretches
  /// `stretches` names (every whole stretch when null). Nothing for a copy.
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
