// A shared object loaded straight from bytes in memory (the compiled kernels
// embedded in an artifact file), without writing it to a temporary file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace q3::runtime {

class SharedLibrary {
public:
  // memfd_create(name) + write + dlopen("/proc/self/fd/N", RTLD_NOW | RTLD_LOCAL).
  // Failures are a one-line LoadError naming `name` with strerror/dlerror.
  static std::unique_ptr<SharedLibrary> loadFromMemory(const std::string &name,
                                                       const uint8_t *data, size_t size);
  ~SharedLibrary(); // dlclose, then close the memfd
  SharedLibrary(const SharedLibrary &) = delete;
  SharedLibrary &operator=(const SharedLibrary &) = delete;

  // The address of `symbolName`; LoadError "<name>: no symbol '<symbolName>'" if absent.
  void *symbol(const std::string &symbolName) const;

  const std::string &name() const { return name_; }

private:
  SharedLibrary(std::string name, int fd, void *handle)
      : name_(std::move(name)), fd_(fd), handle_(handle) {}

  std::string name_;
  int fd_;
  void *handle_;
};

} // namespace q3::runtime
