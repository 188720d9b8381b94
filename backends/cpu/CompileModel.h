//===- CompileModel.h - a CPU target-stage module -> a CPU artifact -------===//
#pragma once

#include "runtime/Artifact.h"
#include "runtime/Manifest.h"

#include "runtime/Signature.h"

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <string>
#include <vector>

namespace q3::cpu {

struct CompiledModel {
  manifest::Manifest manifest;       // the target-stage IR, serialized (docs/artifact.md)
  std::string kernelSource;          // the MLIR of every kernel, kept in the artifact
  std::vector<uint8_t> sharedObject; // the kernels, an ELF shared object
};

/// The MLIR source of every q3.kernel of `module` (at the CPU target stage:
/// the CPU target passes ran), in module order.
std::string cpuKernelsSource(mlir::ModuleOp module);

/// Generates and compiles the kernel of every q3.kernel function of `module`
/// for the CPU its q3.target names, and serializes the module as the
/// manifest. Throws std::runtime_error naming the kernel when the IR asks for
/// something the CPU kernels cannot do.
CompiledModel compileForCpu(mlir::ModuleOp module);

/// Writes `model` as one artifact file (runtime/Artifact.h): the manifest,
/// kernels.so, kernels.mlir, then `extra` sections (the tokenizer and chat
/// template, runtime/text/ArtifactText.h); signed when `signer` is given.
void writeCpuArtifact(const std::string &path, const CompiledModel &model,
                      const std::vector<runtime::ArtifactSection> &extra = {},
                      const runtime::SecretKey *signer = nullptr);

} // namespace q3::cpu
