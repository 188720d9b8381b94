#include "runtime/MappedFile.h"
#include "runtime/FatalSignals.h"
#include "runtime/LoadError.h"
#include "runtime/ThreadPool.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
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

std::optional<FolioCensus> MappedFile::folioCensus() const {
  if (!copy_.empty()) {
    FolioCensus census;
    census.stretches = size_ / kHugePageBytes;
    return census.stretches ? std::optional<FolioCensus>(census) : std::nullopt;
  }
  return runtime::folioCensus(static_cast<const uint8_t *>(mapping_), size_);
}

std::optional<double> MappedFile::hugePageShare() const {
  const std::optional<FolioCensus> census = folioCensus();
  return census ? std::optional<double>(census->hugeShare()) : std::nullopt;
}

RereadResult MappedFile::rereadIntoHugeFolios(ThreadPool *pool, double minBytesPerSecond,
                                              const std::vector<size_t> *stretches) {
  if (!copy_.empty())
    return {};
  std::vector<size_t> every;
  if (!stretches) {
    for (size_t i = 0; i < size_ / kHugePageBytes; ++i)
      every.push_back(i);
    stretches = &every;
  }
  return runtime::rereadIntoHugeFolios(path_, static_cast<uint8_t *>(mapping_), size_, *stretches,
                                       pool, minBytesPerSecond);
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
