//===- CpuPipeline.h - the CPU backend's target stage ---------------------===//
#pragma once

#include "passes/Pipeline.h"

#include <cstdint>
#include <string>

namespace q3::cpu {

/// The options of the CPU target passes (backends/cpu/passes/CpuPasses.td).
struct CpuPipelineOptions {
  std::string cpu = "host";     // cpu-set-target
  std::string matmul = "auto";  // cpu-select-matmul
  int64_t prefillRows = 0;      // cpu-select-tiles (0: measured or default)
  int64_t decodeChunks = 0;    // cpu-set-chunking (0: measured by --tune, else 4)
  int64_t attentionChunks = 8;  // cpu-set-chunking
  int64_t prefetchBytes = 0;    // cpu-set-prefetch (0: measured by --tune, else 8192)
};

/// The CPU target stage: cpu-set-target, cpu-pack-column-blocks,
/// cpu-select-matmul, cpu-select-tiles, cpu-assign-grids, cpu-set-chunking,
/// cpu-set-prefetch, cpu-add-variants.
passes::TargetPipeline cpuTargetPipeline(const CpuPipelineOptions &options);

/// Makes the CPU passes known to q3-opt's command line.
void registerCpuPassesForOpt();

} // namespace q3::cpu
