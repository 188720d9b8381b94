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
  if (name == "target")
    return Stage::Target;
  throw std::invalid_argument("--emit: expected graph, fused, dispatch or target, got '" + name +
                              "'");
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
      {"set-kv-cache-type", Stage::Dispatch},
  };
  return pipeline;
}

namespace {

void addPass(OpPassManager &pm, const std::string &name, const PipelineOptions &options) {
  auto onFunctions = [&](std::unique_ptr<Pass> pass) {
    pm.addNestedPass<func::FuncOp>(std::move(pass));
  };
  if (name == "fuse-rmsnorm-matmul")
    onFunctions(createFuseRMSNormMatmulPass(options.foldGain));
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
  else if (name == "set-kv-cache-type")
    pm.addPass(createSetKVCacheTypePass(options.kvCache));
  else
    throw std::logic_error("pipeline entry without a pass: " + name);
}

/// Every pass the options can run: the default pipeline, then the target's.
std::vector<PipelineEntry> allPasses(const PipelineOptions &options) {
  std::vector<PipelineEntry> entries = defaultPipeline();
  if (options.target)
    for (const std::string &name : options.target->passes)
      entries.push_back({name, Stage::Target});
  return entries;
}

void checkPassNames(const std::vector<PipelineEntry> &entries, const std::set<std::string> &names,
                    const char *flag) {
  for (const std::string &name : names) {
    bool known =
        llvm::any_of(entries, [&](const PipelineEntry &entry) { return entry.name == name; });
    if (!known) {
      std::string all;
      for (const PipelineEntry &entry : entries)
        all += (all.empty() ? "" : ", ") + entry.name;
      throw std::invalid_argument(std::string(flag) + ": unknown pass '" + name +
                                  "' (passes: " + all + ")");
    }
  }
}

} // namespace

LogicalResult runPipeline(ModuleOp module, const PipelineOptions &options) {
  const std::vector<PipelineEntry> entries = allPasses(options);
  checkPassNames(entries, options.disabledPasses, "--disable-pass");
  checkPassNames(entries, options.printIRAfter, "--print-ir-after");
  if (options.stage == Stage::Target && !options.target)
    throw std::invalid_argument("the target stage needs a target (--target cpu)");
  PassManager pm(module.getContext());
  const size_t defaultCount = defaultPipeline().size();
  for (size_t i = 0; i < entries.size(); ++i) {
    const PipelineEntry &entry = entries[i];
    if (entry.stage > options.stage || options.disabledPasses.count(entry.name))
      continue;
    if (i < defaultCount)
      addPass(pm, entry.name, options);
    else
      options.target->addPass(pm, entry.name);
  }
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
