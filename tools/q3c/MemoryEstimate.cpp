//===- MemoryEstimate.cpp -------------------------------------------------===//
#include "tools/q3c/MemoryEstimate.h"

#include "runtime/ResourceLimits.h"

#include <algorithm>
#include <string>
#include <vector>

namespace q3::tools {
namespace {

using runtime::MemoryPart;
using runtime::saturatingAdd;
using runtime::saturatingMul;

// Measured peak RSS of q3c on this project's development VM (GCC 12, MLIR 16):
// `dump --stats` of a config with hidden 8 grows by ~19 KB per layer (90.9 MB
// at 1000 layers, 262 MB at 10000), `compile` by ~72 KB per layer (166 MB,
// 817 MB); both start near 100 MB. The constants round those up.
constexpr uint64_t kBaseBytes = 128ull << 20;
constexpr uint64_t kGraphBytesPerLayer = 24ull << 10;
constexpr uint64_t kCompileBytesPerLayer = 80ull << 10;

uint64_t u(int64_t value) { return value > 0 ? uint64_t(value) : 0; }

struct Params {
  uint64_t total = 0;
  uint64_t largest = 0; // one tensor
};

Params countParams(const frontend::ModelConfig &c) {
  const uint64_t hidden = u(c.hiddenSize), inter = u(c.intermediateSize);
  const uint64_t q = saturatingMul(u(c.qDim()), hidden), kv = saturatingMul(u(c.kvDim()), hidden);
  const uint64_t mlp = saturatingMul(inter, hidden);
  uint64_t layer = saturatingAdd(saturatingMul(q, 2), saturatingMul(kv, 2));
  layer = saturatingAdd(layer, saturatingMul(mlp, 3));
  layer = saturatingAdd(layer, saturatingAdd(saturatingMul(hidden, 2), u(2 * c.headDim)));
  const uint64_t embedding = saturatingMul(u(c.vocabSize), hidden);
  Params params;
  params.total = saturatingMul(layer, u(c.numHiddenLayers));
  params.total = saturatingAdd(params.total, saturatingMul(embedding, c.tieWordEmbeddings ? 1 : 2));
  params.largest = std::max({q, kv, mlp, embedding});
  return params;
}

uint64_t dtypeBytes(frontend::WeightDType dtype) {
  return dtype == frontend::WeightDType::F32 ? 4 : 2;
}

} // namespace

void requireMemoryFor(MemoryUse use, const frontend::ModelConfig &config, int64_t rows) {
  const uint64_t layers = u(config.numHiddenLayers);
  std::vector<MemoryPart> parts = {{"the compiler", kBaseBytes}};
  std::string subject;
  switch (use) {
  case MemoryUse::Graph:
    subject = "the IR";
    parts.push_back({"the IR", saturatingMul(layers, kGraphBytesPerLayer)});
    break;
  case MemoryUse::Compile:
    subject = "compiling";
    parts.push_back({"the IR and manifest", saturatingMul(layers, kCompileBytesPerLayer)});
    break;
  case MemoryUse::Eval: {
    subject = "the reference interpreter";
    const Params params = countParams(config);
    parts.push_back({"the IR", saturatingMul(layers, kGraphBytesPerLayer)});
    parts.push_back({"f32 weights", saturatingMul(params.total, 4)});
    uint64_t cache = saturatingMul(saturatingMul(layers, u(rows)), u(config.kvDim()));
    parts.push_back({"KV cache", saturatingMul(cache, 8)}); // f32 keys and values
    // The widest activations of one position: logits, the MLP, q and k/v.
    uint64_t row = saturatingAdd(u(config.vocabSize), saturatingMul(u(config.intermediateSize), 3));
    row = saturatingAdd(row, saturatingAdd(u(config.qDim()), saturatingMul(u(config.kvDim()), 2)));
    parts.push_back({"activations", saturatingMul(saturatingMul(u(rows), row), 8)});
    break;
  }
  case MemoryUse::RandomModel: {
    subject = "the random checkpoint";
    const Params params = countParams(config);
    parts.push_back({"the IR", saturatingMul(layers, kGraphBytesPerLayer)});
    parts.push_back({"tensors", saturatingMul(params.total, dtypeBytes(config.dtype))});
    parts.push_back({"f32 values of one tensor", saturatingMul(params.largest, 4)});
    break;
  }
  }
  runtime::requireMemory(config.source + ": " + subject, parts, runtime::availableMemory(), "");
}

} // namespace q3::tools
