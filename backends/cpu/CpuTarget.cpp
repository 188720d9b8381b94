//===- CpuTarget.cpp ------------------------------------------------------===//
#include "backends/cpu/CpuTarget.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/TargetParser/Host.h"

#include <stdexcept>

namespace q3::cpu {
namespace {

/// The features each x86-64 level guarantees that kernels care about; the
/// runtime checks these on the machine that loads the library.
std::vector<std::string> levelFeatures(const std::string &level) {
  std::vector<std::string> features = {"sse4.2", "popcnt", "ssse3"};
  if (level == "x86-64-v2")
    return features;
  features.insert(features.end(), {"avx", "avx2", "fma", "f16c", "bmi2"});
  if (level == "x86-64-v3")
    return features;
  features.insert(features.end(), {"avx512f", "avx512bw", "avx512dq", "avx512vl"});
  return features;
}

std::string featureString(const std::vector<std::string> &features) {
  std::string text;
  for (const std::string &f : features)
    text += (text.empty() ? "+" : ",+") + f;
  return text;
}

} // namespace

CpuTarget resolveCpuTarget(const std::string &name) {
  if (name == "host") {
    llvm::StringMap<bool> hostFeatures;
    llvm::sys::getHostCPUFeatures(hostFeatures);
    CpuTarget target{name, llvm::sys::getHostCPUName().str(), "", {}};
    for (const auto &feature : hostFeatures)
      if (feature.second) {
        target.features += (target.features.empty() ? "+" : ",+") + feature.first().str();
        target.requiredFeatures.push_back(feature.first().str());
      }
    return target;
  }
  if (name == "x86-64-v2" || name == "x86-64-v3" || name == "x86-64-v4") {
    std::vector<std::string> features = levelFeatures(name);
    return CpuTarget{name, name, featureString(features), features};
  }
  throw std::invalid_argument("--cpu: expected host, x86-64-v2, x86-64-v3 or x86-64-v4, got '" +
                              name + "'");
}

} // namespace q3::cpu
