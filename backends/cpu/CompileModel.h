//===- CompileModel.h - a dispatch-stage module -> a CPU artifact ---------===//
#pragma once

#include "backends/cpu/CpuTarget.h"

#include "mlir/IR/BuiltinOps.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace q3::cpu {

struct CompiledModel {
  nlohmann::json manifest;           // see docs/artifact.md, "The CPU manifest"
  std::string kernelSource;          // the MLIR of every kernel, kept in the artifact
  std::vector<uint8_t> sharedObject; // the kernels, ELF shared object
};

/// Code generation choices beyond the target.
struct CpuCompileOptions {
  /// Prefill products round activations to bf16 and use vdpbf16ps
  /// (FusedLinearKernel::bf16Activations); needs AVX512-BF16.
  bool bf16Activations = false;
};

/// Generates and compiles the kernel of every q3.kernel function of `module`
/// (which must be at the dispatch stage: form-dispatches and plan-buffers
/// ran) and records the schedule, buffer plan and weight plan. Throws
/// std::runtime_error naming the op when a kernel has no CPU implementation.
CompiledModel compileForCpu(mlir::ModuleOp module, const CpuTarget &target,
                            const CpuCompileOptions &options = {});

/// Writes `model` as one artifact file (runtime/Artifact.h).
void writeCpuArtifact(const std::string &path, const CompiledModel &model);

} // namespace q3::cpu
