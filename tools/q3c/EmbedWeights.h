//===- EmbedWeights.h - q3c compile --embed-weights -----------------------===//
//
// The weights a compiled model's kernels read, computed at compile time from
// the model folder's checkpoint exactly as q3run computes them at load (the
// runtime's own weight-plan evaluation: gains, concatenations, column
// blocks), laid out page-aligned in one mapped artifact section that q3run
// binds in place.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Artifact.h"
#include "runtime/Manifest.h"

#include <cstdint>
#include <string>
#include <vector>

namespace q3::tools {

struct EmbeddedWeightsPayload {
  manifest::EmbeddedWeights index; // what goes into the manifest
  std::vector<uint8_t> bytes;      // the mapped section's payload
};

/// Evaluates `m`'s weight plan on the checkpoint in `modelFolder`. Throws
/// runtime::LoadError naming the file or tensor when it does not fit.
EmbeddedWeightsPayload embedWeights(const manifest::Manifest &m, const std::string &modelFolder,
                                    std::vector<std::string> *warnings);

/// Adds the weights of `modelFolder` to an artifact about to be written:
/// the index into `m`, the mapped section (viewing `storage`) to `sections`.
void addEmbeddedWeights(manifest::Manifest &m, const std::string &modelFolder,
                        std::vector<runtime::ArtifactSection> &sections,
                        EmbeddedWeightsPayload &storage, std::vector<std::string> *warnings);

} // namespace q3::tools
