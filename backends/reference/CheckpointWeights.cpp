//===- CheckpointWeights.cpp ----------------------------------------------===//
#include "backends/reference/CheckpointWeights.h"

#include "runtime/TensorView.h"

namespace q3::reference {

static std::vector<runtime::ParamSpec> toParamSpecs(const std::vector<ir::ParamInfo> &params) {
  std::vector<runtime::ParamSpec> specs;
  for (const ir::ParamInfo &p : params)
    specs.push_back({p.name, p.shape});
  return specs;
}

CheckpointWeights::CheckpointWeights(const std::string &modelPath,
                                     const std::vector<ir::ParamInfo> &params, bool tiedEmbeddings,
                                     std::vector<std::string> *warnings)
    : checkpoint(runtime::Checkpoint::open(modelPath)),
      bound(runtime::bindWeights(checkpoint, toParamSpecs(params), tiedEmbeddings, warnings)) {}

const std::vector<float> &CheckpointWeights::get(const std::string &name) {
  auto it = converted.find(name);
  if (it != converted.end())
    return it->second;
  auto tensor = bound.byName.find(name);
  if (tensor == bound.byName.end())
    throw runtime::LoadError("weight '" + name + "' was not bound");
  return converted.emplace(name, runtime::readAsF32(*tensor->second)).first->second;
}

} // namespace q3::reference
