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

std::unique_ptr<MappedFile> MappedFile::open(const std::string &path) {
  const OpenedFile opened = openRegularFile(path);
  const FileDescriptor &file = opened.file;
  std::unique_ptr<MappedFile> mapped(new MappedFile());
  mapped->size_ = opened.size;
  if (mapped->size_ == 0) // mmap cannot map zero bytes; the parsers report empty files
    return mapped;
  void *mapping = ::mmap(nullptr, mapped->size_, PROT_READ, MAP_PRIVATE, file.fd, 0);
  if (mapping == MAP_FAILED)
    throw LoadError(systemError(path, "mmap", errno));
  mapped->mapping_ = mapping; // the mapping outlives the descriptor
  // A SIGBUS in it (the file truncated while in use) names the file.
  mapped->guard_ = registerMapping(mapping, mapped->size_, path);
  return mapped;
}

MappedFile::~MappedFile() {
  unregisterMapping(guard_);
  if (mapping_)
    ::munmap(mapping_, size_);
}

void MappedFile::dropPages(const uint8_t *begin, size_t bytes) const {
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
