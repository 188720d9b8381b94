//===- Manifest.h - the typed contract between compiler and runtime -------===//
//
// An artifact's manifest describes everything the runtime does with a
// compiled model: the model's hyperparameters, the kernels (their grids,
// lowering choices and signatures), the weight plan (checkpoint tensors and
// the transforms that turn them into what the kernels read), the activation
// buffers, and the schedule of dispatches. The compiler fills these structs
// from the target-stage IR and writes them with toJson(); the runtime reads
// them with manifestFromJson(), which checks every field's type and range and
// names the field ("schedule[12].operands[1].id: ..."), and validateManifest()
// (Manifest.cpp), which checks that the pieces agree with each other. No key
// of the manifest is spelled anywhere else. docs/artifact.md describes it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/DType.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace q3::manifest {

/// The version of the manifest's contents; a reader accepts exactly this one.
inline constexpr int64_t kManifestVersion = 5;

inline constexpr const char *kCpuFormat = "q3c-cpu";
/// A Vulkan artifact: the same schema, plus the Vulkan kernels' modules and
/// dispatch facts under "vulkan" (runtime/vulkan/VulkanManifest.h).
inline constexpr const char *kVulkanFormat = "q3c-vulkan";

/// A manifest that cannot be read or does not hold together. The message is
/// one line and starts with the field it concerns.
class ManifestError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

using runtime::DType;
enum class WeightKind { Param, FoldGain, ConcatRows, PackColumnBlocks };
enum class Layout { RowMajor, ColumnBlocks };
enum class GridKind { Fixed, PerRow };
/// Where a product's bf16 weight is put in column blocks (q3.lowering's
/// weight_packing): not a packed product, by a weight transform at load, or by
/// the kernel in each prefill (the weight bound row-major).
enum class WeightPacking { None, AtLoad, PerCall };
/// How the runtime picks among a kernel's variants (the kernel's
/// q3.variant_choice): by timing one dispatch of each, or by following the
/// matmul the timed products chose (attention).
enum class VariantChoice { Timed, LikeProducts };

/// What one operand or result of a kernel is.
enum class SlotKind {
  Buffer,     // activation rows (f32), row_bytes per row
  Tokens,     // the token ids (i32), one per row
  Weight,     // a weight of `shape`, `dtype`, `layout`
  Cache,      // the whole KV cache (keys and values)
  CacheLayer, // one layer of the keys or the values: [kv_heads][context][head_dim]
  Index,      // an index scalar (layer, start position)
};

/// What a dispatch binds to one operand or result.
enum class BindingKind {
  Buffer,      // id: an activation buffer; row_bytes of the bound value
  Weight,      // id: a weight of the plan
  Tokens,      // the request's token ids
  StartPos,    // the position of the first row
  Cache,       // the whole cache
  CacheKeys,   // layer: one layer's keys
  CacheValues, // layer: one layer's values
  Constant,    // value: an index constant
};

struct ModelConfig {
  int64_t hiddenSize = 0, intermediateSize = 0, numHiddenLayers = 0, numAttentionHeads = 0,
          numKeyValueHeads = 0, headDim = 0, vocabSize = 0, maxPositionEmbeddings = 0;
  double rmsNormEps = 0, ropeTheta = 0;
  bool tieWordEmbeddings = false;
  std::string torchDtype; // informational
};

struct Target {
  std::string backend = "cpu"; // cpu or vulkan
  std::string cpu;             // what --cpu said: host, x86-64-v3, ...
  std::string llvmCpu;
  std::vector<std::string> requiredFeatures; // LLVM spelling; the runtime checks them
};

struct Slot {
  SlotKind kind = SlotKind::Buffer;
  int64_t rowBytes = 0;        // Buffer
  std::vector<int64_t> shape;  // Weight; CacheLayer: [kv_heads, head_dim]; Cache: [layers, kv_heads, head_dim]
  DType dtype = DType::F32;    // Weight; Cache and CacheLayer: the cache's element
  Layout layout = Layout::RowMajor;     // Weight
};

/// Another build of a kernel the runtime may run instead (a portable
/// target's `q3.variants`): its entry is q3_kernel_<kernel>__<name>.
/// The memory one call of a kernel takes on each thread that runs it:
/// `bytes` plus `rowBytes` per row of the dispatch (q3.lowering's
/// thread_scratch; runtime/KernelABI.h).
struct ThreadScratch {
  int64_t bytes = 0, rowBytes = 0;
  int64_t bytesFor(int64_t rows) const { return bytes + rowBytes * rows; }
};

