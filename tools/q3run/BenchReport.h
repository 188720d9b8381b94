//===- BenchReport.h - what q3run bench measured, as a table or JSON -------===//
//
// BenchCommand.cpp measures; this prints. The table is llama-bench's, with
// the read bandwidth, the load and the memory below it; --json prints the
// same numbers as one object (docs/q3run.md lists its fields).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Model.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace q3::q3run {

/// The process's CPU time (all threads) and page faults over an interval.
struct ProcessTimes {
  double userSeconds = 0, systemSeconds = 0;
  int64_t pageFaults = 0; // minor and major
};

/// One phase (prefill or decode) timed per kernel, after the timed runs.
struct PhaseProfile {
  std::string phase;
  int64_t tokens = 0;     // positions the phase ran (decode: steps)
  double wallSeconds = 0; // the whole phase, kernels and what runs between them
  std::vector<runtime::KernelProfile> kernels;
};

/// Everything one `q3run bench` measured; the model it ran says the rest
/// (device, threads, KV cache, the placement of its weights).
struct BenchResult {
  // What ran.
  int64_t promptTokens = 0, generatedTokens = 0, repetitions = 0, seed = 0;
  // The load and the first prompt after it.
  double loadSeconds = 0;
  ProcessTimes load;
  std::optional<double> firstPrefillSeconds;
  int64_t peakRssBytes = -1; // -1: unknown
  // The timed runs: one rate per repetition, and the bandwidth probed
  // before each decode run and after the last.
  std::vector<double> prefillRates, decodeRates, bandwidths;
  bool deviceFloor = false; // the probe read the device's memory, not the host's
  int64_t bandwidthBytes = 0;
  std::optional<double> bandwidthHugeShare;
  int probeReads = 0; // reads per probe; each probe reports the best
  // A plain read of the memory the weights lie in.
  std::optional<double> weightsReadGBs;
  int64_t weightsReadBytes = 0;
  std::vector<PhaseProfile> phases; // --profile

  // Derived: the medians and the probes (the report derives the shares).
  double bandwidth() const;     // the median probe, GB/s
  double bestBandwidth() const; // the best probe, GB/s
  std::optional<double> prefillRate() const;
  std::optional<double> decodeRate() const;
};

/// `--json`'s object.
nlohmann::json benchJson(const BenchResult &result, const runtime::Model &model);

/// The table and the lines below it, to stdout.
void printBench(const BenchResult &result, const runtime::Model &model);

} // namespace q3::q3run
