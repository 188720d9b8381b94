//===- CompileModel.cpp - a CPU target-stage module -> a CPU artifact -----===//
//
// The target passes decided everything (backends/cpu/passes/); this only
// generates each kernel's source from the IR (KernelSelection.cpp), compiles
// them into one shared object for the module's q3.target
// (CompileKernels.cpp), and serializes the IR as the manifest
// (backends/common/ManifestWriter.cpp).
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/CompileModel.h"
#include "backends/common/ManifestWriter.h"
#include "backends/cpu/CompileKernels.h"
#include "backends/cpu/CpuTarget.h"
#include "backends/cpu/KernelSelection.h"
#include "backends/cpu/passes/CpuPasses.h"

namespace q3::cpu {

std::string cpuKernelsSource(mlir::ModuleOp module) {
  std::string source;
  for (mlir::func::FuncOp kernel : kernelsOf(module)) {
    source += cpuKernelSource(module, kernel);
    for (q3::ir::LoweringConfigAttr variant : q3::ir::variantsOf(kernel))
      source += cpuKernelVariantSource(module, kernel, variant);
  }
  return source;
}

CompiledModel compileForCpu(mlir::ModuleOp module) {
  CompiledModel compiled;
  compiled.manifest = backends::manifestOf(module);
  compiled.kernelSource = cpuKernelsSource(module);
  compiled.sharedObject =
      linkSharedObject(compileKernelsToObject(compiled.kernelSource, targetOf(module)));
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
