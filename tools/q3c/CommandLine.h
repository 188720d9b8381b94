//===- CommandLine.h - q3c's subcommands and shared option helpers --------===//
#pragma once

#include "backends/cpu/AttentionTuner.h"
#include "backends/cpu/DecodeSplitTuner.h"
#include "backends/cpu/DecodeTuner.h"
#include "backends/cpu/Tuner.h"
#include "backends/cpu/WeightPackingTuner.h"
#include "backends/vulkan/VulkanPasses.h"
#include "passes/Pipeline.h"

#include "llvm/Support/CommandLine.h"

#include <cstdint>
#include <string>
#include <vector>

namespace q3::tools {

extern llvm::cl::SubCommand dumpCommand;
extern llvm::cl::SubCommand evalCommand;
extern llvm::cl::SubCommand randomModelCommand;
extern llvm::cl::SubCommand compileCommand;
extern llvm::cl::SubCommand keygenCommand;
extern llvm::cl::OptionCategory q3Category;

// Every option lives in CommandLine.cpp: llvm::cl options must be constructed
// after the subcommand they belong to, which only one translation unit can
// guarantee.
extern llvm::cl::opt<std::string> dumpModel;
extern llvm::cl::opt<std::string> dumpOutput;
extern llvm::cl::opt<std::string> evalModel;
extern llvm::cl::opt<std::string> evalTokens;
extern llvm::cl::opt<std::string> evalLogits;
extern llvm::cl::opt<int> evalGenerate;
extern llvm::cl::opt<std::string> randomConfig;
extern llvm::cl::opt<uint64_t> randomSeed;
extern llvm::cl::opt<std::string> randomDType;
extern llvm::cl::opt<std::string> randomOutput;
extern llvm::cl::opt<std::string> randomTokenizer;

extern llvm::cl::opt<std::string> compileModel;
extern llvm::cl::opt<std::string> compileTarget;
extern llvm::cl::opt<std::string> compileOutput;
extern llvm::cl::opt<bool> compileVerbose;
extern llvm::cl::opt<std::string> compileSign;
extern llvm::cl::opt<std::string> keygenOutput;
extern llvm::cl::opt<bool> compileNoTokenizer;
extern llvm::cl::opt<bool> compileEmbedWeights;

// Pipeline flags shared by dump, eval and compile.
extern llvm::cl::opt<std::string> emitStage;
extern llvm::cl::opt<std::string> pipelineTarget; // dump and eval: the target stage to reach
extern llvm::cl::list<std::string> disabledPasses;
extern llvm::cl::opt<bool> printIRAfterAll;
extern llvm::cl::list<std::string> printIRAfter;
extern llvm::cl::opt<int64_t> ubatch;
extern llvm::cl::opt<bool> dumpStats;
extern llvm::cl::opt<bool> dumpJson;

// Target options shared by dump, eval and compile.
extern llvm::cl::opt<std::string> targetCpu;
extern llvm::cl::opt<std::string> targetTune;
extern llvm::cl::opt<std::string> targetPrefillMatmul;
extern llvm::cl::opt<int64_t> targetPrefillRows;
extern llvm::cl::opt<std::string> targetKvCache;

/// The pipeline the flags above ask for: up to `--emit` (the target stage
/// when `target` is set and --emit is not), with `target`'s passes ("" for
/// none, "cpu").
passes::PipelineOptions pipelineOptionsFromFlags(const std::string &target);

/// The Vulkan target's choices the flags make (--decode-splits).
vulkan::VulkanTargetOptions vulkanOptionsFromFlags();

/// What `--tune` measured on this machine (nothing for other targets or
/// when the choices were given).
struct HostTuning {
  std::optional<cpu::WeightPackingTuning> weightPacking;
  std::optional<cpu::TuningResult> prefill;
  std::optional<cpu::DecodeTuning> decode;
  std::optional<cpu::AttentionTuning> attention;
  std::optional<cpu::DecodeSplitTuning> decodeSplits;
};

/// Runs that pipeline on `module` (after --tune's measurements, which the
/// target passes read); throws if a pass fails.
HostTuning runPipelineFromFlags(mlir::ModuleOp module, const std::string &target);

/// Prints warnings to stderr as "q3c: warning: ...".
void printWarnings(const std::vector<std::string> &warnings);

} // namespace q3::tools
