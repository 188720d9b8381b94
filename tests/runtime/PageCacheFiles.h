// Helpers for the runtime tests of the page cache's folios: a file evicted
// from the page cache, and parts of it read back in small folios.
#pragma once

#include "runtime/HostBuffer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace q3::runtime::testing {

/// Asks the kernel to drop `path`'s cached pages (written back first, so
/// they are clean); false when some stay (tmpfs keeps its pages).
inline bool evictFromPageCache(const std::string &path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return false;
  const off_t size = ::lseek(fd, 0, SEEK_END);
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  // mincore on a fresh mapping says what is resident without faulting it in.
  const long page = ::sysconf(_SC_PAGESIZE);
  std::vector<unsigned char> resident(size_t((size + page - 1) / page));
  void *view = ::mmap(nullptr, size_t(size), PROT_READ, MAP_PRIVATE, fd, 0);
  bool evicted = view != MAP_FAILED && ::mincore(view, size_t(size), resident.data()) == 0;
  for (unsigned char r : resident)
    evicted = evicted && !(r & 1);
  if (view != MAP_FAILED)
    ::munmap(view, size_t(size));
  ::close(fd);
  return evicted;
}

/// Reads stretches `stretches` of `path` (evicted) with read() in 64 KiB
/// pieces, no read-ahead: the page cache then holds them in small folios.
inline void readInSmallPieces(const std::string &path, const std::vector<size_t> &stretches) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
  std::vector<uint8_t> piece(size_t(64) << 10);
  for (size_t stretch : stretches)
    for (size_t at = 0; at < kHugePageBytes; at += piece.size())
      ASSERT_EQ(::pread(fd, piece.data(), piece.size(), off_t(stretch * kHugePageBytes + at)),
                ssize_t(piece.size()));
  ::close(fd);
}

/// Expects every stretch `readSmall` read in small pieces among the `small`
/// ones a folio census names. Others may be small too (read-ahead, or no
/// free 2 MB of memory for a folio): a read back must mend those as well.
inline void expectFoundSmall(const std::vector<size_t> &small,
                             const std::vector<size_t> &readSmall) {
  for (size_t stretch : readSmall)
    EXPECT_NE(std::find(small.begin(), small.end(), stretch), small.end())
        << "stretch " << stretch << " was read in small pieces";
}

} // namespace q3::runtime::testing
