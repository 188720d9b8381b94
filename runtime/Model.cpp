// Model: the scheduler that runs an artifact's schedule on bound weights
// through a Driver (runtime/Driver.h).
//
// Load: validate the artifact, create the driver for its format (the CPU
// driver checks the CPU and loads the kernels), bind the checkpoint's tensors
// (mmap; converted only when the artifact wants another dtype), evaluate the
// weight transforms (fold_gain, concat_rows, column_blocks) and hand the
// weights to the driver, and allocate the planned activation buffers and the
// KV cache for the context in driver memory. Run: for each dispatch of the
// schedule, bind its operands to buffer ranges and scalars and dispatch it.
#include "runtime/Model.h"

#include "runtime/Artifact.h"
#include "runtime/Checkpoint.h"
#include "runtime/DType.h"
#include "runtime/Driver.h"
#include "runtime/LoadError.h"
#include "runtime/WeightBinder.h"
#include "runtime/WeightLayout.h"

#include <fmt/format.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <chrono>
#include <memory>

namespace q3::runtime {
namespace {

/// The manifest says something the runtime cannot do. Model::load turns it
/// into a LoadError naming the artifact.
struct ManifestError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A weight as the kernels read it: bytes in the artifact's dtype.
struct WeightData {
  DType dtype = DType::F32;
  int64_t elements = 0;
  const uint8_t *data = nullptr;
  std::vector<uint8_t> owned; // when converted or computed
};

/// What the runtime binds to one operand or result of a dispatch.
struct Binding {
  enum class Kind { Buffer, Weight, Tokens, StartPos, Cache, CacheKeys, CacheValues, Constant };
  Kind kind;
  int64_t value = 0;    // buffer id, weight id, layer or constant
  int64_t rowBytes = 0; // buffers: bytes of one row of the bound value
};

struct Step {
  int64_t kernelId = 0; // the driver's
  std::string kernel;
  enum class Grid { Fixed, Rows, RowsTimes } grid = Grid::Fixed;
  int64_t gridValue = 0;
  std::vector<Binding> operands, results;
};

DType parseArtifactDType(const std::string &name) {
  if (name == "bf16")
    return DType::BF16;
  if (name == "f16")
    return DType::F16;
  if (name == "f32")
    return DType::F32;
  throw ManifestError("unknown weight dtype '" + name + "'");
}

Binding parseBinding(const nlohmann::json &j) {
  static const std::map<std::string, Binding::Kind> kinds = {
      {"buffer", Binding::Kind::Buffer},
      {"weight", Binding::Kind::Weight},
      {"tokens", Binding::Kind::Tokens},
      {"start_pos", Binding::Kind::StartPos},
      {"cache", Binding::Kind::Cache},
      {"cache_keys", Binding::Kind::CacheKeys},
      {"cache_values", Binding::Kind::CacheValues},
      {"constant", Binding::Kind::Constant}};
  auto kind = kinds.find(j.at("kind").get<std::string>());
  if (kind == kinds.end())
    throw ManifestError("unknown operand kind '" + j.at("kind").get<std::string>() + "'");
  Binding binding{kind->second};
  for (const char *key : {"id", "layer", "value"})
    if (j.contains(key))
      binding.value = j.at(key).get<int64_t>();
  if (binding.kind == Binding::Kind::Buffer)
    binding.rowBytes = j.at("row_bytes").get<int64_t>();
  return binding;
}

/// The KV cache's element type (manifest kv_cache_dtype: f32, the default
/// for artifacts that do not say, or bf16).
DType kvCacheDType(const nlohmann::json &manifest) {
  auto it = manifest.find("kv_cache_dtype");
  if (it == manifest.end())
    return DType::F32;
  if (*it == "f32")
    return DType::F32;
  if (*it == "bf16")
    return DType::BF16;
  throw ManifestError("kv_cache_dtype: expected \"f32\" or \"bf16\", found " + it->dump());
}

std::vector<float> widen(const WeightData &weight) {
  std::vector<float> values(size_t(weight.elements));
  convertToF32(weight.dtype, weight.data, values.data(), values.size());
  return values;
}

} // namespace

struct Model::State {
  std::unique_ptr<Artifact> artifact;
  std::unique_ptr<Checkpoint> checkpoint;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<Driver> driver;
  std::vector<WeightData> weights;
  std::vector<int64_t> weightBuffers; // driver buffer of each weight the schedule reads
  std::vector<Step> steps;
  std::vector<int64_t> rowBytes;        // per activation buffer
  std::vector<int64_t> buffers;         // driver buffers of [context] rows each
  int64_t keyCache = 0, valueCache = 0; // [layers][kvHeads][context][headDim], kv_cache_dtype
  int64_t tokenBuffer = 0;              // [context] i32
  std::vector<float> logits;
  int64_t outputBuffer = 0;
  int64_t layers = 0, kvRowBytes = 0, vocab = 0, context = 0, position = 0;
  int64_t decodeBytes = 0;
  bool profiling = false;
  std::vector<KernelProfile> stepProfiles; // parallel to steps while profiling

