#include "runtime/PageCacheFolios.h"
#include "runtime/FatalSignals.h"
#include "runtime/HostBuffer.h"
#include "runtime/LoadError.h"
#include "runtime/MappedFile.h"
#include "runtime/ThreadPool.h"

#include <algorithm>
#include <chrono>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <utility>

namespace q3::runtime {

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

/// Whether a first touch of stretch `i` of `mapping` (its first byte) maps
/// the whole stretch, as it does a huge folio; nullopt when pagemap cannot
/// be read.
std::optional<bool> touchMapsStretch(int pagemap, const uint8_t *mapping, size_t i) {
  (void)*reinterpret_cast<const volatile uint8_t *>(mapping + i * kStretch);
  return pageMapped(pagemap, mapping + (i + 1) * kStretch - 1);
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

/// Reads [begin, end) of the file mapped at `view` (with MADV_HUGEPAGE):
/// the faults read ahead in huge folios where the page cache holds none.
void populate(uint8_t *view, size_t begin, size_t end) {
#ifdef MADV_POPULATE_READ
  if (::madvise(view + begin, end - begin, MADV_POPULATE_READ) == 0)
    return;
#endif
  for (size_t at = begin; at < end; at += 4096) // kernels before 5.14
    (void)*reinterpret_cast<volatile uint8_t *>(view + at);
}

/// Whether any stretch of the first `count` of `pieces`, just read back
/// through `view`, came back in a huge folio (true when pagemap cannot
/// say). Where none did, the kernel caches this file in small folios only
/// (ext4 before large folios, as in Debian 12's 6.1): reading the rest back
/// would only cost time.
bool cameBackHuge(uint8_t *view, const std::vector<std::pair<size_t, size_t>> &pieces,
                  size_t count) {
  const FileDescriptor pagemap(::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC));
  if (pagemap.fd < 0)
    return true;
  for (size_t p = 0; p < count; ++p) {
    const auto [begin, end] = pieces[p];
    (void)::madvise(view + begin, end - begin, MADV_DONTNEED); // populated: all mapped
    for (size_t i = begin / kStretch; i < end / kStretch; ++i) {
      const std::optional<bool> huge = touchMapsStretch(pagemap.fd, view, i);
      if (!huge || *huge)
        return true;
    }
  }
  return false;
}

} // namespace

std::optional<double> combinedHugeShare(const std::vector<std::optional<FolioCensus>> &censuses) {
  size_t huge = 0, measured = 0;
  for (const std::optional<FolioCensus> &census : censuses)
    if (census) {
      huge += census->stretches - census->small.size();
      measured += census->stretches;
    }
  if (measured == 0)
    return std::nullopt;
  return double(huge) / double(measured);
}

std::optional<FolioCensus> folioCensus(const uint8_t *mapping, size_t size, size_t first) {
  FolioCensus census;
  const size_t end = size / kStretch;
  if (first >= end)
    return std::nullopt;
  census.stretches = end - first;
  if (uintptr_t(mapping) % kStretch != 0) {
    for (size_t i = first; i < end; ++i)
      census.small.push_back(i);
    return census;
  }
  const FileDescriptor pagemap(::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC));
  if (pagemap.fd < 0)
    return std::nullopt;
  // Every touch below must be the stretch's first: what an earlier read
  // mapped would look huge.
  (void)::madvise(const_cast<uint8_t *>(mapping) + first * kStretch, (end - first) * kStretch,
                  MADV_DONTNEED);
  for (size_t i = first; i < end; ++i) {
    const std::optional<bool> whole = touchMapsStretch(pagemap.fd, mapping, i);
    if (!whole)
      return std::nullopt;
    if (!*whole)
      census.small.push_back(i);
  }
  return census;
}

RereadResult rereadIntoHugeFolios(const std::string &path, uint8_t *mapping, size_t size,
                                  const std::vector<size_t> &stretches, ThreadPool *pool,
                                  double minBytesPerSecond) {
  RereadResult result;
  const size_t whole = size / kStretch;
  if (whole == 0 || uintptr_t(mapping) % kStretch != 0)
    return result;
  constexpr size_t kPiece = size_t(64) << 20;
  const std::vector<std::pair<size_t, size_t>> pieces = stretchPieces(stretches, kPiece);
  if (pieces.empty() || pieces.back().second > whole * kStretch)
    return result;
  const auto start = std::chrono::steady_clock::now();
  std::optional<OpenedFile> opened;
  try {
    opened.emplace(openRegularFile(path));
  } catch (const LoadError &) {
    return result; // gone since the load mapped it: nothing to mend
  }
  if (opened->size != size) // replaced: its pages are not this mapping's
    return result;
  void *view = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, opened->file.fd, 0);
  if (view == MAP_FAILED)
    return result;
  if (::madvise(view, size, MADV_HUGEPAGE) != 0) { // no THP here
    ::munmap(view, size);
    return result;
  }
  // A file cut short meanwhile: SIGBUS on a read names it (FatalSignals.h).
  const int guard = registerMapping(view, size, path);
  auto *bytes = static_cast<uint8_t *>(view);
  const int fd = opened->file.fd;
  // Pages this mapping holds cannot be dropped: unmap them (clean file
  // pages, faulted in again from the page cache when next read).
  const auto drop = [&](size_t first, size_t last) {
    for (size_t i = first; i < last; ++i) {
      const auto [begin, end] = pieces[i];
      (void)::madvise(mapping + begin, end - begin, MADV_DONTNEED);
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
  const bool fast = double(timedBytes) >= minBytesPerSecond * firstSeconds;
  const bool more = timed < pieces.size();
  result.noHugeFolios = more && fast && !cameBackHuge(bytes, pieces, timed);
  if (more && fast && !result.noHugeFolios) {
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
  } else if (more) {
    result.slowStorage = !fast;
  }
  unregisterMapping(guard);
  ::munmap(view, size);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

} // namespace q3::runtime
