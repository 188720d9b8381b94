//===- CompareCommand.cpp - q3run compare ----------------------------------===//
//
// Times two or more artifacts in one process, in turns: each round runs a
// prefill of -p tokens and -g decode steps on every model, the order
// rotating from round to round, and the report is each one's median rate
// and the median and quartiles of its per-round ratio to the first's. On a
// machine whose speed drifts from minute to minute (a shared VM: the same
// kernel at 175-254 GFLOP/s within an hour), separate `q3run bench` runs of
// two artifacts compare the minutes they ran in as much as the artifacts;
// ratios taken within one round do not.
//
//===----------------------------------------------------------------------===//
#include "tools/q3run/Commands.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace q3::q3run {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

/// The q-quantile of `values` (nearest rank).
double quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, size_t(q * double(values.size())))];
}

/// Rates of one model, per round.
struct Rates {
  std::vector<double> prefill, decode;
};

/// Tokens per second of `model` running `tokens` as one prefill from
/// position 0 (the model reset first), then `decode` one step each.
void runRound(runtime::Model &model, const std::vector<int32_t> &prompt,
              const std::vector<int32_t> &decode, Rates &rates) {
  model.reset();
  Clock::time_point start = Clock::now();
  if (!prompt.empty()) {
    model.forward(prompt, runtime::Model::Logits::Last);
    rates.prefill.push_back(double(prompt.size()) /
                            std::chrono::duration<double>(Clock::now() - start).count());
  }
  start = Clock::now();
  for (int32_t token : decode)
    model.forward({token}, runtime::Model::Logits::Last);
  if (!decode.empty())
    rates.decode.push_back(double(decode.size()) /
                           std::chrono::duration<double>(Clock::now() - start).count());
}

struct Ratios {
  double median, lowerQuartile, upperQuartile;
};

Ratios ratiosTo(const std::vector<double> &rates, const std::vector<double> &first) {
  std::vector<double> ratios;
  for (size_t r = 0; r < rates.size(); ++r)
    ratios.push_back(rates[r] / first[r]);
  return {quantile(ratios, 0.5), quantile(ratios, 0.25), quantile(ratios, 0.75)};
}

json ratiosJson(const Ratios &r) {
  return {{"median", r.median},
          {"lower_quartile", r.lowerQuartile},
          {"upper_quartile", r.upperQuartile}};
}

std::string rateCell(const std::vector<double> &rates, const std::vector<double> &first) {
  if (rates.empty())
    return "-";
  const Ratios r = ratiosTo(rates, first);
  return fmt::format("{:.2f} ({:.3f}, {:.3f}-{:.3f})", quantile(rates, 0.5), r.median,
                     r.lowerQuartile, r.upperQuartile);
}

} // namespace

