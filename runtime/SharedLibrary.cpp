#include "runtime/SharedLibrary.h"
#include "runtime/LoadError.h"

#include <fmt/format.h>

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace q3::runtime {

// dlerror() text may span lines and carry bytes from the file; keep it one line.
static std::string lastDlError() {
  const char *message = dlerror();
  return printable(message ? message : "unknown dlerror");
}

std::unique_ptr<SharedLibrary> SharedLibrary::loadFromMemory(const std::string &name,
                                                             const uint8_t *data, size_t size) {
  // The kernel caps memfd names at 249 bytes; the name only labels /proc entries.
  int fd = memfd_create(name.substr(0, 200).c_str(), MFD_CLOEXEC);
  if (fd < 0)
    throw LoadError(
        fmt::format("{}: memfd_create failed: {}", printable(name), std::strerror(errno)));
  for (size_t written = 0; written < size;) {
    ssize_t n = ::write(fd, data + written, size - written);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      int error = errno;
      ::close(fd);
      throw LoadError(fmt::format("{}: writing the shared object to memory failed: {}",
                                  printable(name), std::strerror(error)));
    }
    written += size_t(n);
  }
  // The fd stays open while the library is loaded, so its /proc path cannot be
  // reused by another library that glibc would then mistake for this one.
  std::string path = fmt::format("/proc/self/fd/{}", fd);
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    std::string error = lastDlError();
    ::close(fd);
    throw LoadError(
        fmt::format("{}: cannot load the shared object: {}", printable(name), error));
  }
  return std::unique_ptr<SharedLibrary>(new SharedLibrary(name, fd, handle));
}

SharedLibrary::~SharedLibrary() {
  dlclose(handle_);
  ::close(fd_);
}

void *SharedLibrary::symbol(const std::string &symbolName) const {
  void *address = dlsym(handle_, symbolName.c_str());
  if (!address)
    throw LoadError(
        fmt::format("{}: no symbol '{}'", printable(name_), printable(symbolName)));
  return address;
}

} // namespace q3::runtime
