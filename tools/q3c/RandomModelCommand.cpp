//===- RandomModelCommand.cpp - q3c random-model --------------------------===//
//
// Writes a random-weight checkpoint in the Hugging Face layout, so that demos,
// tests and benchmarks need no download. The tensor list comes from the q3
// graph itself, so it is exactly what the weight binder will ask for.
//
//===----------------------------------------------------------------------===//
#include "tools/q3c/CommandLine.h"
#include "tools/q3c/Commands.h"
#include "tools/q3c/MemoryEstimate.h"

#include "frontend/ConfigJson.h"
#include "frontend/Presets.h"
#include "ir/BuildGraph.h"
#include "ir/Params.h"
#include "runtime/AtomicFile.h"
#include "runtime/DType.h"
#include "runtime/SafeTensorsWriter.h"
#include "runtime/text/TextAssets.h"
#include "runtime/text/TokenizerSubset.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <filesystem>
#include <random>

namespace q3::tools {

static frontend::WeightDType parseDTypeOption(const std::string &text) {
  if (text == "bf16" || text == "bfloat16")
    return frontend::WeightDType::BF16;
  if (text == "f16" || text == "float16")
    return frontend::WeightDType::F16;
  if (text == "f32" || text == "float32")
    return frontend::WeightDType::F32;
  throw std::invalid_argument("--dtype: expected bf16, f16 or f32, got '" + text + "'");
}

static runtime::DType storageType(frontend::WeightDType dtype) {
  switch (dtype) {
  case frontend::WeightDType::BF16:
    return runtime::DType::BF16;
  case frontend::WeightDType::F16:
    return runtime::DType::F16;
  case frontend::WeightDType::F32:
    return runtime::DType::F32;
  }
  throw std::logic_error("unknown dtype");
}

/// Norm gains are 1 + noise (so a "(1 + w)" or missing-gain bug shows); matrices
/// (embedding included) are scaled by 1/sqrt(fan-in) so activations stay O(1).
static std::vector<float> randomValues(const ir::ParamInfo &param, std::mt19937_64 &rng) {
  int64_t count = 1;
  for (int64_t d : param.shape)
    count *= d;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(count));
  const bool isGain = param.shape.size() == 1;
  const float scale = isGain ? 0.1f : 1.0f / std::sqrt(float(param.shape.back()));
  for (float &v : values)
    v = (isGain ? 1.0f : 0.0f) + scale * normal(rng);
  return values;
}

int runRandomModel() {
  const std::filesystem::path dir(randomOutput.getValue());
  const std::string weightsPath = (dir / "model.safetensors").string();
  const std::string configPath = (dir / "config.json").string();
  for (const std::string &output : {weightsPath, configPath})
    runtime::refuseOutputThatIsInput("-o", output, {randomConfig});
  // A sharded index next to the new file would still be what loaders read.
  if (std::filesystem::exists(dir / "model.safetensors.index.json"))
    throw std::invalid_argument(
        (dir / "model.safetensors.index.json").string() +
        ": -o names a folder with a sharded checkpoint, which model.safetensors would not "
        "replace; choose another folder");
  std::vector<std::string> warnings;
  frontend::ModelConfig config = frontend::resolveModelConfig(randomConfig, &warnings);
  printWarnings(warnings);
  if (!randomDType.empty())
    config.dtype = parseDTypeOption(randomDType);
  requireMemoryFor(MemoryUse::RandomModel, config);
  mlir::MLIRContext context;
  auto module = ir::buildQwen3Graph(context, config);

  std::mt19937_64 rng(randomSeed);
  const runtime::DType dtype = storageType(config.dtype);
  std::vector<runtime::TensorToWrite> tensors;
  for (const ir::ParamInfo &param : ir::collectParams(*module)) {
    std::vector<float> values = randomValues(param, rng);
    runtime::TensorToWrite tensor{param.name, dtype, param.shape, {}};
    tensor.bytes.resize(values.size() * runtime::dtypeSize(dtype));
    runtime::convertFromF32(dtype, values.data(), tensor.bytes.data(), values.size());
    tensors.push_back(std::move(tensor));
  }

  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error)
    throw runtime::OutputError(dir.string() + ": cannot create the folder: " + error.message());
  // Each file is replaced atomically (runtime/AtomicFile.h).
  runtime::writeSafeTensors(weightsPath, tensors);
  runtime::writeFileAtomically(configPath, frontend::toHuggingFaceJson(config) + "\n");
  llvm::outs() << "wrote " << dir.string() << ": " << tensors.size() << " tensors, "
               << frontend::dtypeName(config.dtype) << ", seed " << randomSeed << "\n";
  if (!randomTokenizer.empty()) {
    const text::TextAssets source = text::readTextAssets(randomTokenizer);
    const text::TextAssets assets = text::fitTokenizerToVocabulary(source, config.vocabSize);
    text::writeTextAssets(assets, dir.string());
    const bool cut = assets.tokenizer->bytes != source.tokenizer->bytes;
    llvm::outs() << "wrote " << (dir / "tokenizer.json").string() << " for " << config.vocabSize
                 << " token ids (" << (cut ? "cut down from " : "copied from ") << randomTokenizer
                 << ")\n";
  }
  return 0;
}

} // namespace q3::tools
