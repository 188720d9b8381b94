//===- CpuPipeline.h - the CPU backend's target stage ---------------------===//
#pragma once

#include "backends/cpu/CpuTarget.h"
#include "backends/cpu/KernelSource.h"
#include "passes/Pipeline.h"

#include "mlir/IR/BuiltinOps.h"

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
  int64_t inPlaceRows = 0;      // cpu-select-in-place-rows (0: 7)
};

/// cpu-pack-column-blocks' choice for `option` (auto, at-load or per-call)
/// on `target` for weights of `element` (bf16 or f16): "at_load" or
/// "per_call". For auto: at load where the target may run AMX and the
/// weights are bf16 (the tile unit reads them packed), else `measured` (the
/// tuner's choice, WeightPackingTuner.h) when there is one, else per call.
/// Throws std::invalid_argument for another option or measured value.
std::string resolveWeightPacking(const std::string &option, const CpuTarget &target, DType element,
                                 const std::string &measured = "");

/// Bytes of the product weights cpu-pack-column-blocks would pack at load in
/// `module` (a graph before or after fusion): each bf16 or f16 weight of a
/// product that fits column blocks, once.
int64_t packableWeightBytes(mlir::ModuleOp module);

/// The CPU target stage: cpu-set-target, cpu-pack-column-blocks,
/// cpu-sink-weight-concat, cpu-select-matmul, cpu-select-attention-matmul,
/// cpu-select-tiles, cpu-assign-grids, cpu-split-decode-attention,
/// cpu-set-chunking, cpu-set-prefetch, cpu-set-decode-streams,
/// cpu-set-decode-accumulators, cpu-add-variants, cpu-select-in-place-rows,
/// cpu-plan-thread-scratch.
passes::TargetPipeline cpuTargetPipeline(const CpuPipelineOptions &options);

/// Makes the CPU passes known to q3-opt's command line.
void registerCpuPassesForOpt();

} // namespace q3::cpu
