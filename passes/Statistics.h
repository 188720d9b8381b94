//===- Statistics.h - what the pipeline did, in numbers -------------------===//
#pragma once

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace q3::passes {

struct PipelineStatistics {
  std::map<std::string, int64_t> opsByKindBefore; // the graph as built
  std::map<std::string, int64_t> opsByKindAfter;  // after the pipeline (kernels included)
  // Present only when the pipeline reached the dispatch stage.
  std::optional<int64_t> dispatchesPerLayer;      // the most any layer has
  std::optional<int64_t> dispatchesOutsideLayers; // embedding, final norm + logits
  std::optional<int64_t> distinctKernels;
  // One decode step (T = 1) at position 0, from the dispatch list: every weight
  // a dispatch reads at the width the binder stores it, activations read and
  // written, and the K/V rows written and read.
  std::optional<int64_t> decodeWeightBytes;
  std::optional<int64_t> decodeActivationBytes;
  std::optional<int64_t> decodeBytesPerToken;
  std::optional<int64_t> peakActivationBytes; // from plan-buffers
  std::optional<int64_t> maxSeqLen;
  // Per thread running the kernels: the most thread scratch any kernel (any
  // build) takes at maxSeqLen rows (CPU target; 0 elsewhere).
  std::optional<int64_t> threadScratchBytes;
};

std::map<std::string, int64_t> countOpsByKind(mlir::ModuleOp module);

/// `graph` is the module before the pipeline, `compiled` after it.
PipelineStatistics collectStatistics(mlir::ModuleOp graph, mlir::ModuleOp compiled);

} // namespace q3::passes