  void bindWeights(const std::string &weightsPath,
                   const std::function<void(int64_t, int64_t)> &progress);
  void packColumnBlocksOf(const WeightData &source, const nlohmann::json &entry,
                          WeightData &packed);
  void foldGainInto(const WeightData &matrix, const WeightData &gain, WeightData &folded);
  void dropMappedPages(const WeightData &copied);
  void releaseIntermediate(WeightData &weight);
  void materialize(const nlohmann::json &entry, const BoundWeights &bound);
  void buildSchedule();
  /// Runs one dispatch over rows [firstRow, rows) of the activation buffers
  /// (firstRow > 0 only for a row-independent product).
  void runStep(const Step &step, int64_t rows, int64_t startPos, int64_t firstRow = 0);
};

void Model::State::packColumnBlocksOf(const WeightData &source, const nlohmann::json &entry,
                                      WeightData &packed) {
  auto shape = entry.at("shape").get<std::vector<int64_t>>();
  if (source.dtype != DType::BF16 || packed.dtype != DType::BF16 || shape.size() != 2 ||
      !fitsColumnBlocks(shape[0], shape[1]) || source.elements != packed.elements)
    throw ManifestError(fmt::format(
        "weight {}: column blocks need a bf16 [16n, 2m] matrix, got {} {}",
        entry.at("id").get<int64_t>(), entry.at("dtype").dump(), entry.at("shape").dump()));
  packed.owned.resize(size_t(packed.elements) * 2);
  const auto *from =
      reinterpret_cast<const uint16_t *>(source.owned.empty() ? source.data : source.owned.data());
  auto *to = reinterpret_cast<uint16_t *>(packed.owned.data());
  // In 16 chunks per thread, each dropping the mapped pages it has read: the
  // tied lm_head's 311 MB are otherwise resident twice until the end.
  const int64_t blockElements = kColumnBlockRows * shape[1];
  pool->parallelFor(
      shape[0] / kColumnBlockRows,
      [&](int64_t begin, int64_t end) {
        packColumnBlocks(from, to, shape[1], begin, end);
        if (source.owned.empty())
          checkpoint->dropPages(source.data + begin * blockElements * 2,
                                size_t((end - begin) * blockElements * 2));
      },
      16);
  dropMappedPages(source);
}

void Model::State::foldGainInto(const WeightData &matrix, const WeightData &gain,
                                WeightData &folded) {
  const std::vector<float> gains = widen(gain);
  const int64_t columns = int64_t(gains.size());
  if (columns == 0 || matrix.elements % columns != 0 || folded.elements != matrix.elements)
    throw ManifestError(fmt::format("fold_gain: a gain of {} does not divide a matrix of {}",
                                    columns, matrix.elements));
  // Row by row: an f32 copy of the whole matrix never exists.
  const size_t inSize = dtypeSize(matrix.dtype), outSize = dtypeSize(folded.dtype);
  folded.owned.resize(size_t(folded.elements) * outSize);
  pool->parallelFor(matrix.elements / columns, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(columns));
    for (int64_t r = begin; r < end; ++r) {
      convertToF32(matrix.dtype, matrix.data + size_t(r * columns) * inSize, row.data(),
                   row.size());
      for (size_t c = 0; c < row.size(); ++c)
        row[c] *= gains[c];
      convertFromF32(folded.dtype, row.data(), folded.owned.data() + size_t(r * columns) * outSize,
                     row.size());
    }
  });
  dropMappedPages(matrix);
}

void Model::State::dropMappedPages(const WeightData &copied) {
  // Copying touched every page; the kernels read the copy. Safe even if the
  // tensor is read again (the embedding's gather): the pages fault back in.
  if (copied.owned.empty() && copied.data)
    checkpoint->dropPages(copied.data, size_t(copied.elements) * dtypeSize(copied.dtype));
}

void Model::State::releaseIntermediate(WeightData &weight) {
  if (weight.owned.empty())
    dropMappedPages(weight);
  std::vector<uint8_t>().swap(weight.owned);
  weight.data = nullptr;
}