struct KernelVariant {
  std::string name;   // "<matmul>_<tile rows>"
  std::string matmul; // prefill product instructions
  std::vector<int64_t> tile;
  std::vector<std::string> requiredFeatures; // CPU features (LLVM spelling) it needs
  ThreadScratch threadScratch;
};

/// The CPU features (LLVM spelling) the prefill instructions `matmul` need
/// beyond the x86-64 levels; none for f32.
inline std::vector<std::string> matmulRequiredFeatures(const std::string &matmul) {
  if (matmul == "avx512bf16")
    return {"avx512bf16"};
  if (matmul == "amx")
    return {"amx-tile", "amx-bf16", "avx512bf16"};
  return {};
}

/// Kernel::prefetchBytes of a kernel whose decode loops issue no prefetch
/// (q3.lowering's prefetch_bytes = none).
inline constexpr int64_t kNoPrefetch = -1;

struct Kernel {
  std::string name; // the entry is q3_kernel_<name> (runtime/KernelABI.h)
  GridKind gridKind = GridKind::Fixed;
  int64_t gridCount = 1;
  std::string matmul;        // prefill product instructions (products, attention), else ""
  std::vector<int64_t> tile; // register tile of the prefill product
  WeightPacking weightPacking = WeightPacking::None;
  int64_t prefillChunks = 1, decodeChunks = 1; // per thread, 1..64
  /// Decode loops prefetch this far ahead (0: not a streaming kernel;
  /// kNoPrefetch, "none" in the JSON: they issue no prefetch).
  int64_t prefetchBytes = 0;
  int64_t decodeStreams = 0; // runs decode loops read side by side (0: not a streaming kernel)
  int64_t decodeAccumulators = 0; // vector accumulators per row or head of decode (0: none)
  /// Scratch the kernel takes after its results (runtime/KernelABI.h): the
  /// runtime allocates it zeroed once; the kernel leaves it as it found it.
  int64_t workspaceBytes = 0;
  ThreadScratch threadScratch;
  std::vector<Slot> operands, results;
  std::vector<KernelVariant> variants; // alternatives the runtime may pick at load
  VariantChoice variantChoice = VariantChoice::Timed;
};

struct Weight {
  int64_t id = 0;
  WeightKind kind = WeightKind::Param;
  std::string name;            // Param: the checkpoint tensor
  std::vector<int64_t> inputs; // transforms: weight ids, all smaller than id
  std::vector<int64_t> shape;
  DType dtype = DType::F32;
  Layout layout = Layout::RowMajor;
};

struct Binding {
  BindingKind kind = BindingKind::Buffer;
  int64_t id = 0;       // Buffer, Weight
  int64_t rowBytes = 0; // Buffer
  int64_t layer = 0;    // CacheKeys, CacheValues
  int64_t value = 0;    // Constant
};

struct Step {
  std::string kernel;
  std::vector<Binding> operands, results;
};

/// A weight the artifact carries in the kernels' dtype and layout
/// (q3c compile --embed-weights): `bytes` at `offset` of the mapped section.
struct EmbeddedWeight {
  int64_t id = 0; // of the weight plan entry whose value these bytes are
  int64_t offset = 0;
  int64_t bytes = 0;
};

struct EmbeddedWeights {
  std::string section; // the artifact's mapped section; "" when nothing is embedded
  std::vector<EmbeddedWeight> entries;
};

struct Manifest {
  std::string format = kCpuFormat;
  int64_t version = kManifestVersion;
  Target target;
  ModelConfig config;
  DType kvCache = DType::F32;
  /// Rows the activation buffers hold: the runtime runs a longer prompt in
  /// chunks of at most this many rows.
  int64_t prefillRows = 0;
  std::vector<Kernel> kernels;
  std::vector<Weight> weights;
  std::vector<int64_t> bufferRowBytes;
  std::vector<Step> steps;
  Binding output; // the logits
  int64_t decodeBytesPerToken = 0;
  nlohmann::json tuning = nlohmann::json::object(); // what the compiler measured, for people
  EmbeddedWeights embedded; // empty: the weights come from a checkpoint at load
};

