// Model: the scheduler that runs an artifact's schedule on bound weights
// through a Driver (runtime/Driver.h).
//
// Load: validate the artifact and its manifest (runtime/Manifest.h), create
// the driver for its format (the CPU driver checks the CPU and loads the
// kernels), evaluate the weight plan (runtime/WeightPlan.h) and hand the
// weights the schedule reads to the driver, and allocate the activation
// buffers (prefill_rows rows each) and the KV cache in driver memory (where
// the driver moves memory in place, used for kInitialCachePositions
// positions first and spread out as the context fills). Run: split the
// tokens into chunks of at most prefill_rows rows; for each chunk, bind
// every dispatch's operands to buffer ranges and scalars and dispatch it.
#include "runtime/Model.h"

#include "runtime/Artifact.h"
#include "runtime/Checkpoint.h"
#include "runtime/CheckpointConfig.h"
#include "runtime/DType.h"
#include "runtime/Driver.h"
#include "runtime/HostBuffer.h"
#include "runtime/KernelABI.h"
#include "runtime/LoadError.h"
#include "runtime/MemoryBandwidth.h"
#include "runtime/MemoryLock.h"
#include "runtime/ModelMemory.h"
#include "runtime/WeightPlan.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <chrono>
#include <limits>
#include <memory>

namespace q3::runtime {

using manifest::BindingKind;

struct Model::State {
  std::unique_ptr<Artifact> artifact;
  manifest::Manifest manifest;
  std::unique_ptr<Checkpoint> checkpoint;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<Driver> driver;
  std::vector<WeightData> weights;
  LockedMemory lockedWeights;           // with ModelOptions::lockWeights
  std::vector<int64_t> weightBuffers;   // driver buffer of each weight the schedule reads
  std::vector<int64_t> stepKernels;     // the driver's kernel of each step
  std::vector<const manifest::Kernel *> stepKernelInfo; // the manifest's
  bool logitsRowwise = false; // the last step (logits) may run on some rows only
  std::vector<int64_t> buffers;         // driver buffers of prefillRows rows each
  int64_t keyCache = 0, valueCache = 0; // [layers][kvHeads][capacity][headDim], kv element
  int64_t tokenBuffer = 0;              // [prefillRows] i32
  /// The kernels' workspace (manifest::Kernel::workspaceBytes): one, of the
  /// largest, as dispatches run one at a time and leave it as they found it.
  int64_t workspace = -1;
  std::vector<float> logits;
  int64_t layers = 0, kvRowBytes = 0, vocab = 0, context = 0, position = 0, chunkRows = 0;
  /// Positions the KV cache has room for now (the kernels' capacity
  /// scalar): the context, or less while a driver that moves memory in
  /// place grows it with use (reserve()).
  int64_t capacity = 0;
  bool profiling = false;
  std::vector<KernelProfile> stepProfiles; // parallel to the steps while profiling
  std::map<std::string, std::string> variantChoices; // kernel -> the build it runs
  std::optional<CheckpointPlacement> checkpointPlacement; // absent for embedded weights
  bool kvCacheOnHugePages = false;                        // see kvCacheOnHugePagesPays

