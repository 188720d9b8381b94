//===- CompileCommand.cpp - q3c compile -----------------------------------===//
//
// Config -> graph -> default pipeline -> the CPU target stage (every
// decision recorded in the IR) -> CPU kernels -> one artifact. No weights
// are needed: the runtime binds them at load time, unless --embed-weights
// puts them into the artifact.
//
//===----------------------------------------------------------------------===//
#include "tools/q3c/CommandLine.h"
#include "tools/q3c/Commands.h"
#include "tools/q3c/EmbedWeights.h"
#include "tools/q3c/MemoryEstimate.h"

#include "backends/cpu/CompileModel.h"
#include "backends/cpu/DecodeTuner.h"
#include "backends/cpu/Tuner.h"
#include "backends/cpu/passes/CpuPasses.h"
#include "backends/vulkan/CompileModel.h"
#include "frontend/Presets.h"
#include "ir/BuildGraph.h"
#include "runtime/AtomicFile.h"
#include "runtime/Signature.h"
#include "runtime/text/ArtifactText.h"
#include "runtime/text/Terminal.h"

#include "mlir/IR/MLIRContext.h"
#include <fmt/format.h>

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>
#include <stdexcept>

namespace q3::tools {
namespace {

/// Whether `k` multiplies a weight (a product), not two activations (attention).
bool multipliesAWeight(const manifest::Kernel &k) {
  return std::any_of(k.operands.begin(), k.operands.end(),
                     [](const manifest::Slot &s) { return s.kind == manifest::SlotKind::Weight; });
}

/// "prefill f32", or "prefill amx+f32" when some products cannot use the
/// first, then ", attention <its>": the prefill instructions the kernels use;
/// a portable artifact's variants follow as "f32 or amx|avx512bf16 at load".
std::string matmulSummary(const manifest::Manifest &m) {
  std::set<std::string> products, attention, productVariants, attentionVariants;
  for (const manifest::Kernel &k : m.kernels) {
    if (k.matmul.empty())
      continue;
    const bool product = multipliesAWeight(k);
    (product ? products : attention).insert(k.matmul);
    for (const manifest::KernelVariant &v : k.variants)
      (product ? productVariants : attentionVariants).insert(v.matmul);
  }
  auto join = [](const std::set<std::string> &choices, const char *separator) {
    std::string text;
    for (const std::string &c : choices)
      text += (text.empty() ? "" : separator) + c;
    return text;
  };
  auto describe = [&](const std::set<std::string> &defaults, std::set<std::string> variants) {
    for (const std::string &d : defaults)
      variants.erase(d);
    const std::string text = defaults.empty() ? "f32" : join(defaults, "+");
    return variants.empty() ? text : text + " or " + join(variants, "|") + " at load";
  };
  return "prefill " + describe(products, productVariants) +
         (attention.empty() ? "" : ", attention " + describe(attention, attentionVariants));
}

/// Where the products' weights are packed, for the summary line.
std::string packingSummary(const manifest::Manifest &m) {
  std::set<std::string> choices;
  for (const manifest::Kernel &k : m.kernels)
    if (k.weightPacking == manifest::WeightPacking::AtLoad)
      choices.insert("at load");
    else if (k.weightPacking == manifest::WeightPacking::PerCall)
      choices.insert("per call");
  std::string text;
  for (const std::string &c : choices)
    text += (text.empty() ? "" : " and ") + c;
  return text.empty() ? "" : ", weights packed " + text;
}

/// -v: what the tuner measured and chose for the prefill.
void printPrefillTuning(const cpu::TuningResult &result) {
  llvm::outs() << "tuned the prefill on " << cpu::resolveCpuTarget("host").llvmCpu << " ("
               << cpu::describeProvenance(result.provenance)
               << "), GFLOP/s of a 128-row SwiGLU product on one thread:\n";
  for (const cpu::PrefillVariant &v : result.measured)
    llvm::outs() << fmt::format("  {:<10} {} rows  {:6.1f}{}\n",
                                cpu::prefillMatmulName(v.matmul), v.tileRows, v.gflops,
                                v.matmul == result.best.matmul &&
                                        v.tileRows == result.best.tileRows
                                    ? "  <- chosen"
                                    : "");
}

/// -v: what packing the weights at load would cost, how the two layouts
/// decoded, and where the weights go.
void printWeightPackingTuning(const cpu::WeightPackingTuning &tuning) {
  llvm::outs() << fmt::format(
      "measured the load's weight packing ({}): {:.1f} GB/s into fresh memory on {} threads, so "
      "this model's {:.2f} GB of product weights would take ~{:.2f} s to pack at load (budget "
      "{:.1f} s)\n",
      cpu::describeProvenance(tuning.provenance), tuning.packGbPerSecond, tuning.threads,
      double(tuning.packedBytes) / 1e9, tuning.estimatedSeconds, cpu::kPackAtLoadBudgetSeconds);
  if (tuning.race)
    llvm::outs() << fmt::format(
        "  raced decode's products in both layouts ({}): per call {:.1f} GB/s, packed {:.1f} GB/s "
        "(the packed one's ratio to per call in the same rounds: median {:.3f}, lower quartile "
        "{:.3f})\n",
        cpu::describeProvenance(tuning.race->provenance), tuning.race->perCallGbPerSecond,
        tuning.race->atLoadGbPerSecond, tuning.race->atLoadOverPerCall.median,
        tuning.race->atLoadOverPerCall.lowerQuartile);
  llvm::outs() << "  weights "
               << (tuning.chosen == "at_load" ? "packed at load" : "read in place, packed per call")
               << "\n";
}

/// -v: what the tuner measured for attention's prefill.
void printAttentionTuning(const cpu::AttentionTuning &tuning) {
  llvm::outs() << "tuned the prefill attention (" << cpu::describeProvenance(tuning.provenance)
               << "), GFLOP/s of one layer's 512-row causal prefill on one thread:\n";
  for (const cpu::AttentionRate &r : tuning.measured) {
    const std::string name =
        r.bf16 ? fmt::format("avx512bf16, {} row set{}", r.rowSets, r.rowSets > 1 ? "s" : "")
               : "f32";
    const bool chosen = r.bf16 == tuning.chosen.bf16 && r.rowSets == tuning.chosen.rowSets;
    llvm::outs() << fmt::format("  {:<25} {:6.1f}{}\n", name, r.gflops,
                                chosen ? "  <- chosen" : "");
  }
}

/// -v: what the tuner measured for decode attention's splits.
void printDecodeSplitTuning(const cpu::DecodeSplitTuning &tuning) {
  llvm::outs() << "tuned decode attention's splits, streams and prefetch ("
               << cpu::describeProvenance(tuning.provenance)
               << "), GB/s of KV cache in one decode step over " << tuning.positions
               << " positions on " << tuning.threads
               << " threads (the median round; the median and lower quartile of the ratios "
                  "to the default in the same rounds):\n";
  for (const cpu::DecodeSplitRate &r : tuning.measured) {
    const bool chosen = r.splits == tuning.chosen.splits && r.streams == tuning.chosen.streams &&
                        r.prefetchBytes == tuning.chosen.prefetchBytes;
    const std::string prefetch = r.prefetchBytes == cpu::kNoPrefetch
                                     ? ", no prefetch"
                                     : fmt::format(", prefetch {} B", r.prefetchBytes);
    llvm::outs() << fmt::format(
        "  {:<37} {:6.1f}  {:.3f} {:.3f}{}\n",
        fmt::format("{} split{}, {} stream{}{}", r.splits, r.splits > 1 ? "s" : "", r.streams,
                    r.streams > 1 ? "s" : "", prefetch),
        r.gbPerSecond, r.relative, r.relativeLow, chosen ? "  <- chosen" : "");
  }
}

/// -v: the chosen setting against a plain read of the same weights. With
/// --decode-streams there is no second stage, and a split and a distance
/// chosen away from each other's default were never measured together.
void printPlainRead(const cpu::DecodeTuning &tuning) {
  const cpu::DecodeRate *chosen = cpu::chosenRate(tuning);
  const std::string ratio =
      chosen ? fmt::format("the chosen setting streams at {:.3f} of it (the median ratio in the "
                           "same rounds)",
                           chosen->ofPlainRead)
             : "the chosen split and distance were each measured at the other's default, not "
               "together";
  llvm::outs() << fmt::format(
      "  a plain read of the same weights (the bandwidth probe's loop, in the same pieces): "
      "{:.1f} GB/s; {}\n",
      tuning.plainReadGbPerSecond, ratio);
}

/// -v: what the tuner measured and chose for decode.
void printDecodeTuning(const cpu::DecodeTuning &tuning) {
  llvm::outs() << "tuned the decode split, prefetch and streams ("
               << cpu::describeProvenance(tuning.provenance)
               << "), GB/s of one-row products of the gate and up, then the down weight, layer "
                  "after layer, on "
               << tuning.threads << " threads\n";
  // Each axis at the others' values it was measured at.
  using Axis = int64_t cpu::DecodeSetting::*;
  auto on = [&](Axis axis, const cpu::DecodeSetting &s) { return cpu::onAxis(tuning, s, axis); };
  auto measuredOn = [&](Axis axis) {
    return std::count_if(tuning.measured.begin(), tuning.measured.end(),
                         [&](const cpu::DecodeRate &r) { return on(axis, r.setting); });
  };
  if (measuredOn(&cpu::DecodeSetting::chunks) > 1) {
    llvm::outs() << fmt::format("  pieces per thread, prefetch {} (GB/s; the median and lower "
                                "quartile of the ratios to the default in the same rounds):\n",
                                cpu::describePrefetch(cpu::kBaselineDecodePrefetchBytes));
    for (const cpu::DecodeRate &r : tuning.measured)
      if (on(&cpu::DecodeSetting::chunks, r.setting))
        llvm::outs() << fmt::format("  {:>6} pieces  {:6.1f}  {:.3f} {:.3f}{}\n", r.setting.chunks,
                                    r.gbPerSecond, r.relative, r.relativeLow,
                                    r.setting.chunks == tuning.chosen.chunks ? "  <- chosen" : "");
  } else {
    llvm::outs() << fmt::format("  {} pieces per thread, as --decode-chunks gave (not measured)\n",
                                tuning.chosen.chunks);
  }
  llvm::outs() << fmt::format("  prefetch distance, {} pieces per thread (GB/s; the ratios to "
                              "prefetch {} in the same rounds):\n",
                              tuning.distanceChunks,
                              cpu::describePrefetch(cpu::kBaselineDecodePrefetchBytes));
  std::vector<cpu::DecodeRate> byDistance = tuning.measured;
  std::sort(byDistance.begin(), byDistance.end(), [](const auto &a, const auto &b) {
    return a.setting.prefetchBytes < b.setting.prefetchBytes;
  });
  for (const cpu::DecodeRate &r : byDistance)
    if (on(&cpu::DecodeSetting::prefetchBytes, r.setting))
      llvm::outs() << fmt::format(
          "  {:>12}   {:6.1f}  {:.3f} {:.3f}{}\n", cpu::describePrefetch(r.setting.prefetchBytes),
          r.gbPerSecond, r.relative, r.relativeLow,
          r.setting.prefetchBytes == tuning.streamsMeasuredAt.prefetchBytes ? "  <- chosen" : "");
  if (tuning.streamRates.empty()) {
    llvm::outs() << fmt::format("  {} streams, as --decode-streams gave (not measured)\n",
                                tuning.chosen.streams);
    printPlainRead(tuning);
    return;
  }
  llvm::outs() << fmt::format("  rows read side by side, at the chosen {} pieces per thread and "
                              "prefetch {}, or as the row says (GB/s; the ratios to {} in the same "
                              "rounds):\n",
                              tuning.streamsMeasuredAt.chunks,
                              cpu::describePrefetch(tuning.streamsMeasuredAt.prefetchBytes),
                              tuning.streamsMeasuredAt.streams);
  for (const cpu::DecodeRate &r : tuning.streamRates) {
    const bool otherDistance = r.setting.prefetchBytes != tuning.streamsMeasuredAt.prefetchBytes;
    llvm::outs() << fmt::format(
        "  {:>6} stream{} {:6.1f}  {:.3f} {:.3f}{}{}\n", r.setting.streams,
        r.setting.streams == 1 ? " " : "s", r.gbPerSecond, r.relative, r.relativeLow,
        r.setting == tuning.chosen ? "  <- chosen" : "",
        otherDistance ? "  (prefetch " + cpu::describePrefetch(r.setting.prefetchBytes) + ")" : "");
  }
  printPlainRead(tuning);
}

/// The text sections compile embedded, and the folder they came from.
void printEmbedded(const std::vector<runtime::ArtifactSection> &textSections,
                   const std::string &modelFolder) {
  if (textSections.empty())
    return;
  llvm::outs() << "embedded";
  for (const runtime::ArtifactSection &section : textSections)
    llvm::outs() << " " << section.name;
  llvm::outs() << " (from " << modelFolder << ")\n";
}

/// With --embed-weights: how many weights, how many bytes, from where.
void printEmbeddedWeights(const manifest::EmbeddedWeights &embedded,
                          const std::string &modelFolder) {
  if (embedded.section.empty())
    return;
  int64_t bytes = 0;
  for (const manifest::EmbeddedWeight &w : embedded.entries)
    bytes += w.bytes;
  llvm::outs() << fmt::format("embedded {} weights, {:.2f} GB in the kernels' layout (from {})\n",
                              embedded.entries.size(), double(bytes) / 1e9, modelFolder);
}

} // namespace

/// With --embed-weights: the weights of `modelFolder` into `m` and `sections`.
static void embedIfAsked(manifest::Manifest &m, const std::string &modelFolder,
                         std::vector<runtime::ArtifactSection> &sections,
                         EmbeddedWeightsPayload &storage) {
  if (!compileEmbedWeights)
    return;
  std::vector<std::string> warnings;
  addEmbeddedWeights(m, modelFolder, sections, storage, &warnings);
  printWarnings(warnings);
}

/// q3c compile --target vulkan, after the pipeline: SPIR-V kernels.
static void compileVulkan(mlir::ModuleOp module, text::StageProgress &progress,
                          std::vector<runtime::ArtifactSection> sections,
                          const std::string &modelFolder, const runtime::SecretKey *signer,
                          std::chrono::steady_clock::time_point start) {
  progress.stage(3, "kernels (SPIR-V)");
  vulkan::CompiledVulkanModel compiled = vulkan::compileForVulkan(module, vulkanOptionsFromFlags());
  progress.stage(4, "writing");
  EmbeddedWeightsPayload weights;
  embedIfAsked(compiled.manifest, modelFolder, sections, weights);
  vulkan::writeVulkanArtifact(compileOutput, compiled, sections, signer);
  progress.finish();
  size_t modules = 0;
  for (const auto &kernel : compiled.kernels)
    modules += kernel.modules.size();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  llvm::outs() << "compiled " << compiled.manifest.kernels.size() << " kernels (" << modules
               << " SPIR-V modules), " << compiled.manifest.steps.size()
               << " dispatches for vulkan (ubatch " << compiled.manifest.prefillRows << ") in "
               << llvm::format("%.2f", seconds) << " s -> " << compileOutput;
  if (signer)
    llvm::outs() << ", signed by key " << runtime::keyId(signer->publicKey());
  llvm::outs() << "\n";
  printEmbeddedWeights(compiled.manifest.embedded, modelFolder);
}

int runCompile() {
  if (compileTarget != "cpu" && compileTarget != "vulkan")
    throw std::invalid_argument("--target: expected cpu or vulkan, got '" + compileTarget + "'");
  // Before the work: -o must not name the config or a file of the model folder.
  runtime::refuseOutputThatIsInput("-o", compileOutput, {compileModel, compileSign});
  // Read the key first: a bad key file should not cost a compilation.
  std::optional<runtime::SecretKey> signer;
  if (!compileSign.empty())
    signer = runtime::readSecretKey(compileSign);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> warnings;
  frontend::ModelConfig config = frontend::resolveModelConfig(compileModel, &warnings);
  printWarnings(warnings);
  requireMemoryFor(MemoryUse::Compile, config);
  // The tokenizer, chat template and generation defaults, checked first so a
  // broken tokenizer.json fails before the long part.
  const std::string modelFolder = text::modelFolderOf(compileModel);
  if (compileEmbedWeights && modelFolder.empty())
    throw std::invalid_argument("--embed-weights: expected a model folder with the weights "
                                "(config.json and *.safetensors), got '" +
                                std::string(compileModel) + "'");
  const std::vector<runtime::ArtifactSection> textSections =
      compileNoTokenizer || modelFolder.empty()
          ? std::vector<runtime::ArtifactSection>()
          : text::collectTextSections(modelFolder, config.vocabSize);
  text::StageProgress progress("q3c compile", 4);
  progress.stage(1, "graph");
  mlir::MLIRContext context;
  auto module = ir::buildQwen3Graph(context, config);
  if (compileTarget == "vulkan") {
    progress.stage(2, "passes");
    runPipelineFromFlags(*module, compileTarget);
    compileVulkan(*module, progress, textSections, modelFolder, signer ? &*signer : nullptr,
                  start);
    printEmbedded(textSections, modelFolder);
    return 0;
  }
  progress.stage(2, "tuning and passes");
  const HostTuning tuning = runPipelineFromFlags(*module, "cpu");
  if (compileVerbose && tuning.weightPacking)
    printWeightPackingTuning(*tuning.weightPacking);
  if (compileVerbose && tuning.prefill)
    printPrefillTuning(*tuning.prefill);
  if (compileVerbose && tuning.decode)
    printDecodeTuning(*tuning.decode);
  if (compileVerbose && tuning.attention)
    printAttentionTuning(*tuning.attention);
  if (compileVerbose && tuning.decodeSplits)
    printDecodeSplitTuning(*tuning.decodeSplits);
  progress.stage(3, "kernels (LLVM)");
  cpu::CompiledModel compiled = cpu::compileForCpu(*module);
  progress.stage(4, "writing");
  std::vector<runtime::ArtifactSection> sections = textSections;
  EmbeddedWeightsPayload weights;
  embedIfAsked(compiled.manifest, modelFolder, sections, weights);
  cpu::writeCpuArtifact(compileOutput, compiled, sections, signer ? &*signer : nullptr);
  progress.finish();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const manifest::Manifest &m = compiled.manifest;
  llvm::outs() << "compiled " << m.kernels.size() << " kernels, " << m.steps.size()
               << " dispatches for " << m.target.cpu << " (" << m.target.llvmCpu << ", "
               << matmulSummary(m) << packingSummary(m) << ", kv cache "
               << runtime::mlirName(m.kvCache) << ", ubatch " << m.prefillRows << ") in "
               << llvm::format("%.2f", seconds) << " s -> " << compileOutput;
  if (signer)
    llvm::outs() << ", signed by key " << runtime::keyId(signer->publicKey());
  llvm::outs() << "\n";
  printEmbedded(textSections, modelFolder);
  printEmbeddedWeights(m.embedded, modelFolder);
  return 0;
}

int runKeygen() {
  const runtime::PublicKey key = runtime::generateKeyPair(keygenOutput, keygenOutput + ".pub");
  llvm::outs() << "wrote " << keygenOutput << " (secret: keep it private) and " << key.source
               << " (public: give it to q3run --require-signature); key " << runtime::keyId(key)
               << "\n";
  return 0;
}

} // namespace q3::tools
