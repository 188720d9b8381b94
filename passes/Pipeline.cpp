//===- Pipeline.cpp - q3c's default pass pipeline -------------------------===//
#include "passes/Pipeline.h"
#include "passes/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <stdexcept>

using namespace mlir;

namespace q3::passes {

Stage parseStage(const std::string &name) {
  if (name == "graph")
    return Stage::Graph;
  if (name == "fused")
    return Stage::Fused;
  if (name == "dispatch")
    return Stage::Dispatch;
  throw std::invalid_argument("--emit: expected graph, fused or dispatch, got '" + name + "'");
}

const std::vector<PipelineEntry> &defaultPipeline() {
  static const std::vector<PipelineEntry> pipeline = {
      {"fuse-rmsnorm-matmul", Stage::Fused},
      {"merge-sibling-matmuls", Stage::Fused},
      {"fuse-qknorm-rope", Stage::Fused},
      {"expand-gqa", Stage::Fused},
      {"fuse-epilogues", Stage::Fused},
      {"canonicalize", Stage::Fused},
      {"cse", Stage::Fused},
      {"form-dispatches", Stage::Dispatch},
      {"plan-buffers", Stage::Dispatch},
  };
  return pipeline;
}

namespace {

void addPass(OpPassManager &pm, const std::string &name, const PipelineOptions &options) {
  auto onFunctions = [&](std::unique_ptr<Pass> pass) {
    pm.addNestedPass<func::FuncOp>(std::move(pass));
  };
  if (name == "fuse-rmsnorm-matmul")
    onFunctions(createFuseRMSNormMatmulPass(options.foldIntoCheckpointDType));
  else if (name == "merge-sibling-matmuls")
    onFunctions(createMergeSiblingMatmulsPass());
  else if (name == "fuse-qknorm-rope")
    onFunctions(createFuseQKNormRopePass());
  else if (name == "expand-gqa")
    onFunctions(createExpandGQAPass());
  else if (name == "fuse-epilogues")
    onFunctions(createFuseEpiloguesPass());
  else if (name == "canonicalize")
    pm.addPass(createCanonicalizerPass());
  else if (name == "cse")
    pm.addPass(createCSEPass());
  else if (name == "form-dispatches")
    pm.addPass(createFormDispatchesPass());
  else if (name == "plan-buffers")
    pm.addPass(createPlanBuffersPass(options.maxSeqLen));
  else
    throw std::logic_error("pipeline entry without a pass: " + name);
}

void checkPassNames(const std::set<std::string> &names, const char *flag) {
  for (const std::string &name : names) {
    bool known = llvm::any_of(defaultPipeline(),
                              [&](const PipelineEntry &entry) { return entry.name == name; });
    if (!known) {
      std::string all;
      for (const PipelineEntry &entry : defaultPipeline())
        all += (all.empty() ? "" : ", ") + entry.name;
      throw std::invalid_argument(std::string(flag) + ": unknown pass '" + name +
                                  "' (passes: " + all + ")");
    }
  }
}

} // namespace

LogicalResult runPipeline(ModuleOp module, const PipelineOptions &options) {
  checkPassNames(options.disabledPasses, "--disable-pass");
  checkPassNames(options.printIRAfter, "--print-ir-after");
  PassManager pm(module.getContext());
  for (const PipelineEntry &entry : defaultPipeline())
    if (entry.stage <= options.stage && !options.disabledPasses.count(entry.name))
      addPass(pm, entry.name, options);
  if (options.printIRAfterAll || !options.printIRAfter.empty()) {
    module.getContext()->disableMultithreading();
    auto printAfter = [options](Pass *pass, Operation *) {
      return options.printIRAfterAll || options.printIRAfter.count(pass->getArgument().str());
    };
    pm.enableIRPrinting([](Pass *, Operation *) { return false; }, printAfter,
                        /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false,
                        /*printAfterOnlyOnFailure=*/false, llvm::errs());
  }
  return pm.run(module);
}

} // namespace q3::passes
