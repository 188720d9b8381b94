#include "runtime/ModelMemory.h"
#include "runtime/DType.h"

#include <algorithm>
#include <set>

namespace q3::runtime {
namespace {

uint64_t nonNegative(int64_t value) { return value > 0 ? uint64_t(value) : 0; }

/// Weight ids that some dispatch binds.
std::set<int64_t> weightsRead(const manifest::Manifest &m) {
  std::set<int64_t> ids;
  for (const manifest::Step &step : m.steps)
    for (const manifest::Binding &operand : step.operands)
      if (operand.kind == manifest::BindingKind::Weight)
        ids.insert(operand.id);
  return ids;
}

uint64_t weightBytes(const manifest::Weight &weight) {
  uint64_t bytes = dtypeSize(weight.dtype);
  for (int64_t extent : weight.shape)
    bytes = saturatingMul(bytes, nonNegative(extent));
  return bytes;
}

} // namespace

std::vector<MemoryPart> estimateModelMemory(const manifest::Manifest &m, int64_t context,
                                            int threads) {
  const uint64_t rows = nonNegative(context);
  uint64_t weights = 0;
  for (int64_t id : weightsRead(m))
    if (id >= 0 && size_t(id) < m.weights.size())
      weights = saturatingAdd(weights, weightBytes(m.weights[size_t(id)]));
  // Prompts run in chunks of prefill_rows rows: the buffers hold one chunk.
  const uint64_t chunk = nonNegative(m.prefillRows);
  const uint64_t bufferRows = chunk > 0 && chunk < rows ? chunk : rows;
  uint64_t activations = 0;
  for (int64_t rowBytes : m.bufferRowBytes)
    activations = saturatingAdd(activations, saturatingMul(bufferRows, nonNegative(rowBytes)));
  activations = saturatingAdd(activations, saturatingMul(bufferRows, 4)); // token ids
  uint64_t workspace = 0; // one, of the largest kernel's (runtime/KernelABI.h)
  for (const manifest::Kernel &kernel : m.kernels)
    workspace = std::max(workspace, nonNegative(kernel.workspaceBytes));
  activations = saturatingAdd(activations, workspace);
  activations =
      saturatingAdd(activations, saturatingMul(nonNegative(manifest::largestThreadScratch(m)),
                                               nonNegative(threads)));
  uint64_t cache = saturatingMul(nonNegative(m.config.numHiddenLayers), rows);
  cache = saturatingMul(cache, nonNegative(m.config.numKeyValueHeads));
  cache = saturatingMul(cache, nonNegative(m.config.headDim));
  cache = saturatingMul(saturatingMul(cache, dtypeSize(m.kvCache)), 2); // keys and values
  // The logits are one of the activation buffers; what forward() copies out
  // is the prompt's rows, not the context's.
  return {{"weights", weights}, {"KV cache", cache}, {"activation buffers", activations}};
}

} // namespace q3::runtime
