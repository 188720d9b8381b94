//===- BenchCommand.cpp - q3run bench --------------------------------------===//
//
// Like llama-bench: times Model::load, a prefill of -p random tokens from
// position 0 and -g single-token decode steps after it, -r times (reset()
// between repetitions), and reports the median of each next to the machine's
// measured read bandwidth. Decode reads every weight once per token and the
// keys and values of the positions it sees, so decodeBytesPerToken() at the
// runs' positions x decode tokens/s over the measured bandwidth says how
// close decode runs to the memory limit. Method: docs/q3run.md.
//
//===----------------------------------------------------------------------===//
#include "tools/q3run/BenchReport.h"
#include "tools/q3run/Commands.h"

#include "runtime/MemoryBandwidth.h"
#include "runtime/ThreadPool.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>
#include <optional>
#include <random>

#include <fmt/format.h>

namespace q3::q3run {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kBandwidthBytes = int64_t(1) << 30;
/// Reads of the bandwidth buffer per probe; a probe reports the best.
constexpr int kProbeReads = 3;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The process's peak resident set: VmHWM of /proc/self/status, else
// getrusage's ru_maxrss.
int64_t peakRssBytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0)
      return std::stoll(line.substr(6)) * 1024; // "VmHWM:   123456 kB"
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) != 0)
    return -1;
  return int64_t(usage.ru_maxrss) * 1024; // Linux reports kilobytes
}

// The process's CPU time (all threads) and page faults so far: a load's
// share in the kernel says how much of it went to faulting in fresh memory.
ProcessTimes processTimes() {
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) != 0)
    return {};
  auto seconds = [](const timeval &t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; };
  return {seconds(usage.ru_utime), seconds(usage.ru_stime),
          int64_t(usage.ru_minflt) + int64_t(usage.ru_majflt)};
}

/// --profile: prefill and decode run once more, each kernel timed.
std::vector<PhaseProfile> profilePhases(runtime::Model &model, const std::vector<int32_t> &prompt,
                                        const std::vector<int32_t> &decodeTokens) {
  std::vector<PhaseProfile> phases;
  model.reset();
  if (!prompt.empty()) {
    model.setProfiling(true);
    const Clock::time_point start = Clock::now();
    model.forward(prompt, runtime::Model::Logits::Last);
    const double wall = secondsSince(start);
    phases.push_back({"prefill", int64_t(prompt.size()), wall, model.profile()});
  }
  if (!decodeTokens.empty()) {
    model.setProfiling(true);
    const Clock::time_point start = Clock::now();
    for (int32_t id : decodeTokens)
      model.forward({id}, runtime::Model::Logits::Last);
    const double wall = secondsSince(start);
    phases.push_back({"decode", int64_t(decodeTokens.size()), wall, model.profile()});
  }
  model.setProfiling(false);
  model.reset();
  return phases;
}

/// Where decode's floor comes from: the host's memory (a STREAM-like read on
/// the thread pool) for CPU artifacts, the device's for Vulkan ones (the
/// artifact's read kernel, timed with device timestamps).
class BandwidthFloor {
public:
  explicit BandwidthFloor(runtime::Model &model) : model_(model) {
    int64_t bytes = 0;
    if (model.deviceReadBandwidth(1, &bytes)) {
      bytes_ = bytes;
      return;
    }
    cpu_.emplace(model.pool(), kBandwidthBytes);
    bytes_ = cpu_->bytes();
    hugePageShare_ = cpu_->hugePageShare();
  }
  double measure() {
    if (cpu_)
      return cpu_->measure(kProbeReads).gigabytesPerSecond;
    return model_.deviceReadBandwidth(kProbeReads).value_or(0.0);
  }
  bool onDevice() const { return !cpu_; }
  int64_t bytes() const { return bytes_; }
  /// Host memory the probe holds (counted out of the peak RSS).
  int64_t hostBytes() const { return cpu_ ? cpu_->bytes() : 0; }
  /// The host probe's buffer on huge pages, as the weights decode streams
  /// (where smaps says; nullopt on a device).
  std::optional<double> hugePageShare() const { return hugePageShare_; }

private:
  runtime::Model &model_;
  std::optional<runtime::ReadBandwidthProbe> cpu_;
  int64_t bytes_ = 0;
  std::optional<double> hugePageShare_;
};

// The timed repetitions, into `runs`. Each decode run is bracketed by bandwidth probes: the shared
// machine's bandwidth drifts by tens of percent within seconds, so the floor is sampled when the
// decode runs are, not only before or after them all.
void runRepetitions(runtime::Model &model, BandwidthFloor &probe,
                    const std::vector<int32_t> &prompt, const std::vector<int32_t> &decodeTokens,
                    BenchResult &runs) {
  for (int64_t r = 0; r < runs.repetitions; ++r) {
    model.reset();
    if (!prompt.empty()) {
      const Clock::time_point start = Clock::now();
      model.forward(prompt, runtime::Model::Logits::Last);
      runs.prefillRates.push_back(double(prompt.size()) / secondsSince(start));
    }
    runs.bandwidths.push_back(probe.measure());
    if (!decodeTokens.empty()) {
      const Clock::time_point start = Clock::now();
      for (int32_t id : decodeTokens)
        model.forward({id}, runtime::Model::Logits::Last);
      runs.decodeRates.push_back(double(decodeTokens.size()) / secondsSince(start));
    }
  }
  runs.bandwidths.push_back(probe.measure());
  model.reset();
}

} // namespace

