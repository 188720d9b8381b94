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
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

namespace q3::q3run {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int64_t kBandwidthBytes = int64_t(1) << 30;
/// Reads of the bandwidth buffer per probe; a probe reports the best.
constexpr int kProbeReads = 3;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
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
struct ProcessTimes {
  double userSeconds = 0, systemSeconds = 0;
  int64_t pageFaults = 0; // minor and major
};

ProcessTimes processTimes() {
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) != 0)
    return {};
  auto seconds = [](const timeval &t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; };
  return {seconds(usage.ru_utime), seconds(usage.ru_stime),
          int64_t(usage.ru_minflt) + int64_t(usage.ru_majflt)};
}

// "1.19 GB" (1 GB = 1e9 bytes, as bandwidth is counted).
std::string formatBytes(double bytes) {
  if (bytes >= 1e9)
    return fmt::format("{:.2f} GB", bytes / 1e9);
  if (bytes >= 1e6)
    return fmt::format("{:.1f} MB", bytes / 1e6);
  if (bytes >= 1e3)
    return fmt::format("{:.1f} kB", bytes / 1e3);
  return fmt::format("{:.0f} B", bytes);
}

// "qwen3 0.6B-shape bf16": the parameter count the config implies (the weights
// may be random, hence "-shape"), or the weight bytes when the manifest has no
// recognizable config.
std::string describeModel(const manifest::ModelConfig &c) {
  const double h = double(c.hiddenSize), headDim = double(c.headDim);
  const double perLayer = h * double(c.numAttentionHeads) * headDim * 2  // q, o
                          + h * double(c.numKeyValueHeads) * headDim * 2 // k, v
                          + 3 * h * double(c.intermediateSize)           // gate, up, down
                          + 2 * h + 2 * headDim;                         // norms, q/k norms
  const double params = double(c.vocabSize) * h * (c.tieWordEmbeddings ? 1 : 2) + h +
                        double(c.numHiddenLayers) * perLayer;
  std::string name = params >= 1e8   ? fmt::format("qwen3 {:.1f}B-shape", params / 1e9)
                     : params >= 1e6 ? fmt::format("qwen3 {:.0f}M-shape", params / 1e6)
                                     : fmt::format("qwen3 {:.0f}K-shape", params / 1e3);
  if (!c.torchDtype.empty())
    name += " " + c.torchDtype;
  return name;
}

// A markdown table with padded columns, like llama-bench's.
void printTable(const std::vector<std::vector<std::string>> &rows) {
  std::vector<size_t> widths(rows.front().size(), 0);
  for (const auto &row : rows)
    for (size_t c = 0; c < row.size(); ++c)
      widths[c] = std::max(widths[c], row[c].size());
  auto printRow = [&](const std::vector<std::string> &row) {
    std::string line = "|";
    for (size_t c = 0; c < row.size(); ++c)
      line += fmt::format(c == 0 ? " {:<{}} |" : " {:>{}} |", row[c], widths[c]);
    std::puts(line.c_str());
  };
  printRow(rows.front());
  std::string rule = "|";
  for (size_t c = 0; c < widths.size(); ++c)
    rule += c == 0 ? " " + std::string(widths[c], '-') + " |"
                   : " " + std::string(widths[c] - 1, '-') + ": |";
  std::puts(rule.c_str());
  for (size_t r = 1; r < rows.size(); ++r)
    printRow(rows[r]);
}

json orNull(const std::optional<double> &value) { return value ? json(*value) : json(nullptr); }

/// One phase (prefill or decode) timed per kernel, after the timed runs.
struct PhaseProfile {
  std::string phase;
  int64_t tokens = 0; // positions the phase ran (decode: steps)
  double wallSeconds = 0; // the whole phase, kernels and what runs between them
  std::vector<runtime::KernelProfile> kernels;
};