void Model::State::materialize(const nlohmann::json &entry, const BoundWeights &bound) {
  WeightData weight;
  weight.dtype = parseArtifactDType(entry.at("dtype").get<std::string>());
  weight.elements = 1;
  for (int64_t extent : entry.at("shape").get<std::vector<int64_t>>())
    weight.elements *= extent;
  const std::string kind = entry.at("kind").get<std::string>();
  auto store = [&](const std::vector<float> &values) {
    weight.owned.resize(values.size() * dtypeSize(weight.dtype));
    convertFromF32(weight.dtype, values.data(), weight.owned.data(), values.size());
  };
  if (kind == "param") {
    const TensorView *tensor = bound.byName.at(entry.at("name").get<std::string>());
    if (tensor->dtype == weight.dtype)
      weight.data = tensor->data; // used in place, straight from the mapped file
    else
      store(readAsF32(*tensor));
  } else if (kind == "fold_gain") {
    auto inputs = entry.at("inputs").get<std::vector<int64_t>>();
    foldGainInto(weights.at(inputs.at(0)), weights.at(inputs.at(1)), weight);
  } else if (kind == "concat_rows") {
    for (int64_t input : entry.at("inputs").get<std::vector<int64_t>>()) {
      const WeightData &part = weights.at(input);
      const uint8_t *bytes = part.owned.empty() ? part.data : part.owned.data();
      weight.owned.insert(weight.owned.end(), bytes, bytes + part.elements * dtypeSize(part.dtype));
      dropMappedPages(part);
    }
  } else if (kind == "column_blocks") {
    packColumnBlocksOf(weights.at(entry.at("inputs").at(0).get<size_t>()), entry, weight);
  } else {
    throw ManifestError("unknown weight kind '" + kind + "'");
  }
  if (!weight.owned.empty())
    weight.data = weight.owned.data();
  weights.push_back(std::move(weight));
}

void Model::State::bindWeights(const std::string &weightsPath,
                               const std::function<void(int64_t, int64_t)> &progress) {
  const nlohmann::json &manifest = artifact->manifest();
  std::vector<ParamSpec> params;
  for (const auto &entry : manifest.at("weights"))
    if (entry.at("kind") == "param")
      params.push_back(
          {entry.at("name").get<std::string>(), entry.at("shape").get<std::vector<int64_t>>()});
  checkpoint = std::make_unique<Checkpoint>(Checkpoint::open(weightsPath));
  std::vector<std::string> warnings;
  BoundWeights bound = q3::runtime::bindWeights(
      *checkpoint, params, manifest.at("config").at("tie_word_embeddings").get<bool>(), &warnings);
  // Only the weights the schedule reads, and what they are computed from, are
  // materialized: a transform whose result no dispatch reads is skipped.
  const nlohmann::json &entries = manifest.at("weights");
  std::vector<bool> read(entries.size(), false), needed;
  for (const auto &step : manifest.at("schedule"))
    for (const auto &operand : step.at("operands"))
      if (operand.at("kind") == "weight")
        read.at(operand.at("id").get<size_t>()) = true;
  needed = read;
  for (size_t i = entries.size(); i-- > 0;)
    if (needed[i] && entries[i].contains("inputs"))
      for (int64_t input : entries[i].at("inputs").get<std::vector<int64_t>>())
        needed.at(size_t(input)) = true;
  // An input that no dispatch reads is released right after its last
  // consumer: the folded, concatenated and packed copies of every layer would
  // otherwise all be resident at once, twice the model.
  std::vector<size_t> lastUse(entries.size(), 0);
  for (size_t i = 0; i < entries.size(); ++i)
    if (needed[i] && entries[i].contains("inputs"))
      for (int64_t input : entries[i].at("inputs").get<std::vector<int64_t>>())
        lastUse.at(size_t(input)) = i;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!needed[i]) {
      weights.emplace_back();
      continue;
    }
    materialize(entries[i], bound);
    if (progress)
      progress(int64_t(i + 1), int64_t(entries.size()));
    if (entries[i].contains("inputs"))
      for (int64_t input : entries[i].at("inputs").get<std::vector<int64_t>>())
        if (lastUse[size_t(input)] == i && !read[size_t(input)])
          releaseIntermediate(weights[size_t(input)]);
  }
  // Weights that only fed a transform are not needed any more; the rest go
  // to the driver.
  weightBuffers.assign(weights.size(), -1);
  for (size_t i = 0; i < weights.size(); ++i) {
    WeightData &w = weights[i];
    if (read[i]) {
      weightBuffers[i] = driver->wrapHost(w.data, w.elements * int64_t(dtypeSize(w.dtype)));
      continue;
    }
    std::vector<uint8_t>().swap(w.owned);
    w.data = nullptr;
  }
