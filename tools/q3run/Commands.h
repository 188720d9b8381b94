//===- Commands.h - q3run's commands ---------------------------------------===//
#pragma once

#include "tools/q3run/ArgParser.h"

#include "runtime/Model.h"
#include "runtime/WeightPlan.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace q3::q3run {

/// Options every command takes.
struct CommonOptions {
  std::string artifact;
  std::string weights;
  int64_t threads = 0; // 0: all cores
  int64_t context = 0; // 0: min(max_position_embeddings, 4096)
  int64_t device = -1; // Vulkan artifacts: the device index; -1: the default
  std::string requireSignature; // a public key file, or empty
  std::string kernelBuild;      // --kernel-build: "" (time the variants), "default" or a variant
  bool lockWeights = false;     // --mlock
  bool copyWeights = false;     // --copy-weights
  bool mapWeights = false;      // --map-weights
  bool reserveContext = false;  // --reserve-ctx
};

/// Adds MODEL.q3, --weights, --threads, --ctx, --reserve-ctx, --device,
/// --mlock, --copy-weights and --map-weights to `parser`.
void addCommonOptions(ArgParser &parser, CommonOptions &options);

/// Model::load with the common options (threads capped to the CPUs, the
/// signature required when asked), reporting weight-plan progress.
std::unique_ptr<runtime::Model> loadModel(const CommonOptions &options,
                                          const runtime::WeightPlanProgress &progress = {});

/// Index of the largest value in row `row` of a [rows, vocab] matrix; the
/// first index wins ties (as std::max_element).
int32_t argmaxRow(const std::vector<float> &logits, int64_t vocab, int64_t row);

/// `q3run MODEL.q3 ...`: logits, argmax per position, greedy generation.
/// `args` excludes the program name. Returns the exit code; throws on errors.
int runCommand(const std::vector<std::string> &args);

/// `q3run --list-devices`: the Vulkan devices, one per line.
int listDevicesCommand();

/// `q3run bench MODEL.q3 ...`: prefill and decode speed against the machine's
/// memory bandwidth. `args` excludes "q3run bench".
int benchCommand(const std::vector<std::string> &args);

/// `q3run compare MODEL.q3 --with OTHER.q3 ...`: artifacts loaded side by
/// side and timed in turns. `args` excludes "q3run compare".
int compareCommand(const std::vector<std::string> &args);

} // namespace q3::q3run
