//===- WeightPlan.cpp - the weights a compiled model's kernels read -------===//
#include "runtime/WeightPlan.h"

#include "runtime/LoadError.h"
#include "runtime/WeightBinder.h"
#include "runtime/WeightLayout.h"

#include <fmt/format.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace q3::runtime {

DType runtimeDType(manifest::ElementType type) {
  switch (type) {
  case manifest::ElementType::F32:
    return DType::F32;
  case manifest::ElementType::F16:
    return DType::F16;
  case manifest::ElementType::BF16:
    return DType::BF16;
  }
  return DType::F32;
}

namespace {

std::vector<float> widen(const WeightData &weight) {
  std::vector<float> values(size_t(weight.elements));
  convertToF32(weight.dtype, weight.data, values.data(), values.size());
  return values;
}

class PlanEvaluator {
public:
  PlanEvaluator(const manifest::Manifest &m, const Checkpoint &checkpoint, ThreadPool &pool)
      : m(m), checkpoint(checkpoint), pool(pool) {}

  std::vector<WeightData> evaluate(std::vector<std::string> *warnings,
                                   const WeightPlanProgress &progress) {
    bind(warnings);
    markNeeded();
    for (size_t i = 0; i < m.weights.size(); ++i) {
      if (!needed[i]) {
        weights.emplace_back();
        continue;
      }
      materialize(m.weights[i]);
      if (progress)
        progress(int64_t(i + 1), int64_t(m.weights.size()));
      for (int64_t input : m.weights[i].inputs)
        if (lastUse[size_t(input)] == i && !read[size_t(input)])
          release(weights[size_t(input)]);
    }
    for (size_t i = 0; i < weights.size(); ++i)
      if (!read[i])
        release(weights[i]);
#if defined(__GLIBC__)
    // The released intermediates below malloc's mmap threshold left holes in
    // the heap that glibc keeps; hand their pages back (~120 MB for 0.6B).
    malloc_trim(0);
#endif
    return std::move(weights);
  }

private:
  void bind(std::vector<std::string> *warnings) {
    std::vector<ParamSpec> params;
    for (const manifest::Weight &w : m.weights)
      if (w.kind == manifest::WeightKind::Param)
        params.push_back({w.name, w.shape});
    bound = bindWeights(checkpoint, params, m.config.tieWordEmbeddings, warnings);
  }

  /// Only the weights the schedule reads, and what they are computed from,
  /// are materialized; an input no dispatch reads is released right after its
  /// last consumer (the transformed copies of every layer would otherwise all
  /// be resident at once, twice the model).
  void markNeeded() {
    read.assign(m.weights.size(), false);
    for (const manifest::Step &step : m.steps)
      for (const manifest::Binding &b : step.operands)
        if (b.kind == manifest::BindingKind::Weight)
          read[size_t(b.id)] = true;
    needed = read;
    for (size_t i = m.weights.size(); i-- > 0;)
      if (needed[i])
        for (int64_t input : m.weights[i].inputs)
          needed[size_t(input)] = true;
    lastUse.assign(m.weights.size(), 0);
    for (size_t i = 0; i < m.weights.size(); ++i)
      if (needed[i])
        for (int64_t input : m.weights[i].inputs)
          lastUse[size_t(input)] = i;
  }

  const uint8_t *bytesOf(const WeightData &w) { return w.owned.empty() ? w.data : w.owned.data(); }

  void dropMappedPages(const WeightData &copied) {
    // Copying touched every page; the kernels read the copy. Safe even if the
    // tensor is read again (the embedding's gather): the pages fault back in.
    if (copied.owned.empty() && copied.data)
      checkpoint.dropPages(copied.data, size_t(copied.bytes()));
  }

  void release(WeightData &w) {
    if (w.owned.empty())
      dropMappedPages(w);
    std::vector<uint8_t>().swap(w.owned);
    w.data = nullptr;
  }

