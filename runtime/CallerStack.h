// A stack of a chosen size that a thread can run a function on, so code
// whose stack use is known (compiled kernels) does not depend on the stack
// of whoever calls it: the main thread's is `ulimit -s` (often 8 MiB, but
// users and launchers lower it), an embedding program's thread may have
// less.
#pragma once

#include <cstddef>
#include <functional>

namespace q3::runtime {

class CallerStack {
public:
  /// Reserves `bytes` (rounded up to pages) of address space with a guard
  /// page below it; pages are backed only once touched. Throws
  /// std::system_error when the system refuses the mapping.
  explicit CallerStack(size_t bytes);
  ~CallerStack();
  CallerStack(const CallerStack &) = delete;
  CallerStack &operator=(const CallerStack &) = delete;

  /// Runs `body` on this stack and returns when it does; an exception it
  /// throws is rethrown here, on the caller's stack. Not reentrant.
  void run(const std::function<void()> &body);

  size_t bytes() const { return bytes_; }

private:
  void *mapping_ = nullptr; // guard page, then the stack
  size_t mappingBytes_ = 0, bytes_ = 0;
};

} // namespace q3::runtime
