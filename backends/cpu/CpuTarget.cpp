//===- CpuTarget.cpp ------------------------------------------------------===//
#include "backends/cpu/CpuTarget.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/X86TargetParser.h"

#include <algorithm>
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
  // A CPU LLVM knows by name (znver4, sapphirerapids, ...): every feature it
  // implies, so the artifact runs on that CPU and the ones above it.
  if (llvm::X86::parseArchX86(name, /*Only64Bit=*/true) != llvm::X86::CK_None) {
    llvm::SmallVector<llvm::StringRef> implied;
    llvm::X86::getFeaturesForCPU(name, implied);
    std::vector<std::string> features(implied.begin(), implied.end());
    return CpuTarget{name, name, featureString(features), features};
  }
  throw std::invalid_argument("--cpu: expected host, x86-64-v2, x86-64-v3, x86-64-v4 or a CPU "
                              "LLVM knows (e.g. znver4, sapphirerapids), got '" +
                              name + "'");
}

std::string choicesText(llvm::ArrayRef<llvm::StringLiteral> choices) {
  std::string text;
  for (size_t i = 0; i < choices.size(); ++i)
    text += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i].str();
  return text;
}

bool targetHas(const CpuTarget &target, const std::string &feature) {
  return std::find(target.requiredFeatures.begin(), target.requiredFeatures.end(), feature) !=
         target.requiredFeatures.end();
}

namespace {

/// How many 16-lane f32 accumulators fit half of `target`'s vector
/// registers (the rest for loads and widened operands).
int64_t accumulatorRegisterBudget(const CpuTarget &target) {
  const bool avx512 = targetHas(target, "avx512f");
  const int64_t registers = avx512 ? 32 : 16;
  const int64_t perVector = avx512 ? 1 : targetHas(target, "avx") ? 2 : 4;
  return registers / 2 / perVector;
}

} // namespace

int64_t decodeAccumulatorsFor(const CpuTarget &target, int64_t rowsSideBySide) {
  const int64_t budget = accumulatorRegisterBudget(target);
  for (int64_t accumulators : {4, 2})
    if (rowsSideBySide * accumulators <= budget)
      return accumulators;
  return 1;
}

int64_t decodeValueAccumulatorsFor(const CpuTarget &target, int64_t heads, int64_t columns) {
  const int64_t fit = accumulatorRegisterBudget(target) / std::max<int64_t>(1, heads);
  return std::max<int64_t>(1, std::min(columns, fit));
}

void setTargetAttribute(mlir::ModuleOp module, const CpuTarget &target) {
  mlir::Builder builder(module.getContext());
  llvm::SmallVector<llvm::StringRef> features(target.requiredFeatures.begin(),
                                              target.requiredFeatures.end());
  mlir::NamedAttrList fields;
  fields.append("backend", builder.getStringAttr("cpu"));
  fields.append("cpu", builder.getStringAttr(target.name));
  fields.append("llvm_cpu", builder.getStringAttr(target.llvmCpu));
  fields.append("features", builder.getStrArrayAttr(features));
  module->setAttr(kTargetAttrName, fields.getDictionary(module.getContext()));
}

CpuTarget targetOf(mlir::ModuleOp module) {
  auto dict = module->getAttrOfType<mlir::DictionaryAttr>(kTargetAttrName);
  auto backend = dict ? dict.getAs<mlir::StringAttr>("backend") : nullptr;
  if (!backend || backend.getValue() != "cpu")
    throw std::runtime_error(std::string("the module has no CPU ") + kTargetAttrName +
                             " attribute: run cpu-set-target");
  CpuTarget target;
  if (auto cpu = dict.getAs<mlir::StringAttr>("cpu"))
    target.name = cpu.str();
  if (auto llvmCpu = dict.getAs<mlir::StringAttr>("llvm_cpu"))
    target.llvmCpu = llvmCpu.str();
  if (auto features = dict.getAs<mlir::ArrayAttr>("features"))
    for (mlir::Attribute feature : features)
      if (auto name = feature.dyn_cast<mlir::StringAttr>())
        target.requiredFeatures.push_back(name.str());
  target.features = featureString(target.requiredFeatures);
  return target;
}

} // namespace q3::cpu