int compareCommand(const std::vector<std::string> &args) {
  CommonOptions common;
  std::vector<std::string> others;
  int64_t promptTokens = 128, generatedTokens = 32, rounds = 10, seed = 1234;
  bool jsonOutput = false;
  ArgParser parser(
      "q3run compare",
      "q3run compare MODEL.q3 --with OTHER.q3 [--with ...] --weights MODEL_DIR [-p N] [-g N] "
      "[-r N] [--json] [--threads N] [--ctx N]",
      "Loads every artifact into this process and times them in turns: each of -r\n"
      "rounds runs a prefill of -p random tokens and -g decode steps on each model,\n"
      "in an order that rotates. Prints each one's median tokens/s and the median and\n"
      "quartiles of its per-round ratio to MODEL.q3's: the way to compare builds on a\n"
      "machine whose speed drifts between minutes. --weights and the other options\n"
      "apply to every artifact.");
  addCommonOptions(parser, common);
  parser.addStringList({"--with"}, &others, "OTHER.q3",
                       "an artifact to compare with MODEL.q3 (repeatable; at least one)");
  parser.addInt({"-p", "--n-prompt"}, &promptTokens, "N", "prompt tokens per round (default 128)",
                0, std::numeric_limits<int32_t>::max());
  parser.addInt({"-g", "--n-gen"}, &generatedTokens, "N",
                "decode steps per round after the prompt (default 32)", 0,
                std::numeric_limits<int32_t>::max());
  parser.addInt({"-r", "--rounds"}, &rounds, "N", "rounds (default 10)", 1, 1000000);
  parser.addInt({"--seed"}, &seed, "N", "seed of the random tokens (default 1234)", 0,
                std::numeric_limits<int64_t>::max());
  parser.addFlag({"--json"}, &jsonOutput, "print one JSON object instead of the table");
  if (!parser.parse(args))
    return 0;
  if (others.empty())
    throw UsageError("nothing to compare MODEL.q3 with: give --with OTHER.q3");
  if (promptTokens + generatedTokens == 0)
    throw UsageError("-p and -g are both 0: nothing to measure");

  std::vector<std::string> paths = {common.artifact};
  paths.insert(paths.end(), others.begin(), others.end());
  std::vector<std::unique_ptr<runtime::Model>> models;
  for (const std::string &path : paths) {
    CommonOptions options = common;
    options.artifact = path;
    models.push_back(loadModel(options));
    if (promptTokens + generatedTokens > models.back()->contextLength())
      throw UsageError(fmt::format("-p {} + -g {} positions do not fit in {}'s context of {} "
                                   "(--ctx)",
                                   promptTokens, generatedTokens, path,
                                   models.back()->contextLength()));
    if (models.back()->vocabSize() != models.front()->vocabSize())
      throw UsageError(fmt::format("{} has a vocabulary of {} tokens, {} of {}: not the same model",
                                   path, models.back()->vocabSize(), paths.front(),
                                   models.front()->vocabSize()));
  }
  std::mt19937_64 random(static_cast<uint64_t>(seed));
  const uint64_t vocab = uint64_t(models.front()->vocabSize());
  std::vector<int32_t> prompt(static_cast<size_t>(promptTokens));
  std::vector<int32_t> decode(static_cast<size_t>(generatedTokens));
  for (int32_t &id : prompt)
    id = int32_t(random() % vocab);
  for (int32_t &id : decode)
    id = int32_t(random() % vocab);

  // A warm-up round (first touches, cold caches), then the timed ones.
  std::vector<Rates> rates(models.size());
  for (size_t round = 0; round <= size_t(rounds); ++round)
    for (size_t turn = 0; turn < models.size(); ++turn) {
      const size_t m = (turn + round) % models.size();
      Rates warmUp;
      runRound(*models[m], prompt, decode, round == 0 ? warmUp : rates[m]);
      // The last model's workers spin a little before they sleep: let them.
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }

  if (jsonOutput) {
    json entries = json::array();
    for (size_t m = 0; m < models.size(); ++m) {
      json entry = {{"artifact", paths[m]}};
      if (!rates[m].prefill.empty()) {
        entry["prefill_tok_s"] = quantile(rates[m].prefill, 0.5);
        entry["prefill_ratio"] = ratiosJson(ratiosTo(rates[m].prefill, rates[0].prefill));
      }
      if (!rates[m].decode.empty()) {
        entry["decode_tok_s"] = quantile(rates[m].decode, 0.5);
        entry["decode_ratio"] = ratiosJson(ratiosTo(rates[m].decode, rates[0].decode));
      }
      entries.push_back(entry);
    }
    std::printf("%s\n", json({{"prompt_tokens", promptTokens},
                              {"generated_tokens", generatedTokens},
                              {"rounds", rounds},
                              {"threads", models.front()->threads()},
                              {"artifacts", entries}})
                            .dump(2)
                            .c_str());
    return 0;
  }
  std::printf("| artifact | pp%lld t/s (ratio to the first: median, quartiles) | tg%lld t/s "
              "(ratio to the first: median, quartiles) |\n| --- | ---: | ---: |\n",
              static_cast<long long>(promptTokens), static_cast<long long>(generatedTokens));
  for (size_t m = 0; m < models.size(); ++m)
    std::printf("| %s | %s | %s |\n", paths[m].c_str(),
                rateCell(rates[m].prefill, rates[0].prefill).c_str(),
                rateCell(rates[m].decode, rates[0].decode).c_str());
  std::printf("%lld rounds after a warm-up, %d threads; in each round every artifact ran in turn, "
              "the order rotating\n",
              static_cast<long long>(rounds), models.front()->threads());
  return 0;
}

} // namespace q3::q3run
