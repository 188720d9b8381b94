//===- Pipeline.h - q3c's default pass pipeline and its stages ------------===//
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

namespace mlir {
class OpPassManager;
} // namespace mlir

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace q3::passes {

/// Where `--emit` stops: the graph as built, after the fusion passes, after
/// dispatch formation and buffer planning, or after a backend's target passes
/// (which record its decisions: layouts, instructions, grids).
enum class Stage { Graph, Fused, Dispatch, Target };

/// Parses "graph" | "fused" | "dispatch" | "target"; throws
/// std::invalid_argument otherwise.
Stage parseStage(const std::string &name);

/// A backend's target passes, which run after the dispatch stage (the
/// backend owns them; passes/ does not depend on backends/).
struct TargetPipeline {
  std::string backend;             // "cpu"
  std::vector<std::string> passes; // pass arguments, in order
  /// Adds the pass named `pass` to `pm`.
  std::function<void(mlir::OpPassManager &pm, const std::string &pass)> addPass;
};

struct PipelineOptions {
  Stage stage = Stage::Dispatch;
  std::set<std::string> disabledPasses; // --disable-pass, by pass argument
  bool printIRAfterAll = false;         // --print-ir-after-all
  std::set<std::string> printIRAfter;   // --print-ir-after=PASS
  int64_t maxSeqLen = 4096;             // for plan-buffers
  std::string foldGain = "never";       // fuse-rmsnorm-matmul fold-gain
  std::string kvCache = "f32";           // set-kv-cache-type element (target stage)
  std::optional<TargetPipeline> target;  // the target stage's passes
};

/// The passes of the default pipeline, in order, with the stage each belongs to.
struct PipelineEntry {
  std::string name;
  Stage stage;
};
const std::vector<PipelineEntry> &defaultPipeline();

/// Runs the default pipeline up to `options.stage` on `module`: at the target
/// stage, set-kv-cache-type and then `options.target`'s passes (a target is
/// required there). IR dumps go to stderr. Unknown pass names in the options
/// throw std::invalid_argument.
mlir::LogicalResult runPipeline(mlir::ModuleOp module, const PipelineOptions &options);

} // namespace q3::passes
