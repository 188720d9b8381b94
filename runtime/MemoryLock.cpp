#include "runtime/MemoryLock.h"
#include "runtime/ResourceLimits.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

namespace q3::runtime {
namespace {

/// `ranges` widened to whole pages, sorted, overlapping ones merged.
std::vector<MemoryRange> pagesOf(const std::vector<MemoryRange> &ranges) {
  const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  std::vector<std::pair<uintptr_t, uintptr_t>> spans;
  for (const MemoryRange &range : ranges) {
    if (!range.begin || range.bytes == 0)
      continue;
    const uintptr_t begin = reinterpret_cast<uintptr_t>(range.begin);
    spans.push_back({begin / page * page, (begin + range.bytes + page - 1) / page * page});
  }
  std::sort(spans.begin(), spans.end());
  std::vector<MemoryRange> pages;
  for (size_t i = 0; i < spans.size();) {
    uintptr_t begin = spans[i].first, end = spans[i].second;
    for (++i; i < spans.size() && spans[i].first <= end; ++i)
      end = std::max(end, spans[i].second);
    pages.push_back({reinterpret_cast<const void *>(begin), size_t(end - begin)});
  }
  return pages;
}

uint64_t totalBytes(const std::vector<MemoryRange> &ranges) {
  uint64_t total = 0;
  for (const MemoryRange &range : ranges)
    total = saturatingAdd(total, range.bytes);
  return total;
}

/// Why mlock failed, with the limit when it is the likely cause.
std::string reasonFor(int error) {
  std::string reason = std::strerror(error);
  struct rlimit limit {};
  if ((error == ENOMEM || error == EPERM) && ::getrlimit(RLIMIT_MEMLOCK, &limit) == 0 &&
      limit.rlim_cur != RLIM_INFINITY)
    reason += fmt::format("; the locked-memory limit (ulimit -l) is {}: raise it (ulimit -l "
                          "unlimited, LimitMEMLOCK= in a systemd unit, --ulimit memlock=-1 for "
                          "docker) or run without --mlock",
                          formatMemory(uint64_t(limit.rlim_cur)));
  return reason;
}

} // namespace

LockedMemory::LockedMemory(LockedMemory &&other) noexcept : pages_(std::move(other.pages_)) {
  other.pages_.clear();
}

LockedMemory &LockedMemory::operator=(LockedMemory &&other) noexcept {
  if (this != &other) {
    unlock();
    pages_ = std::move(other.pages_);
    other.pages_.clear();
  }
  return *this;
}

LockedMemory::~LockedMemory() { unlock(); }

uint64_t LockedMemory::bytes() const { return totalBytes(pages_); }

void LockedMemory::unlock() {
  for (const MemoryRange &range : pages_)
    (void)::munlock(range.begin, range.bytes);
  pages_.clear();
}

LockedMemory lockInMemory(const std::vector<MemoryRange> &ranges, const std::string &what) {
  LockedMemory locked;
  const std::vector<MemoryRange> pages = pagesOf(ranges);
  for (const MemoryRange &range : pages) {
    if (::mlock(range.begin, range.bytes) != 0) {
      const int error = errno;
      // mlock may have locked the part of the range before a hole.
      (void)::munlock(range.begin, range.bytes);
      throw ResourceError(fmt::format("{}: cannot lock {} in memory: {}", what,
                                      formatMemory(totalBytes(pages)), reasonFor(error)));
    }
    locked.pages_.push_back(range); // unlocked by `locked` if a later range fails
  }
  return locked;
}

} // namespace q3::runtime
