//===- BenchReport.cpp - q3run bench's table and JSON ----------------------===//
#include "tools/q3run/BenchReport.h"

#include "runtime/ResourceLimits.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace q3::q3run {
namespace {

using json = nlohmann::json;

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// "1.19 GB" (1 GB = 1e9 bytes, as bandwidth is counted).
std::string formatBytes(double bytes) { return runtime::formatMemory(uint64_t(std::llround(bytes))); }

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

/// {bytes, seconds, slow_storage, no_huge_folios, huge_share_after}, or null when the load
/// did not read the checkpoint back into huge folios.
json rereadJson(const runtime::CheckpointPlacement &placement) {
  if (!placement.reread)
    return nullptr;
  return {{"bytes", placement.reread->bytes},
          {"seconds", placement.reread->seconds},
          {"slow_storage", placement.reread->slowStorage},
          {"no_huge_folios", placement.reread->noHugeFolios},
          {"huge_share_after", orNull(placement.hugeShareAfterReread)}};
}

json placementJson(const std::optional<runtime::CheckpointPlacement> &placement) {
  if (!placement)
    return nullptr; // not this kind of weights (or not measured: Vulkan)
  const auto &share = placement->pageCacheHugeShare;
  return {
      {"placement", placement->placement == runtime::FilePlacement::Mapped ? "mapped" : "copied"},
      {"chosen", placement->chosen},
      {"page_cache_huge_share", share ? json(*share) : json(nullptr)},
      {"in_place_bytes", placement->inPlaceBytes},
      {"reread", rereadJson(*placement)}};
}

/// "checkpoint copied onto huge pages at load (chosen: the page cache held
/// 13% of it in huge folios)"; `what` is "checkpoint" or the like.
std::string describePlacement(const runtime::CheckpointPlacement &placement,
                              const std::string &what) {
  const std::string where = placement.placement == runtime::FilePlacement::Mapped
                                ? what + " read in place from the page cache"
                                : what + " copied onto huge pages at load";
  std::string why = placement.chosen ? "chosen" : "asked for";
  if (placement.pageCacheHugeShare)
    why += fmt::format(": the page cache held {:.0f}% of it in huge folios",
                       *placement.pageCacheHugeShare * 100);
  if (placement.reread) {
    const runtime::RereadResult &reread = *placement.reread;
    const std::string read = formatBytes(double(reread.bytes));
    if (reread.slowStorage)
      why += fmt::format("; storage read {} in {:.2f} s, too slow to read it all back", read,
                         reread.seconds);
    else if (reread.noHugeFolios)
      why += fmt::format("; {} read back in {:.2f} s came back in small folios again (the "
                         "kernel caches this file in small ones), so the rest was left",
                         read, reread.seconds);
    else
      why += fmt::format("; read {} back from storage in {:.2f} s", read, reread.seconds);
    if (placement.hugeShareAfterReread)
      why += fmt::format(", then {:.0f}% huge", *placement.hugeShareAfterReread * 100);
  }
  return fmt::format("{} ({}); the kernels read {} of it in place", where, why,
                     formatBytes(double(placement.inPlaceBytes)));
}

} // namespace

double BenchResult::bandwidth() const { return median(bandwidths); }

double BenchResult::bestBandwidth() const {
  return *std::max_element(bandwidths.begin(), bandwidths.end());
}

std::optional<double> BenchResult::prefillRate() const {
  return prefillRates.empty() ? std::nullopt : std::optional<double>(median(prefillRates));
}

std::optional<double> BenchResult::decodeRate() const {
  return decodeRates.empty() ? std::nullopt : std::optional<double>(median(decodeRates));
}

namespace {

/// The decode steps' mean traffic per token (weights, activations and the
/// KV cache at the runs' positions, bytes), decode's rate as traffic, and its
/// share of each read it is set beside.
struct DecodeShares {
  double trafficPerToken = 0;
  std::optional<double> gigabytesPerSecond, ofBandwidth, ofBestBandwidth, ofWeightsRead;
};

DecodeShares decodeShares(const BenchResult &result, const runtime::Model &model) {
  DecodeShares shares;
  // The decode steps see promptTokens + 1 .. promptTokens + generatedTokens
  // positions; their traffic grows linearly with them, so the mean step's is
  // the mean of the first's and the last's.
  shares.trafficPerToken =
      0.5 * double(model.decodeBytesPerToken(result.promptTokens + 1) +
                   model.decodeBytesPerToken(result.promptTokens +
                                             std::max<int64_t>(1, result.generatedTokens)));
  const std::optional<double> rate = result.decodeRate();
  if (!rate)
    return shares;
  const double gbs = shares.trafficPerToken * *rate / 1e9;
  shares.gigabytesPerSecond = gbs;
  shares.ofBandwidth = gbs / result.bandwidth();
  shares.ofBestBandwidth = gbs / result.bestBandwidth();
  if (result.weightsReadGBs)
    shares.ofWeightsRead = gbs / *result.weightsReadGBs;
  return shares;
}

} // namespace

