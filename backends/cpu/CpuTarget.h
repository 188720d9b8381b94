//===- CpuTarget.h - the CPU a kernel library is compiled for -------------===//
#pragma once

#include <string>
#include <vector>

namespace q3::cpu {

struct CpuTarget {
  std::string name;     // what the user asked for: host, x86-64-v2, x86-64-v3, x86-64-v4
  std::string llvmCpu;  // LLVM's CPU name
  std::string features; // LLVM feature string, "+avx2,+fma,..."
  std::vector<std::string> requiredFeatures; // what the runtime must check on its host
};

/// "host" (this machine, as LLVM detects it) or an x86-64 microarchitecture
/// level. Anything else throws std::invalid_argument listing the choices.
CpuTarget resolveCpuTarget(const std::string &name);

} // namespace q3::cpu
