//===- HostBuffer.h - large host allocations for weights and caches -------===//
//
// Weights computed at load (concatenations, column blocks), activations and
// the KV cache are hundreds of MB. A HostBuffer maps them anonymously: the
// kernel zero-fills each page on first touch, so nothing is memset twice and
// pages nobody writes are never resident. Buffers that are written whole (the
// weights) ask for transparent huge pages: a 2 MB fault replaces 512 small
// ones and decode's streaming reads miss the TLB less. Buffers written as a
// request goes (the KV cache: one stretch of its capacity per head and layer,
// touched by the first token) choose: small pages, so memory follows use, or
// huge ones, read faster (runtime/Model.h, kvCacheOnHugePagesPays; the
// capacity grows with the context, kInitialCachePositions).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace q3::runtime {

/// The transparent huge page size of x86-64 (a PMD): what Pages::Huge maps
/// in, and the stretch a huge page-cache folio covers.
constexpr size_t kHugePageBytes = size_t(2) << 20;

class HostBuffer {
public:
  HostBuffer() = default;
  enum class Pages { Small, Huge };
  /// Reserves `bytes` (zero-filled on first touch); throws std::bad_alloc.
  explicit HostBuffer(size_t bytes, Pages pages = Pages::Small);
  ~HostBuffer();
  HostBuffer(HostBuffer &&other) noexcept;
  HostBuffer &operator=(HostBuffer &&other) noexcept;
  HostBuffer(const HostBuffer &) = delete;
  HostBuffer &operator=(const HostBuffer &) = delete;

  uint8_t *data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  /// The share of the buffer's pages the kernel holds on huge pages now
  /// (AnonHugePages over the mapped bytes; pages never touched count as
  /// small), or nullopt where /proc/self/smaps does not say (the kernel
  /// merged the mapping with its neighbour, or no procfs).
  std::optional<double> hugePageShare() const;
  /// Unmaps the memory now.
  void reset();

private:
  uint8_t *data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;
};

} // namespace q3::runtime