json benchJson(const BenchResult &result, const runtime::Model &model) {
  const DecodeShares shares = decodeShares(result, model);
  json out = {
      {"model", describeModel(model.config())},
      {"device", model.deviceName()},
      {"threads", model.threads()},
      {"context_length", model.contextLength()},
      {"prompt_tokens", result.promptTokens},
      {"generated_tokens", result.generatedTokens},
      {"repetitions", result.repetitions},
      {"seed", result.seed},
      {"load_seconds", result.loadSeconds},
      {"load_cpu_seconds",
       {{"user", result.load.userSeconds}, {"system", result.load.systemSeconds}}},
      {"load_page_faults", result.load.pageFaults},
      {"first_prefill_seconds", orNull(result.firstPrefillSeconds)},
      {"prefill_tok_s", orNull(result.prefillRate())},
      {"prefill_tok_s_runs", result.prefillRates},
      {"decode_tok_s", orNull(result.decodeRate())},
      {"decode_tok_s_runs", result.decodeRates},
      {"decode_bytes_per_token", model.decodeBytesPerToken()},
      {"decode_traffic_bytes_per_token", shares.trafficPerToken},
      {"weight_bytes", model.weightBytes()},
      {"decode_gb_s", orNull(shares.gigabytesPerSecond)},
      {"measured_bandwidth_gb_s", result.bandwidth()},
      {"best_bandwidth_gb_s", result.bestBandwidth()},
      {"bandwidth_gb_s_runs", result.bandwidths},
      {"bandwidth_buffer_bytes", result.bandwidthBytes},
      {"bandwidth_buffer_huge_page_share", orNull(result.bandwidthHugeShare)},
      {"bandwidth_repetitions", result.probeReads},
      {"fraction_of_bandwidth", orNull(shares.ofBandwidth)},
      {"fraction_of_best_bandwidth", orNull(shares.ofBestBandwidth)},
      {"weights_read_gb_s", orNull(result.weightsReadGBs)},
      {"weights_read_bytes", result.weightsReadGBs ? json(result.weightsReadBytes) : json(nullptr)},
      {"fraction_of_weights_read", orNull(shares.ofWeightsRead)},
      {"peak_rss_bytes", result.peakRssBytes},
      {"locked_bytes", model.lockedBytes()},
      {"kernel_variants", model.kernelVariantChoices()},
      {"checkpoint", placementJson(model.checkpointPlacement())},
      {"embedded_weights", placementJson(model.embeddedWeightsPlacement())},
      {"kv_cache",
       {{"bytes", model.kvCacheBytes()},
        {"positions", model.kvCachePositions()},
        {"huge_pages", model.kvCacheOnHugePages()}}},
  };
  if (!result.phases.empty()) {
    out["profile"] = json::array();
    for (const PhaseProfile &phase : result.phases)
      out["profile"].push_back(profileJson(phase));
  }
  return out;
}