json profileJson(const PhaseProfile &phase) {
  json kernels = json::array();
  for (const runtime::KernelProfile &k : phase.kernels)
    kernels.push_back({{"kernel", k.kernel},
                       {"calls", k.calls},
                       {"seconds", k.seconds},
                       {"weight_bytes", k.weightBytes},
                       {"cache_bytes", k.cacheBytes},
                       {"multiply_adds", k.multiplyAdds}});
  return {{"phase", phase.phase},
          {"tokens", phase.tokens},
          {"wall_seconds", phase.wallSeconds},
          {"kernels", kernels}};
}

// Per kernel: share of the phase's time and, for kernels that read weights
// or the KV cache, the rate they streamed them at; for the products, the
// rate they computed at (GFLOP/s: two per multiply-add), which is what
// bounds a prefill.
void printProfile(const PhaseProfile &phase) {
  double total = 0;
  for (const runtime::KernelProfile &k : phase.kernels)
    total += k.seconds;
  std::vector<std::vector<std::string>> rows = {{"kernel", "calls", "ms", "% of " + phase.phase,
                                                 "weights read", "KV read", "GB/s", "GFLOP/s"}};
  auto rate = [](double amount, double seconds) {
    return amount > 0 && seconds > 0 ? fmt::format("{:.1f}", amount / seconds / 1e9)
                                     : std::string("-");
  };
  for (const runtime::KernelProfile &k : phase.kernels)
    rows.push_back({k.kernel, std::to_string(k.calls), fmt::format("{:.2f}", k.seconds * 1e3),
                    fmt::format("{:.1f}%", total > 0 ? 100 * k.seconds / total : 0.0),
                    k.weightBytes ? formatBytes(double(k.weightBytes)) : "-",
                    k.cacheBytes ? formatBytes(double(k.cacheBytes)) : "-",
                    rate(double(k.weightBytes + k.cacheBytes), k.seconds),
                    rate(2.0 * double(k.multiplyAdds), k.seconds)});
  fmt::print("\n{} of {} tokens, {:.2f} ms in kernels, {:.2f} ms in all ({:.1f}% between "
             "kernels):\n",
             phase.phase, phase.tokens, total * 1e3, phase.wallSeconds * 1e3,
             phase.wallSeconds > 0 ? 100 * (1 - total / phase.wallSeconds) : 0.0);
  printTable(rows);
}

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

/// {bytes, seconds, slow_storage, huge_share_after}, or null when the load
/// did not read the checkpoint back into huge folios.
json rereadJson(const runtime::CheckpointPlacement &placement) {
  if (!placement.reread)
    return nullptr;
  return {{"bytes", placement.reread->bytes},
          {"seconds", placement.reread->seconds},
          {"slow_storage", placement.reread->slowStorage},
          {"huge_share_after", orNull(placement.hugeShareAfterReread)}};
}

json placementJson(const std::optional<runtime::CheckpointPlacement> &placement) {
  if (!placement)
    return nullptr; // the artifact embeds its weights
  const auto &share = placement->pageCacheHugeShare;
  return {
      {"placement", placement->placement == runtime::FilePlacement::Mapped ? "mapped" : "copied"},
      {"chosen", placement->chosen},
      {"page_cache_huge_share", share ? json(*share) : json(nullptr)},
      {"in_place_bytes", placement->inPlaceBytes},
      {"reread", rereadJson(*placement)}};
}

/// "checkpoint copied onto huge pages at load (chosen: the page cache held
/// 13% of it in huge folios)".
std::string describePlacement(const runtime::CheckpointPlacement &placement) {
  const std::string where = placement.placement == runtime::FilePlacement::Mapped
                                ? "checkpoint read in place from the page cache"
                                : "checkpoint copied onto huge pages at load";
  std::string why = placement.chosen ? "chosen" : "asked for";
  if (placement.pageCacheHugeShare)
    why += fmt::format(": the page cache held {:.0f}% of it in huge folios",
                       *placement.pageCacheHugeShare * 100);
  if (placement.reread) {
    const runtime::RereadResult &reread = *placement.reread;
    why += reread.slowStorage
               ? fmt::format("; storage read {} in {:.2f} s, too slow to read it all back",
                             formatBytes(double(reread.bytes)), reread.seconds)
               : fmt::format("; read {} back from storage in {:.2f} s",
                             formatBytes(double(reread.bytes)), reread.seconds);
    if (placement.hugeShareAfterReread)
      why += fmt::format(", then {:.0f}% huge", *placement.hugeShareAfterReread * 100);
  }
  return fmt::format("{} ({}); the kernels read {} of it in place", where, why,
                     formatBytes(double(placement.inPlaceBytes)));
}