#if defined(__GLIBC__)
  // The released intermediates below malloc's mmap threshold left holes in
  // the heap that glibc keeps; hand their pages back (~120 MB for 0.6B).
  malloc_trim(0);
#endif
}

void Model::State::buildSchedule() {
  const nlohmann::json &manifest = artifact->manifest();
  std::map<std::string, nlohmann::json> grids;
  for (const auto &kernel : manifest.at("kernels"))
    grids[kernel.at("name").get<std::string>()] = kernel.at("grid");
  for (const auto &entry : manifest.at("schedule")) {
    Step step;
    step.kernel = entry.at("kernel").get<std::string>();
    step.kernelId = driver->kernel(step.kernel);
    const nlohmann::json &grid = grids.at(step.kernel);
    const std::string kind = grid.at("kind").get<std::string>();
    step.grid = kind == "fixed"  ? Step::Grid::Fixed
                : kind == "rows" ? Step::Grid::Rows
                                 : Step::Grid::RowsTimes;
    step.gridValue = grid.value(kind == "fixed" ? "count" : "factor", int64_t(1));
    for (const auto &operand : entry.at("operands"))
      step.operands.push_back(parseBinding(operand));
    for (const auto &result : entry.at("results"))
      step.results.push_back(parseBinding(result));
    steps.push_back(std::move(step));
  }
  outputBuffer = parseBinding(manifest.at("output")).value;
  // Every binding fits its buffer (a buffer holds `context` rows of its widest tenant).
  for (const Step &step : steps)
    for (const auto *list : {&step.operands, &step.results})
      for (const Binding &b : *list)
        if (b.kind == Binding::Kind::Buffer && b.rowBytes > rowBytes.at(b.value))
          throw ManifestError("dispatch of " + step.kernel + ": a value of " +
                              std::to_string(b.rowBytes) + " bytes per row does not fit buffer " +
                              std::to_string(b.value));
}

void Model::State::runStep(const Step &step, int64_t rows, int64_t startPos, int64_t firstRow) {
  std::vector<BufferRange> ranges;
  std::vector<int64_t> scalars = {rows - firstRow, startPos + rows, context};
  const int64_t cacheLayerBytes = context * kvRowBytes; // [kvHeads][context][headDim]
  auto bind = [&](const Binding &b) {
    switch (b.kind) {
    case Binding::Kind::Buffer:
      ranges.push_back(
          {buffers.at(b.value), firstRow * b.rowBytes, (rows - firstRow) * b.rowBytes});
      break;
    case Binding::Kind::Weight: {
      const WeightData &w = weights.at(b.value);
      ranges.push_back({weightBuffers.at(b.value), 0, w.elements * int64_t(dtypeSize(w.dtype))});
      break;
    }
    case Binding::Kind::Tokens:
      ranges.push_back({tokenBuffer, 0, rows * 4});
      break;
    case Binding::Kind::Cache:
      ranges.push_back({keyCache, 0, layers * cacheLayerBytes});
      ranges.push_back({valueCache, 0, layers * cacheLayerBytes});
      break;
    case Binding::Kind::CacheKeys:
    case Binding::Kind::CacheValues:
      ranges.push_back({b.kind == Binding::Kind::CacheKeys ? keyCache : valueCache,
                        b.value * cacheLayerBytes, cacheLayerBytes});
      break;
    case Binding::Kind::StartPos:
      scalars.push_back(startPos);
      break;
    case Binding::Kind::Constant:
      scalars.push_back(b.value);
      break;
    }
  };
  for (const Binding &operand : step.operands)
    bind(operand);
  for (const Binding &result : step.results)
    if (result.kind == Binding::Kind::Buffer)
      bind(result);
  const int64_t workgroups = step.grid == Step::Grid::Fixed  ? step.gridValue
                             : step.grid == Step::Grid::Rows ? rows
                                                             : rows * step.gridValue;
  const auto start =
      profiling ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  driver->dispatch(step.kernelId, ranges, scalars, workgroups);
  if (profiling) {
    driver->finish(); // the time of this dispatch, not of issuing it
    KernelProfile &p = stepProfiles[size_t(&step - steps.data())];
    p.calls += 1;
    p.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // Column-tiled (fixed-grid) kernels read all of each weight once per
    // call; the row-gridded ones (the embedding) gather rows.
    for (const Binding &operand : step.operands)
      if (step.grid == Step::Grid::Fixed && operand.kind == Binding::Kind::Weight) {
        const WeightData &w = weights.at(operand.value);
        p.weightBytes += w.elements * int64_t(dtypeSize(w.dtype));
      }
  }
}

