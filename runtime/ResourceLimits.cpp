#include "runtime/ResourceLimits.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include <sched.h>
#include <sys/resource.h>

namespace q3::runtime {
namespace {

/// "Key:   123 kB" lines of a /proc file, in bytes; nullopt-like 0 if absent.
bool readKilobytes(const char *file, const std::string &key, uint64_t &bytes) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);)
    if (line.compare(0, key.size() + 1, key + ":") == 0) {
      std::istringstream value(line.substr(key.size() + 1));
      uint64_t kb = 0;
      if (!(value >> kb))
        return false;
      bytes = saturatingMul(kb, 1024);
      return true;
    }
  return false;
}

bool readNumber(const std::string &file, uint64_t &value) {
  std::ifstream in(file);
  std::string text;
  if (!(in >> text) || text == "max")
    return false;
  try {
    value = std::stoull(text);
  } catch (const std::exception &) {
    return false;
  }
  return true;
}

/// The cgroup v2 folder of this process ("0::/user.slice/..."), or "".
std::string cgroupFolder() {
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("0::", 0) == 0)
      return "/sys/fs/cgroup" + line.substr(3);
  return "";
}

void tighten(MemoryBudget &budget, uint64_t bytes, const std::string &why) {
  if (bytes < budget.bytes) {
    budget.bytes = bytes;
    budget.limitedBy = why;
  }
}

/// What is left under an rlimit given the process's current use.
void tightenByLimit(MemoryBudget &budget, int resource, const char *statusKey, const char *name) {
  struct rlimit limit {};
  if (::getrlimit(resource, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY)
    return;
  uint64_t used = 0;
  readKilobytes("/proc/self/status", statusKey, used);
  tighten(budget, limit.rlim_cur > used ? uint64_t(limit.rlim_cur) - used : 0, name);
}

} // namespace

uint64_t saturatingAdd(uint64_t a, uint64_t b) {
  uint64_t sum;
  return __builtin_add_overflow(a, b, &sum) ? UINT64_MAX : sum;
}

uint64_t saturatingMul(uint64_t a, uint64_t b) {
  uint64_t product;
  return __builtin_mul_overflow(a, b, &product) ? UINT64_MAX : product;
}

int availableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0)
    return 1;
  return std::max(1, CPU_COUNT(&set));
}

MemoryBudget availableMemory() {
  MemoryBudget budget;
  uint64_t available = 0, swap = 0;
  if (readKilobytes("/proc/meminfo", "MemAvailable", available)) {
    readKilobytes("/proc/meminfo", "SwapFree", swap);
    tighten(budget, saturatingAdd(available, swap), "free memory: MemAvailable + SwapFree");
  }
  tightenByLimit(budget, RLIMIT_AS, "VmSize", "the address-space limit, ulimit -v");
  tightenByLimit(budget, RLIMIT_DATA, "VmData", "the data-size limit, ulimit -d");
  if (std::string folder = cgroupFolder(); !folder.empty()) {
    uint64_t max = 0, current = 0;
    if (readNumber(folder + "/memory.max", max)) {
      readNumber(folder + "/memory.current", current);
      tighten(budget, max > current ? max - current : 0, "the cgroup's memory.max");
    }
  }
  return budget;
}

std::string formatMemory(uint64_t bytes) {
  if (bytes == UINT64_MAX)
    return "more than 18 EB";
  const double b = double(bytes);
  if (b >= 1e12)
    return fmt::format("{:.1f} TB", b / 1e12);
  if (b >= 1e9)
    return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6)
    return fmt::format("{:.1f} MB", b / 1e6);
  if (b >= 1e3)
    return fmt::format("{:.1f} kB", b / 1e3);
  return fmt::format("{} B", bytes);
}

void requireMemory(const std::string &subject, const std::vector<MemoryPart> &parts,
                   const MemoryBudget &budget, const std::string &advice) {
  uint64_t total = 0;
  for (const MemoryPart &part : parts)
    total = saturatingAdd(total, part.bytes);
  if (total <= budget.bytes)
    return;
  std::vector<MemoryPart> sorted = parts;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const MemoryPart &a, const MemoryPart &b) { return a.bytes > b.bytes; });
  std::string breakdown;
  for (const MemoryPart &part : sorted)
    if (part.bytes > 0)
      breakdown += (breakdown.empty() ? "" : ", ") + part.what + " " + formatMemory(part.bytes);
  throw ResourceError(fmt::format("{} needs {} of memory ({}), more than the {} available ({}){}",
                                  subject,
                                  total == UINT64_MAX ? formatMemory(total)
                                                      : "about " + formatMemory(total),
                                  breakdown, formatMemory(budget.bytes), budget.limitedBy,
                                  advice));
}

} // namespace q3::runtime