int benchCommand(const std::vector<std::string> &args) {
  CommonOptions common;
  int64_t promptTokens = 128;
  int64_t generatedTokens = 64;
  int64_t repetitions = 3;
  int64_t seed = 1234;
  bool jsonOutput = false;
  bool profile = false;
  ArgParser parser(
      "q3run bench",
      "q3run bench MODEL.q3 --weights MODEL_DIR [-p N] [-g N] [-r N] [--json] [--profile] "
      "[--threads N] [--ctx N]",
      "Measures load time, prefill tokens/s (-p random tokens from position 0) and\n"
      "decode tokens/s (-g single-token steps after that prefill), the median of -r\n"
      "repetitions, and compares decode traffic with the machine's read bandwidth.");
  addCommonOptions(parser, common);
  parser.addInt({"-p", "--n-prompt"}, &promptTokens, "N", "prompt tokens to prefill (default 128)",
                0, std::numeric_limits<int32_t>::max());
  parser.addInt({"-g", "--n-gen"}, &generatedTokens, "N",
                "decode steps after the prefill (default 64)", 0,
                std::numeric_limits<int32_t>::max());
  parser.addInt({"-r", "--repetitions"}, &repetitions, "N",
                "repetitions; medians are reported (default 3)", 1, 1000000);
  parser.addInt({"--seed"}, &seed, "N",
                "seed of the random prompt and decode tokens (default 1234)", 0,
                std::numeric_limits<int64_t>::max());
  parser.addFlag({"--json"}, &jsonOutput, "print one JSON object instead of the table");
  parser.addFlag({"--profile"}, &profile,
                 "after the timed runs, run prefill and decode once more timing each kernel");
  if (!parser.parse(args))
    return 0;

  if (promptTokens + generatedTokens == 0)
    throw UsageError("-p and -g are both 0: nothing to measure");
  const int64_t needed = promptTokens + generatedTokens;
  auto checkContext = [&](int64_t context) {
    if (needed > context)
      throw UsageError(fmt::format("-p {} + -g {} = {} positions do not fit in the context of {} "
                                   "(--ctx)",
                                   promptTokens, generatedTokens, needed, context));
  };
  if (common.context > 0)
    checkContext(common.context);

  BenchResult result;
  result.promptTokens = promptTokens;
  result.generatedTokens = generatedTokens;
  result.repetitions = repetitions;
  result.seed = seed;
  result.probeReads = kProbeReads;

  const Clock::time_point loadStart = Clock::now();
  const ProcessTimes beforeLoad = processTimes();
  std::unique_ptr<runtime::Model> model = loadModel(common);
  result.loadSeconds = secondsSince(loadStart);
  const ProcessTimes afterLoad = processTimes();
  result.load = {afterLoad.userSeconds - beforeLoad.userSeconds,
                 afterLoad.systemSeconds - beforeLoad.systemSeconds,
                 afterLoad.pageFaults - beforeLoad.pageFaults};
  checkContext(model->contextLength());

  // Deterministic tokens: mt19937_64's sequence is fixed by the standard; the
  // modulo keeps it independent of the library's distributions.
  std::mt19937_64 random(static_cast<uint64_t>(seed));
  const uint64_t vocab = uint64_t(model->vocabSize());
  std::vector<int32_t> prompt(static_cast<size_t>(promptTokens));
  for (int32_t &id : prompt)
    id = int32_t(random() % vocab);
  std::vector<int32_t> decodeTokens(static_cast<size_t>(generatedTokens));
  for (int32_t &id : decodeTokens)
    id = int32_t(random() % vocab);

  // Warm-up (as llama-bench): one prefill and one decode step, out of the
  // repetitions, so first-touch page faults and cold caches stay out of the
  // first one. The prefill is timed all the same: it is what a user's first
  // prompt after the load costs.
  if (promptTokens > 0) {
    const Clock::time_point start = Clock::now();
    model->forward(prompt, runtime::Model::Logits::Last);
    result.firstPrefillSeconds = secondsSince(start);
  }
  if (generatedTokens > 0)
    model->forward({decodeTokens.front()}, runtime::Model::Logits::Last);

  // The load's and warm-up's peak, before the bandwidth buffer exists; the
  // runs' peak less that buffer, which stays resident through them.
  const int64_t loadPeakRss = peakRssBytes();
  result.peakRssBytes = loadPeakRss;
  {
    BandwidthFloor probe(*model);
    result.deviceFloor = probe.onDevice();
    result.bandwidthBytes = probe.bytes();
    result.bandwidthHugeShare = probe.hugePageShare();
    runRepetitions(*model, probe, prompt, decodeTokens, result);
    if (loadPeakRss >= 0)
      result.peakRssBytes = std::max(loadPeakRss, peakRssBytes() - probe.hostBytes());
  }
  // The memory the weights lie in, read plainly: beside the probe's fresh
  // buffer it tells the pages the weights got from the kernels' speed. The
  // floor is the median probe, as decode's rate is the median run; the best
  // probe is reported beside it (a best read against a median run measures
  // the neighbours' quietest moment as much as the kernels).
  result.weightsReadGBs = model->weightReadBandwidth(kProbeReads, &result.weightsReadBytes);
  if (profile)
    result.phases = profilePhases(*model, prompt, decodeTokens);

  if (jsonOutput)
    std::puts(benchJson(result, *model).dump(2).c_str());
  else
    printBench(result, *model);
  return 0;
}

} // namespace q3::q3run
