// Keeping memory resident: q3run --mlock locks the weights the kernels read,
// so that memory pressure cannot evict them (a checkpoint bound in place is
// page cache, which the kernel reclaims first) and stall decode on page
// faults.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace q3::runtime {

/// A byte range of this process's memory.
struct MemoryRange {
  const void *begin = nullptr;
  size_t bytes = 0;
};

/// Pages locked by lockInMemory; unlocked when this is destroyed.
class LockedMemory {
public:
  LockedMemory() = default;
  LockedMemory(LockedMemory &&other) noexcept;
  LockedMemory &operator=(LockedMemory &&other) noexcept;
  LockedMemory(const LockedMemory &) = delete;
  LockedMemory &operator=(const LockedMemory &) = delete;
  ~LockedMemory();
  /// Bytes locked (whole pages; ranges that share pages count once).
  uint64_t bytes() const;

private:
  friend LockedMemory lockInMemory(const std::vector<MemoryRange> &, const std::string &);
  void unlock();
  std::vector<MemoryRange> pages_; // disjoint, page-aligned
};

/// Locks the pages of `ranges` (mlock: faulted in now, never evicted). On
/// failure nothing stays locked and ResourceError says what could not be
/// locked ("<what>: cannot lock 1.19 GB in memory: ..."), why, and the
/// locked-memory limit (ulimit -l) when that is what stopped it.
LockedMemory lockInMemory(const std::vector<MemoryRange> &ranges, const std::string &what);

} // namespace q3::runtime
