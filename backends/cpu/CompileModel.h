//===- CompileModel.h - a dispatch-stage module -> a CPU artifact ---------===//
#pragma once

#include "backends/cpu/CpuTarget.h"
#include "backends/cpu/KernelSource.h"
#include "runtime/Artifact.h"

#include "mlir/IR/BuiltinOps.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
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
  /// How prefill multiplies bf16 weights (FusedLinearKernel::prefillMatmul);
  /// unset: the fastest the target has (resolvePrefillMatmul).
  std::optional<PrefillMatmul> prefillMatmul;
  /// The KV cache's element type: F32 (exact), or BF16 (half the memory and
  /// the attention reads; keys and values rounded to nearest even).
  WeightStorage kvCache = WeightStorage::F32;
};

/// "f32", "bf16": the spelling of --kv-cache and the manifest's kv_cache_dtype.
const char *kvCacheName(WeightStorage cache);
std::optional<WeightStorage> parseKvCache(const std::string &name);

/// `requested`, checked against the target's features (std::invalid_argument
/// naming the missing one), or without a request: Amx where the target has
/// AMX-BF16; Avx512Bf16 on AMD Zen (znver*) CPUs with AVX512-BF16, whose
/// vdpbf16ps does twice the work of their 512-bit FMA per cycle (from
/// instruction tables; not measured here); else F32 (on Sapphire Rapids
/// without AMX, vdpbf16ps measured slower than F32).
PrefillMatmul resolvePrefillMatmul(const CpuTarget &target, std::optional<PrefillMatmul> requested);

/// "f32", "avx512bf16", "amx": the spelling of the command line and manifest.
const char *prefillMatmulName(PrefillMatmul matmul);
std::optional<PrefillMatmul> parsePrefillMatmul(const std::string &name);

/// Generates and compiles the kernel of every q3.kernel function of `module`
/// (which must be at the dispatch stage: form-dispatches and plan-buffers
/// ran) and records the schedule, buffer plan and weight plan. Throws
/// std::runtime_error naming the op when a kernel has no CPU implementation.
CompiledModel compileForCpu(mlir::ModuleOp module, const CpuTarget &target,
                            const CpuCompileOptions &options = {});

/// Writes `model` as one artifact file (runtime/Artifact.h), with
/// `extraSections` (the tokenizer and chat template, runtime/text/ArtifactText.h)
/// after the kernels.
void writeCpuArtifact(const std::string &path, const CompiledModel &model,
                      const std::vector<runtime::ArtifactSection> &extraSections = {});

} // namespace q3::cpu
