//===- CompileCommand.cpp - q3c compile -----------------------------------===//
//
// Config -> graph -> default pipeline (dispatch stage) -> CPU kernels -> one
// artifact. No weights are needed: the runtime binds them at load time.
//
//===----------------------------------------------------------------------===//
#include "tools/q3c/CommandLine.h"
#include "tools/q3c/Commands.h"
#include "tools/q3c/MemoryEstimate.h"

#include "backends/cpu/CompileModel.h"
#include "frontend/Presets.h"
#include "ir/BuildGraph.h"
#include "runtime/AtomicFile.h"
#include "runtime/Signature.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <optional>
#include <stdexcept>

namespace q3::tools {

int runCompile() {
  if (compileTarget != "cpu")
    throw std::invalid_argument("--target: expected cpu, got '" + compileTarget +
                                "' (the Vulkan backend is not built yet)");
  if (emitStage != "dispatch")
    throw std::invalid_argument("compile always runs the pipeline to the dispatch stage");
  // Before the work: -o must not name the config or a file of the model folder.
  runtime::refuseOutputThatIsInput("-o", compileOutput, {compileModel, compileSign});
  // Read the key first: a bad key file should not cost a compilation.
  std::optional<runtime::SecretKey> signer;
  if (!compileSign.empty())
    signer = runtime::readSecretKey(compileSign);
  const auto start = std::chrono::steady_clock::now();
  cpu::CpuTarget target = cpu::resolveCpuTarget(compileCpu);
  std::vector<std::string> warnings;
  frontend::ModelConfig config = frontend::resolveModelConfig(compileModel, &warnings);
  printWarnings(warnings);
  requireMemoryFor(MemoryUse::Compile, config);
  mlir::MLIRContext context;
  auto module = ir::buildQwen3Graph(context, config);
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
  cpu::CompiledModel compiled = cpu::compileForCpu(*module, target, options);
  cpu::writeCpuArtifact(compileOutput, compiled, signer ? &*signer : nullptr);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  llvm::outs() << "compiled " << compiled.manifest["kernels"].size() << " kernels, "
               << compiled.manifest["schedule"].size() << " dispatches for " << target.name << " ("
               << target.llvmCpu << ", prefill "
               << compiled.manifest["target"]["prefill_matmul"].get<std::string>() << ", kv cache "
               << compiled.manifest["kv_cache_dtype"].get<std::string>() << ") in "
               << llvm::format("%.2f", seconds) << " s -> " << compileOutput;
  if (signer)
    llvm::outs() << ", signed by key " << runtime::keyId(signer->publicKey());
  llvm::outs() << "\n";
  return 0;
}

int runKeygen() {
  const runtime::PublicKey key = runtime::generateKeyPair(keygenOutput, keygenOutput + ".pub");
  llvm::outs() << "wrote " << keygenOutput << " (secret: keep it private) and " << key.source
               << " (public: give it to q3run --require-signature); key " << runtime::keyId(key)
               << "\n";
  return 0;
}

} // namespace q3::tools
