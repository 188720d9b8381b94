// Which CPU features this machine has, to refuse artifacts compiled for more.
#pragma once

#include <string>
#include <vector>

namespace q3::runtime {

/// The features of `required` (LLVM spelling: "avx2", "avx512f", "sse4.2", ...)
/// that this CPU lacks, as reported by /proc/cpuinfo. Features this runtime
/// does not know how to look up are not reported.
std::vector<std::string> missingCpuFeatures(const std::vector<std::string> &required);

/// Asks Linux for the AMX tile data state (arch_prctl ARCH_REQ_XCOMP_PERM),
/// which a process must hold before any thread runs a tile instruction.
/// Returns an empty string on success, else why it was refused.
std::string requestAmxState();

} // namespace q3::runtime