/// The most thread scratch any kernel or any of its builds takes at the
/// planned prefill chunk: what the CPU runtime gives each of its threads.
inline int64_t largestThreadScratch(const Manifest &m) {
  int64_t largest = 0;
  for (const Kernel &kernel : m.kernels) {
    largest = std::max(largest, kernel.threadScratch.bytesFor(m.prefillRows));
    for (const KernelVariant &variant : kernel.variants)
      largest = std::max(largest, variant.threadScratch.bytesFor(m.prefillRows));
  }
  return largest;
}

//===----------------------------------------------------------------------===//
// Spellings
//===----------------------------------------------------------------------===//

namespace detail {

template <typename Enum> struct Spelling {
  Enum value;
  const char *name;
};

inline constexpr Spelling<DType> kDTypes[] = {{DType::F32, runtime::mlirName(DType::F32)},
                                              {DType::F16, runtime::mlirName(DType::F16)},
                                              {DType::BF16, runtime::mlirName(DType::BF16)}};
inline constexpr Spelling<WeightKind> kWeightKinds[] = {
    {WeightKind::Param, "param"},
    {WeightKind::FoldGain, "fold_gain"},
    {WeightKind::ConcatRows, "concat_rows"},
    {WeightKind::PackColumnBlocks, "pack_column_blocks"}};
inline constexpr Spelling<Layout> kLayouts[] = {{Layout::RowMajor, "row_major"},
                                                {Layout::ColumnBlocks, "column_blocks"}};
inline constexpr Spelling<WeightPacking> kWeightPackings[] = {{WeightPacking::AtLoad, "at_load"},
                                                              {WeightPacking::PerCall, "per_call"}};
inline constexpr Spelling<VariantChoice> kVariantChoices[] = {
    {VariantChoice::Timed, "timed"}, {VariantChoice::LikeProducts, "like_products"}};
inline constexpr Spelling<GridKind> kGridKinds[] = {{GridKind::Fixed, "fixed"},
                                                    {GridKind::PerRow, "per_row"}};
inline constexpr Spelling<SlotKind> kSlotKinds[] = {
    {SlotKind::Buffer, "buffer"}, {SlotKind::Tokens, "tokens"},
    {SlotKind::Weight, "weight"}, {SlotKind::Cache, "cache"},
    {SlotKind::CacheLayer, "cache_layer"}, {SlotKind::Index, "index"}};
inline constexpr Spelling<BindingKind> kBindingKinds[] = {
    {BindingKind::Buffer, "buffer"},         {BindingKind::Weight, "weight"},
    {BindingKind::Tokens, "tokens"},         {BindingKind::StartPos, "start_pos"},
    {BindingKind::Cache, "cache"},           {BindingKind::CacheKeys, "cache_keys"},
    {BindingKind::CacheValues, "cache_values"}, {BindingKind::Constant, "constant"}};

template <typename Enum, size_t N>
const char *spell(const Spelling<Enum> (&table)[N], Enum value) {
  for (const auto &entry : table)
    if (entry.value == value)
      return entry.name;
  return "?";
}

template <typename Enum, size_t N> std::string choices(const Spelling<Enum> (&table)[N]) {
  std::string text;
  for (size_t i = 0; i < N; ++i)
    text += std::string(i ? (i + 1 == N ? " or " : ", ") : "") + "\"" + table[i].name + "\"";
  return text;
}

/// Reads fields of one JSON object, naming `path` in every error.
class Reader {
public:
  Reader(const nlohmann::json &object, std::string path) : json_(object), path_(std::move(path)) {
    if (!json_.is_object())
      fail("", "a JSON object", json_);
  }

  const std::string &path() const { return path_; }
  std::string at(const std::string &key) const { return path_.empty() ? key : path_ + "." + key; }
  bool has(const std::string &key) const { return json_.contains(key); }

  [[noreturn]] void fail(const std::string &key, const std::string &expected,
                         const nlohmann::json &found) const {
    std::string text = found.dump();
    if (text.size() > 80)
      text = text.substr(0, 77) + "...";
    const std::string where = key.empty() ? path_ : at(key);
    throw ManifestError((where.empty() ? "" : where + ": ") + "expected " + expected +
                        ", found " + text);
  }

  const nlohmann::json &field(const std::string &key) const {
    auto it = json_.find(key);
    if (it == json_.end())
      throw ManifestError(at(key) + ": missing");
    return *it;
  }