  /// The activation buffers and the KV cache; `memoryBudget` (bytes this
  /// process may use) decides the cache's pages, `reserveContext`
  /// (ModelOptions) whether it is allocated for the whole context.
  void allocate(uint64_t memoryBudget, bool reserveContext);
  /// Room in the KV cache for `positions` (at most the context): where it
  /// has less, the capacity doubles (or more, to fit) and each layer's and
  /// head's cached rows move to their new place in the same buffers.
  void reserve(int64_t positions);
  /// Locks the weights in memory (ModelOptions::lockWeights); `source` is
  /// the checkpoint or the artifact that embeds them, for the message.
  void lockWeights(const std::string &source);
  /// For each kernel with variants this machine can run: times one dispatch
  /// of its first step on `kVariantProbeRows` rows with each build (the
  /// buffers hold no request yet) and keeps the fastest, or the build named
  /// `asked`; then gives each kernel that chooses like the products
  /// (attention) its first build whose matmul a product's chosen build runs.
  void chooseKernelVariants(const std::string &asked);
  /// The prefill instructions of `kernel`'s build `build` (-1: its default)
  /// among the usable builds `names`.
  static std::string buildMatmul(const manifest::Kernel &kernel,
                                 const std::vector<std::string> &names, int build);
  /// Runs step `index`'s kernel as its build `build` and records the choice.
  void useBuild(size_t index, const std::vector<std::string> &names, int build);
  /// The build of step `index`'s kernel (-1: its default, else one of its
  /// `variants` usable builds) whose dispatch on `rows` rows is fastest.
  int fastestBuild(size_t index, size_t variants, int64_t rows);
  /// Runs the chunk of `rows` tokens at `startPos`: every step, or all but
  /// the logits product (`logitsRows` 0), which otherwise runs on its last
  /// `logitsRows` rows.
  void runChunk(int64_t rows, int64_t startPos, int64_t logitsRows);
  /// After a chunk has finished, while profiling on a driver that times
  /// its dispatches: adds the device's times to the steps' profiles.
  void addDispatchTimes();
  /// Runs one dispatch over rows [firstRow, rows) of the activation buffers
  /// (firstRow > 0 only for the row-independent logits product).
  void runStep(size_t index, int64_t rows, int64_t startPos, int64_t firstRow = 0);
  /// Counts one call of step `index` (and the weight bytes it reads) while
  /// profiling.
  void countCall(size_t index, int64_t visible, int64_t computedRows);
};

void Model::State::allocate(uint64_t memoryBudget, bool reserveContext) {
  const manifest::ModelConfig &c = manifest.config;
  layers = c.numHiddenLayers;
  vocab = c.vocabSize;
  chunkRows = manifest.prefillRows;
  kvRowBytes = c.numKeyValueHeads * c.headDim * int64_t(runtime::dtypeSize(manifest.kvCache));
  // The manifest's extents are bounded (runtime/Manifest.h), the context is
  // the user's: keep every size a product that cannot overflow.
  auto bytes = [&](int64_t a, int64_t b, const char *what) {
    if (a < 0 || b < 0 || (a != 0 && b > (int64_t(1) << 50) / a))
      throw LoadError(fmt::format("{}: {} of {} x {} bytes is more than this runtime allocates "
                                  "(use a smaller --ctx)",
                                  artifact->displayName(), what, a, b));
    return a * b;
  };
  // The weights first: on a device with its own memory they are uploaded,
  // and what no longer fits after them is the context's part (the KV
  // cache), which the driver's error then asks to shrink (--ctx).
  weightBuffers.assign(weights.size(), -1);
  for (size_t i = 0; i < weights.size(); ++i)
    if (weights[i].data)
      weightBuffers[i] = driver->wrapHost(weights[i].data, weights[i].bytes());
  for (int64_t rowBytes : manifest.bufferRowBytes)
    buffers.push_back(driver->allocate(bytes(chunkRows, rowBytes, "an activation buffer")));
  // Positions are written before attention reads them: the cache needs no
  // zeroing (allocate() leaves untouched pages unmapped). Its layout gives
  // each layer and head one stretch of the capacity, so its first token
  // touches every stretch; with the whole context's capacity (on huge
  // pages) that made all of it resident at once (0.9 GB for the 0.6B
  // shape's 4096 f32 positions, about 1.6 s of a first token on the
  // project's VM), so where the driver moves memory in place the capacity
  // starts small and doubles as the context fills, inside buffers that
  // reserve the whole context.
  const int64_t cacheBytes =
      bytes(bytes(layers, context, "the KV cache"), kvRowBytes, "the KV cache");
  kvCacheOnHugePages = manifest.target.backend == "cpu" &&
                       kvCacheOnHugePagesPays(2 * uint64_t(cacheBytes), memoryBudget);
  capacity = driver->movesInPlace() && !reserveContext ? std::min(context, kInitialCachePositions)
                                                       : context;
  const auto kvPages = kvCacheOnHugePages ? Driver::Pages::Huge : Driver::Pages::Small;
  keyCache = driver->allocate(cacheBytes, kvPages);
  valueCache = driver->allocate(cacheBytes, kvPages);
  tokenBuffer = driver->allocate(chunkRows * 4);
  int64_t workspaceBytes = 0;
  for (const manifest::Kernel &k : manifest.kernels)
    workspaceBytes = std::max(workspaceBytes, k.workspaceBytes);
  if (workspaceBytes > 0)
    workspace = driver->allocate(workspaceBytes);
  for (const manifest::Step &step : manifest.steps) {
    stepKernels.push_back(driver->kernel(step.kernel));
    for (const manifest::Kernel &k : manifest.kernels)
      if (k.name == step.kernel)
        stepKernelInfo.push_back(&k);
  }
  // The logits product computes each row on its own (a fixed grid of column
  // tiles) when it writes the output: then generation runs it on one row.
  const manifest::Step &lastStep = manifest.steps.back();
  logitsRowwise = stepKernelInfo.back()->gridKind == manifest::GridKind::Fixed &&
                  lastStep.results.size() == 1 &&
                  lastStep.results[0].kind == manifest.output.kind &&
                  lastStep.results[0].id == manifest.output.id;
}

void Model::State::reserve(int64_t positions) {
  if (positions <= capacity)
    return;
  int64_t grown = capacity;
  while (grown < positions)
    grown *= 2;
  grown = std::min(grown, context);
  if (position == 0) { // nothing cached to move
    capacity = grown;
    return;
  }
  // Each layer and head keeps its first `position` rows (the ones written),
  // now `grown` rows apart. Stretch h moves to h * grown rows, past the
  // sources of every stretch below `hi` once h * grown >= hi * capacity:
  // those move together, then the ones below them.
  const int64_t heads = layers * manifest.config.numKeyValueHeads;
  const int64_t headRowBytes = kvRowBytes / manifest.config.numKeyValueHeads;
  std::vector<std::vector<Driver::CopyRange>> waves;
  for (int64_t hi = heads; hi > 1;) {
    // At least the stretch hi - 1 (its rows go to no lower place than they
    // are), where the capacity grows by less than hi / (hi - 1).
    const int64_t lo = std::clamp<int64_t>((hi * capacity + grown - 1) / grown, 1, hi - 1);
    std::vector<Driver::CopyRange> &wave = waves.emplace_back();
    for (int64_t head = lo; head < hi; ++head)
      for (int64_t cache : {keyCache, valueCache})
        wave.push_back({{cache, head * capacity * headRowBytes, position * headRowBytes},
                        {cache, head * grown * headRowBytes, position * headRowBytes}});
    hi = lo;
  }
  driver->move(waves);
  capacity = grown;
}

void Model::State::runStep(size_t index, int64_t rows, int64_t startPos, int64_t firstRow) {
  const manifest::Step &step = manifest.steps[index];
  const manifest::Kernel *kernel = stepKernelInfo[index];
  std::vector<BufferRange> ranges;
  std::vector<int64_t> scalars = {rows - firstRow, startPos + rows, capacity};
  const int64_t cacheLayerBytes = capacity * kvRowBytes; // [kvHeads][capacity][headDim]
  auto bind = [&](const manifest::Binding &b) {
    switch (b.kind) {
    case BindingKind::Buffer:
      ranges.push_back(
          {buffers.at(size_t(b.id)), firstRow * b.rowBytes, (rows - firstRow) * b.rowBytes});
      break;
    case BindingKind::Weight:
      ranges.push_back({weightBuffers.at(size_t(b.id)), 0, weights.at(size_t(b.id)).bytes()});
      break;
    case BindingKind::Tokens:
      ranges.push_back({tokenBuffer, 0, rows * 4});
      break;
    case BindingKind::Cache:
      ranges.push_back({keyCache, 0, layers * cacheLayerBytes});
      ranges.push_back({valueCache, 0, layers * cacheLayerBytes});
      break;
    case BindingKind::CacheKeys:
    case BindingKind::CacheValues:
      ranges.push_back({b.kind == BindingKind::CacheKeys ? keyCache : valueCache,
                        b.layer * cacheLayerBytes, cacheLayerBytes});
      break;
    case BindingKind::StartPos:
      scalars.push_back(startPos);
      break;
    case BindingKind::Constant:
      scalars.push_back(b.value);
      break;
    }
  };
  for (const manifest::Binding &operand : step.operands)
    bind(operand);
  for (const manifest::Binding &result : step.results)
    if (result.kind == BindingKind::Buffer)
      bind(result);
  if (kernel->workspaceBytes > 0)
    ranges.push_back({workspace, 0, kernel->workspaceBytes});
  const int64_t workgroups = kernel->gridKind == manifest::GridKind::Fixed
                                 ? kernel->gridCount
                                 : (rows - firstRow) * kernel->gridCount;
  // A driver that times dispatches itself (device timestamps) reports the
  // seconds after the chunk (runChunk); the others are clocked here.
  const bool clockIt = profiling && !driver->timesDispatches();
  const auto start =
      clockIt ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  driver->dispatch(stepKernels[index], ranges, scalars, workgroups);
  if (profiling) {
    KernelProfile &p = stepProfiles[index];
    if (clockIt) {
      driver->finish(); // the time of this dispatch, not of issuing it
      p.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    countCall(index, startPos + rows, rows - firstRow);
  }
}

void Model::State::countCall(size_t index, int64_t visible, int64_t computedRows) {
  KernelProfile &p = stepProfiles[index];
  p.calls += 1;
  // Column-tiled (fixed-grid) kernels read all of each weight once per
  // call, and multiply each matrix by every row they compute; the
  // row-gridded ones (the embedding) gather rows. A layer's keys or values
  // are read at the `visible` positions of every KV head.
  const bool fixedGrid = stepKernelInfo[index]->gridKind == manifest::GridKind::Fixed;
  for (const manifest::Binding &operand : manifest.steps[index].operands) {
    if (operand.kind == BindingKind::Weight && fixedGrid) {
      const WeightData &weight = weights.at(size_t(operand.id));
      p.weightBytes += weight.bytes();
      if (manifest.weights.at(size_t(operand.id)).shape.size() == 2)
        p.multiplyAdds += computedRows * weight.elements;
    }
    if (operand.kind == BindingKind::CacheKeys || operand.kind == BindingKind::CacheValues)
      p.cacheBytes += visible * kvRowBytes;
  }
}

void Model::State::runChunk(int64_t rows, int64_t startPos, int64_t logitsRows) {
  const size_t last = manifest.steps.size() - 1;
  if (!logitsRowwise)
    logitsRows = rows;
  // A driver that records command buffers replays a chunk of the same shape
  // (the dispatches differ only in the position); the calls and weight bytes
  // of the steps count all the same.
  const bool replayed = driver->beginPass({rows, logitsRows}, startPos);
  if (replayed && profiling)
    for (size_t i = 0; i <= last; ++i)
      if (i < last || logitsRows > 0)
        countCall(i, startPos + rows, i < last ? rows : logitsRows);
  if (!replayed) {
    for (size_t i = 0; i < last; ++i)
      runStep(i, rows, startPos);
    if (logitsRows > 0)
      runStep(last, rows, startPos, rows - logitsRows);
  }
  // Not waited for here: the caller reads the logits (a Vulkan driver
  // submits the read with the pass) or calls finish(), then
  // addDispatchTimes().
  driver->endPass();
}

void Model::State::addDispatchTimes() {
  if (!profiling || !driver->timesDispatches())
    return;
  std::vector<double> seconds = driver->dispatchSeconds();
  for (size_t i = 0; i < seconds.size() && i < stepProfiles.size(); ++i)
    stepProfiles[i].seconds += seconds[i];
}

// Rows of the dispatch that times each variant: enough for the prefill tiles
// (and AMX's 16-row minimum) to show their rate; the logits product of a
// 152K vocabulary stays a few milliseconds per build.
constexpr int64_t kVariantProbeRows = 32;

void Model::State::chooseKernelVariants(const std::string &asked) {
  const int64_t rows = std::min(chunkRows, kVariantProbeRows);
  std::set<int64_t> chosen;
  std::vector<size_t> followers;        // steps whose kernel follows the products
  std::set<std::string> productMatmuls; // what the timed kernels' chosen builds run
  bool askedFound = asked.empty() || asked == "default";
  for (size_t i = 0; i < stepKernels.size(); ++i) {
    const int64_t kernel = stepKernels[i];
    if (!chosen.insert(kernel).second)
      continue;
    const manifest::Kernel &info = *stepKernelInfo[i];
    if (info.variantChoice == manifest::VariantChoice::LikeProducts) {
      followers.push_back(i);
      continue;
    }
    const std::vector<std::string> names = driver->kernelVariants(kernel);
    int build = -1;
    if (!asked.empty()) { // the user's choice, not a measurement
      auto named = std::find(names.begin(), names.end(), asked);
      build = named != names.end() ? int(named - names.begin()) : -1;
      askedFound = askedFound || build >= 0;
    } else if (!names.empty()) {
      build = fastestBuild(i, names.size(), rows);
    }
    useBuild(i, names, build);
    if (!info.matmul.empty())
      productMatmuls.insert(buildMatmul(info, names, build));
  }
  if (!askedFound)
    throw LoadError(fmt::format("{}: --kernel-build {}: no kernel has a variant of that name that "
                                "this CPU can run",
                                artifact->displayName(), asked));
  for (size_t i : followers) {
    const std::vector<std::string> names = driver->kernelVariants(stepKernels[i]);
    int build = -1;
    for (size_t b = 0; b < names.size() && build < 0; ++b)
      if (productMatmuls.count(buildMatmul(*stepKernelInfo[i], names, int(b))))
        build = int(b);
    useBuild(i, names, build);
  }
}

std::string Model::State::buildMatmul(const manifest::Kernel &kernel,
                                      const std::vector<std::string> &names, int build) {
  if (build < 0)
    return kernel.matmul;
  for (const manifest::KernelVariant &variant : kernel.variants)
    if (variant.name == names.at(size_t(build)))
      return variant.matmul;
  return kernel.matmul;
}

void Model::State::useBuild(size_t index, const std::vector<std::string> &names, int build) {
  driver->useKernelVariant(stepKernels[index], build);
  if (!stepKernelInfo[index]->variants.empty())
    variantChoices[stepKernelInfo[index]->name] = build < 0 ? "default" : names[size_t(build)];
}

int Model::State::fastestBuild(size_t index, size_t variants, int64_t rows) {
  int best = -1;
  double bestSeconds = std::numeric_limits<double>::infinity();
  for (int build = -1; build < int(variants); ++build) {
    driver->useKernelVariant(stepKernels[index], build);
    runStep(index, rows, 0); // warms up
    driver->finish();
    const auto start = std::chrono::steady_clock::now();
    runStep(index, rows, 0);
    driver->finish();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (seconds < bestSeconds) {
      bestSeconds = seconds;
      best = build;
    }
  }
  return best;
}

const std::map<std::string, std::string> &Model::kernelVariantChoices() const {
  return state->variantChoices;
}

Model::Model() : state(std::make_unique<State>()) {}
Model::~Model() = default;

std::unique_ptr<Model> Model::load(const std::string &artifactPath, const std::string &weightsPath,
                                   const ModelOptions &options) {
  std::unique_ptr<Model> model(new Model());
  State &s = *model->state;
  s.artifact = Artifact::open(artifactPath);
  // Before anything of the artifact runs: it carries native code.
  if (options.requiredSigner)
    s.artifact->verifySignature(*options.requiredSigner);
  try {
    s.manifest = manifest::manifestFromJson(s.artifact->manifest());
    manifest::validateManifest(s.manifest);
  } catch (const manifest::ManifestError &e) {
    throw LoadError(artifactPath + ": manifest: " + e.what());
  }
  const bool embedded = !s.manifest.embedded.section.empty();
  if (embedded && !weightsPath.empty())
    throw LoadError(artifactPath + ": embeds its weights (q3c compile --embed-weights): run it "
                                   "without --weights");
  if (!embedded && weightsPath.empty())
    throw LoadError(artifactPath + ": does not embed its weights: pass --weights MODEL_DIR (the "
                                   "checkpoint folder), or compile with --embed-weights");
  // Weights of a model with another config bind without a shape error when
  // only a constant differs (rms_norm_eps, rope_theta): refuse them first.
  if (!embedded)
    checkCheckpointConfig(weightsPath, manifest::toJson(s.manifest.config), artifactPath);
  if (options.lockWeights && s.manifest.target.backend != "cpu")
    throw LoadError(fmt::format("{}: --mlock keeps the weights the CPU kernels read in memory; "
                                "this artifact runs on {}, whose weights live in device memory",
                                artifactPath, s.manifest.target.backend));
  // Also packs the weights in parallel.
  s.pool = std::make_unique<ThreadPool>(options.threads, kKernelStackBytes);
  s.driver = createDriver(*s.artifact, s.manifest, artifactPath, *s.pool,
                         DriverOptions{options.device});
  const int64_t maxPositions = s.manifest.config.maxPositionEmbeddings;
  s.context =
      options.contextLength > 0 ? options.contextLength : std::min<int64_t>(maxPositions, 4096);
  // Refuse what cannot fit before allocating any of it.
  const std::vector<MemoryPart> modelMemory = estimateModelMemory(s.manifest, s.context);
  const MemoryBudget budget = availableMemory();
  requireMemory(
      fmt::format("{}: the model with a context of {} positions", artifactPath, s.context),
      modelMemory, budget, "; use a shorter context (q3run --ctx)");
  if (embedded) {
    const Artifact::Section *section = s.artifact->find(s.manifest.embedded.section);
    if (!section || section->kind != SectionKind::Mapped)
      throw LoadError(fmt::format("{}: embedded_weights: expected a mapped section '{}', found "
                                  "none",
                                  artifactPath, s.manifest.embedded.section));
    s.weights = bindEmbeddedWeights(s.manifest, section->data, section->size, artifactPath);
  } else {
    uint64_t modelBytes = 0;
    for (const MemoryPart &part : modelMemory)
      modelBytes = saturatingAdd(modelBytes, part.bytes);
    std::vector<std::string> warnings;
    BoundCheckpoint bound =
        bindCheckpoint(weightsPath, s.manifest, options.checkpointPlacement, *s.pool, budget,
                       modelBytes, &warnings, options.progress);
    s.checkpoint = std::move(bound.checkpoint);
    s.weights = std::move(bound.weights);
    s.checkpointPlacement = bound.placement;
  }
  if (options.lockWeights)
    s.lockWeights(embedded ? artifactPath : weightsPath);
  s.allocate(budget.bytes, options.reserveContext);
  s.chooseKernelVariants(options.kernelBuild);
  return model;
}

void Model::State::lockWeights(const std::string &source) {
  std::vector<MemoryRange> ranges;
  for (const WeightData &w : weights)
    if (w.data)
      ranges.push_back({w.data, size_t(w.bytes())});
  lockedWeights = lockInMemory(ranges, fmt::format("{}: the weights", source));
}

const std::vector<float> &Model::forward(const std::vector<int32_t> &tokens, Logits which) {
  State &s = *state;
  const int64_t rows = int64_t(tokens.size());
  if (rows == 0)
    throw RequestError("no tokens to run");
  if (s.position + rows > s.context)
    throw RequestError(fmt::format("positions {}..{} do not fit the context of {} (use --ctx)",
                                   s.position, s.position + rows - 1, s.context));
  for (int32_t id : tokens)
    if (id < 0 || id >= s.vocab)
      throw RequestError(fmt::format("token id {} is outside the vocabulary [0, {})", id, s.vocab));
  s.reserve(s.position + rows);
  const int64_t rowBytes = s.vocab * 4;
  s.logits.resize(size_t((which == Logits::All ? rows : 1) * s.vocab));
  const int64_t output = s.buffers.at(size_t(s.manifest.output.id));
  for (int64_t begin = 0; begin < rows; begin += s.chunkRows) {
    const int64_t chunk = std::min(s.chunkRows, rows - begin);
    const bool lastChunk = begin + chunk == rows;
    s.driver->write({s.tokenBuffer, 0, chunk * 4}, tokens.data() + begin);
    // Logits::Last: only the last chunk's last row goes through the logits
    // product (a row-wise product over a fixed grid of columns).
    const int64_t logitsRows = which == Logits::All ? chunk : (lastChunk ? 1 : 0);
    s.runChunk(chunk, s.position, logitsRows);
    s.position += chunk;
    if (which == Logits::All)
      s.driver->read({output, 0, chunk * rowBytes}, s.logits.data() + begin * s.vocab);
    else if (lastChunk)
      s.driver->read({output, (chunk - 1) * rowBytes, rowBytes}, s.logits.data());
    else
      s.driver->finish(); // the next chunk's token write reuses the buffer
    s.addDispatchTimes();
  }
  return s.logits;
}

int64_t Model::vocabSize() const { return state->vocab; }
int64_t Model::contextLength() const { return state->context; }
int64_t Model::prefillRows() const { return state->chunkRows; }
int Model::threads() const { return state->pool->size(); }
int64_t Model::position() const { return state->position; }
void Model::reset() { state->position = 0; }
int64_t Model::decodeBytesPerToken(int64_t visiblePositions) const {
  // Counted from the weights as bound (their real dtype and layout) and the
  // schedule's bindings, not copied from the manifest's compile-time figure:
  // one row of every activation read and written, every product weight in
  // full, one row of an embedding table, the K/V rows written and the
  // visible positions of the layer's keys and values attention reads.
  const manifest::Manifest &m = state->manifest;
  const int64_t cacheRowBytes = state->kvRowBytes;
  int64_t total = 0;
  for (const manifest::Step &step : m.steps) {
    const bool gathersRows =
        std::any_of(step.operands.begin(), step.operands.end(),
                    [](const manifest::Binding &b) { return b.kind == BindingKind::Tokens; });
    std::set<std::pair<int, int64_t>> seen; // a value passed twice is read once
    for (const manifest::Binding &operand : step.operands) {
      if (!seen.insert({int(operand.kind), operand.id}).second)
        continue;
      switch (operand.kind) {
      case BindingKind::Weight: {
        const WeightData &w = state->weights.at(size_t(operand.id));
        const int64_t rows = m.weights.at(size_t(operand.id)).shape.front();
        total += gathersRows ? w.bytes() / rows : w.bytes();
        break;
      }
      case BindingKind::Buffer:
        total += operand.rowBytes;
        break;
      case BindingKind::CacheKeys:
      case BindingKind::CacheValues:
        total += visiblePositions * cacheRowBytes;
        break;
      case BindingKind::Cache:
        total += 2 * cacheRowBytes; // the step writes this token's keys and values
        break;
      case BindingKind::Tokens:
        total += int64_t(sizeof(int32_t));
        break;
      default:
        break;
      }
    }
    for (const manifest::Binding &result : step.results)
      if (result.kind == BindingKind::Buffer)
        total += result.rowBytes;
  }
  return total;
}

int64_t Model::weightBytes() const {
  int64_t total = 0;
  for (const WeightData &w : state->weights)
    if (w.data)
      total += w.bytes();
  return total;
}
uint64_t Model::lockedBytes() const { return state->lockedWeights.bytes(); }
int64_t Model::kvCacheBytes() const {
  return 2 * state->layers * state->context * state->kvRowBytes;
}
int64_t Model::kvCachePositions() const { return state->capacity; }
bool Model::kvCacheOnHugePages() const { return state->kvCacheOnHugePages; }
const std::optional<CheckpointPlacement> &Model::checkpointPlacement() const {
  return state->checkpointPlacement;
}
const manifest::Manifest &Model::manifest() const { return state->manifest; }
const manifest::ModelConfig &Model::config() const { return state->manifest.config; }
ThreadPool &Model::pool() { return *state->pool; }
std::string Model::deviceName() const { return state->driver->deviceName(); }
std::optional<double> Model::deviceReadBandwidth(int reads, int64_t *bytes) {
  std::optional<Driver::Bandwidth> measured = state->driver->measureReadBandwidth(reads);
  if (!measured)
    return std::nullopt;
  if (bytes)
    *bytes = measured->bytes;
  return measured->gigabytesPerSecond;
}

std::optional<double> Model::weightReadBandwidth(int reads, int64_t *bytes) {
  State &s = *state;
  if (s.manifest.target.backend != "cpu")
    return std::nullopt;
  std::vector<MemoryRegion> regions;
  for (size_t i = 0; i < s.weights.size(); ++i)
    if (s.weightBuffers[i] >= 0)
      regions.push_back({s.weights[i].data, s.weights[i].bytes()});
  const BandwidthResult result = measureRegionsReadBandwidth(*s.pool, regions, reads);
  if (bytes)
    *bytes = result.bytes;
  return result.gigabytesPerSecond;
}

void Model::setProfiling(bool enabled) {
  State &s = *state;
  s.profiling = enabled;
  s.driver->setProfiling(enabled);
  if (enabled) {
    s.stepProfiles.assign(s.manifest.steps.size(), KernelProfile{});
    for (size_t i = 0; i < s.manifest.steps.size(); ++i)
      s.stepProfiles[i].kernel = s.manifest.steps[i].kernel;
  }
}

std::vector<KernelProfile> Model::profile() const {
  std::vector<KernelProfile> byKernel;
  for (const KernelProfile &step : state->stepProfiles) {
    auto it = std::find_if(byKernel.begin(), byKernel.end(),
                           [&](const KernelProfile &k) { return k.kernel == step.kernel; });
    if (it == byKernel.end()) {
      byKernel.push_back(step);
      continue;
    }
    it->calls += step.calls;
    it->seconds += step.seconds;
    it->weightBytes += step.weightBytes;
    it->cacheBytes += step.cacheBytes;
    it->multiplyAdds += step.multiplyAdds;
  }
  return byKernel;
}

bool kvCacheOnHugePagesPays(uint64_t cacheBytes, uint64_t budgetBytes) {
  return cacheBytes >= 2 * kHugePageBytes && cacheBytes <= budgetBytes / 8;
}

} // namespace q3::runtime
