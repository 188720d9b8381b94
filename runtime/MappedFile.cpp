#include "runtime/MappedFile.h"
#include "runtime/FatalSignals.h"
#include "runtime/LoadError.h"
#include "runtime/Smaps.h"
#include "runtime/ThreadPool.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace q3::runtime {

std::string systemError(const std::string &path, const char *action, int error) {
  return fmt::format("{}: cannot {}: {}", printable(path), action, std::strerror(error));
}

FileDescriptor::~FileDescriptor() {
  if (fd >= 0)
    ::close(fd);
}

OpenedFile openRegularFile(const std::string &path) {
  OpenedFile opened{FileDescriptor(::open(path.c_str(), O_RDONLY | O_CLOEXEC)), 0};
  if (opened.file.fd < 0)
    throw LoadError(systemError(path, "open", errno));
  struct stat info;
  if (::fstat(opened.file.fd, &info) != 0)
    throw LoadError(systemError(path, "stat", errno));
  if (!S_ISREG(info.st_mode))
    throw LoadError(fmt::format("{}: not a regular file", printable(path)));
  opened.size = size_t(info.st_size);
  return opened;
}

void *mapFileReadOnly(int fd, size_t size, bool populateNow) {
  void *mapping = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (mapping == MAP_FAILED)
    return mapping;
  // Advice only: without transparent huge pages the faults read small folios.
  (void)::madvise(mapping, size, MADV_HUGEPAGE);
  if (!populateNow)
    return mapping;
    // Best effort, as MAP_POPULATE is: no touching, which would raise SIGBUS
    // past the end of a file cut short since it was opened.
#ifdef MADV_POPULATE_READ
  if (::madvise(mapping, size, MADV_POPULATE_READ) == 0)
    return mapping;
#endif
  (void)::madvise(mapping, size, MADV_WILLNEED); // kernels before 5.14: read ahead
  return mapping;
}

std::unique_ptr<MappedFile> MappedFile::open(const std::string &path, FilePlacement placement,
                                             ThreadPool *pool) {
  const OpenedFile opened = openRegularFile(path);
  const FileDescriptor &file = opened.file;
  std::unique_ptr<MappedFile> mapped(new MappedFile());
  mapped->path_ = path;
  mapped->size_ = opened.size;
  if (mapped->size_ == 0) // mmap cannot map zero bytes; the parsers report empty files
    return mapped;
  if (placement == FilePlacement::HugePageCopy) {
    mapped->copyFrom(file, path, pool);
    return mapped;
  }
  void *mapping = mapFileReadOnly(file.fd, mapped->size_, /*populate=*/false);
  if (mapping == MAP_FAILED)
    throw LoadError(systemError(path, "mmap", errno));
  mapped->mapping_ = mapping; // the mapping outlives the descriptor
  // A SIGBUS in it (the file truncated while in use) names the file.
  mapped->guard_ = registerMapping(mapping, mapped->size_, path);
  return mapped;
}

