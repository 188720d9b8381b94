//===- ForeignLoad.cpp - how busy the rest of the machine was -------------===//
#include "backends/cpu/ForeignLoad.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace q3::cpu {
namespace {

std::optional<MachineCpuTime> readMachineCpuTime() {
  std::ifstream stat("/proc/stat");
  std::string line;
  if (!stat || !std::getline(stat, line))
    return std::nullopt;
  return parseMachineCpuTime(line);
}

/// This process's user and system time, all threads and the children it
/// waited for (the linker a kernel build runs), in clock ticks.
double ownTicks() {
  double seconds = 0;
  for (int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
    rusage usage{};
    if (getrusage(who, &usage) != 0)
      continue;
    for (const timeval &t : {usage.ru_utime, usage.ru_stime})
      seconds += double(t.tv_sec) + double(t.tv_usec) * 1e-6;
  }
  return seconds * double(sysconf(_SC_CLK_TCK));
}

} // namespace

std::optional<MachineCpuTime> parseMachineCpuTime(const std::string &line) {
  std::istringstream in(line);
  std::string label;
  uint64_t user, nice, system, idle, iowait, irq, softirq, steal = 0;
  if (!(in >> label) || label != "cpu" ||
      !(in >> user >> nice >> system >> idle >> iowait >> irq >> softirq))
    return std::nullopt;
  in >> steal; // absent before Linux 2.6.11
  MachineCpuTime time;
  time.busy = user + nice + system + irq + softirq + steal;
  time.total = time.busy + idle + iowait;
  return time;
}

double foreignShare(const MachineCpuTime &before, const MachineCpuTime &after, double ownTicks) {
  if (after.total <= before.total || after.busy < before.busy)
    return 0;
  const double busy = double(after.busy - before.busy) - ownTicks;
  return std::clamp(busy / double(after.total - before.total), 0.0, 1.0);
}

ForeignLoadMonitor::ForeignLoadMonitor() : start_(readMachineCpuTime()), ownStart_(ownTicks()) {}

double ForeignLoadMonitor::foreignShare() const {
  const std::optional<MachineCpuTime> now = readMachineCpuTime();
  if (!start_ || !now)
    return 0;
  return cpu::foreignShare(*start_, *now, ownTicks() - ownStart_);
}

} // namespace q3::cpu
