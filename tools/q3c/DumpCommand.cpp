//===- DumpCommand.cpp - q3c dump -----------------------------------------===//
#include "tools/q3c/CommandLine.h"
#include "tools/q3c/Commands.h"
#include "tools/q3c/MemoryEstimate.h"

#include "backends/cpu/CompileModel.h"
#include "backends/vulkan/CompileModel.h"
#include "frontend/Presets.h"
#include "ir/BuildGraph.h"
#include "passes/Statistics.h"
#include "runtime/AtomicFile.h"

#include <nlohmann/json.hpp>

#include "mlir/IR/MLIRContext.h"

#include "llvm/Support/raw_ostream.h"

#include <stdexcept>

namespace q3::tools {

/// JSON of the statistics; fields the pipeline did not reach are null.
static std::string statisticsJson(const passes::PipelineStatistics &stats) {
  auto optional = [](const std::optional<int64_t> &v) -> nlohmann::json {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  nlohmann::json json = {
      {"ops_by_kind_before", stats.opsByKindBefore},
      {"ops_by_kind_after", stats.opsByKindAfter},
      {"dispatches_per_layer", optional(stats.dispatchesPerLayer)},
      {"dispatches_outside_layers", optional(stats.dispatchesOutsideLayers)},
      {"distinct_kernels", optional(stats.distinctKernels)},
      {"decode_weight_bytes", optional(stats.decodeWeightBytes)},
      {"decode_activation_bytes", optional(stats.decodeActivationBytes)},
      {"decode_bytes_per_token", optional(stats.decodeBytesPerToken)},
      {"peak_activation_bytes", optional(stats.peakActivationBytes)},
      {"max_seq_len", optional(stats.maxSeqLen)},
      {"thread_scratch_bytes", optional(stats.threadScratchBytes)},
  };
  return json.dump(2) + "\n";
}

static std::string statisticsText(const passes::PipelineStatistics &stats) {
  std::string text;
  auto line = [&](const std::string &name, const std::optional<int64_t> &value) {
    text += name + ": " + (value ? std::to_string(*value) : std::string("-")) + "\n";
  };
  line("dispatches per layer", stats.dispatchesPerLayer);
  line("dispatches outside layers", stats.dispatchesOutsideLayers);
  line("distinct kernels", stats.distinctKernels);
  line("decode bytes per token", stats.decodeBytesPerToken);
  line("  weights", stats.decodeWeightBytes);
  line("  activations and KV", stats.decodeActivationBytes);
  line("peak activation bytes", stats.peakActivationBytes);
  line("  planned for rows", stats.maxSeqLen);
  line("thread scratch bytes, per thread", stats.threadScratchBytes);
  text += "ops before -> after:\n";
  std::map<std::string, std::pair<int64_t, int64_t>> both;
  for (auto [kind, count] : stats.opsByKindBefore)
    both[kind].first = count;
  for (auto [kind, count] : stats.opsByKindAfter)
    both[kind].second = count;
  for (auto [kind, counts] : both)
    text += "  " + kind + ": " + std::to_string(counts.first) + " -> " +
            std::to_string(counts.second) + "\n";
  return text;
}

int runDump() {
  runtime::refuseOutputThatIsInput("-o", dumpOutput, {dumpModel});
  std::vector<std::string> warnings;
  frontend::ModelConfig config = frontend::resolveModelConfig(dumpModel, &warnings);
  printWarnings(warnings);
  requireMemoryFor(MemoryUse::Graph, config);
  mlir::MLIRContext context;
  auto module = ir::buildQwen3Graph(context, config);
  mlir::OwningOpRef<mlir::ModuleOp> graph = module->clone();
  runPipelineFromFlags(*module, pipelineTarget);
  const bool kernels = emitStage.getNumOccurrences() && emitStage == "kernels";
  if (kernels && pipelineTarget != "cpu" && pipelineTarget != "vulkan")
    throw std::invalid_argument("--emit=kernels needs --target cpu or --target vulkan");
  // The Vulkan target passes run on the dispatch stage (CommandLine.cpp):
  // --target vulkan at the target stage runs them here.
  const bool vulkanTargetStage = pipelineTarget == "vulkan" &&
                                 (!emitStage.getNumOccurrences() || emitStage == "target");
  std::string text;
  if (kernels) {
    text = pipelineTarget == "vulkan"
               ? vulkan::vulkanKernelSource(*module, vulkanOptionsFromFlags())
               : cpu::cpuKernelsSource(*module);
  } else if (dumpStats) {
    passes::PipelineStatistics stats = passes::collectStatistics(*graph, *module);
    text = dumpJson ? statisticsJson(stats) : statisticsText(stats);
  } else {
    if (vulkanTargetStage)
      vulkan::runVulkanTargetPasses(
          *module, vulkanOptionsFromFlags()); // the Vulkan decisions, in the lowering configs
    llvm::raw_string_ostream os(text);
    module->print(os);
    os << "\n";
  }
  // Atomically: a failed write leaves what was at the path (runtime/AtomicFile.h).
  runtime::writeFileAtomically(dumpOutput, text, runtime::Dash::IsStandardOutput);
  return 0;
}

} // namespace q3::tools
