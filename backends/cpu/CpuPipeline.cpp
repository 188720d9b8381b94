//===- CpuPipeline.cpp - the CPU backend's target stage -------------------===//
#include "backends/cpu/CpuPipeline.h"
#include "backends/cpu/passes/CpuPasses.h"

#include "mlir/Pass/PassManager.h"

#include <stdexcept>

namespace q3::cpu {

passes::TargetPipeline cpuTargetPipeline(const CpuPipelineOptions &options) {
  passes::TargetPipeline pipeline;
  pipeline.backend = "cpu";
  pipeline.passes = {
      "cpu-set-target",    "cpu-pack-column-blocks",      "cpu-sink-weight-concat",
      "cpu-select-matmul", "cpu-select-attention-matmul", "cpu-select-tiles",
      "cpu-assign-grids",  "cpu-split-decode-attention",  "cpu-set-chunking",
      "cpu-set-prefetch",  "cpu-set-decode-streams",      "cpu-set-decode-accumulators",
      "cpu-add-variants",  "cpu-select-in-place-rows",    "cpu-plan-thread-scratch"};
  pipeline.addPass = [options](mlir::OpPassManager &pm, const std::string &name) {
    if (name == "cpu-set-target") {
      CpuSetTargetOptions o;
      o.cpu = options.cpu;
      pm.addPass(createCpuSetTargetPass(o));
    } else if (name == "cpu-pack-column-blocks") {
      CpuPackColumnBlocksOptions o;
      o.packing = options.weightPacking;
      pm.addPass(createCpuPackColumnBlocksPass(o));
    } else if (name == "cpu-sink-weight-concat") {
      pm.addPass(createCpuSinkWeightConcatPass());
    } else if (name == "cpu-select-matmul") {
      CpuSelectMatmulOptions o;
      o.matmul = options.matmul;
      pm.addPass(createCpuSelectMatmulPass(o));
    } else if (name == "cpu-select-attention-matmul") {
      CpuSelectAttentionMatmulOptions o;
      o.matmul = options.attentionMatmul;
      pm.addPass(createCpuSelectAttentionMatmulPass(o));
    } else if (name == "cpu-select-tiles") {
      CpuSelectTilesOptions o;
      o.prefillRows = options.prefillRows;
      pm.addPass(createCpuSelectTilesPass(o));
    } else if (name == "cpu-assign-grids") {
      pm.addPass(createCpuAssignGridsPass());
    } else if (name == "cpu-split-decode-attention") {
      CpuSplitDecodeAttentionOptions o;
      o.splits = options.decodeSplits;
      pm.addPass(createCpuSplitDecodeAttentionPass(o));
    } else if (name == "cpu-set-chunking") {
      CpuSetChunkingOptions o;
      o.decodeChunks = options.decodeChunks;
      o.attentionChunks = options.attentionChunks;
      pm.addPass(createCpuSetChunkingPass(o));
    } else if (name == "cpu-set-prefetch") {
      CpuSetPrefetchOptions o;
      o.prefetchBytes = options.prefetchBytes;
      pm.addPass(createCpuSetPrefetchPass(o));
    } else if (name == "cpu-set-decode-streams") {
      CpuSetDecodeStreamsOptions o;
      o.streams = options.decodeStreams;
      pm.addPass(createCpuSetDecodeStreamsPass(o));
    } else if (name == "cpu-set-decode-accumulators") {
      pm.addPass(createCpuSetDecodeAccumulatorsPass());
    } else if (name == "cpu-add-variants") {
      CpuAddVariantsOptions o;
      o.enabled = options.matmul == "auto"; // a chosen --prefill-matmul is kept
      o.attention = options.attentionMatmul == "auto";
      pm.addPass(createCpuAddVariantsPass(o));
    } else if (name == "cpu-select-in-place-rows") {
      CpuSelectInPlaceRowsOptions o;
      o.rows = options.inPlaceRows;
      pm.addPass(createCpuSelectInPlaceRowsPass(o));
    } else if (name == "cpu-plan-thread-scratch") {
      pm.addPass(createCpuPlanThreadScratchPass());
    } else {
      throw std::logic_error("no CPU pass named " + name);
    }
  };
  return pipeline;
}

void registerCpuPassesForOpt() { registerCpuPasses(); }

} // namespace q3::cpu
