// Measures the machine's sustainable memory read bandwidth, the ceiling for
// decode speed: each generated token streams every weight from memory once.
#pragma once

#include "runtime/HostBuffer.h"
#include "runtime/ThreadPool.h"

#include <cstdint>
#include <vector>

namespace q3::runtime {

struct BandwidthResult {
  double gigabytesPerSecond; // 1 GB = 1e9 bytes, as STREAM counts
  int64_t bytes;             // buffer size read per repetition
  int threads;
};

// The runs the probe reads side by side in its second pattern.
inline constexpr int kProbeReadStreams = 4;

// The probe's read of one thread's part: the whole 64-byte lines of `bytes`
// from `data` (32-byte aligned), as one run (`streams` 1) or as
// kProbeReadStreams runs side by side (any other count). Returns their sum,
// so the reads cannot be optimized away.
uint64_t readLines(const uint8_t *data, int64_t bytes, int streams);

// STREAM-like read kernel: sums a buffer of `bytes` (default 1 GiB, far beyond
// the caches) with all pool threads, `repetitions` times, each time as one
// run per thread and as four runs side by side (the decode kernels read
// either way, q3.lowering's decode_streams; which is faster is the
// machine's), and reports the best rate, as STREAM does. Each thread first writes the part it later
// reads, so page faults stay out of the timing and pages land on that thread's NUMA node. The
// buffer is on transparent huge pages, as the weights decode streams are: on small pages the TLB
// misses (two-level walks in a VM) hid a third of the bandwidth, and the floor decode was measured
// against was too low. bytes < 1 or repetitions < 1 is std::invalid_argument.
BandwidthResult measureReadBandwidth(ThreadPool &pool, int64_t bytes = int64_t(1) << 30,
                                     int repetitions = 5);

// Memory that already holds something, such as the weights where a model
// reads them.
struct MemoryRegion {
  const uint8_t *data;
  int64_t bytes;
};

// The same read (both patterns, the best of `repetitions`) of the whole
// 64-byte lines of `regions`, as one sequence of lines cut among the pool's
// threads: how fast that memory reads, not a fresh buffer's. On a VM whose
// pages differ in speed (docs/cpu-backend.md) the two differ. `bytes` in
// the result is what was read. No lines or repetitions < 1:
// std::invalid_argument.
BandwidthResult measureRegionsReadBandwidth(ThreadPool &pool,
                                            const std::vector<MemoryRegion> &regions,
                                            int repetitions);

// The same measurement on a buffer that is allocated and touched once, so it
// can be repeated between other timed work (q3run bench reads it between its
// repetitions) without paying for the page faults again.
class ReadBandwidthProbe {
public:
  ReadBandwidthProbe(ThreadPool &pool, int64_t bytes); // bytes < 1: std::invalid_argument
  ReadBandwidthProbe(const ReadBandwidthProbe &) = delete;
  ReadBandwidthProbe &operator=(const ReadBandwidthProbe &) = delete;

  BandwidthResult measure(int repetitions); // repetitions < 1: std::invalid_argument
  int64_t bytes() const { return bytes_; }
  /// HostBuffer::hugePageShare of the buffer read.
  std::optional<double> hugePageShare() const { return buffer_.hugePageShare(); }

private:
  ThreadPool &pool_;
  int64_t bytes_, lines_;
  HostBuffer buffer_;
  uint8_t *data_ = nullptr;
};

} // namespace q3::runtime
