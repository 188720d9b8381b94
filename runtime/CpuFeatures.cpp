#include "runtime/CpuFeatures.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace q3::runtime {
namespace {

/// LLVM feature name -> /proc/cpuinfo flag, for the features kernels depend on.
const std::map<std::string, std::string> &cpuinfoNames() {
  static const std::map<std::string, std::string> names = {{"sse4.1", "sse4_1"},
                                                           {"sse4.2", "sse4_2"},
                                                           {"ssse3", "ssse3"},
                                                           {"popcnt", "popcnt"},
                                                           {"avx", "avx"},
                                                           {"avx2", "avx2"},
                                                           {"fma", "fma"},
                                                           {"f16c", "f16c"},
                                                           {"bmi2", "bmi2"},
                                                           {"avx512f", "avx512f"},
                                                           {"avx512bw", "avx512bw"},
                                                           {"avx512dq", "avx512dq"},
                                                           {"avx512vl", "avx512vl"},
                                                           {"avx512bf16", "avx512_bf16"},
                                                           {"avx512vnni", "avx512_vnni"},
                                                           {"avx512fp16", "avx512_fp16"},
                                                           {"avxvnni", "avx_vnni"},
                                                           {"amx-tile", "amx_tile"},
                                                           {"amx-bf16", "amx_bf16"},
                                                           {"fma4", "fma4"},
                                                           {"xop", "xop"}};
  return names;
}

std::set<std::string> cpuinfoFlags() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::set<std::string> flags;
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("flags", 0) != 0)
      continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string flag; words >> flag;)
      flags.insert(flag);
    break; // every core reports the same flags
  }
  return flags;
}

} // namespace

std::vector<std::string> missingCpuFeatures(const std::vector<std::string> &required) {
  const std::set<std::string> flags = cpuinfoFlags();
  std::vector<std::string> missing;
  if (flags.empty())
    return missing; // no /proc/cpuinfo: nothing to check against
  for (const std::string &feature : required) {
    auto name = cpuinfoNames().find(feature);
    if (name != cpuinfoNames().end() && !flags.count(name->second))
      missing.push_back(feature);
  }
  return missing;
}

std::string requestAmxState() {
#if defined(__linux__) && defined(__x86_64__)
  constexpr int kArchRequestPermission = 0x1023; // ARCH_REQ_XCOMP_PERM
  constexpr int kTileDataFeature = 18;           // XFEATURE_XTILEDATA
  if (syscall(SYS_arch_prctl, kArchRequestPermission, kTileDataFeature) != 0)
    return std::string("the kernel refused the AMX tile state (arch_prctl: ") +
           std::strerror(errno) + ")";
  return "";
#else
  return "AMX needs Linux on x86-64";
#endif
}

} // namespace q3::runtime