namespace {

void printRates(const BenchResult &result, const runtime::Model &model,
                const DecodeShares &shares) {
  const std::string name = describeModel(model.config());
  const std::string threads = std::to_string(model.threads());
  std::vector<std::vector<std::string>> rows = {
      {"model", "threads", "test", "t/s", "bytes/token", "GB/s", "% of bandwidth"}};
  if (const std::optional<double> rate = result.prefillRate())
    rows.push_back({name, threads, fmt::format("pp{}", result.promptTokens),
                    fmt::format("{:.2f}", *rate), "-", "-", "-"});
  if (const std::optional<double> rate = result.decodeRate())
    rows.push_back({name, threads, fmt::format("tg{}", result.generatedTokens),
                    fmt::format("{:.2f}", *rate), formatBytes(shares.trafficPerToken),
                    fmt::format("{:.1f}", *shares.gigabytesPerSecond),
                    fmt::format("{:.0f}%", *shares.ofBandwidth * 100)});
  printTable(rows);
}

void printBandwidth(const BenchResult &result, const runtime::Model &model,
                    const DecodeShares &shares) {
  if (result.deviceFloor)
    fmt::print("device read bandwidth: {:.1f} GB/s ({}: the artifact's read kernel over {}, "
               "median of {} probes around the decode runs, each the best of {} reads: {:.1f} "
               "GB/s)\n",
               result.bandwidth(), model.deviceName(), formatBytes(double(result.bandwidthBytes)),
               result.bandwidths.size(), result.probeReads, fmt::join(result.bandwidths, ", "));
  else
    fmt::print("machine read bandwidth: {:.1f} GB/s (STREAM-like{}, median of {} probes around "
               "the decode runs, each the best of {} reads: {:.1f} GB/s)\n",
               result.bandwidth(),
               result.bandwidthHugeShare
                   ? fmt::format(" on {:.0f}% huge pages", *result.bandwidthHugeShare * 100)
                   : std::string(),
               result.bandwidths.size(), result.probeReads, fmt::join(result.bandwidths, ", "));
  if (shares.ofBestBandwidth)
    fmt::print("against the best probe, {:.1f} GB/s, decode runs at {:.0f}%\n",
               result.bestBandwidth(), *shares.ofBestBandwidth * 100);
  if (result.weightsReadGBs)
    fmt::print("the weights where they lie: a plain read of the {} the kernels read, {:.1f} GB/s "
               "(the best of {} reads){}\n",
               formatBytes(double(result.weightsReadBytes)), *result.weightsReadGBs,
               result.probeReads,
               shares.ofWeightsRead
                   ? fmt::format("; decode runs at {:.0f}% of it", *shares.ofWeightsRead * 100)
                   : std::string());
  if (result.decodeRate()) {
    const int64_t bytesPerToken = model.decodeBytesPerToken();
    fmt::print("bytes/token: {} at position 0 (weights, activations, the token's keys and "
               "values: q3c dump --stats), and {} more of the KV cache attention reads at the "
               "runs' positions {} to {}\n",
               formatBytes(double(bytesPerToken)),
               formatBytes(shares.trafficPerToken - double(bytesPerToken)),
               result.promptTokens, result.promptTokens + result.generatedTokens - 1);
  }
}

void printMemory(const BenchResult &result, const runtime::Model &model) {
  fmt::print(
      "load {:.2f} s (CPU, all threads: {:.2f} s user, {:.2f} s in the kernel; {} page "
      "faults){}{}; peak RSS {}\n",
      result.loadSeconds, result.load.userSeconds, result.load.systemSeconds,
      result.load.pageFaults,
      model.lockedBytes()
          ? fmt::format(", weights locked in memory ({})", formatBytes(double(model.lockedBytes())))
          : std::string(),
      result.firstPrefillSeconds
          ? fmt::format("; the first prompt after it {:.2f} s", *result.firstPrefillSeconds)
          : std::string(),
      result.peakRssBytes >= 0 ? formatBytes(double(result.peakRssBytes)) : std::string("unknown"));
  if (const auto &placement = model.checkpointPlacement())
    fmt::print("{}\n", describePlacement(*placement, "checkpoint"));
  if (const auto &placement = model.embeddedWeightsPlacement())
    fmt::print("{}\n", describePlacement(*placement, "artifact's embedded weights"));
  const std::string growth =
      model.kvCachePositions() < model.contextLength()
          ? fmt::format(", room for {} after the runs (it doubles as the context fills)",
                        model.kvCachePositions())
          : std::string();
  fmt::print("KV cache {} for {} positions{}, {}\n", formatBytes(double(model.kvCacheBytes())),
             model.contextLength(), growth,
             model.kvCacheOnHugePages()
                 ? "on huge pages (each capacity resident from its first token: decode "
                   "attention streams it faster)"
                 : "resident as positions fill");
  if (!model.kernelVariantChoices().empty()) {
    std::vector<std::string> choices;
    for (const auto &[kernel, variant] : model.kernelVariantChoices())
      choices.push_back(kernel + " " + variant);
    fmt::print("kernel builds picked at load (products timed, attention like them): {}\n",
               fmt::join(choices, ", "));
  }
}

} // namespace

void printBench(const BenchResult &result, const runtime::Model &model) {
  const DecodeShares shares = decodeShares(result, model);
  printRates(result, model, shares);
  printBandwidth(result, model, shares);
  printMemory(result, model);
  fmt::print("medians of {} repetitions after one warm-up; decode GB/s = bytes/token x t/s\n",
             result.repetitions);
  for (const PhaseProfile &phase : result.phases)
    printProfile(phase);
}

} // namespace q3::q3run
