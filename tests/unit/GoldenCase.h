//===- GoldenCase.h - the committed golden checkpoints --------------------===//
#pragma once

#include "backends/reference/Interpreter.h"

#include "mlir/IR/BuiltinOps.h"

#include <functional>
#include <string>
#include <vector>

namespace q3::testing {

/// One folder of tests/golden: a checkpoint, a prompt, and what the
/// independent reference (scripts/qwen3_reference.py) computed for it.
struct GoldenCase {
  std::string name;
  std::string dir;
  std::vector<int32_t> prompt;      // tokens.txt
  std::vector<int32_t> greedy;      // greedy.txt, "ids: ..."
  std::vector<int64_t> logitsShape; // logits.npy
  std::vector<float> logits;
};

std::vector<std::string> goldenCaseNames();
GoldenCase loadGoldenCase(const std::string &name);

/// Runs the reference interpreter on a case's checkpoint, owning everything it needs.
class GoldenRunner {
public:
  /// `transform`, if given, runs on the graph before the interpreter sees it
  /// (e.g. a pass pipeline).
  explicit GoldenRunner(const GoldenCase &golden,
                        const std::function<void(mlir::ModuleOp)> &transform = {});
  ~GoldenRunner();
  reference::Interpreter &interpreter();
  mlir::ModuleOp module();

private:
  struct Impl;
  Impl *impl;
};

/// max |a - b| over two equally long arrays; NaN when the lengths differ or
/// any value is not finite, so that every comparison with it fails.
double maxAbsDiff(const std::vector<float> &a, const std::vector<float> &b);

} // namespace q3::testing