Model::Model() : state(std::make_unique<State>()) {}
Model::~Model() = default;

std::unique_ptr<Model> Model::load(const std::string &artifactPath, const std::string &weightsPath,
                                   const ModelOptions &options) {
  std::unique_ptr<Model> model(new Model());
  State &s = *model->state;
  s.artifact = Artifact::open(artifactPath);
  try {
    s.pool = std::make_unique<ThreadPool>(options.threads); // also packs weights in parallel
    s.driver = createDriver(*s.artifact, artifactPath, *s.pool);
    const nlohmann::json &config = s.artifact->manifest().at("config");
    s.layers = config.at("num_hidden_layers").get<int64_t>();
    s.kvRowBytes = config.at("num_key_value_heads").get<int64_t>() *
                   config.at("head_dim").get<int64_t>() *
                   int64_t(dtypeSize(kvCacheDType(s.artifact->manifest())));
    s.vocab = config.at("vocab_size").get<int64_t>();
    const int64_t maxPositions = config.at("max_position_embeddings").get<int64_t>();
    s.context =
        options.contextLength > 0 ? options.contextLength : std::min<int64_t>(maxPositions, 4096);
    s.bindWeights(weightsPath, options.progress);
    s.rowBytes = s.artifact->manifest().at("buffers").at("row_bytes").get<std::vector<int64_t>>();
    s.buildSchedule();
    for (int64_t bytes : s.rowBytes)
      s.buffers.push_back(s.driver->allocate(s.context * bytes));
    s.keyCache = s.driver->allocate(s.layers * s.context * s.kvRowBytes);
    s.valueCache = s.driver->allocate(s.layers * s.context * s.kvRowBytes);
    s.tokenBuffer = s.driver->allocate(s.context * 4);
    s.decodeBytes = s.artifact->manifest().value("decode_bytes_per_token", int64_t(0));
  } catch (const ManifestError &e) {
    throw LoadError(artifactPath + ": manifest: " + e.what());
  } catch (const nlohmann::json::exception &e) {
    throw LoadError(artifactPath + ": malformed manifest: " + e.what());
  } catch (const std::out_of_range &e) {
    throw LoadError(artifactPath +
                    ": manifest refers to something that does not exist: " + e.what());
  }
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
  s.driver->write({s.tokenBuffer, 0, rows * 4}, tokens.data());
  // The logits product (the last dispatch, a row-wise product over a fixed
  // grid of columns) can run on the last row alone.
  const bool lastOnly = which == Logits::Last && s.steps.back().grid == Step::Grid::Fixed;
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const bool logitsStep = i + 1 == s.steps.size();
    s.runStep(s.steps[i], rows, s.position, logitsStep && lastOnly ? rows - 1 : 0);
  }
  s.position += rows;
  s.driver->finish();
  // Logits::Last: the window's one row is the buffer's row rows - 1.
  const int64_t firstRow = which == Logits::Last ? rows - 1 : 0;
  const int64_t rowBytes = s.vocab * 4;
  s.logits.resize(size_t((rows - firstRow) * s.vocab));
  s.driver->read({s.buffers.at(s.outputBuffer), firstRow * rowBytes, (rows - firstRow) * rowBytes},
                 s.logits.data());
  return s.logits;
}

int64_t Model::vocabSize() const { return state->vocab; }
int64_t Model::contextLength() const { return state->context; }
int Model::threads() const { return state->pool->size(); }
int64_t Model::position() const { return state->position; }
void Model::reset() { state->position = 0; }
int64_t Model::decodeBytesPerToken() const { return state->decodeBytes; }
int64_t Model::weightBytes() const {
  int64_t total = 0;
  for (const WeightData &w : state->weights)
    if (w.data)
      total += w.elements * int64_t(dtypeSize(w.dtype));
  return total;
}
const nlohmann::json &Model::manifest() const { return state->artifact->manifest(); }
ThreadPool &Model::pool() { return *state->pool; }

void Model::setProfiling(bool enabled) {
  State &s = *state;
  s.profiling = enabled;
  if (enabled) {
    s.stepProfiles.assign(s.steps.size(), KernelProfile{});
    for (size_t i = 0; i < s.steps.size(); ++i)
      s.stepProfiles[i].kernel = s.steps[i].kernel;
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
  }
  return byKernel;
}

} // namespace q3::runtime