  int64_t integer(const std::string &key, int64_t min, int64_t max) const {
    const nlohmann::json &value = field(key);
    if (!value.is_number_integer())
      fail(key, "an integer", value);
    if (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(INT64_MAX))
      fail(key, "an integer from " + std::to_string(min) + " to " + std::to_string(max), value);
    const int64_t v = value.get<int64_t>();
    if (v < min || v > max)
      fail(key, "an integer from " + std::to_string(min) + " to " + std::to_string(max), value);
    return v;
  }
  int64_t integerOr(const std::string &key, int64_t fallback, int64_t min, int64_t max) const {
    return has(key) ? integer(key, min, max) : fallback;
  }

  double number(const std::string &key, double min, double max) const {
    const nlohmann::json &value = field(key);
    if (!value.is_number())
      fail(key, "a number", value);
    const double v = value.get<double>();
    if (!(v >= min && v <= max)) // NaN fails too
      fail(key, "a number from " + std::to_string(min) + " to " + std::to_string(max), value);
    return v;
  }

  bool boolean(const std::string &key) const {
    const nlohmann::json &value = field(key);
    if (!value.is_boolean())
      fail(key, "true or false", value);
    return value.get<bool>();
  }

  std::string string(const std::string &key) const {
    const nlohmann::json &value = field(key);
    if (!value.is_string())
      fail(key, "a string", value);
    return value.get<std::string>();
  }
  std::string stringOr(const std::string &key, const std::string &fallback) const {
    return has(key) ? string(key) : fallback;
  }

  template <typename Enum, size_t N>
  Enum oneOf(const std::string &key, const Spelling<Enum> (&table)[N]) const {
    const nlohmann::json &value = field(key);
    if (value.is_string())
      for (const auto &entry : table)
        if (value.get<std::string>() == entry.name)
          return entry.value;
    fail(key, choices(table), value);
  }
  template <typename Enum, size_t N>
  Enum oneOfOr(const std::string &key, const Spelling<Enum> (&table)[N], Enum fallback) const {
    return has(key) ? oneOf(key, table) : fallback;
  }

  std::vector<int64_t> integers(const std::string &key, int64_t min, int64_t max,
                                size_t maxCount = 1u << 20) const {
    const nlohmann::json &value = field(key);
    if (!value.is_array() || value.size() > maxCount)
      fail(key, "an array of at most " + std::to_string(maxCount) + " integers", value);
    std::vector<int64_t> out;
    for (size_t i = 0; i < value.size(); ++i) {
      const nlohmann::json &element = value[i];
      const std::string where = at(key) + "[" + std::to_string(i) + "]";
      if (!element.is_number_integer() ||
          (element.is_number_unsigned() && element.get<uint64_t>() > uint64_t(INT64_MAX)) ||
          element.get<int64_t>() < min || element.get<int64_t>() > max)
        throw ManifestError(where + ": expected an integer from " + std::to_string(min) + " to " +
                            std::to_string(max) + ", found " + element.dump());
      out.push_back(element.get<int64_t>());
    }
    return out;
  }
  std::vector<int64_t> integersOr(const std::string &key, int64_t min, int64_t max) const {
    return has(key) ? integers(key, min, max) : std::vector<int64_t>{};
  }

  std::vector<std::string> strings(const std::string &key) const {
    const nlohmann::json &value = field(key);
    if (!value.is_array())
      fail(key, "an array of strings", value);
    std::vector<std::string> out;
    for (const auto &element : value) {
      if (!element.is_string())
        fail(key, "an array of strings", value);
      out.push_back(element.get<std::string>());
    }
    return out;
  }

  /// Calls `read(Reader)` on each object of the array `key`.
  template <typename Read> void each(const std::string &key, Read read) const {
    const nlohmann::json &value = field(key);
    if (!value.is_array())
      fail(key, "an array", value);
    for (size_t i = 0; i < value.size(); ++i)
      read(Reader(value[i], at(key) + "[" + std::to_string(i) + "]"));
  }

