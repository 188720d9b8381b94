#include "runtime/MappedFile.h"
#include "runtime/FatalSignals.h"
#include "runtime/LoadError.h"
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

namespace {

constexpr size_t kStretch = kHugePageBytes;

/// Whether /proc/self/pagemap (`pagemap`) says the page holding `address`
/// is mapped; nullopt when it cannot be read.
std::optional<bool> pageMapped(int pagemap, const void *address) {
  const auto page = uintptr_t(::sysconf(_SC_PAGESIZE));
  uint64_t entry = 0;
  const off_t at = off_t(uintptr_t(address) / page * sizeof entry);
  if (::pread(pagemap, &entry, sizeof entry, at) != ssize_t(sizeof entry))
    return std::nullopt;
  return (entry >> 63) != 0; // bit 63: present
}

/// [begin, end) byte ranges of the file, each at most `most` bytes: the runs
/// of consecutive stretches in `stretches` (ascending), cut where longer.
std::vector<std::pair<size_t, size_t>> stretchPieces(const std::vector<size_t> &stretches,
                                                     size_t most) {
  std::vector<std::pair<size_t, size_t>> pieces;
  for (size_t i = 0; i < stretches.size();) {
    size_t last = i;
    while (last + 1 < stretches.size() && stretches[last + 1] == stretches[last] + 1)
      ++last;
    const size_t begin = stretches[i] * kStretch, end = (stretches[last] + 1) * kStretch;
    for (size_t at = begin; at < end; at += most)
      pieces.emplace_back(at, std::min(end, at + most));
    i = last + 1;
  }
  return pieces;
}

} // namespace

std::optional<FolioCensus> MappedFile::folioCensus() const {
  FolioCensus census;
  census.stretches = size_ / kStretch;
  if (census.stretches == 0)
    return std::nullopt;
  if (!copy_.empty())
    return census;
  if (uintptr_t(mapping_) % kStretch != 0) {
    for (size_t i = 0; i < census.stretches; ++i)
      census.small.push_back(i);
    return census;
  }
  const FileDescriptor pagemap(::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC));
  if (pagemap.fd < 0)
    return std::nullopt;
  // Every touch below must be the stretch's first: what an earlier read
  // mapped would look huge.
  (void)::madvise(mapping_, size_, MADV_DONTNEED);
  const auto *bytes = static_cast<const uint8_t *>(mapping_);
  for (size_t i = 0; i < census.stretches; ++i) {
    (void)*reinterpret_cast<const volatile uint8_t *>(bytes + i * kStretch);
    const std::optional<bool> whole = pageMapped(pagemap.fd, bytes + (i + 1) * kStretch - 1);
    if (!whole)
      return std::nullopt;
    if (!*whole)
      census.small.push_back(i);
  }
  return census;
}

std::optional<double> MappedFile::hugePageShare() const {
  const std::optional<FolioCensus> census = folioCensus();
  return census ? std::optional<double>(census->hugeShare()) : std::nullopt;
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

RereadResult MappedFile::rereadIntoHugeFolios(ThreadPool *pool, double minBytesPerSecond,
                                              const std::vector<size_t> *stretches) {
  RereadResult result;
  const size_t whole = size_ / kStretch;
  if (!copy_.empty() || whole == 0 || uintptr_t(mapping_) % kStretch != 0)
    return result;
  std::vector<size_t> every;
  if (!stretches) {
    for (size_t i = 0; i < whole; ++i)
      every.push_back(i);
    stretches = &every;
  }
  constexpr size_t kPiece = size_t(64) << 20;
  const std::vector<std::pair<size_t, size_t>> pieces = stretchPieces(*stretches, kPiece);
  if (pieces.empty() || pieces.back().second > whole * kStretch)
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
  auto *bytes = static_cast<uint8_t *>(view);
  const int fd = opened->file.fd;
  // Pages this mapping holds cannot be dropped: unmap them (clean file
  // pages, faulted in again from the page cache when next read).
  const auto drop = [&](size_t first, size_t last) {
    for (size_t i = first; i < last; ++i) {
      const auto [begin, end] = pieces[i];
      (void)::madvise(static_cast<uint8_t *>(mapping_) + begin, end - begin, MADV_DONTNEED);
      (void)::posix_fadvise(fd, off_t(begin), off_t(end - begin), POSIX_FADV_DONTNEED);
    }
  };
  const auto pieceBytes = [&](size_t i) { return pieces[i].second - pieces[i].first; };
  // The first 64 MB (or what there is) alone, timed.
  size_t timed = 1, timedBytes = pieceBytes(0);
  while (timed < pieces.size() && timedBytes + pieceBytes(timed) <= kPiece)
    timedBytes += pieceBytes(timed++);
  drop(0, timed);
  for (size_t i = 0; i < timed; ++i)
    populate(bytes, pieces[i].first, pieces[i].second);
  const double firstSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.bytes = timedBytes;
  if (timed == pieces.size() || double(timedBytes) >= minBytesPerSecond * firstSeconds) {
    // The rest dropped at once: dropping and reading piece by piece left a
    // third of the file in small folios (the read-ahead of one piece met
    // the next piece's old pages).
    drop(timed, pieces.size());
    const auto rereadPieces = [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        populate(bytes, pieces[timed + size_t(i)].first, pieces[timed + size_t(i)].second);
    };
    const auto rest = int64_t(pieces.size() - timed);
    if (pool)
      pool->parallelFor(rest, rereadPieces, /*chunksPerThread=*/1);
    else
      rereadPieces(0, rest);
    for (size_t i = timed; i < pieces.size(); ++i)
      result.bytes += pieceBytes(i);
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
