//===- MemoryEstimate.h - what a q3c command will need, before it starts --===//
//
// A config can ask for more memory than the machine has (a 100000-layer IR,
// a 32B model's f32 weights in `eval`, a random 14B checkpoint), which used to
// end in "LLVM ERROR: out of memory" and a stack dump. Each command estimates
// its peak from the config and refuses what does not fit the process's
// limits (runtime/ResourceLimits.h), with the estimate in the message.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "frontend/ModelConfig.h"

#include <cstdint>

namespace q3::tools {

enum class MemoryUse {
  Graph,       // dump: the graph and its optimized copy
  Compile,     // compile: the IR, the manifest and the kernels
  Eval,        // eval: f32 weights, the KV cache and activations for `rows` positions
  RandomModel, // random-model: every tensor in the checkpoint's dtype
};

/// Throws runtime::ResourceError when the estimate exceeds the memory this
/// process may use. `rows`: positions an eval runs (prompt + generated).
void requireMemoryFor(MemoryUse use, const frontend::ModelConfig &config, int64_t rows = 0);

} // namespace q3::tools