  Reader object(const std::string &key) const { return Reader(field(key), at(key)); }

private:
  const nlohmann::json &json_;
  std::string path_;
};

// Generous bounds: they only keep arithmetic on untrusted numbers finite.
inline constexpr int64_t kMaxExtent = int64_t(1) << 32;
inline constexpr int64_t kMaxCount = int64_t(1) << 24;
inline constexpr int64_t kMaxChunksPerThread = 64;
inline constexpr int64_t kMaxPrefetchBytes = int64_t(1) << 20;
inline constexpr int64_t kMaxDecodeStreams = 4;
inline constexpr int64_t kMaxDecodeAccumulators = 16;
inline constexpr int64_t kMaxWorkspaceBytes = int64_t(64) << 20;
inline constexpr int64_t kMaxThreadScratchBytes = int64_t(64) << 20;
inline constexpr int64_t kMaxThreadScratchRowBytes = int64_t(1) << 20;

/// thread_scratch_bytes and thread_scratch_row_bytes, where not zero.
inline void putThreadScratch(nlohmann::json &j, const ThreadScratch &scratch) {
  if (scratch.bytes != 0)
    j["thread_scratch_bytes"] = scratch.bytes;
  if (scratch.rowBytes != 0)
    j["thread_scratch_row_bytes"] = scratch.rowBytes;
}

inline nlohmann::json slotJson(const Slot &slot) {
  nlohmann::json j = {{"kind", spell(kSlotKinds, slot.kind)}};
  switch (slot.kind) {
  case SlotKind::Buffer:
    j["row_bytes"] = slot.rowBytes;
    break;
  case SlotKind::Weight:
    j["shape"] = slot.shape;
    j["dtype"] = spell(kDTypes, slot.dtype);
    j["layout"] = spell(kLayouts, slot.layout);
    break;
  case SlotKind::Cache:
  case SlotKind::CacheLayer:
    j["shape"] = slot.shape;
    j["dtype"] = spell(kDTypes, slot.dtype);
    break;
  case SlotKind::Tokens:
  case SlotKind::Index:
    break;
  }
  return j;
}

inline Slot readSlot(const Reader &r) {
  Slot slot;
  slot.kind = r.oneOf("kind", kSlotKinds);
  switch (slot.kind) {
  case SlotKind::Buffer:
    slot.rowBytes = r.integer("row_bytes", 1, kMaxExtent);
    break;
  case SlotKind::Weight:
    slot.shape = r.integers("shape", 1, kMaxExtent, 4);
    slot.dtype = r.oneOf("dtype", kDTypes);
    slot.layout = r.oneOf("layout", kLayouts);
    break;
  case SlotKind::Cache:
  case SlotKind::CacheLayer:
    slot.shape = r.integers("shape", 1, kMaxExtent, 3);
    slot.dtype = r.oneOf("dtype", kDTypes);
    break;
  case SlotKind::Tokens:
  case SlotKind::Index:
    break;
  }
  return slot;
}

} // namespace detail

inline const char *weightKindName(WeightKind kind) {
  return detail::spell(detail::kWeightKinds, kind);
}
inline const char *slotKindName(SlotKind kind) { return detail::spell(detail::kSlotKinds, kind); }
inline const char *bindingKindName(BindingKind kind) {
  return detail::spell(detail::kBindingKinds, kind);
}

//===----------------------------------------------------------------------===//
// To JSON
//===----------------------------------------------------------------------===//

inline nlohmann::json toJson(const ModelConfig &c) {
  return {{"hidden_size", c.hiddenSize},
          {"intermediate_size", c.intermediateSize},
          {"num_hidden_layers", c.numHiddenLayers},
          {"num_attention_heads", c.numAttentionHeads},
          {"num_key_value_heads", c.numKeyValueHeads},
          {"head_dim", c.headDim},
          {"vocab_size", c.vocabSize},
          {"max_position_embeddings", c.maxPositionEmbeddings},
          {"rms_norm_eps", c.rmsNormEps},
          {"rope_theta", c.ropeTheta},
          {"tie_word_embeddings", c.tieWordEmbeddings},
          {"torch_dtype", c.torchDtype}};
}

inline nlohmann::json toJson(const Binding &b) {
  nlohmann::json j = {{"kind", bindingKindName(b.kind)}};
  switch (b.kind) {
  case BindingKind::Buffer:
    j["id"] = b.id;
    j["row_bytes"] = b.rowBytes;
    break;
  case BindingKind::Weight:
    j["id"] = b.id;
    break;
  case BindingKind::CacheKeys:
  case BindingKind::CacheValues:
    j["layer"] = b.layer;
    break;
  case BindingKind::Constant:
    j["value"] = b.value;
    break;
  case BindingKind::Tokens:
  case BindingKind::StartPos:
  case BindingKind::Cache:
    break;
  }
  return j;
}

