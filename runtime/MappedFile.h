// Files as the runtime reads them: mapped read-only, with one-line errors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace q3::runtime {

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

/// A regular file mapped read-only (MAP_PRIVATE) for as long as this lives.
/// An empty file maps to no bytes (data() is null). Throws LoadError naming
/// the path and the failing call. A SIGBUS on a read of the mapping is one
/// line naming the file once installFatalSignalHandlers() ran
/// (runtime/FatalSignals.h).
class MappedFile {
public:
  static std::unique_ptr<MappedFile> open(const std::string &path);
  const uint8_t *data() const { return static_cast<const uint8_t *>(mapping_); }
  size_t size() const { return size_; }
  /// Lets the kernel drop the resident pages wholly inside [begin, begin +
  /// bytes) of this mapping: they stop counting in RSS and are read from the
  /// page cache again if touched. For bytes copied elsewhere (packed weights).
  void dropPages(const uint8_t *begin, size_t bytes) const;
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;
  ~MappedFile();

private:
  MappedFile() = default;
  void *mapping_ = nullptr;
  size_t size_ = 0;
  int guard_ = -1; // runtime/FatalSignals.h
};

} // namespace q3::runtime
