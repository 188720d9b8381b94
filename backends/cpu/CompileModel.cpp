//===- CompileModel.cpp - a CPU target-stage module -> a CPU artifact -----===//
//
// The target passes decided everything (backends/cpu/passes/); this only
// generates each kernel's source from the IR (KernelSelection.cpp), compiles
// them (in as many units as CPUs, at once) and links them into one shared
// object for the module's q3.target (CompileKernels.cpp), and serializes the
// IR as the manifest
// (backends/common/ManifestWriter.cpp).
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/CompileModel.h"
#include "backends/common/ManifestWriter.h"
#include "backends/cpu/CompileKernels.h"
#include "backends/cpu/CpuTarget.h"
#include "backends/cpu/KernelSelection.h"
#include "backends/cpu/passes/CpuPasses.h"
#include "runtime/ResourceLimits.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <numeric>

namespace q3::cpu {

namespace {

/// The source of every kernel and variant of `module`, in module order.
std::vector<std::string> kernelSources(mlir::ModuleOp module) {
  std::vector<std::string> sources;
  for (mlir::func::FuncOp kernel : kernelsOf(module)) {
    sources.push_back(cpuKernelSource(module, kernel));
    for (q3::ir::LoweringConfigAttr variant : q3::ir::variantsOf(kernel))
      sources.push_back(cpuKernelVariantSource(module, kernel, variant));
  }
  return sources;
}

/// `sources` dealt into `groups` compile units of about equal size (the
/// largest first, each to the smallest unit so far), so the units compile
/// in about equal time on as many CPUs.
std::vector<std::string> compileUnits(const std::vector<std::string> &sources, size_t groups) {
  std::vector<size_t> order(sources.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sources[a].size() > sources[b].size(); });
  std::vector<std::string> units(std::max<size_t>(1, std::min(groups, sources.size())));
  for (size_t i : order)
    std::min_element(units.begin(), units.end(), [](const std::string &a, const std::string &b) {
      return a.size() < b.size();
    })->append(sources[i]);
  return units;
}

} // namespace

std::string cpuKernelsSource(mlir::ModuleOp module) {
  return llvm::join(kernelSources(module), "");
}

CompiledModel compileForCpu(mlir::ModuleOp module) {
  CompiledModel compiled;
  compiled.manifest = backends::manifestOf(module);
  const std::vector<std::string> sources = kernelSources(module);
  compiled.kernelSource = llvm::join(sources, "");
  const std::vector<std::string> units =
      compileUnits(sources, size_t(std::max(1, runtime::availableCpus())));
  compiled.sharedObject = linkSharedObject(compileKernelsToObjects(units, targetOf(module)));
  return compiled;
}

void writeCpuArtifact(const std::string &path, const CompiledModel &model,
                      const std::vector<runtime::ArtifactSection> &extra,
                      const runtime::SecretKey *signer) {
  std::vector<runtime::ArtifactSection> sections;
  sections.push_back({"kernels.so", runtime::SectionKind::Executable, model.sharedObject});
  sections.push_back({"kernels.mlir", runtime::SectionKind::Data,
                      std::vector<uint8_t>(model.kernelSource.begin(), model.kernelSource.end())});
  sections.insert(sections.end(), extra.begin(), extra.end());
  runtime::writeArtifact(path, manifest::toJson(model.manifest), sections, signer);
}

} // namespace q3::cpu
