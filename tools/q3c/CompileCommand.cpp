//===- CompileCommand.cpp - q3c compile -----------------------------------===//
//
// Config -> graph -> default pipeline (dispatch stage) -> CPU kernels -> one
// artifact. No weights are needed: the runtime binds them at load time.
//
//===----------------------------------------------------------------------===//
#include "tools/q3c/CommandLine.h"
#include "tools/q3c/Commands.h"

#include "backends/cpu/CompileModel.h"
#include "frontend/Presets.h"
#include "ir/BuildGraph.h"
#include "runtime/text/ArtifactText.h"
#include "runtime/text/Terminal.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <stdexcept>

namespace q3::tools {

int runCompile() {
  if (compileTarget != "cpu")
    throw std::invalid_argument("--target: expected cpu, got '" + compileTarget +
                                "' (the Vulkan backend is not built yet)");
  if (emitStage != "dispatch")
    throw std::invalid_argument("compile always runs the pipeline to the dispatch stage");
  const auto start = std::chrono::steady_clock::now();
  cpu::CpuTarget target = cpu::resolveCpuTarget(compileCpu);
  std::vector<std::string> warnings;
  frontend::ModelConfig config = frontend::resolveModelConfig(compileModel, &warnings);
  printWarnings(warnings);
  // The tokenizer, chat template and generation defaults, checked first so a
  // broken tokenizer.json fails before the long part.
  const std::string modelFolder = text::modelFolderOf(compileModel);
  const std::vector<runtime::ArtifactSection> textSections =
      compileNoTokenizer || modelFolder.empty()
          ? std::vector<runtime::ArtifactSection>()
          : text::collectTextSections(modelFolder, config.vocabSize);
  text::StageProgress progress("q3c compile", 4);
  progress.stage(1, "graph");
  mlir::MLIRContext context;
  auto module = ir::buildQwen3Graph(context, config);
  progress.stage(2, "passes");
  runPipelineFromFlags(*module);
  cpu::CpuCompileOptions options;
  if (compilePrefillMatmul != "auto") {
    options.prefillMatmul = cpu::parsePrefillMatmul(compilePrefillMatmul);
    if (!options.prefillMatmul)
      throw std::invalid_argument("--prefill-matmul: expected auto, f32, avx512bf16 or amx, got '" +
                                  compilePrefillMatmul + "'");
  }
  std::optional<cpu::WeightStorage> kvCache = cpu::parseKvCache(compileKvCache);
  if (!kvCache)
    throw std::invalid_argument("--kv-cache: expected f32 or bf16, got '" + compileKvCache + "'");
  options.kvCache = *kvCache;
  progress.stage(3, "kernels (LLVM)");
  cpu::CompiledModel compiled = cpu::compileForCpu(*module, target, options);
  progress.stage(4, "writing");
  cpu::writeCpuArtifact(compileOutput, compiled, textSections);
  progress.finish();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  llvm::outs() << "compiled " << compiled.manifest["kernels"].size() << " kernels, "
               << compiled.manifest["schedule"].size() << " dispatches for " << target.name << " ("
               << target.llvmCpu << ", prefill "
               << compiled.manifest["target"]["prefill_matmul"].get<std::string>() << ", kv cache "
               << compiled.manifest["kv_cache_dtype"].get<std::string>() << ") in "
               << llvm::format("%.2f", seconds) << " s -> " << compileOutput << "\n";
  if (!textSections.empty()) {
    llvm::outs() << "embedded";
    for (const runtime::ArtifactSection &section : textSections)
      llvm::outs() << " " << section.name;
    llvm::outs() << " (from " << modelFolder << ")\n";
  }
  return 0;
}

} // namespace q3::tools