inline nlohmann::json toJson(const Kernel &k) {
  nlohmann::json j = {
      {"name", k.name},
      {"grid", {{"kind", detail::spell(detail::kGridKinds, k.gridKind)}, {"count", k.gridCount}}},
      {"prefill_chunks", k.prefillChunks},
      {"decode_chunks", k.decodeChunks},
      {"operands", nlohmann::json::array()},
      {"results", nlohmann::json::array()}};
  if (!k.matmul.empty())
    j["matmul"] = k.matmul;
  if (!k.tile.empty())
    j["tile"] = k.tile;
  if (k.weightPacking != WeightPacking::None)
    j["weight_packing"] = detail::spell(detail::kWeightPackings, k.weightPacking);
  if (k.prefetchBytes == kNoPrefetch)
    j["prefetch_bytes"] = "none";
  else if (k.prefetchBytes != 0)
    j["prefetch_bytes"] = k.prefetchBytes;
  if (k.decodeStreams != 0)
    j["decode_streams"] = k.decodeStreams;
  if (k.decodeAccumulators != 0)
    j["decode_accumulators"] = k.decodeAccumulators;
  if (k.workspaceBytes != 0)
    j["workspace_bytes"] = k.workspaceBytes;
  detail::putThreadScratch(j, k.threadScratch);
  for (const Slot &slot : k.operands)
    j["operands"].push_back(detail::slotJson(slot));
  for (const Slot &slot : k.results)
    j["results"].push_back(detail::slotJson(slot));
  for (const KernelVariant &v : k.variants) {
    nlohmann::json variant = {
        {"name", v.name}, {"matmul", v.matmul}, {"tile", v.tile}, {"requires", v.requiredFeatures}};
    detail::putThreadScratch(variant, v.threadScratch);
    j["variants"].push_back(std::move(variant));
  }
  if (k.variantChoice != VariantChoice::Timed)
    j["variant_choice"] = detail::spell(detail::kVariantChoices, k.variantChoice);
  return j;
}

inline nlohmann::json toJson(const Weight &w) {
  nlohmann::json j = {{"id", w.id},
                      {"kind", weightKindName(w.kind)},
                      {"shape", w.shape},
                      {"dtype", runtime::mlirName(w.dtype)},
                      {"layout", detail::spell(detail::kLayouts, w.layout)}};
  if (w.kind == WeightKind::Param)
    j["name"] = w.name;
  else
    j["inputs"] = w.inputs;
  return j;
}

inline nlohmann::json toJson(const Manifest &m) {
  nlohmann::json kernels = nlohmann::json::array(), weights = nlohmann::json::array(),
                 steps = nlohmann::json::array();
  for (const Kernel &k : m.kernels)
    kernels.push_back(toJson(k));
  for (const Weight &w : m.weights)
    weights.push_back(toJson(w));
  for (const Step &s : m.steps) {
    nlohmann::json operands = nlohmann::json::array(), results = nlohmann::json::array();
    for (const Binding &b : s.operands)
      operands.push_back(toJson(b));
    for (const Binding &b : s.results)
      results.push_back(toJson(b));
    steps.push_back({{"kernel", s.kernel}, {"operands", operands}, {"results", results}});
  }
  nlohmann::json j = {{"format", m.format},
                      {"format_version", m.version},
                      {"target",
                       {{"backend", m.target.backend},
                        {"cpu", m.target.cpu},
                        {"llvm_cpu", m.target.llvmCpu},
                        {"required_features", m.target.requiredFeatures}}},
                      {"config", toJson(m.config)},
                      {"kv_cache", {{"element", runtime::mlirName(m.kvCache)}}},
                      {"prefill_rows", m.prefillRows},
                      {"kernels", kernels},
                      {"weights", weights},
                      {"buffers", {{"row_bytes", m.bufferRowBytes}}},
                      {"schedule", steps},
                      {"output", toJson(m.output)},
                      {"decode_bytes_per_token", m.decodeBytesPerToken},
                      {"tuning", m.tuning}};
  if (!m.embedded.section.empty()) {
    nlohmann::json entries = nlohmann::json::array();
    for (const EmbeddedWeight &w : m.embedded.entries)
      entries.push_back({{"id", w.id}, {"offset", w.offset}, {"bytes", w.bytes}});
    j["embedded_weights"] = {{"section", m.embedded.section}, {"entries", entries}};
  }
  return j;
}

