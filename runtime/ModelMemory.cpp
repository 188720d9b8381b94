#include "runtime/ModelMemory.h"

#include <algorithm>
#include <set>

namespace q3::runtime {
namespace {

using Json = nlohmann::json;

uint64_t nonNegative(const Json &object, const char *key) {
  if (!object.is_object())
    return 0;
  auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer() || it->get<int64_t>() < 0)
    return 0;
  return it->get<uint64_t>();
}

uint64_t dtypeBytes(const Json &entry) {
  auto it = entry.find("dtype");
  if (it != entry.end() && it->is_string() && (*it == "bf16" || *it == "f16"))
    return 2;
  return 4;
}

const Json &arrayAt(const Json &object, const char *key) {
  static const Json empty = Json::array();
  if (!object.is_object())
    return empty;
  auto it = object.find(key);
  return it != object.end() && it->is_array() ? *it : empty;
}

/// Weight ids that some dispatch binds.
std::set<int64_t> weightsRead(const Json &manifest) {
  std::set<int64_t> ids;
  for (const Json &step : arrayAt(manifest, "schedule"))
    for (const Json &operand : arrayAt(step, "operands"))
      if (operand.is_object() && operand.value("kind", Json()) == "weight")
        ids.insert(int64_t(nonNegative(operand, "id")));
  return ids;
}

} // namespace

std::vector<MemoryPart> estimateModelMemory(const Json &manifest, int64_t context,
                                            uint64_t kvElementBytes) {
  const uint64_t rows = context > 0 ? uint64_t(context) : 0;
  uint64_t weights = 0;
  const std::set<int64_t> read = weightsRead(manifest);
  const Json &entries = arrayAt(manifest, "weights");
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!read.count(int64_t(i)) || !entries[i].is_object())
      continue;
    uint64_t bytes = dtypeBytes(entries[i]);
    for (const Json &extent : arrayAt(entries[i], "shape"))
      bytes = saturatingMul(bytes, extent.is_number_integer() && extent.get<int64_t>() > 0
                                       ? extent.get<uint64_t>()
                                       : 0);
    weights = saturatingAdd(weights, bytes);
  }
  // Prompts run in chunks of prefill_rows rows: the buffers hold one chunk.
  const uint64_t chunk = nonNegative(manifest, "prefill_rows");
  const uint64_t bufferRows = chunk > 0 && chunk < rows ? chunk : rows;
  uint64_t activations = 0;
  const Json buffers = manifest.is_object() ? manifest.value("buffers", Json()) : Json();
  for (const Json &rowBytes : arrayAt(buffers, "row_bytes"))
    if (rowBytes.is_number_integer() && rowBytes.get<int64_t>() > 0)
      activations =
          saturatingAdd(activations, saturatingMul(bufferRows, rowBytes.get<uint64_t>()));
  activations = saturatingAdd(activations, saturatingMul(bufferRows, 4)); // token ids
  uint64_t workspace = 0; // one, of the largest kernel's (runtime/KernelABI.h)
  for (const Json &kernel : arrayAt(manifest, "kernels"))
    if (kernel.is_object())
      workspace = std::max(workspace, nonNegative(kernel, "workspace_bytes"));
  activations = saturatingAdd(activations, workspace);
  const Json config = manifest.is_object() ? manifest.value("config", Json()) : Json();
  uint64_t cache = saturatingMul(nonNegative(config, "num_hidden_layers"), rows);
  cache = saturatingMul(cache, nonNegative(config, "num_key_value_heads"));
  cache = saturatingMul(cache, nonNegative(config, "head_dim"));
  cache = saturatingMul(saturatingMul(cache, kvElementBytes), 2); // keys and values
  // The logits are one of the activation buffers; what forward() copies out
  // is the prompt's rows, not the context's.
  return {{"weights", weights}, {"KV cache", cache}, {"activation buffers", activations}};
}

} // namespace q3::runtime
