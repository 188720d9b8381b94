//===- CommandLine.cpp ----------------------------------------------------===//
#include "tools/q3c/CommandLine.h"

#include "backends/cpu/CpuPipeline.h"
#include "backends/cpu/CpuTarget.h"
#include "backends/cpu/KernelSelection.h"
#include "runtime/ResourceLimits.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <limits>
#include <stdexcept>

namespace q3::tools {

llvm::cl::OptionCategory q3Category("q3c options");
llvm::cl::SubCommand
    dumpCommand("dump", "Print the q3 IR of a Qwen3 config (file, model folder or preset)");
llvm::cl::SubCommand
    evalCommand("eval",
                "Run the reference interpreter on a checkpoint: logits, argmax, greedy ids");
llvm::cl::SubCommand compileCommand(
    "compile", "Compile a Qwen3 config (file, model folder or preset) into a deployable artifact");
llvm::cl::SubCommand keygenCommand(
    "keygen", "Make an ed25519 key pair for signing artifacts (q3c compile --sign)");
llvm::cl::SubCommand
    randomModelCommand("random-model",
                       "Write a random-weight Qwen3 checkpoint (config.json + model.safetensors)");

namespace cl = llvm::cl;

// q3c dump
cl::opt<std::string> dumpModel(cl::Positional, cl::Required, cl::sub(dumpCommand),
                               cl::desc("<config.json | model folder | preset>"),
                               cl::cat(q3Category));
cl::opt<std::string> dumpOutput("o", cl::sub(dumpCommand), cl::init("-"),
                                cl::desc("Write the IR here (default: stdout)"),
                                cl::value_desc("file"), cl::cat(q3Category));

// q3c eval
cl::opt<std::string> evalModel(cl::Positional, cl::Required, cl::sub(evalCommand),
                               cl::desc("<model folder with config.json and model.safetensors>"),
                               cl::cat(q3Category));
cl::opt<std::string> evalTokens("tokens", cl::sub(evalCommand), cl::Required,
                                cl::desc("Prompt token ids, e.g. 1,2,3"), cl::value_desc("ids"),
                                cl::cat(q3Category));
cl::opt<std::string>
    evalLogits("logits", cl::sub(evalCommand),
               cl::desc("Write the logits of every position as a [T, vocab] float32 .npy"),
               cl::value_desc("file.npy"), cl::cat(q3Category));
cl::opt<int> evalGenerate("n", cl::sub(evalCommand), cl::init(0),
                          cl::desc("Greedily generate this many tokens and print 'ids: ...'"),
                          cl::value_desc("count"), cl::cat(q3Category));

// q3c random-model
cl::opt<std::string>
    randomConfig("config", cl::sub(randomModelCommand), cl::Required,
                 cl::desc("config.json, model folder or preset name (e.g. qwen3-0.6b, tiny)"),
                 cl::value_desc("config|preset"), cl::cat(q3Category));
cl::opt<uint64_t> randomSeed("seed", cl::sub(randomModelCommand), cl::init(0),
                             cl::desc("Random seed"), cl::cat(q3Category));
cl::opt<std::string>
    randomDType("dtype", cl::sub(randomModelCommand),
                cl::desc("Weight dtype: bf16, f16 or f32 (default: the config's torch_dtype)"),
                cl::cat(q3Category));
cl::opt<std::string> randomTokenizer(
    "tokenizer", cl::sub(randomModelCommand),
    cl::desc("Also write this tokenizer (tokenizer.json, a model folder or an artifact) with its "
             "tokenizer_config.json and generation_config.json, cut down to the config's "
             "vocabulary when it is smaller (the first merges, then the added tokens)"),
    cl::value_desc("path"), cl::cat(q3Category));
cl::opt<std::string> randomOutput("o", cl::sub(randomModelCommand), cl::Required,
                                  cl::desc("Output model folder"), cl::value_desc("dir"),
                                  cl::cat(q3Category));

// q3c compile
cl::opt<std::string> compileModel(cl::Positional, cl::Required, cl::sub(compileCommand),
                                  cl::desc("<config.json | model folder | preset>"),
                                  cl::cat(q3Category));
cl::opt<std::string> compileTarget("target", cl::sub(compileCommand), cl::init("cpu"),
                                   cl::desc("Backend: cpu or vulkan"), cl::cat(q3Category));
cl::opt<std::string> compileOutput("o", cl::sub(compileCommand), cl::Required,
                                   cl::desc("The artifact to write"), cl::value_desc("file.q3"),
                                   cl::cat(q3Category));
cl::opt<std::string> targetTune(
    "tune", cl::sub(dumpCommand), cl::sub(evalCommand), cl::sub(compileCommand), cl::init("quick"),
    cl::desc(
        "With the CPU target and --cpu=host: measure the prefill kernel variants and "
        "decode's split, prefetch distance and streams on this machine and keep the fastest: off, "
        "quick (default, about a second; cached per CPU in $XDG_CACHE_HOME/q3c) or full"),
    cl::value_desc("off|quick|full"), cl::cat(q3Category));
cl::opt<double> tuneMaxForeignShare(
    "tune-max-foreign-share", cl::sub(dumpCommand), cl::sub(evalCommand), cl::sub(compileCommand),
    cl::init(cpu::kMaxForeignShare), cl::Hidden,
    cl::desc("Cache a --tune measurement only when other processes took at most this share "
             "of the machine's CPU time meanwhile (0 to 1; negative: never cache)"),
    cl::cat(q3Category));
cl::opt<bool> compileVerbose("v", cl::sub(compileCommand),
                             cl::desc("Print the choices and the measured rates"),
                             cl::cat(q3Category));

// Target options, shared by dump, eval and compile.
cl::opt<std::string> targetCpu("cpu", cl::sub(dumpCommand), cl::sub(evalCommand),
                               cl::sub(compileCommand), cl::init("host"),
                               cl::desc("CPU: host, x86-64-v2, x86-64-v3 or x86-64-v4"),
                               cl::cat(q3Category));
cl::opt<std::string> targetPrefillMatmul(
    "prefill-matmul", cl::sub(dumpCommand), cl::sub(evalCommand), cl::sub(compileCommand),
    cl::init("auto"),
    cl::desc("Prefill products on bf16 weights: auto (the fastest measured on this machine by "
             "--tune; without a measurement amx where the CPU has AMX-BF16, avx512bf16 for weights "
             "packed per call, else f32), f32, "
             "avx512bf16 (vdpbf16ps) or amx. The bf16 ones round prefill activations to bf16: "
             "logits then differ from f32 by up to ~1%"),
    cl::value_desc("auto|f32|avx512bf16|amx"), cl::cat(q3Category));
cl::opt<std::string> targetAttentionMatmul(
    "attention-matmul", cl::sub(dumpCommand), cl::sub(evalCommand), cl::sub(compileCommand),
    cl::init("auto"),
    cl::desc("Prefill attention (head_dim a multiple of 32): auto (avx512bf16 where the "
             "products' prefill runs it, else f32), f32 or avx512bf16 (vdpbf16ps on queries, "
             "keys, probabilities and values rounded to bf16; softmax and sums in f32)"),
    cl::value_desc("auto|f32|avx512bf16"), cl::cat(q3Category));
cl::opt<int64_t> targetPrefillRows(
    "prefill-rows", cl::sub(dumpCommand), cl::sub(evalCommand), cl::sub(compileCommand),
    cl::init(0),
    cl::desc("Rows of the prefill register tile, 1 to 8 (default 0: measured by --tune, else 6 "
             "with AVX-512 and 2 without)"),
    cl::cat(q3Category));
cl::opt<int64_t> targetInPlaceRows(
    "in-place-rows", cl::sub(dumpCommand), cl::sub(evalCommand), cl::sub(compileCommand),
    cl::init(0),
    cl::desc("Most prefill rows a bf16 product packed per call with vdpbf16ps multiplies "
             "against its weight rows in place instead of packing panels, 1 to 7 (1: none; "
             "default 0: 7)"),
    cl::cat(q3Category));
cl::opt<int64_t> targetDecodeSplits(
    "decode-splits", cl::sub(dumpCommand), cl::sub(evalCommand), cl::sub(compileCommand),
    cl::init(0),
    cl::desc("Workgroups each KV head's decode attention is split into, so more threads "
             "than KV heads stream a long context's cache: 1 to 16 on the CPU (default 0: "
             "measured by --tune, else enough for the CPUs of this machine with --cpu=host, for "
             "16 threads otherwise), 1 to 256 for Vulkan (default 0: 256 workgroups over the "
             "KV heads)"),
    cl::cat(q3Category));
cl::opt<int64_t> targetDecodeColumnSubgroups(
    "decode-column-subgroups", cl::sub(dumpCommand), cl::sub(compileCommand), cl::init(0),
    cl::desc("Vulkan: subgroups that share each output column of the decode products, a power "
             "of two from 1 to 8 (default 0: enough that a product has 8192 subgroups)"),
    cl::cat(q3Category));
cl::list<int64_t> targetPrefillTile(
    "prefill-tile", cl::sub(dumpCommand), cl::sub(compileCommand), cl::CommaSeparated,
    cl::desc("Vulkan: the prefill GEMM's tile for every product: rows, columns, K step, register "
             "rows, register columns (default 32,64,16,4,4)"),
    cl::value_desc("R,C,K,r,c"), cl::cat(q3Category));
cl::opt<int64_t> targetDecodeChunks(
    "decode-chunks", cl::sub(dumpCommand), cl::sub(evalCommand), cl::sub(compileCommand),
    cl::init(0),
    cl::desc("Pieces per thread a decode product's columns are split into (work stealing evens "
             "them out; more pieces, more DRAM streams started) (default 0: measured by --tune, "
             "else 4)"),
    cl::cat(q3Category));
cl::opt<int64_t> targetDecodeStreams(
    "decode-streams", cl::sub(dumpCommand), cl::sub(evalCommand), cl::sub(compileCommand),
    cl::init(0),
    cl::desc("Runs of memory a decode loop reads side by side, 1, 2 or 4: a product's weight "
             "rows (SwiGLU: at least its gate and up rows), attention's key and value positions "
             "(default 0: measured by --tune, else 4)"),
    cl::cat(q3Category));
cl::opt<std::string> targetWeightPacking(
    "weight-packing", cl::sub(dumpCommand), cl::sub(evalCommand), cl::sub(compileCommand),
    cl::init("auto"),
    cl::desc(
        "Where bf16 and f16 product weights are put in the kernels' column blocks: per-call (each "
        "prefill packs the panels it multiplies; the runtime binds the checkpoint's bytes "
        "as they are, so loading copies nothing), at-load (copied once when the model "
        "loads, or at compile time with --embed-weights; prefill ~6% faster at 128 "
        "tokens, decode up to 20% faster) or auto (at-load with --embed-weights, "
        "--prefill-matmul=amx or, for bf16 weights, a target that may run AMX; for --cpu=host "
        "with --tune, at-load when packing this model's weights measured under a second on "
        "this host and the packed products decoded clearly faster there; else per-call)"),
    cl::value_desc("auto|per-call|at-load"), cl::cat(q3Category));
cl::opt<std::string> targetKvCache(
    "kv-cache", cl::sub(dumpCommand), cl::sub(evalCommand), cl::sub(compileCommand),
    cl::init("auto"),
    cl::desc("Element type of the KV cache: f32 (exact), bf16 or f16 (half the memory and the "
             "attention reads; keys and values rounded, so logits differ from f32 by up to ~1% "
             "for bf16, ~0.1% for f16; f16 clamps to its finite range and needs F16C on the CPU), "
             "or auto (default: the target's choice, f16 (what llama.cpp caches) except f32 for a "
             "CPU without F16C, e.g. --cpu=x86-64-v2; f32 without --target)"),
    cl::value_desc("auto|f32|bf16|f16"), cl::cat(q3Category));

cl::opt<std::string> compileSign(
    "sign", cl::sub(compileCommand),
    cl::desc("Sign the artifact with this secret key (q3c keygen); q3run --require-signature "
             "checks it"),
    cl::value_desc("keyfile"), cl::cat(q3Category));
cl::opt<bool> compileEmbedWeights(
    "embed-weights", cl::sub(compileCommand),
    cl::desc("Write the model folder's weights into the artifact, already in the kernels' dtype "
             "and layout (gains, concatenations and column blocks applied): q3run maps them and "
             "needs no --weights, and the artifact alone is what to deploy"),
    cl::cat(q3Category));
cl::opt<bool> compileNoTokenizer(
    "no-tokenizer", cl::sub(compileCommand),
    cl::desc("Do not embed the model folder's tokenizer.json, tokenizer_config.json, "
             "chat_template.jinja and generation_config.json (embedded by default when present)"),
    cl::cat(q3Category));

// q3c keygen
cl::opt<std::string> keygenOutput("o", cl::sub(keygenCommand), cl::Required,
                                  cl::desc("The secret key file to write (mode 0600); the public "
                                           "key goes to <keyfile>.pub"),
                                  cl::value_desc("keyfile"), cl::cat(q3Category));

// Pipeline flags, shared by dump, eval and compile.
cl::opt<std::string> emitStage(
    "emit", cl::sub(dumpCommand), cl::sub(evalCommand),
    cl::desc("Stop after this stage: graph, fused, dispatch (the default without --target), "
             "target (the default with --target: the target passes' decisions recorded), or, "
             "for dump, kernels (the generated kernels, before compilation)"),
    cl::value_desc("stage"), cl::cat(q3Category));
cl::opt<std::string>
    pipelineTarget("target", cl::sub(dumpCommand), cl::sub(evalCommand),
                   cl::desc("Run this backend's target passes too: cpu or vulkan (default: none)"),
                   cl::value_desc("cpu|vulkan"), cl::cat(q3Category));
cl::list<std::string> disabledPasses("disable-pass", cl::sub(dumpCommand), cl::sub(evalCommand),
                                     cl::sub(compileCommand),
                                     cl::desc("Skip a pass of the pipeline (repeatable)"),
                                     cl::value_desc("pass"), cl::cat(q3Category));
cl::opt<bool> printIRAfterAll("print-ir-after-all", cl::sub(dumpCommand), cl::sub(evalCommand),
                              cl::sub(compileCommand),
                              cl::desc("Print the IR to stderr after every pass"),
                              cl::cat(q3Category));
cl::list<std::string> printIRAfter("print-ir-after", cl::sub(dumpCommand), cl::sub(evalCommand),
                                   cl::sub(compileCommand),
                                   cl::desc("Print the IR to stderr after this pass (repeatable)"),
                                   cl::value_desc("pass"), cl::cat(q3Category));
cl::opt<int64_t> ubatch(
    "ubatch", cl::sub(dumpCommand), cl::sub(evalCommand), cl::sub(compileCommand), cl::init(512),
    cl::desc("Rows the activation buffers are planned for: the runtime runs longer prompts in "
             "chunks of this many rows (default 512)"),
    cl::cat(q3Category));
cl::opt<std::string> foldGain(
    "fold-gain", cl::sub(dumpCommand), cl::sub(evalCommand), cl::sub(compileCommand),
    cl::init("never"),
    cl::desc("Where fuse-rmsnorm-matmul folds an RMSNorm gain into the product's weights "
             "(q3.fold_gain) instead of applying it in the kernel's prologue: never (default: "
             "the weights are read where they are mapped), f32-weights (folds into f32 "
             "weights, a copy of each at load) or always (widens bf16/f16 weights to f32)"),
    cl::value_desc("never|f32-weights|always"), cl::cat(q3Category));
cl::opt<bool> dumpStats("stats", cl::sub(dumpCommand),
                        cl::desc("Print what the pipeline did instead of the IR"),
                        cl::cat(q3Category));
cl::opt<bool> dumpJson("json", cl::sub(dumpCommand),
                       cl::desc("With --stats: print one JSON object"), cl::cat(q3Category));

/// --weight-packing, with auto settled where the flags decide it: packing
/// ahead of time (--embed-weights) is free, and AMX reads packed weights.
static std::string weightPackingFromFlags() {
  if (targetWeightPacking == "auto" && (compileEmbedWeights || targetPrefillMatmul == "amx"))
    return "at-load";
  return targetWeightPacking;
}

/// --kv-cache, with auto settled by the target: f16 (half f32's memory and
/// of attention's reads at long contexts, three more mantissa bits than
/// bf16) wherever its kernels can convert it, f32 on a CPU without F16C. With
/// no target (q3c eval or dump of the target-independent IR) the cache stays
/// exact, f32: the interpreter is the reference then.
static std::string kvCacheFromFlags(const std::string &target) {
  if (targetKvCache != "auto")
    return targetKvCache;
  if (target.empty())
    return "f32";
  if (target == "cpu") {
    try {
      if (!cpu::targetHas(cpu::resolveCpuTarget(targetCpu), "f16c"))
        return "f32";
    } catch (const std::invalid_argument &) {
      // An unknown --cpu: cpu-set-target refuses it by name.
    }
  }
  return "f16";
}

passes::PipelineOptions pipelineOptionsFromFlags(const std::string &target) {
  passes::PipelineOptions options;
  if (!target.empty() && target != "cpu" && target != "vulkan")
    throw std::invalid_argument("--target: expected cpu or vulkan, got '" + target + "'");
  const std::string stage =
      emitStage.getNumOccurrences() ? emitStage.getValue() : (target.empty() ? "dispatch" : "target");
  // The Vulkan target passes run in the Vulkan backend (compileForVulkan,
  // vulkanKernelSource) on the dispatch stage: its target stage is that.
  const std::string pipelineStage =
      stage == "kernels" || stage == "target" ? (target == "vulkan" ? "dispatch" : "target") : stage;
  options.stage = passes::parseStage(pipelineStage);
  if (targetDecodeColumnSubgroups.getNumOccurrences() && target != "vulkan")
    throw std::invalid_argument("--decode-column-subgroups: a Vulkan choice; add --target vulkan");
  if (targetPrefillTile.getNumOccurrences() && target != "vulkan")
    throw std::invalid_argument("--prefill-tile: a Vulkan choice; add --target vulkan");
  options.disabledPasses.insert(disabledPasses.begin(), disabledPasses.end());
  options.printIRAfterAll = printIRAfterAll;
  options.printIRAfter.insert(printIRAfter.begin(), printIRAfter.end());
  if (ubatch <= 0)
    throw std::invalid_argument("--ubatch must be positive, got " + std::to_string(ubatch));
  // Token ids and positions are 32-bit; larger row counts only overflow the
  // buffer plan's byte sizes (which wrapped to "0 bytes").
  if (ubatch > std::numeric_limits<int32_t>::max())
    throw std::invalid_argument("--ubatch: expected at most 2147483647, got " +
                                std::to_string(ubatch));
  options.maxSeqLen = ubatch;
  options.kvCache = kvCacheFromFlags(target);
  if (foldGain != "f32-weights" && foldGain != "always" && foldGain != "never")
    throw std::invalid_argument("--fold-gain: expected never, f32-weights or always, got '" +
                                foldGain + "'");
  options.foldGain = foldGain;
  if (target == "cpu") {
    // Checked here as well as by the passes, so the error names the flag and
    // comes before any tuning.
    const std::string matmul = targetPrefillMatmul, attention = targetAttentionMatmul;
    if (!llvm::is_contained(cpu::kProductMatmulChoices, matmul))
      throw std::invalid_argument("--prefill-matmul: expected " +
                                  cpu::choicesText(cpu::kProductMatmulChoices) + ", got '" +
                                  matmul + "'");
    if (!llvm::is_contained(cpu::kAttentionMatmulChoices, attention))
      throw std::invalid_argument("--attention-matmul: expected " +
                                  cpu::choicesText(cpu::kAttentionMatmulChoices) + ", got '" +
                                  attention + "'");
    cpu::CpuPipelineOptions cpuOptions;
    cpuOptions.cpu = targetCpu;
    cpuOptions.matmul = targetPrefillMatmul;
    cpuOptions.attentionMatmul = targetAttentionMatmul;
    cpuOptions.prefillRows = targetPrefillRows;
    cpuOptions.decodeChunks = targetDecodeChunks;
    cpuOptions.decodeStreams = targetDecodeStreams;
    cpuOptions.decodeSplits = targetDecodeSplits;
    cpuOptions.inPlaceRows = targetInPlaceRows;
    cpuOptions.weightPacking = weightPackingFromFlags();
    options.target = cpu::cpuTargetPipeline(cpuOptions);
  }
  return options;
}

vulkan::VulkanTargetOptions vulkanOptionsFromFlags() {
  vulkan::VulkanTargetOptions options;
  options.decodeSplits = targetDecodeSplits;
  options.decodeColumnSubgroups = targetDecodeColumnSubgroups;
  options.prefillTile.assign(targetPrefillTile.begin(), targetPrefillTile.end());
  return options;
}

namespace {

int64_t configInt(mlir::DictionaryAttr config, const char *key) {
  auto value = config ? config.getAs<mlir::IntegerAttr>(key) : nullptr;
  return value ? value.getInt() : 0;
}

/// The KV cache type --kv-cache settles on for a CPU target, which the
/// attention tuners measure (the graph they see does not carry it yet). A
/// name that is none set-kv-cache-type refuses right after.
cpu::DType cpuKvCache() {
  return runtime::parseMlirName(kvCacheFromFlags("cpu")).value_or(cpu::DType::F32);
}

/// The shape of the module's (first) attention, if it has one, with the
/// cache type the CPU kernels will read.
std::optional<cpu::AttentionKernel> attentionShape(mlir::ModuleOp module) {
  std::optional<cpu::AttentionKernel> shape;
  module.walk([&](q3::ir::AttentionOp op) {
    shape = cpu::attentionKernelShape(op);
    return mlir::WalkResult::interrupt();
  });
  if (shape)
    shape->cache = cpuKvCache();
  return shape;
}

/// Measures whether attention's prefill gains from vdpbf16ps where the
/// products' prefill takes it (cpu-select-attention-matmul follows them
/// unless this says f32), unless --attention-matmul was given.
std::optional<cpu::AttentionTuning> tuneAttentionIfItMatters(const cpu::CpuTarget &host,
                                                             mlir::ModuleOp module,
                                                             const HostTuning &tuning) {
  const bool productsTakeVdpbf16ps =
      targetPrefillMatmul == "avx512bf16" ||
      (targetPrefillMatmul == "auto" && tuning.prefill &&
       tuning.prefill->best.matmul == cpu::PrefillMatmul::Avx512Bf16);
  if (targetAttentionMatmul != "auto" || !productsTakeVdpbf16ps)
    return std::nullopt;
  std::optional<cpu::AttentionKernel> shape = attentionShape(module);
  if (!shape || !cpu::attentionTunable(host, *shape))
    return std::nullopt;
  return cpu::tuneAttention(host, *shape, tuneMaxForeignShare);
}

/// Measures what packing the weights at load would cost this host and, when
/// it fits the load, whether the packed products decode faster, unless
/// --weight-packing decides or the target packs them at load anyway (AMX).
std::optional<cpu::WeightPackingTuning>
tuneWeightPackingIfItMatters(const cpu::CpuTarget &host, mlir::ModuleOp module, cpu::DType dtype,
                             int64_t hidden, int64_t intermediate, cpu::TuneLevel level) {
  if (weightPackingFromFlags() != "auto" ||
      cpu::resolveWeightPacking("auto", host, dtype) == "at_load")
    return std::nullopt;
  return cpu::tuneWeightPacking(host, cpu::packableWeightBytes(module), hidden, intermediate, dtype,
                                level, runtime::availableCpus(), tuneMaxForeignShare);
}

/// Measures for --cpu=host, when the weights are bf16 or f16 (the products
/// with column blocks and variants): the prefill variants (unless both were
/// given), the decode split and, where it matters, attention's prefill
/// instructions; records them in the module for the CPU target passes.
HostTuning tuneIfAsked(mlir::ModuleOp module, const std::string &target) {
  const cpu::TuneLevel level = cpu::parseTuneLevel(targetTune);
  if (target != "cpu" || level == cpu::TuneLevel::Off)
    return {};
  if (targetCpu != "host") {
    if (targetTune.getNumOccurrences())
      llvm::errs() << "q3c: warning: --tune measures only for --cpu=host; " << targetCpu
                   << " gets the default variants\n";
    return {};
  }
  auto config = module->getAttrOfType<mlir::DictionaryAttr>("q3.config");
  auto dtype = config ? config.getAs<mlir::StringAttr>("torch_dtype") : nullptr;
  if (!dtype || (dtype.getValue() != "bfloat16" && dtype.getValue() != "float16"))
    return {};
  const cpu::CpuTarget host = cpu::resolveCpuTarget("host");
  const int64_t hidden = configInt(config, "hidden_size");
  const int64_t intermediate = configInt(config, "intermediate_size");
  // The products are measured with the model's dtype, packed the way the
  // compiled ones will be: first where.
  cpu::TunedWeights weights;
  weights.dtype = dtype.getValue() == "float16" ? cpu::DType::F16 : cpu::DType::BF16;
  HostTuning tuning;
  tuning.weightPacking =
      tuneWeightPackingIfItMatters(host, module, weights.dtype, hidden, intermediate, level);
  if (tuning.weightPacking)
    cpu::recordWeightPackingTuning(module, *tuning.weightPacking);
  weights.packPerCall = cpu::resolveWeightPacking(
                            weightPackingFromFlags(), host, weights.dtype,
                            tuning.weightPacking ? tuning.weightPacking->chosen : "") == "per_call";
  if (targetPrefillMatmul == "auto" || targetPrefillRows == 0) {
    tuning.prefill =
        cpu::tunePrefill(host, hidden, intermediate, weights, level, tuneMaxForeignShare);
    cpu::recordTuning(module, *tuning.prefill);
  }
  // The runtime's default: every CPU this process may use. A split given
  // with --decode-chunks or a stream count with --decode-streams is not
  // measured, the other settings are, at it.
  tuning.decode =
      cpu::tuneDecode(host, hidden, intermediate, weights, level, runtime::availableCpus(),
                      tuneMaxForeignShare, targetDecodeChunks, targetDecodeStreams);
  cpu::recordDecodeTuning(module, *tuning.decode);
  tuning.attention = tuneAttentionIfItMatters(host, module, tuning);
  if (tuning.attention)
    cpu::recordAttentionTuning(module, *tuning.attention);
  // Decode attention's splits, unless --decode-splits decides.
  std::optional<cpu::AttentionKernel> shape = attentionShape(module);
  if (targetDecodeSplits == 0 && shape && shape->vectorized()) {
    tuning.decodeSplits = cpu::tuneDecodeSplits(host, *shape, runtime::availableCpus(),
                                                tuneMaxForeignShare, targetDecodeStreams);
    cpu::recordDecodeSplitTuning(module, *tuning.decodeSplits);
  }
  return tuning;
}

} // namespace

HostTuning runPipelineFromFlags(mlir::ModuleOp module, const std::string &target) {
  const passes::PipelineOptions options = pipelineOptionsFromFlags(target);
  HostTuning tuning = tuneIfAsked(module, target);
  // A pass that refuses the module says why in an error diagnostic: that is
  // the one line the user gets (the module's location would only say "tiny").
  std::string errors;
  mlir::ScopedDiagnosticHandler collect(module.getContext(), [&](mlir::Diagnostic &diagnostic) {
    if (diagnostic.getSeverity() != mlir::DiagnosticSeverity::Error)
      return mlir::failure(); // notes and warnings go to the default handler
    errors += (errors.empty() ? "" : "; ") + diagnostic.str();
    return mlir::success();
  });
  if (mlir::failed(passes::runPipeline(module, options)))
    throw std::runtime_error(errors.empty() ? "the pass pipeline failed" : errors);
  return tuning;
}

void printWarnings(const std::vector<std::string> &warnings) {
  for (const std::string &w : warnings)
    llvm::errs() << "q3c: warning: " << w << "\n";
}

} // namespace q3::tools
