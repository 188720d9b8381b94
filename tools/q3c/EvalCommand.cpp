//===- EvalCommand.cpp - q3c eval -----------------------------------------===//
//
// Runs the reference interpreter on a Hugging Face checkpoint. Without -n it
// prints each position's argmax; --logits writes all positions' logits as a
// [T, vocab] float32 .npy; -n N generates N tokens greedily (prefill, then
// one decode step per token using the KV cache) and prints "ids: ...".
//
//===----------------------------------------------------------------------===//
#include "tools/q3c/CommandLine.h"
#include "tools/q3c/Commands.h"
#include "tools/q3c/MemoryEstimate.h"

#include "backends/reference/CheckpointWeights.h"
#include "backends/reference/Interpreter.h"
#include "frontend/ModelConfig.h"
#include "ir/BuildGraph.h"
#include "ir/Params.h"
#include "runtime/AtomicFile.h"
#include "runtime/LogitFormat.h"
#include "runtime/Npy.h"
#include "runtime/TokenList.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

namespace q3::tools {

int runEval() {
  std::vector<int32_t> prompt = runtime::parseTokenIds(evalTokens);
  runtime::refuseOutputThatIsInput("--logits", evalLogits, {evalModel});
  if (evalGenerate < 0)
    throw std::invalid_argument("-n must not be negative");
  std::vector<std::string> warnings;
  frontend::ModelConfig config = frontend::loadModelConfig(evalModel, &warnings);
  requireMemoryFor(MemoryUse::Eval, config, int64_t(prompt.size()) + evalGenerate);
  mlir::MLIRContext context;
  auto module = ir::buildQwen3Graph(context, config);
  runPipelineFromFlags(*module, pipelineTarget);
  reference::CheckpointWeights weights(evalModel, ir::collectParams(*module),
                                       config.tieWordEmbeddings, &warnings);
  printWarnings(warnings);
  for (int32_t id : prompt)
    if (id >= config.vocabSize)
      throw std::invalid_argument("--tokens: token id " + std::to_string(id) +
                                  " is outside the vocabulary [0, " +
                                  std::to_string(config.vocabSize) + ")");

  const int64_t contextLength = int64_t(prompt.size()) + evalGenerate;
  reference::Interpreter interpreter(
      *module,
      [&](const std::string &name) -> const std::vector<float> & { return weights.get(name); },
      contextLength);
  if (evalGenerate > 0) {
    std::vector<int32_t> ids = reference::generateGreedy(interpreter, prompt, evalGenerate);
    llvm::outs() << "ids:";
    for (int32_t id : ids)
      llvm::outs() << " " << id;
    llvm::outs() << "\n";
    if (evalLogits.empty())
      return 0;
    interpreter.reset();
  }
  reference::Tensor logits = interpreter.run(prompt);
  if (!evalLogits.empty())
    runtime::writeNpyF32(evalLogits, logits.shape, logits.data);
  if (evalGenerate == 0)
    for (int64_t t = 0; t < logits.rows(); ++t) {
      int32_t best = reference::argmaxRow(logits, t);
      llvm::outs() << "position " << t << ": token " << prompt[t] << " -> argmax " << best
                   << " (logit " << runtime::formatLogit(logits.data[t * config.vocabSize + best])
                   << ")\n";
    }
  return 0;
}

} // namespace q3::tools
