// What this process may use: CPUs (affinity) and memory (RAM, ulimit -v/-d,
// the cgroup's memory.max). The compiler and the runtime estimate what a
// config, a context length or a thread count needs and refuse what cannot
// fit with a message that holds the estimate, instead of failing part-way
// with "out of memory", an abort or a hang.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace q3::runtime {

/// A request that does not fit this machine or its limits. One line.
class ResourceError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// CPUs this process may run on (sched_getaffinity), at least 1.
int availableCpus();

/// The tightest of the memory limits this process has, and which one it is.
struct MemoryBudget {
  uint64_t bytes = UINT64_MAX;
  std::string limitedBy; // "MemAvailable + SwapFree in /proc/meminfo", "ulimit -v", ...
};
MemoryBudget availableMemory();

/// One part of an estimate, for the message ("KV cache", bytes).
struct MemoryPart {
  std::string what;
  uint64_t bytes;
};

/// a + b and a * b that stick at UINT64_MAX instead of wrapping: a size
/// computed from untrusted numbers can only be refused, never become small.
uint64_t saturatingAdd(uint64_t a, uint64_t b);
uint64_t saturatingMul(uint64_t a, uint64_t b);

/// Throws ResourceError "<subject> needs about 41.2 GB of memory (KV cache
/// 39.9 GB, weights 1.2 GB, ...), more than the 8.1 GB available
/// (<limitedBy>)<advice>" when the parts do not fit `budget`.
void requireMemory(const std::string &subject, const std::vector<MemoryPart> &parts,
                   const MemoryBudget &budget, const std::string &advice);

/// "1.19 GB" (1 GB = 1e9 bytes), "more than 18 EB" for a saturated size.
std::string formatMemory(uint64_t bytes);

} // namespace q3::runtime
