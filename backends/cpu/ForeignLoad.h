//===- ForeignLoad.h - how busy the rest of the machine was ---------------===//
//
// The tuners time kernels on the machine they compile for; another process
// (or, in a VM, the hypervisor's steal) running meanwhile takes cores or
// memory bandwidth and makes a candidate look slower than it is. A
// measurement taken so is used for the compile at hand but not cached:
// from /proc/stat and this process's own CPU time, the monitor says what
// share of the machine's CPU time went to others while it watched.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace q3::cpu {

/// The machine's CPU time from /proc/stat's aggregate `cpu` line, in ticks.
struct MachineCpuTime {
  uint64_t busy = 0;  // user, nice, system, irq, softirq, steal
  uint64_t total = 0; // busy, idle and iowait
};

/// Parses the aggregate line ("cpu  user nice system idle iowait irq softirq
/// steal ..."); nullopt for anything else.
std::optional<MachineCpuTime> parseMachineCpuTime(const std::string &line);

/// Others' share of the machine's CPU time between two readings: the
/// machine's busy ticks less this process's own, over all ticks (0 to 1).
double foreignShare(const MachineCpuTime &before, const MachineCpuTime &after, double ownTicks);

/// Starts watching when made; foreignShare() says how much of the machine
/// went to others since (0 when /proc/stat cannot be read).
class ForeignLoadMonitor {
public:
  ForeignLoadMonitor();
  double foreignShare() const;

private:
  std::optional<MachineCpuTime> start_;
  double ownStart_ = 0; // this process's CPU time, ticks
};

/// A measurement during which others took more than this share of the
/// machine is not cached.
inline constexpr double kMaxForeignShare = 0.10;

} // namespace q3::cpu
