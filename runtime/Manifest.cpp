//===- Manifest.cpp - does a manifest hold together? ----------------------===//
//
// manifestFromJson() has checked each field on its own; this checks that the
// fields agree: what each dispatch binds against the kernel's signature, the
// signatures against the config, every weight transform's shapes, and the
// order of the schedule (a dispatch reads only what an earlier one wrote), so
// that no kernel is ever handed memory of another size or meaning than it was
// compiled for.
//
//===----------------------------------------------------------------------===//
#include "runtime/Manifest.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <set>

namespace q3::manifest {
namespace {

/// Bytes above which a product of untrusted extents is refused (256 TiB).
constexpr int64_t kMaxBytes = int64_t(1) << 48;

[[noreturn]] void fail(const std::string &where, const std::string &what) {
  throw ManifestError(where + ": " + what);
}

/// a * b, refused when it leaves [0, kMaxBytes].
int64_t checkedProduct(int64_t a, int64_t b, const std::string &where) {
  if (a < 0 || b < 0 || (a != 0 && b > kMaxBytes / a))
    fail(where, fmt::format("{} x {} is too large", a, b));
  return a * b;
}

int64_t elementsOf(const std::vector<int64_t> &shape, const std::string &where) {
  int64_t n = 1;
  for (int64_t extent : shape)
    n = checkedProduct(n, extent, where);
  return n;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

void validateConfig(const ModelConfig &c) {
  if (c.numAttentionHeads % c.numKeyValueHeads != 0)
    fail("config.num_attention_heads",
         fmt::format("expected a multiple of num_key_value_heads ({}), found {}",
                     c.numKeyValueHeads, c.numAttentionHeads));
  if (c.headDim % 2 != 0)
    fail("config.head_dim", fmt::format("expected an even number (RoPE), found {}", c.headDim));
}

void validateWeight(const Manifest &m, size_t index) {
  const Weight &w = m.weights[index];
  const std::string where = fmt::format("weights[{}]", index);
  if (w.id != int64_t(index))
    fail(where + ".id", fmt::format("expected {} (ids are positions), found {}", index, w.id));
  elementsOf(w.shape, where + ".shape");
  std::vector<const Weight *> inputs;
  for (int64_t input : w.inputs) {
    if (input >= w.id)
      fail(where + ".inputs",
           fmt::format("expected ids of earlier weights (below {}), found {}", w.id, input));
    inputs.push_back(&m.weights[size_t(input)]);
  }
  auto expectInputs = [&](size_t count) {
    if (inputs.size() != count)
      fail(where + ".inputs", fmt::format("a {} takes {} input(s), found {}",
                                          weightKindName(w.kind), count, inputs.size()));
  };
  auto expect = [&](bool ok, const std::string &what) {
    if (!ok)
      fail(where, fmt::format("{}: {}", weightKindName(w.kind), what));
  };
  const bool rowMajorInputs = std::all_of(inputs.begin(), inputs.end(), [](const Weight *in) {
    return in->layout == Layout::RowMajor;
  });
  switch (w.kind) {
  case WeightKind::Param:
    expect(!w.name.empty(), "expected a tensor name, found an empty one");
    expect(w.layout == Layout::RowMajor, "a checkpoint tensor is row-major");
    break;
  case WeightKind::FoldGain:
    expectInputs(2);
    expect(rowMajorInputs && w.layout == Layout::RowMajor, "reads and writes row-major weights");
    expect(w.shape.size() == 2 && inputs[0]->shape == w.shape &&
               inputs[1]->shape == std::vector<int64_t>{w.shape[1]} && w.dtype == DType::F32,
           fmt::format("expected an f32 [N, K] from [N, K] and [K], found {} {} from {} and {}",
                       runtime::mlirName(w.dtype), shapeText(w.shape), shapeText(inputs[0]->shape),
                       shapeText(inputs[1]->shape)));
    break;
  case WeightKind::ConcatRows: {
    expect(!inputs.empty(), "expected at least one input");
    expect(rowMajorInputs && w.layout == Layout::RowMajor, "reads and writes row-major weights");
    int64_t rows = 0;
    for (const Weight *in : inputs) {
      expect(in->shape.size() == 2 && w.shape.size() == 2 && in->shape[1] == w.shape[1] &&
                 in->dtype == w.dtype,
             fmt::format("input {} {} does not stack into {} {}", runtime::mlirName(in->dtype),
                         shapeText(in->shape), runtime::mlirName(w.dtype), shapeText(w.shape)));
      rows += in->shape[0];
    }
    expect(rows == w.shape[0], fmt::format("the inputs have {} rows, the result {}", rows,
                                           w.shape[0]));
    break;
  }
  case WeightKind::PackColumnBlocks:
    expectInputs(1);
    expect(inputs[0]->layout == Layout::RowMajor && w.layout == Layout::ColumnBlocks,
           "packs a row-major weight into column blocks");
    expect(inputs[0]->shape == w.shape && inputs[0]->dtype == w.dtype && w.dtype != DType::F32 &&
               w.shape.size() == 2 && w.shape[0] % 16 == 0 && w.shape[1] % 2 == 0,
           fmt::format("expected a 16-bit [16n, 2m] weight kept in shape and type, found {} {} "
                       "from {} {}",
                       runtime::mlirName(w.dtype), shapeText(w.shape),
                       runtime::mlirName(inputs[0]->dtype), shapeText(inputs[0]->shape)));
    break;
  }
}

void validateSlot(const Manifest &m, const Slot &slot, const std::string &where) {
  const ModelConfig &c = m.config;
  switch (slot.kind) {
  case SlotKind::Weight:
    elementsOf(slot.shape, where + ".shape");
    break;
  case SlotKind::Cache:
    if (slot.shape != std::vector<int64_t>{c.numHiddenLayers, c.numKeyValueHeads, c.headDim} ||
        slot.dtype != m.kvCache)
      fail(where, fmt::format("expected the cache {} {} (kv_cache.element, the config's "
                              "layers, kv heads and head_dim), found {} {}",
                              runtime::mlirName(m.kvCache),
                              shapeText({c.numHiddenLayers, c.numKeyValueHeads, c.headDim}),
                              runtime::mlirName(slot.dtype), shapeText(slot.shape)));
    break;
  case SlotKind::CacheLayer:
    if (slot.shape != std::vector<int64_t>{c.numKeyValueHeads, c.headDim} ||
        slot.dtype != m.kvCache)
      fail(where,
           fmt::format("expected a cache layer {} {} (kv_cache.element, the config's "
                       "kv heads and head_dim), found {} {}",
                       runtime::mlirName(m.kvCache), shapeText({c.numKeyValueHeads, c.headDim}),
                       runtime::mlirName(slot.dtype), shapeText(slot.shape)));
    break;
  case SlotKind::Buffer:
  case SlotKind::Tokens:
  case SlotKind::Index:
    break;
  }
}

bool isIdentifier(const std::string &name) {
  return !name.empty() && name.size() <= 200 &&
         std::all_of(name.begin(), name.end(), [](char ch) {
           return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                  ch == '_';
         });
}

void validateMatmul(const std::string &matmul, const std::string &where) {
  if (!matmul.empty() && matmul != "f32" && matmul != "avx512bf16" && matmul != "amx")
    fail(where, "expected \"f32\", \"avx512bf16\" or \"amx\", found \"" + matmul.substr(0, 40) +
                    "\"");
}

// A kernel's variants: only where there is a matmul to vary (products,
// attention), distinct names, known instructions, and the CPU features those
// instructions need (the runtime checks these).
void validateVariants(const Kernel &k, const std::string &where) {
  if (k.variantChoice != VariantChoice::Timed && k.variants.empty())
    fail(where + ".variant_choice", "expected variants to choose among");
  std::set<std::string> names;
  for (size_t v = 0; v < k.variants.size(); ++v) {
    const KernelVariant &variant = k.variants[v];
    const std::string at = fmt::format("{}.variants[{}]", where, v);
    if (k.matmul.empty())
      fail(at, "expected variants only on a kernel with a matmul (a product or attention)");
    if (!isIdentifier(variant.name) || !names.insert(variant.name).second)
      fail(at + ".name", "expected a unique name of letters, digits and '_', found \"" +
                             variant.name.substr(0, 40) + "\"");
    validateMatmul(variant.matmul, at + ".matmul");
    if (variant.requiredFeatures != matmulRequiredFeatures(variant.matmul))
      fail(at + ".requires", fmt::format("expected [{}] for matmul \"{}\"",
                                         fmt::join(matmulRequiredFeatures(variant.matmul), ", "),
                                         variant.matmul));
  }
}

void validateKernels(const Manifest &m) {
  std::set<std::string> names;
  for (size_t i = 0; i < m.kernels.size(); ++i) {
    const Kernel &k = m.kernels[i];
    const std::string where = fmt::format("kernels[{}]", i);
    if (!isIdentifier(k.name))
      fail(where + ".name", "expected letters, digits and '_', found \"" + k.name.substr(0, 40) +
                                "\"");
    if (!names.insert(k.name).second)
      fail(where + ".name", "expected a unique kernel name, found '" + k.name + "' twice");
    validateMatmul(k.matmul, where + ".matmul");
    validateVariants(k, where);
    for (size_t s = 0; s < k.operands.size(); ++s)
      validateSlot(m, k.operands[s], fmt::format("{}.operands[{}]", where, s));
    for (size_t s = 0; s < k.results.size(); ++s) {
      const Slot &slot = k.results[s];
      if (slot.kind != SlotKind::Buffer && slot.kind != SlotKind::CacheLayer)
        fail(fmt::format("{}.results[{}]", where, s),
             std::string("expected a buffer or a cache layer, found a ") +
                 slotKindName(slot.kind));
      validateSlot(m, slot, fmt::format("{}.results[{}]", where, s));
    }
  }
}

/// What the schedule has written so far, to check that each dispatch reads
/// values that exist, of the width it expects.
struct Written {
  std::map<int64_t, int64_t> bufferRowBytes;        // buffer -> row bytes of its last value
  std::set<std::pair<int64_t, bool>> cacheLayers;   // (layer, values?) written
};

bool fits(const Slot &slot, const Binding &b) {
  switch (slot.kind) {
  case SlotKind::Buffer:
    return b.kind == BindingKind::Buffer;
  case SlotKind::Tokens:
    return b.kind == BindingKind::Tokens;
  case SlotKind::Weight:
    return b.kind == BindingKind::Weight;
  case SlotKind::Cache:
    return b.kind == BindingKind::Cache;
  case SlotKind::CacheLayer:
    return b.kind == BindingKind::CacheKeys || b.kind == BindingKind::CacheValues;
  case SlotKind::Index:
    return b.kind == BindingKind::StartPos || b.kind == BindingKind::Constant;
  }
  return false;
}

void validateBinding(const Manifest &m, const Slot &slot, const Binding &b, bool isResult,
                     Written &written, const std::string &where) {
  if (!fits(slot, b))
    fail(where, fmt::format("the kernel takes a {} here, found a {}", slotKindName(slot.kind),
                            bindingKindName(b.kind)));
  switch (b.kind) {
  case BindingKind::Buffer: {
    if (b.id >= int64_t(m.bufferRowBytes.size()))
      fail(where + ".id", fmt::format("expected a buffer below {}, found {}",
                                      m.bufferRowBytes.size(), b.id));
    if (b.rowBytes != slot.rowBytes)
      fail(where + ".row_bytes",
           fmt::format("the kernel reads rows of {} bytes, found {}", slot.rowBytes, b.rowBytes));
    if (b.rowBytes > m.bufferRowBytes[size_t(b.id)])
      fail(where + ".row_bytes", fmt::format("expected at most buffer {}'s {} bytes, found {}",
                                             b.id, m.bufferRowBytes[size_t(b.id)], b.rowBytes));
    if (isResult) {
      written.bufferRowBytes[b.id] = b.rowBytes;
    } else {
      auto last = written.bufferRowBytes.find(b.id);
      if (last == written.bufferRowBytes.end())
        fail(where, fmt::format("reads buffer {} before any dispatch wrote it", b.id));
      if (last->second != b.rowBytes)
        fail(where, fmt::format("reads buffer {} as rows of {} bytes, but it holds rows of {}",
                                b.id, b.rowBytes, last->second));
    }
    break;
  }
  case BindingKind::Weight: {
    if (b.id >= int64_t(m.weights.size()))
      fail(where + ".id",
           fmt::format("expected a weight below {}, found {}", m.weights.size(), b.id));
    const Weight &w = m.weights[size_t(b.id)];
    if (w.shape != slot.shape || w.dtype != slot.dtype || w.layout != slot.layout)
      fail(where, fmt::format("the kernel reads a {} {} weight, weight {} is {} {}",
                              runtime::mlirName(slot.dtype), shapeText(slot.shape), b.id,
                              runtime::mlirName(w.dtype), shapeText(w.shape)));
    break;
  }
  case BindingKind::CacheKeys:
  case BindingKind::CacheValues: {
    if (b.layer >= m.config.numHiddenLayers)
      fail(where + ".layer", fmt::format("expected a layer below {}, found {}",
                                         m.config.numHiddenLayers, b.layer));
    const auto key = std::make_pair(b.layer, b.kind == BindingKind::CacheValues);
    if (isResult)
      written.cacheLayers.insert(key);
    else if (!written.cacheLayers.count(key))
      fail(where, fmt::format("reads cache layer {} before any dispatch wrote it", b.layer));
    break;
  }
  case BindingKind::Tokens:
  case BindingKind::StartPos:
  case BindingKind::Cache:
  case BindingKind::Constant:
    break;
  }
}

void validateSchedule(const Manifest &m) {
  if (m.steps.empty())
    fail("schedule", "expected at least one dispatch, found none");
  std::map<std::string, const Kernel *> kernels;
  for (const Kernel &k : m.kernels)
    kernels[k.name] = &k;
  Written written;
  for (size_t i = 0; i < m.steps.size(); ++i) {
    const Step &step = m.steps[i];
    const std::string where = fmt::format("schedule[{}]", i);
    auto kernel = kernels.find(step.kernel);
    if (kernel == kernels.end())
      fail(where + ".kernel", "no kernel named '" + step.kernel.substr(0, 60) + "'");
    const Kernel &k = *kernel->second;
    for (auto [bindings, slots, what] :
         {std::tuple{&step.operands, &k.operands, "operands"},
          std::tuple{&step.results, &k.results, "results"}})
      if (bindings->size() != slots->size())
        fail(fmt::format("{}.{}", where, what),
             fmt::format("kernel {} takes {} {}, found {}", k.name, slots->size(), what,
                         bindings->size()));
    // A step that writes a cache layer may also bind it as an operand (the
    // Vulkan cache kernel updates the layer in place): it reads the
    // positions earlier passes wrote, not a value of this pass.
    for (const Binding &result : step.results)
      if (result.kind == BindingKind::CacheKeys || result.kind == BindingKind::CacheValues)
        written.cacheLayers.insert({result.layer, result.kind == BindingKind::CacheValues});
    for (size_t o = 0; o < step.operands.size(); ++o)
      validateBinding(m, k.operands[o], step.operands[o], false, written,
                      fmt::format("{}.operands[{}]", where, o));
    for (size_t r = 0; r < step.results.size(); ++r)
      validateBinding(m, k.results[r], step.results[r], true, written,
                      fmt::format("{}.results[{}]", where, r));
  }
  const Binding &out = m.output;
  if (out.kind != BindingKind::Buffer)
    fail("output", std::string("expected a buffer, found a ") + bindingKindName(out.kind));
  const int64_t logitsRow = checkedProduct(m.config.vocabSize, 4, "config.vocab_size");
  if (out.rowBytes != logitsRow)
    fail("output.row_bytes", fmt::format("expected the logits' {} bytes (vocab_size {}), found {}",
                                         logitsRow, m.config.vocabSize, out.rowBytes));
  auto last = written.bufferRowBytes.find(out.id);
  if (last == written.bufferRowBytes.end() || last->second != out.rowBytes)
    fail("output", fmt::format("expected buffer {} to hold the logits after the last dispatch",
                               out.id));
}

// Embedded weights: known ids, each once, the bytes of its shape and dtype,
// 64-byte aligned, not overlapping; and every weight a step reads among them.
void validateEmbedded(const Manifest &m) {
  const EmbeddedWeights &e = m.embedded;
  if (e.section.empty()) {
    if (!e.entries.empty())
      fail("embedded_weights.section", "expected the section of the entries, found \"\"");
    return;
  }
  std::vector<const EmbeddedWeight *> byOffset;
  std::set<int64_t> ids;
  for (size_t i = 0; i < e.entries.size(); ++i) {
    const EmbeddedWeight &w = e.entries[i];
    const std::string where = fmt::format("embedded_weights.entries[{}]", i);
    if (w.id >= int64_t(m.weights.size()))
      fail(where + ".id", fmt::format("expected a weight id below {}, found {}", m.weights.size(),
                                      w.id));
    if (!ids.insert(w.id).second)
      fail(where + ".id", fmt::format("expected each weight once, found {} again", w.id));
    const Weight &weight = m.weights[size_t(w.id)];
    const int64_t bytes =
        checkedProduct(elementsOf(weight.shape, where + ".bytes"),
                       int64_t(runtime::dtypeSize(weight.dtype)), where + ".bytes");
    if (w.bytes != bytes)
      fail(where + ".bytes", fmt::format("expected {} (weight {}: shape and dtype), found {}",
                                         bytes, w.id, w.bytes));
    if (w.offset % 64 != 0)
      fail(where + ".offset", fmt::format("expected a multiple of 64, found {}", w.offset));
    byOffset.push_back(&w);
  }
  std::sort(byOffset.begin(), byOffset.end(),
            [](const EmbeddedWeight *a, const EmbeddedWeight *b) { return a->offset < b->offset; });
  for (size_t i = 1; i < byOffset.size(); ++i)
    if (byOffset[i]->offset - byOffset[i - 1]->offset < byOffset[i - 1]->bytes)
      fail("embedded_weights.entries",
           fmt::format("expected no overlap, found weight {} at {} inside weight {} at {}",
                       byOffset[i]->id, byOffset[i]->offset, byOffset[i - 1]->id,
                       byOffset[i - 1]->offset));
  for (size_t s = 0; s < m.steps.size(); ++s)
    for (const Binding &b : m.steps[s].operands)
      if (b.kind == BindingKind::Weight && !ids.count(b.id))
        fail(fmt::format("schedule[{}]", s),
             fmt::format("reads weight {}, which embedded_weights does not hold", b.id));
}

} // namespace

void validateManifest(const Manifest &m) {
  validateConfig(m.config);
  for (size_t i = 0; i < m.weights.size(); ++i)
    validateWeight(m, i);
  for (int64_t rowBytes : m.bufferRowBytes)
    checkedProduct(rowBytes, m.prefillRows, "buffers.row_bytes");
  validateKernels(m);
  validateSchedule(m);
  validateEmbedded(m);
}

} // namespace q3::manifest