//===----------------------------------------------------------------------===//
// From JSON (each field's type and range; validateManifest checks the rest)
//===----------------------------------------------------------------------===//

inline ModelConfig configFromJson(const detail::Reader &r) {
  using detail::kMaxExtent;
  ModelConfig c;
  c.hiddenSize = r.integer("hidden_size", 1, kMaxExtent);
  c.intermediateSize = r.integer("intermediate_size", 1, kMaxExtent);
  c.numHiddenLayers = r.integer("num_hidden_layers", 1, detail::kMaxCount);
  c.numAttentionHeads = r.integer("num_attention_heads", 1, kMaxExtent);
  c.numKeyValueHeads = r.integer("num_key_value_heads", 1, kMaxExtent);
  c.headDim = r.integer("head_dim", 1, kMaxExtent);
  c.vocabSize = r.integer("vocab_size", 1, kMaxExtent);
  c.maxPositionEmbeddings = r.integer("max_position_embeddings", 1, kMaxExtent);
  c.rmsNormEps = r.number("rms_norm_eps", 1e-30, 1.0);
  c.ropeTheta = r.number("rope_theta", 1e-30, 1e30);
  c.tieWordEmbeddings = r.boolean("tie_word_embeddings");
  c.torchDtype = r.stringOr("torch_dtype", "");
  return c;
}

inline Binding bindingFromJson(const detail::Reader &r) {
  using namespace detail;
  Binding b;
  b.kind = r.oneOf("kind", kBindingKinds);
  switch (b.kind) {
  case BindingKind::Buffer:
    b.id = r.integer("id", 0, kMaxCount);
    b.rowBytes = r.integer("row_bytes", 1, kMaxExtent);
    break;
  case BindingKind::Weight:
    b.id = r.integer("id", 0, kMaxCount);
    break;
  case BindingKind::CacheKeys:
  case BindingKind::CacheValues:
    b.layer = r.integer("layer", 0, kMaxCount);
    break;
  case BindingKind::Constant:
    b.value = r.integer("value", 0, kMaxExtent);
    break;
  case BindingKind::Tokens:
  case BindingKind::StartPos:
  case BindingKind::Cache:
    break;
  }
  return b;
}

inline ThreadScratch readThreadScratch(const detail::Reader &r) {
  using namespace detail;
  return {r.integerOr("thread_scratch_bytes", 0, 0, kMaxThreadScratchBytes),
          r.integerOr("thread_scratch_row_bytes", 0, 0, kMaxThreadScratchRowBytes)};
}

inline Kernel kernelFromJson(const detail::Reader &r) {
  using namespace detail;
  Kernel k;
  k.name = r.string("name");
  Reader grid = r.object("grid");
  k.gridKind = grid.oneOf("kind", kGridKinds);
  k.gridCount = grid.integer("count", 1, kMaxExtent);
  k.matmul = r.stringOr("matmul", "");
  k.tile = r.integersOr("tile", 1, 64);
  k.weightPacking = r.oneOfOr("weight_packing", kWeightPackings, WeightPacking::None);
  k.prefillChunks = r.integerOr("prefill_chunks", 1, 1, kMaxChunksPerThread);
  k.decodeChunks = r.integerOr("decode_chunks", 1, 1, kMaxChunksPerThread);
  if (r.has("prefetch_bytes") && r.field("prefetch_bytes").is_string()) {
    if (r.field("prefetch_bytes") != "none")
      r.fail("prefetch_bytes",
             "\"none\" or an integer from 64 to " + std::to_string(kMaxPrefetchBytes),
             r.field("prefetch_bytes"));
    k.prefetchBytes = kNoPrefetch;
  } else {
    k.prefetchBytes = r.integerOr("prefetch_bytes", 0, 64, kMaxPrefetchBytes);
  }
  k.decodeStreams = r.integerOr("decode_streams", 0, 1, kMaxDecodeStreams);
  k.decodeAccumulators = r.integerOr("decode_accumulators", 0, 1, kMaxDecodeAccumulators);
  k.workspaceBytes = r.integerOr("workspace_bytes", 0, 0, kMaxWorkspaceBytes);
  k.threadScratch = readThreadScratch(r);
  r.each("operands", [&](const Reader &slot) { k.operands.push_back(readSlot(slot)); });
  r.each("results", [&](const Reader &slot) { k.results.push_back(readSlot(slot)); });
  if (r.has("variants"))
    r.each("variants", [&](const Reader &v) {
      k.variants.push_back({v.string("name"), v.string("matmul"), v.integers("tile", 1, 64, 4),
                            v.strings("requires"), readThreadScratch(v)});
    });
  k.variantChoice = r.oneOfOr("variant_choice", kVariantChoices, VariantChoice::Timed);
  return k;
}

