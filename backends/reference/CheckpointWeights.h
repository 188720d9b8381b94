//===- CheckpointWeights.h - a checkpoint's weights as f32 for the reference ===//
#pragma once

#include "ir/Params.h"
#include "runtime/Checkpoint.h"
#include "runtime/WeightBinder.h"

#include <map>
#include <string>
#include <vector>

namespace q3::reference {

/// Binds a Hugging Face checkpoint to the params a module needs (every shape
/// checked up front) and hands out f32 copies, converted on first use.
class CheckpointWeights {
public:
  CheckpointWeights(const std::string &modelPath, const std::vector<ir::ParamInfo> &params,
                    bool tiedEmbeddings, std::vector<std::string> *warnings);

  const std::vector<float> &get(const std::string &name);

private:
  runtime::Checkpoint checkpoint;
  runtime::BoundWeights bound;
  std::map<std::string, std::vector<float>> converted;
};

} // namespace q3::reference
