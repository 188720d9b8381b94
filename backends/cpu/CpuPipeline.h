//===- CpuPipeline.h - the CPU backend's target stage ---------------------===//
#pragma once

#include "backends/cpu/CpuTarget.h"
#include "backends/cpu/KernelSource.h"
#include "passes/Pipeline.h"

#include <cstdint>
#include <string>

namespace q3::cpu {

/// The options of the CPU target passes (backends/cpu/passes/CpuPasses.td).
struct CpuPipelineOptions {
  std::string cpu = "host";     // cpu-set-target
  std::string weightPacking = "auto"; // cpu-pack-column-blocks
  std::string matmul = "auto";  // cpu-select-matmul
  std::string attentionMatmul = "auto"; // cpu-select-attention-matmul
  int64_t prefillRows = 0;      // cpu-select-tiles (0: measured or default)
  int64_t decodeSplits = 0;     // cpu-split-decode-attention (0: from the threads)
  int64_t decodeChunks = 0;    // cpu-set-chunking (0: measured by --tune, else 4)
  int64_t attentionChunks = 8;  // cpu-set-chunking
  int64_t prefetchBytes = 0;    // cpu-set-prefetch (0: measured by --tune, else 8192)
  int64_t decodeStreams = 0;    // cpu-set-decode-streams (0: measured by --tune, else 4)
};

/// cpu-pack-column-blocks' choice for `option` (auto, at-load or per-call)
/// on `target` for weights of `element` (bf16 or f16): "at_load" or
/// "per_call". Throws std::invalid_argument for another option.
std::string resolveWeightPacking(const std::string &option, const CpuTarget &target, DType element);

/// The CPU target stage: cpu-set-target, cpu-pack-column-blocks,
/// cpu-sink-weight-concat, cpu-select-matmul, cpu-select-attention-matmul,
/// cpu-select-tiles, cpu-assign-grids, cpu-split-decode-attention,
/// cpu-set-chunking, cpu-set-prefetch, cpu-set-decode-streams,
/// cpu-add-variants.
passes::TargetPipeline cpuTargetPipeline(const CpuPipelineOptions &options);

/// Makes the CPU passes known to q3-opt's command line.
void registerCpuPassesForOpt();

} // namespace q3::cpu