inline Weight weightFromJson(const detail::Reader &r) {
  using namespace detail;
  Weight w;
  w.id = r.integer("id", 0, kMaxCount);
  w.kind = r.oneOf("kind", kWeightKinds);
  if (w.kind == WeightKind::Param)
    w.name = r.string("name");
  else
    w.inputs = r.integers("inputs", 0, kMaxCount, 64);
  w.shape = r.integers("shape", 1, kMaxExtent, 4);
  w.dtype = r.oneOf("dtype", kDTypes);
  w.layout = r.oneOfOr("layout", kLayouts, Layout::RowMajor);
  return w;
}

/// Reads `json` (an artifact's manifest). Throws ManifestError naming the
/// field on a missing key, a wrong type or a value out of range.
inline Manifest manifestFromJson(const nlohmann::json &json) {
  using namespace detail;
  Reader r(json, "");
  Manifest m;
  m.format = r.string("format");
  m.version = r.integer("format_version", 0, INT64_MAX);
  if (m.version != kManifestVersion)
    throw ManifestError("format_version: manifest version " + std::to_string(m.version) +
                        ", this runtime reads version " + std::to_string(kManifestVersion) +
                        ": recompile the model with a matching q3c");
  Reader target = r.object("target");
  m.target.backend = target.string("backend");
  m.target.cpu = target.stringOr("cpu", "");
  m.target.llvmCpu = target.stringOr("llvm_cpu", "");
  if (target.has("required_features"))
    m.target.requiredFeatures = target.strings("required_features");
  m.config = configFromJson(r.object("config"));
  m.kvCache = r.object("kv_cache").oneOf("element", kDTypes);
  m.prefillRows = r.integer("prefill_rows", 1, kMaxExtent);
  r.each("kernels", [&](const Reader &k) { m.kernels.push_back(kernelFromJson(k)); });
  r.each("weights", [&](const Reader &w) { m.weights.push_back(weightFromJson(w)); });
  m.bufferRowBytes = r.object("buffers").integers("row_bytes", 1, kMaxExtent, kMaxCount);
  r.each("schedule", [&](const Reader &s) {
    Step step;
    step.kernel = s.string("kernel");
    s.each("operands", [&](const Reader &b) { step.operands.push_back(bindingFromJson(b)); });
    s.each("results", [&](const Reader &b) { step.results.push_back(bindingFromJson(b)); });
    m.steps.push_back(std::move(step));
  });
  m.output = bindingFromJson(r.object("output"));
  m.decodeBytesPerToken = r.integer("decode_bytes_per_token", 0, INT64_MAX);
  if (r.has("tuning")) {
    if (!json.at("tuning").is_object())
      r.fail("tuning", "a JSON object", json.at("tuning"));
    m.tuning = json.at("tuning");
  }
  if (r.has("embedded_weights")) {
    Reader e = r.object("embedded_weights");
    m.embedded.section = e.string("section");
    e.each("entries", [&](const Reader &w) {
      m.embedded.entries.push_back({w.integer("id", 0, kMaxCount), w.integer("offset", 0, INT64_MAX),
                                    w.integer("bytes", 1, INT64_MAX)});
    });
  }
  return m;
}

/// Checks that the parts of `m` agree: weight ids and inputs in dependency
/// order, each transform's shapes, every step's kernel and the kind, size
/// and shape of each operand against the kernel's signature and the config,
/// buffers, cache layers, the output. Throws ManifestError naming the field.
/// (Manifest.cpp)
void validateManifest(const Manifest &m);

} // namespace q3::manifest
