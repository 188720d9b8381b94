#include "runtime/HostBuffer.h"
#include "runtime/Smaps.h"

#include <algorithm>
#include <new>
#include <utility>

#include <sys/mman.h>

namespace q3::runtime {

HostBuffer::HostBuffer(size_t bytes, Pages pages) {
  if (bytes == 0)
    return;
  if (pages == Pages::Small || bytes < kHugePageBytes) {
    // Small: a huge page would make a few KB resident as 2 MB.
    void *p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      throw std::bad_alloc();
    data_ = static_cast<uint8_t *>(p);
    size_ = mapped_ = bytes;
    return;
  }
  // Whole huge pages on a huge-page boundary: map one more, trim the ends.
  const size_t length = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  void *p = ::mmap(nullptr, length + kHugePageBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    throw std::bad_alloc();
  const auto start = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = (start + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (aligned > start)
    ::munmap(p, aligned - start);
  if (const size_t tail = start + length + kHugePageBytes - (aligned + length))
    ::munmap(reinterpret_cast<void *>(aligned + length), tail);
#ifdef MADV_HUGEPAGE
  // Advice only: without THP the buffer is still correct.
  (void)::madvise(reinterpret_cast<void *>(aligned), length, MADV_HUGEPAGE);
#endif
  data_ = reinterpret_cast<uint8_t *>(aligned);
  size_ = bytes;
  mapped_ = length;
}

HostBuffer::~HostBuffer() { reset(); }

HostBuffer::HostBuffer(HostBuffer &&other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)) {}

HostBuffer &HostBuffer::operator=(HostBuffer &&other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

std::optional<double> HostBuffer::hugePageShare() const {
  if (!data_)
    return std::nullopt;
  const std::optional<std::string> smaps = readSelfSmaps();
  const std::optional<uint64_t> kb =
      smaps ? smapsFieldKb(*smaps, uintptr_t(data_), "AnonHugePages") : std::nullopt;
  if (!kb)
    return std::nullopt;
  return std::min(1.0, double(*kb << 10) / double(mapped_));
}

void HostBuffer::reset() {
  if (data_)
    ::munmap(data_, mapped_);
  data_ = nullptr;
  size_ = mapped_ = 0;
}

} // namespace q3::runtime
