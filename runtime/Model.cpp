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
// The buffers and KV cache: ModelBuffers.cpp; the kernel builds chosen at
// load: ModelKernelVariants.cpp.
#include "runtime/Model.h"
#include "runtime/ModelState.h"

#include "runtime/Artifact.h"
#include "runtime/Checkpoint.h"
#include "runtime/CheckpointConfig.h"
#include "runtime/Driver.h"
#include "runtime/KernelABI.h"
#include "runtime/LoadError.h"
#include "runtime/MemoryBandwidth.h"
#include "runtime/ModelMemory.h"
#include "runtime/WeightPlan.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <set>

namespace q3::runtime {

using manifest::BindingKind;

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
  driver->dispatch(stepKernels[index], ranges, scalars, workgroups);
  // The driver times the dispatches as they run (addDispatchTimes).
  if (profiling)
    countCall(index, startPos + rows, rows - firstRow);
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
  if (!profiling)
    return;
  std::vector<double> seconds = driver->dispatchSeconds();
  for (size_t i = 0; i < seconds.size() && i < stepProfiles.size(); ++i)
    stepProfiles[i].seconds += seconds[i];
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
  const int64_t maxPositions = s.manifest.config.maxPositionEmbeddings;
  s.context =
      options.contextLength > 0 ? options.contextLength : std::min<int64_t>(maxPositions, 4096);
  // Refuse what cannot fit before allocating any of it (the CPU driver
  // reserves its threads' scratch).
  const std::vector<MemoryPart> modelMemory =
      estimateModelMemory(s.manifest, s.context, s.pool->size());
  const MemoryBudget budget = availableMemory();
  requireMemory(
      fmt::format("{}: the model with a context of {} positions", artifactPath, s.context),
      modelMemory, budget, "; use a shorter context (q3run --ctx)");
  s.driver = createDriver(*s.artifact, s.manifest, artifactPath, *s.pool,
                         DriverOptions{options.device});
  if (embedded) {
    const Artifact::Section *section = s.artifact->find(s.manifest.embedded.section);
    if (!section || section->kind != SectionKind::Mapped)
      throw LoadError(fmt::format("{}: embedded_weights: expected a mapped section '{}', found "
                                  "none",
                                  artifactPath, s.manifest.embedded.section));
    s.weights = bindEmbeddedWeights(s.manifest, section->data, section->size, artifactPath);
    if (s.manifest.target.backend == "cpu") // the kernels stream them in place
      s.embeddedWeightsPlacement = placeEmbeddedWeights(*s.artifact, section->size, *s.pool);
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
const std::optional<CheckpointPlacement> &Model::embeddedWeightsPlacement() const {
  return state->embeddedWeightsPlacement;
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

} // namespace q3::runtime
