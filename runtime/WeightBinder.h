// Matching what a compiled model needs (ParamSpecs) against a checkpoint.
#pragma once

#include "runtime/Checkpoint.h"
#include "runtime/TensorView.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace q3::runtime {

struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;
};

struct BoundWeights {
  std::map<std::string, const TensorView *> byName; // points into the Checkpoint
};

// Checks every ParamSpec is present with exactly that shape (and a supported
// dtype) and throws LoadError naming the first that is not: missing tensors
// list up to 3 similar checkpoint names. With `tiedEmbeddings`, a checkpoint
// "lm_head.weight" that no spec asks for is silently ignored. Other unused
// tensors are reported in `warnings` (if non-null): one line each, at most 5,
// then "... and N more".
BoundWeights bindWeights(const Checkpoint &, const std::vector<ParamSpec> &, bool tiedEmbeddings,
                         std::vector<std::string> *warnings);

} // namespace q3::runtime