/// Reads [begin, end) of `file` into `to + begin`.
static void readRange(const FileDescriptor &file, const std::string &path, uint8_t *to,
                      size_t begin, size_t end, size_t size) {
  for (size_t done = begin; done < end;) {
    const ssize_t n = ::pread(file.fd, to + done, end - done, off_t(done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      throw LoadError(systemError(path, "read", errno));
    if (n == 0) // truncated since it was opened
      throw LoadError(fmt::format("{}: read {} of its {} bytes: the file shrank while it was read",
                                  printable(path), done, size));
    done += size_t(n);
  }
}

void MappedFile::copyFrom(const FileDescriptor &file, const std::string &path, ThreadPool *pool) {
  try {
    copy_ = HostBuffer(size_, HostBuffer::Pages::Huge);
  } catch (const std::bad_alloc &) {
    throw LoadError(
        fmt::format("{}: cannot copy {} bytes into memory: out of memory", printable(path), size_));
  }
  // Most of a copy's time is the kernel finding and zeroing huge pages on
  // first touch, which scales with the threads that touch them; each thread
  // takes whole huge pages, so no page is faulted by two.
  constexpr size_t kBlock = kHugePageBytes;
  const auto blocks = int64_t((size_ + kBlock - 1) / kBlock);
  const auto readBlocks = [&](int64_t first, int64_t last) {
    readRange(file, path, copy_.data(), size_t(first) * kBlock,
              std::min(size_, size_t(last) * kBlock), size_);
  };
  if (pool)
    pool->parallelFor(blocks, readBlocks, /*chunksPerThread=*/1);
  else
    readBlocks(0, blocks);
  mapping_ = copy_.data();
}

std::optional<double> MappedFile::hugePageShare(int samples) const {
  if (!copy_.empty())
    return 1.0;
  constexpr auto kHuge = uintptr_t(kHugePageBytes);
  const auto start = uintptr_t(mapping_);
  const uintptr_t first = (start + kHuge - 1) / kHuge * kHuge;
  const uintptr_t stretches = first < start + size_ ? (start + size_ - first) / kHuge : 0;
  if (stretches == 0 || samples < 1)
    return std::nullopt;
  const uintptr_t taken = std::min<uintptr_t>(stretches, uintptr_t(samples));
  for (uintptr_t i = 0; i < taken; ++i) {
    const auto *byte =
        reinterpret_cast<const volatile uint8_t *>(first + i * stretches / taken * kHuge);
    (void)*byte; // the fault maps the whole stretch when its folio is huge
  }
  const std::optional<std::string> smaps = readSelfSmaps();
  const std::optional<uint64_t> kb =
      smaps ? smapsFieldKb(*smaps, start, "FilePmdMapped") : std::nullopt;
  if (!kb)
    return std::nullopt;
  return std::min(1.0, double(*kb << 10) / double(taken * kHuge));
}

/// Reads [begin, end) of the file mapped at `view` (with MADV_HUGEPAGE):
/// the faults read ahead in huge folios where the page cache holds none.
static void populate(uint8_t *view, size_t begin, size_t end) {
#ifdef MADV_POPULATE_READ
  if (::madvise(view + begin, end - begin, MADV_POPULATE_READ) == 0)
    return;
#endif
  for (size_t at = begin; at < end; at += 4096) // kernels before 5.14
    (void)*reinterpret_cast<volatile uint8_t *>(view + at);
}

RereadResult MappedFile::rereadIntoHugeFolios(ThreadPool *pool, double minBytesPerSecond) {
  RereadResult result;
  const size_t whole = size_ / kHugePageBytes * kHugePageBytes;
  if (!copy_.empty() || whole == 0)
    return result;
  const auto start = std::chrono::steady_clock::now();
  std::optional<OpenedFile> opened;
  try {
    opened.emplace(openRegularFile(path_));
  } catch (const LoadError &) {
    return result; // gone since the load mapped it: nothing to mend
  }
  if (opened->size != size_) // replaced: its pages are not this mapping's
    return result;
  void *view = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, opened->file.fd, 0);
  if (view == MAP_FAILED)
    return result;
  if (::madvise(view, size_, MADV_HUGEPAGE) != 0) { // no THP here
    ::munmap(view, size_);
    return result;
  }
  // A file cut short meanwhile: SIGBUS on a read names it (FatalSignals.h).
  const int guard = registerMapping(view, size_, path_);
  // Pages this mapping holds cannot be dropped: unmap them (clean file
  // pages, faulted in again from the page cache when next read).
  (void)::madvise(mapping_, size_, MADV_DONTNEED);
  auto *bytes = static_cast<uint8_t *>(view);
  constexpr size_t kPiece = size_t(64) << 20;
  const size_t first = std::min(whole, kPiece);
  const int fd = opened->file.fd;
  (void)::posix_fadvise(fd, 0, off_t(first), POSIX_FADV_DONTNEED);
  populate(bytes, 0, first);
  const double firstSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.bytes = first;
  if (first == whole || double(first) >= minBytesPerSecond * firstSeconds) {
    // The rest dropped at once: dropping and reading piece by piece left a
    // third of the file in small folios (the read-ahead of one piece met
    // the next piece's old pages).
    (void)::posix_fadvise(fd, off_t(first), off_t(whole - first), POSIX_FADV_DONTNEED);
    const auto pieces = int64_t((whole - first + kPiece - 1) / kPiece);
    const auto rereadPieces = [&](int64_t begin, int64_t end) {
      for (int64_t piece = begin; piece < end; ++piece)
        populate(bytes, first + size_t(piece) * kPiece,
                 std::min(whole, first + size_t(piece + 1) * kPiece));
    };
    if (pool)
      pool->parallelFor(pieces, rereadPieces, /*chunksPerThread=*/1);
    else
      rereadPieces(0, pieces);
    result.bytes = whole;
  } else {
    result.slowStorage = true;
  }
  unregisterMapping(guard);
  ::munmap(view, size_);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

MappedFile::~MappedFile() {
  if (!copy_.empty())
    return; // copy_ frees itself; there is no mapping or SIGBUS guard
  unregisterMapping(guard_);
  if (mapping_)
    ::munmap(mapping_, size_);
}

void MappedFile::dropPages(const uint8_t *begin, size_t bytes) const {
  if (!copy_.empty())
    return; // MADV_DONTNEED would zero anonymous pages: the bytes would be lost
  const auto page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (uintptr_t(begin) + page - 1) / page * page;
  const uintptr_t last = (uintptr_t(begin) + bytes) / page * page;
  const auto mapStart = uintptr_t(mapping_), mapEnd = mapStart + size_;
  if (first >= last || first < mapStart || last > mapEnd)
    return;
  // Advice only: a failure leaves the pages resident, which is harmless.
  (void)::madvise(reinterpret_cast<void *>(first), last - first, MADV_DONTNEED);
}

} // namespace q3::runtime
