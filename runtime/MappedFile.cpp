#include "runtime/MappedFile.h"
#include "runtime/FatalSignals.h"
#include "runtime/LoadError.h"

#include <fmt/format.h>

#include <cerrno>
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

std::unique_ptr<MappedFile> MappedFile::open(const std::string &path, FilePlacement placement) {
  const OpenedFile opened = openRegularFile(path);
  const FileDescriptor &file = opened.file;
  std::unique_ptr<MappedFile> mapped(new MappedFile());
  mapped->size_ = opened.size;
  if (mapped->size_ == 0) // mmap cannot map zero bytes; the parsers report empty files
    return mapped;
  if (placement == FilePlacement::HugePageCopy) {
    mapped->copyFrom(file, path);
    return mapped;
  }
  void *mapping = ::mmap(nullptr, mapped->size_, PROT_READ, MAP_PRIVATE, file.fd, 0);
  if (mapping == MAP_FAILED)
    throw LoadError(systemError(path, "mmap", errno));
  mapped->mapping_ = mapping; // the mapping outlives the descriptor
  // A SIGBUS in it (the file truncated while in use) names the file.
  mapped->guard_ = registerMapping(mapping, mapped->size_, path);
  return mapped;
}

void MappedFile::copyFrom(const FileDescriptor &file, const std::string &path) {
  try {
    copy_ = HostBuffer(size_, HostBuffer::Pages::Huge);
  } catch (const std::bad_alloc &) {
    throw LoadError(
        fmt::format("{}: cannot copy {} bytes into memory: out of memory", printable(path), size_));
  }
  size_t done = 0;
  while (done < size_) {
    const ssize_t n = ::pread(file.fd, copy_.data() + done, size_ - done, off_t(done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      throw LoadError(systemError(path, "read", errno));
    if (n == 0) // truncated since it was opened
      throw LoadError(fmt::format("{}: read {} of its {} bytes: the file shrank while it was read",
                                  printable(path), done, size_));
    done += size_t(n);
  }
  mapping_ = copy_.data();
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
