#include "runtime/SafeTensors.h"

#include "runtime/SafeTensorsParser.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace q3::runtime {

namespace {

std::string systemError(const std::string &path, const char *action, int error) {
  return fmt::format("{}: cannot {}: {}", printable(path), action, std::strerror(error));
}

// Closes the descriptor on every path out of open(); the mapping outlives it.
struct FileDescriptor {
  int fd;
  ~FileDescriptor() {
    if (fd >= 0)
      ::close(fd);
  }
};

} // namespace

std::unique_ptr<SafeTensorsFile> SafeTensorsFile::parse(const std::string &displayName,
                                                        const uint8_t *data, size_t size) {
  SafeTensorsContents contents = parseSafeTensorsImage(displayName, data, size);
  std::unique_ptr<SafeTensorsFile> file(new SafeTensorsFile());
  file->displayName_ = displayName;
  file->tensors_ = std::move(contents.tensors);
  file->metadata_ = std::move(contents.metadata);
  return file;
}

std::unique_ptr<SafeTensorsFile> SafeTensorsFile::open(const std::string &path) {
  FileDescriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0)
    throw LoadError(systemError(path, "open", errno));
  struct stat info;
  if (::fstat(file.fd, &info) != 0)
    throw LoadError(systemError(path, "stat", errno));
  if (!S_ISREG(info.st_mode))
    throw LoadError(fmt::format("{}: not a regular file", printable(path)));

  size_t size = size_t(info.st_size);
  if (size == 0) // mmap cannot map zero bytes; let the parser report it
    return parse(path, nullptr, 0);
  void *mapping = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file.fd, 0);
  if (mapping == MAP_FAILED)
    throw LoadError(systemError(path, "mmap", errno));
  try {
    std::unique_ptr<SafeTensorsFile> parsed =
        parse(path, static_cast<const uint8_t *>(mapping), size);
    parsed->mapping_ = mapping;
    parsed->mappingSize_ = size;
    return parsed;
  } catch (...) {
    ::munmap(mapping, size);
    throw;
  }
}

const TensorView *SafeTensorsFile::find(std::string_view name) const {
  auto it = std::lower_bound(
      tensors_.begin(), tensors_.end(), name,
      [](const TensorView &tensor, std::string_view key) { return tensor.name < key; });
  if (it == tensors_.end() || it->name != name)
    return nullptr;
  return &*it;
}

SafeTensorsFile::~SafeTensorsFile() {
  if (mapping_)
    ::munmap(mapping_, mappingSize_);
}

} // namespace q3::runtime