/// The timed repetitions and the read bandwidth probed between them.
struct TimedRuns {
  std::vector<double> prefillRates, decodeRates; // tokens/s, one per repetition
  std::vector<double> bandwidths;                // GB/s: before each decode run, and after the last
};

// Each decode run is bracketed by bandwidth probes: the shared machine's
// bandwidth drifts by tens of percent within seconds, so the floor is sampled
// when the decode runs are, not only before or after them all.
TimedRuns runRepetitions(runtime::Model &model, BandwidthFloor &probe,
                         const std::vector<int32_t> &prompt,
                         const std::vector<int32_t> &decodeTokens, int64_t repetitions) {
  TimedRuns runs;
  for (int64_t r = 0; r < repetitions; ++r) {
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
  return runs;
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

  const Clock::time_point loadStart = Clock::now();
  const ProcessTimes beforeLoad = processTimes();
  std::unique_ptr<runtime::Model> model = loadModel(common);
  const double loadSeconds = secondsSince(loadStart);
  const ProcessTimes afterLoad = processTimes();
  const ProcessTimes load = {afterLoad.userSeconds - beforeLoad.userSeconds,
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
  std::optional<double> firstPrefillSeconds;
  if (promptTokens > 0) {
    const Clock::time_point start = Clock::now();
    model->forward(prompt, runtime::Model::Logits::Last);
    firstPrefillSeconds = secondsSince(start);
  }
  if (generatedTokens > 0)
    model->forward({decodeTokens.front()}, runtime::Model::Logits::Last);

  // The load's and warm-up's peak, before the bandwidth buffer exists; the
  // runs' peak less that buffer, which stays resident through them.
  const int64_t loadPeakRss = peakRssBytes();
  TimedRuns runs;
  int64_t peakRss = loadPeakRss;
  bool deviceFloor = false;
  int64_t bandwidthBytes = 0;
  std::optional<double> bandwidthHugeShare;
  {
    BandwidthFloor probe(*model);
    deviceFloor = probe.onDevice();
    bandwidthBytes = probe.bytes();
    bandwidthHugeShare = probe.hugePageShare();
    runs = runRepetitions(*model, probe, prompt, decodeTokens, repetitions);
    if (loadPeakRss >= 0)
      peakRss = std::max(loadPeakRss, peakRssBytes() - probe.hostBytes());
  }
  // The memory the weights lie in, read plainly: beside the probe's fresh
  // buffer it tells the pages the weights got from the kernels' speed.
  int64_t weightsReadBytes = 0;
  const std::optional<double> weightsRead =
      model->weightReadBandwidth(kProbeReads, &weightsReadBytes);
  std::vector<PhaseProfile> phases;
  if (profile)
    phases = profilePhases(*model, prompt, decodeTokens);

  // The floor is the median probe, as decode's rate is the median run; the
  // best probe is reported beside it (a best read against a median run
  // measures the neighbours' quietest moment as much as the kernels).
  const double bandwidth = median(runs.bandwidths);
  const double bestBandwidth = *std::max_element(runs.bandwidths.begin(), runs.bandwidths.end());
  std::optional<double> prefillRate, decodeRate, decodeGBs, fraction, fractionOfBest,
      fractionOfWeightsRead;
  if (!runs.prefillRates.empty())
    prefillRate = median(runs.prefillRates);
  // The decode steps see promptTokens + 1 .. promptTokens + generatedTokens
  // positions; their traffic grows linearly with them, so the mean step's
  // is the mean of the first's and the last's.
  const int64_t bytesPerToken = model->decodeBytesPerToken();
  const double trafficPerToken =
      0.5 *
      double(model->decodeBytesPerToken(promptTokens + 1) +
             model->decodeBytesPerToken(promptTokens + std::max<int64_t>(1, generatedTokens)));
  if (!runs.decodeRates.empty()) {
    decodeRate = median(runs.decodeRates);
    decodeGBs = trafficPerToken * *decodeRate / 1e9;
    fraction = *decodeGBs / bandwidth;
    fractionOfBest = *decodeGBs / bestBandwidth;
    if (weightsRead)
      fractionOfWeightsRead = *decodeGBs / *weightsRead;
  }
  const std::string name = describeModel(model->config());

  if (jsonOutput) {
    json out = {
        {"model", name},
        {"device", model->deviceName()},
        {"threads", model->threads()},
        {"context_length", model->contextLength()},
        {"prompt_tokens", promptTokens},
        {"generated_tokens", generatedTokens},
        {"repetitions", repetitions},
        {"seed", seed},
        {"load_seconds", loadSeconds},
        {"load_cpu_seconds", {{"user", load.userSeconds}, {"system", load.systemSeconds}}},
        {"load_page_faults", load.pageFaults},
        {"first_prefill_seconds", orNull(firstPrefillSeconds)},
        {"prefill_tok_s", orNull(prefillRate)},
        {"prefill_tok_s_runs", runs.prefillRates},
        {"decode_tok_s", orNull(decodeRate)},
        {"decode_tok_s_runs", runs.decodeRates},
        {"decode_bytes_per_token", bytesPerToken},
        {"decode_traffic_bytes_per_token", trafficPerToken},
        {"weight_bytes", model->weightBytes()},
        {"decode_gb_s", orNull(decodeGBs)},
        {"measured_bandwidth_gb_s", bandwidth},
        {"best_bandwidth_gb_s", bestBandwidth},
        {"bandwidth_gb_s_runs", runs.bandwidths},
        {"bandwidth_buffer_bytes", bandwidthBytes},
        {"bandwidth_buffer_huge_page_share", orNull(bandwidthHugeShare)},
        {"bandwidth_repetitions", kProbeReads},
        {"fraction_of_bandwidth", orNull(fraction)},
        {"fraction_of_best_bandwidth", orNull(fractionOfBest)},
        {"weights_read_gb_s", orNull(weightsRead)},
        {"weights_read_bytes", weightsRead ? json(weightsReadBytes) : json(nullptr)},
        {"fraction_of_weights_read", orNull(fractionOfWeightsRead)},
        {"peak_rss_bytes", peakRss},
        {"locked_bytes", model->lockedBytes()},
        {"kernel_variants", model->kernelVariantChoices()},
        {"checkpoint", placementJson(model->checkpointPlacement())},
        {"kv_cache",
         {{"bytes", model->kvCacheBytes()},
          {"positions", model->kvCachePositions()},
          {"huge_pages", model->kvCacheOnHugePages()}}},
    };
    if (profile) {
      out["profile"] = json::array();
      for (const PhaseProfile &phase : phases)
        out["profile"].push_back(profileJson(phase));
    }
    std::puts(out.dump(2).c_str());
    return 0;
  }

  const std::string threads = std::to_string(model->threads());
  std::vector<std::vector<std::string>> rows = {
      {"model", "threads", "test", "t/s", "bytes/token", "GB/s", "% of bandwidth"}};
  if (prefillRate)
    rows.push_back({name, threads, fmt::format("pp{}", promptTokens),
                    fmt::format("{:.2f}", *prefillRate), "-", "-", "-"});
  if (decodeRate)
    rows.push_back({name, threads, fmt::format("tg{}", generatedTokens),
                    fmt::format("{:.2f}", *decodeRate), formatBytes(trafficPerToken),
                    fmt::format("{:.1f}", *decodeGBs), fmt::format("{:.0f}%", *fraction * 100)});
  printTable(rows);
  if (deviceFloor)
    fmt::print("device read bandwidth: {:.1f} GB/s ({}: the artifact's read kernel over {}, "
               "median of {} probes around the decode runs, each the best of {} reads: {:.1f} "
               "GB/s)\n",
               bandwidth, model->deviceName(), formatBytes(double(bandwidthBytes)),
               runs.bandwidths.size(), kProbeReads, fmt::join(runs.bandwidths, ", "));
  else
    fmt::print("machine read bandwidth: {:.1f} GB/s (STREAM-like{}, median of {} probes around "
               "the decode runs, each the best of {} reads: {:.1f} GB/s)\n",
               bandwidth,
               bandwidthHugeShare ? fmt::format(" on {:.0f}% huge pages", *bandwidthHugeShare * 100)
                                  : std::string(),
               runs.bandwidths.size(), kProbeReads, fmt::join(runs.bandwidths, ", "));
  if (fractionOfBest)
    fmt::print("against the best probe, {:.1f} GB/s, decode runs at {:.0f}%\n", bestBandwidth,
               *fractionOfBest * 100);
  if (weightsRead)
    fmt::print("the weights where they lie: a plain read of the {} the kernels read, {:.1f} GB/s "
               "(the best of {} reads){}\n",
               formatBytes(double(weightsReadBytes)), *weightsRead, kProbeReads,
               fractionOfWeightsRead
                   ? fmt::format("; decode runs at {:.0f}% of it", *fractionOfWeightsRead * 100)
                   : std::string());
  if (decodeRate)
    fmt::print("bytes/token: {} at position 0 (weights, activations, the token's keys and "
               "values: q3c dump --stats), and {} more of the KV cache attention reads at the "
               "runs' positions {} to {}\n",
               formatBytes(double(bytesPerToken)),
               formatBytes(trafficPerToken - double(bytesPerToken)), promptTokens,
               promptTokens + generatedTokens - 1);
  fmt::print("load {:.2f} s (CPU, all threads: {:.2f} s user, {:.2f} s in the kernel; {} page "
             "faults){}{}; peak RSS {}\n",
             loadSeconds, load.userSeconds, load.systemSeconds, load.pageFaults,
             model->lockedBytes() ? fmt::format(", weights locked in memory ({})",
                                                formatBytes(double(model->lockedBytes())))
                                  : std::string(),
             firstPrefillSeconds
                 ? fmt::format("; the first prompt after it {:.2f} s", *firstPrefillSeconds)
                 : std::string(),
             peakRss >= 0 ? formatBytes(double(peakRss)) : std::string("unknown"));
  if (const auto &placement = model->checkpointPlacement())
    fmt::print("{}\n", describePlacement(*placement));
  const std::string growth =
      model->kvCachePositions() < model->contextLength()
          ? fmt::format(", room for {} after the runs (it doubles as the context fills)",
                        model->kvCachePositions())
          : std::string();
  fmt::print("KV cache {} for {} positions{}, {}\n", formatBytes(double(model->kvCacheBytes())),
             model->contextLength(), growth,
             model->kvCacheOnHugePages()
                 ? "on huge pages (each capacity resident from its first token: decode "
                   "attention streams it faster)"
                 : "resident as positions fill");
  if (!model->kernelVariantChoices().empty()) {
    std::vector<std::string> choices;
    for (const auto &[kernel, variant] : model->kernelVariantChoices())
      choices.push_back(kernel + " " + variant);
    fmt::print("kernel builds picked at load (products timed, attention like them): {}\n",
               fmt::join(choices, ", "));
  }
  fmt::print("medians of {} repetitions after one warm-up; decode GB/s = bytes/token x t/s\n",
             repetitions);
  for (const PhaseProfile &phase : phases)
    printProfile(phase);
  return 0;
}

} // namespace q3::q3run