  void materialize(const manifest::Weight &entry) {
    WeightData w;
    w.dtype = runtimeDType(entry.dtype);
    w.elements = 1;
    for (int64_t extent : entry.shape)
      w.elements *= extent;
    switch (entry.kind) {
    case manifest::WeightKind::Param: {
      const TensorView *tensor = bound.byName.at(entry.name);
      if (tensor->dtype == w.dtype) {
        w.data = tensor->data; // used in place, straight from the mapped file
      } else {
        std::vector<float> values = readAsF32(*tensor);
        w.owned.resize(values.size() * dtypeSize(w.dtype));
        convertFromF32(w.dtype, values.data(), w.owned.data(), values.size());
      }
      break;
    }
    case manifest::WeightKind::FoldGain:
      foldGain(weights.at(size_t(entry.inputs[0])), weights.at(size_t(entry.inputs[1])), w);
      break;
    case manifest::WeightKind::ConcatRows:
      w.owned.reserve(size_t(w.bytes()));
      for (int64_t input : entry.inputs) {
        const WeightData &part = weights.at(size_t(input));
        const uint8_t *bytes = bytesOf(part);
        w.owned.insert(w.owned.end(), bytes, bytes + part.bytes());
        dropMappedPages(part);
      }
      break;
    case manifest::WeightKind::PackColumnBlocks:
      packColumnBlocksOf(weights.at(size_t(entry.inputs[0])), entry, w);
      break;
    }
    if (!w.owned.empty())
      w.data = w.owned.data();
    weights.push_back(std::move(w));
  }

  void foldGain(const WeightData &matrix, const WeightData &gain, WeightData &folded) {
    const std::vector<float> gains = widen(gain);
    const int64_t columns = int64_t(gains.size());
    // Row by row: an f32 copy of the whole matrix never exists.
    const size_t inSize = dtypeSize(matrix.dtype), outSize = dtypeSize(folded.dtype);
    folded.owned.resize(size_t(folded.elements) * outSize);
    const uint8_t *from = bytesOf(matrix);
    pool.parallelFor(matrix.elements / columns, [&](int64_t begin, int64_t end) {
      std::vector<float> row(static_cast<size_t>(columns));
      for (int64_t r = begin; r < end; ++r) {
        convertToF32(matrix.dtype, from + size_t(r * columns) * inSize, row.data(), row.size());
        for (size_t c = 0; c < row.size(); ++c)
          row[c] *= gains[c];
        convertFromF32(folded.dtype, row.data(),
                       folded.owned.data() + size_t(r * columns) * outSize, row.size());
      }
    });
    dropMappedPages(matrix);
  }

  void packColumnBlocksOf(const WeightData &source, const manifest::Weight &entry,
                          WeightData &packed) {
    packed.owned.resize(size_t(packed.bytes()));
    const auto *from = reinterpret_cast<const uint16_t *>(bytesOf(source));
    auto *to = reinterpret_cast<uint16_t *>(packed.owned.data());
    const int64_t columns = entry.shape[1];
    // In 16 chunks per thread, each dropping the mapped pages it has read: the
    // tied lm_head's 311 MB are otherwise resident twice until the end.
    const int64_t blockBytes = kColumnBlockRows * columns * 2;
    pool.parallelFor(
        entry.shape[0] / kColumnBlockRows,
        [&](int64_t begin, int64_t end) {
          packColumnBlocks(from, to, columns, begin, end);
          if (source.owned.empty())
            checkpoint.dropPages(source.data + begin * blockBytes,
                                 size_t((end - begin) * blockBytes));
        },
        16);
    dropMappedPages(source);
  }

  const manifest::Manifest &m;
  const Checkpoint &checkpoint;
  ThreadPool &pool;
  BoundWeights bound;
  std::vector<WeightData> weights;
  std::vector<bool> read, needed;
  std::vector<size_t> lastUse;
};

} // namespace

std::vector<WeightData> evaluateWeightPlan(const manifest::Manifest &m,
                                           const Checkpoint &checkpoint, ThreadPool &pool,
                                           std::vector<std::string> *warnings,
                                           const WeightPlanProgress &progress) {
  return PlanEvaluator(m, checkpoint, pool).evaluate(warnings, progress);
}

} // namespace q3::runtime
