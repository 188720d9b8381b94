//===- Pipeline.h - q3c's default pass pipeline and its stages ------------===//
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <set>
#include <string>
#include <vector>

namespace q3::passes {

/// Where `--emit` stops: the graph as built, after the fusion passes, or after
/// dispatch formation and buffer planning.
enum class Stage { Graph, Fused, Dispatch };

/// Parses "graph" | "fused" | "dispatch"; throws std::invalid_argument otherwise.
Stage parseStage(const std::string &name);

struct PipelineOptions {
  Stage stage = Stage::Dispatch;
  std::set<std::string> disabledPasses; // --disable-pass, by pass argument
  bool printIRAfterAll = false;         // --print-ir-after-all
  std::set<std::string> printIRAfter;   // --print-ir-after=PASS
  int64_t maxSeqLen = 4096;             // for plan-buffers
  bool foldIntoCheckpointDType = false; // fuse-rmsnorm-matmul keep-weight-dtype
};

/// The passes of the default pipeline, in order, with the stage each belongs to.
struct PipelineEntry {
  std::string name;
  Stage stage;
};
const std::vector<PipelineEntry> &defaultPipeline();

/// Runs the default pipeline up to `options.stage` on `module`. IR dumps go to
/// stderr. Unknown pass names in the options throw std::invalid_argument.
mlir::LogicalResult runPipeline(mlir::ModuleOp module, const PipelineOptions &options);

} // namespace q3::passes
