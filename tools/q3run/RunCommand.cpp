//===- RunCommand.cpp - q3run MODEL.q3 ... ---------------------------------===//
//
// The same output contract as `q3c eval`: without -n, one line per position
// "position T: token ID -> argmax A (logit L)"; --logits writes all
// positions' logits as a [T, vocab] float32 .npy; -n N generates N tokens
// greedily (prefill, then N-1 single-token decode steps on the KV cache) and
// prints "ids: a b c". With both -n and --logits the model is reset after
// generating and the prompt's logits are written.
//
//===----------------------------------------------------------------------===//
#include "tools/q3run/Commands.h"

#include "runtime/AtomicFile.h"
#include "runtime/LogitFormat.h"
#include "runtime/Npy.h"
#include "runtime/ResourceLimits.h"
#include "runtime/TokenList.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include <fmt/format.h>

namespace q3::q3run {

void addCommonOptions(ArgParser &parser, CommonOptions &options) {
  parser.addPositional("MODEL.q3", &options.artifact, "the artifact `q3c compile` wrote");
  parser.addString({"--weights"}, &options.weights, "MODEL_DIR",
                   "the Hugging Face checkpoint folder (config.json, *.safetensors); not for an "
                   "artifact compiled with --embed-weights, which carries its own");
  parser.addInt({"--threads"}, &options.threads, "N",
                "threads, the caller included (default and most: the CPUs this process may use)",
                0, 1 << 16);
  parser.addString({"--require-signature"}, &options.requireSignature, "KEY.pub",
                   "refuse an artifact not signed with this key (q3c compile --sign; q3c keygen)");
  parser.addInt({"--ctx"}, &options.context, "N",
                "KV cache positions (default: min(max_position_embeddings, 4096))", 1,
                std::numeric_limits<int32_t>::max());
  parser.addFlag({"--reserve-ctx"}, &options.reserveContext,
                 "CPU artifacts: give the KV cache room for the whole context from the first token "
                 "(by default it has room for 256 positions and doubles as the context fills, "
                 "moving what it holds: less memory and a faster first token for short contexts, "
                 "a pause when it grows)");
  parser.addString({"--kernel-build"}, &options.kernelBuild, "NAME",
                   "portable artifacts (q3c compile --cpu=x86-64-v4): run this build of each "
                   "product (default, or a variant such as avx512bf16_8) instead of timing them at "
                   "load and taking the fastest; attention follows the products' build");
  parser.addInt({"--device"}, &options.device, "N",
                "Vulkan artifacts: the device to run on (q3run --list-devices; default: the "
                "first discrete GPU, else integrated, else a CPU device)",
                0, 1 << 16);
  parser.addFlag({"--mlock"}, &options.lockWeights,
                 "CPU artifacts: lock the weights in memory, so memory pressure cannot evict them "
                 "(the checkpoint is read in place, as page cache) and stall generation on disk "
                 "reads; needs the locked-memory limit (ulimit -l) to hold them");
  parser.addFlag({"--copy-weights"}, &options.copyWeights,
                 "always copy the checkpoint into memory on transparent huge pages at load (by "
                 "default, where the page cache holds parts of it in small pages, which slow "
                 "the kernels, CPU artifacts read those parts back from storage into huge ones "
                 "once, and copy it only where most of it stays small; docs/q3run.md)");
  parser.addFlag({"--map-weights"}, &options.mapWeights,
                 "always read the checkpoint in place from the page cache as it finds it, "
                 "never copy it nor read it back (less memory; processes that map the same "
                 "checkpoint share it)");
}

std::unique_ptr<runtime::Model> loadModel(const CommonOptions &options,
                                          const runtime::WeightPlanProgress &progress) {
  runtime::ModelOptions modelOptions;
  // More threads than CPUs only makes the spinning workers wait for each
  // other (and thousands of them can exhaust memory): cap, and say so.
  const int cpus = runtime::availableCpus();
  modelOptions.threads = options.threads == 0 ? cpus : int(options.threads);
  if (options.threads > cpus) {
    std::fflush(stdout);
    std::fprintf(stderr,
                 "q3run: warning: --threads %lld is more than the %d CPUs this process may use; "
                 "using %d\n",
                 static_cast<long long>(options.threads), cpus, cpus);
    modelOptions.threads = cpus;
  }
  modelOptions.contextLength = options.context;
  modelOptions.reserveContext = options.reserveContext;
  modelOptions.device = int(options.device);
  modelOptions.kernelBuild = options.kernelBuild;
  modelOptions.lockWeights = options.lockWeights;
  if (options.copyWeights && options.mapWeights)
    throw UsageError("--copy-weights and --map-weights: choose one");
  if (options.copyWeights)
    modelOptions.checkpointPlacement = runtime::FilePlacement::HugePageCopy;
  if (options.mapWeights)
    modelOptions.checkpointPlacement = runtime::FilePlacement::Mapped;
  if (!options.requireSignature.empty())
    modelOptions.requiredSigner = runtime::readPublicKey(options.requireSignature);
  modelOptions.progress = progress;
  return runtime::Model::load(options.artifact, options.weights, modelOptions);
}

int32_t argmaxRow(const std::vector<float> &logits, int64_t vocab, int64_t row) {
  const float *begin = logits.data() + row * vocab;
  return int32_t(std::max_element(begin, begin + vocab) - begin);
}

int runCommand(const std::vector<std::string> &args) {
  CommonOptions common;
  std::string tokenText;
  std::string logitsPath;
  int64_t generate = 0;
  ArgParser parser("q3run",
                   "q3run MODEL.q3 --weights MODEL_DIR --tokens 1,2,3 [--logits OUT.npy] [-n N] "
                   "[--threads N] [--ctx N]\n"
                   "       q3run bench MODEL.q3 --weights MODEL_DIR [-p N] [-g N] [-r N] [--json] "
                   "(see 'q3run bench --help')\n"
                   "       q3run compare MODEL.q3 --with OTHER.q3 --weights MODEL_DIR [...]  "
                   "artifacts timed in turns (see 'q3run compare --help')\n"
                   "       q3run MODEL.q3 --weights MODEL_DIR --prompt TEXT [...]  text in, text out "
                   "(see 'q3run generate --help')\n"
                   "       q3run chat MODEL.q3 --weights MODEL_DIR [...]           interactive chat "
                   "(see 'q3run chat --help')\n"
                   "       q3run tokenize | detokenize | template ...             the tokenizer and "
                   "chat template alone",
                   "Runs a compiled Qwen3 model on the token ids given. Without -n it prints each\n"
                   "position's argmax; --logits writes all positions' logits as a [T, vocab]\n"
                   "float32 .npy; -n N generates N tokens greedily and prints \"ids: ...\".");
  addCommonOptions(parser, common);
  parser.addString({"--tokens"}, &tokenText, "IDS", "prompt token ids, as in 1,2,3",
                   /*required=*/true);
  parser.addString({"--logits"}, &logitsPath, "OUT.npy",
                   "write the prompt's logits [T, vocab] as float32 .npy");
  parser.addInt({"-n"}, &generate, "N",
                "generate N tokens greedily (prefill, then N-1 decode steps)", 0,
                std::numeric_limits<int32_t>::max());
  if (!parser.parse(args))
    return 0;

  const std::vector<int32_t> prompt = runtime::parseTokenIds(tokenText);
  runtime::refuseOutputThatIsInput("--logits", logitsPath, {common.artifact, common.weights});
  const int64_t promptLength = int64_t(prompt.size());
  // Positions the KV cache must hold: the prompt, then each generated token
  // but the last, which is never fed back.
  const int64_t needed = promptLength + std::max<int64_t>(generate - 1, 0);
  auto checkContext = [&](int64_t context) {
    if (needed > context)
      throw UsageError(fmt::format(
          "{} prompt tokens{} need {} positions, more than the context of {} (--ctx)", promptLength,
          generate > 0 ? fmt::format(" and -n {}", generate) : std::string(), needed, context));
  };
  if (common.context > 0)
    checkContext(common.context);

  std::unique_ptr<runtime::Model> model = loadModel(common);
  checkContext(model->contextLength());
  const int64_t vocab = model->vocabSize();

  if (generate > 0) {
    std::vector<int32_t> ids;
    ids.reserve(size_t(generate));
    const std::vector<float> *logits = &model->forward(prompt, runtime::Model::Logits::Last);
    ids.push_back(argmaxRow(*logits, vocab, 0));
    while (int64_t(ids.size()) < generate) {
      logits = &model->forward({ids.back()}, runtime::Model::Logits::Last);
      ids.push_back(argmaxRow(*logits, vocab, 0));
    }
    std::string line = "ids:";
    for (int32_t id : ids)
      line += " " + std::to_string(id);
    std::puts(line.c_str());
    if (logitsPath.empty())
      return 0;
    model->reset();
  }

  const std::vector<float> &logits = model->forward(prompt);
  if (!logitsPath.empty())
    runtime::writeNpyF32(logitsPath, {promptLength, vocab}, logits);
  if (generate == 0)
    for (int64_t t = 0; t < promptLength; ++t) {
      const int32_t best = argmaxRow(logits, vocab, t);
      // The spelling `q3c eval` prints too (runtime/LogitFormat.h).
      fmt::print("position {}: token {} -> argmax {} (logit {})\n", t, prompt[size_t(t)], best,
                 runtime::formatLogit(logits[size_t(t * vocab + best)]));
    }
  return 0;
}

} // namespace q3::q3run
