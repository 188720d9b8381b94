//===- WeightPlan.cpp - the weights a compiled model's kernels read -------===//
#include "runtime/WeightPlan.h"

#include "runtime/LoadError.h"
#include "runtime/WeightBinder.h"
#include "runtime/WeightLayout.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace q3::runtime {

namespace {

// Computed weights are written whole at load and streamed by every token.
constexpr HostBuffer::Pages kWeightPages = HostBuffer::Pages::Huge;

std::vector<float> widen(const WeightData &weight) {
  std::vector<float> values(size_t(weight.elements));
  convertToF32(weight.dtype, weight.data, values.data(), values.size());
  return values;
}

/// Vectors this small (the RMSNorm gains) are copied rather than read in place.
constexpr int64_t kCopiedVectorBytes = 64 << 10;

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
      materialize(i);
      if (progress)
        progress(int64_t(i + 1), int64_t(m.weights.size()));
      for (size_t input : releasedAfter[i])
        release(weights[input]);
    }
    for (size_t i = 0; i < weights.size(); ++i)
      if (!read[i])
        release(weights[i]);
    // A page cache in huge folios is mapped 2 MB at a time, so a read after a
    // drop maps the neighbouring tensors' dropped pages back in with its own
    // (53 of 80 MB of a small model stayed resident): drop them all again.
    for (const auto &[data, bytes] : dropped)
      checkpoint.dropPages(data, bytes);
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
    consumers.assign(m.weights.size(), {});
    for (size_t i = 0; i < m.weights.size(); ++i)
      if (needed[i])
        for (int64_t input : m.weights[i].inputs) {
          lastUse[size_t(input)] = i;
          consumers[size_t(input)].push_back(i);
        }
    // A deferred concatenation's parts live until its packing has read them.
    deferred.assign(m.weights.size(), false);
    for (size_t i = 0; i < m.weights.size(); ++i)
      if (needed[i] && m.weights[i].kind == manifest::WeightKind::ConcatRows && onlyPacked(i)) {
        deferred[i] = true;
        for (int64_t input : m.weights[i].inputs)
          lastUse[size_t(input)] = std::max(lastUse[size_t(input)], lastUse[i]);
      }
    releasedAfter.assign(m.weights.size(), {});
    for (size_t i = 0; i < m.weights.size(); ++i)
      if (needed[i] && !read[i] && !consumers[i].empty())
        releasedAfter[lastUse[i]].push_back(i);
  }

  const uint8_t *bytesOf(const WeightData &w) { return w.owned.empty() ? w.data : w.owned.data(); }

  void dropMappedPages(const WeightData &copied) {
    // Copying touched every page; the kernels read the copy. Safe even if the
    // tensor is read again (the embedding's gather): the pages fault back in.
    if (copied.owned.empty() && copied.data) {
      checkpoint.dropPages(copied.data, size_t(copied.bytes()));
      dropped.emplace_back(copied.data, size_t(copied.bytes()));
    }
  }

  void release(WeightData &w) {
    if (w.owned.empty())
      dropMappedPages(w);
    w.owned.reset();
    w.data = nullptr;
  }

  void materialize(size_t index) {
    const manifest::Weight &entry = m.weights[index];
    WeightData w;
    w.dtype = entry.dtype;
    w.elements = 1;
    for (int64_t extent : entry.shape)
      w.elements *= extent;
    switch (entry.kind) {
    case manifest::WeightKind::Param: {
      const TensorView *tensor = bound.byName.at(entry.name);
      if (tensor->dtype == w.dtype && entry.shape.size() == 1 && w.bytes() <= kCopiedVectorBytes) {
        // A gain read in place would keep the 2 MB of mapped file around it
        // resident (a page cache in huge folios is mapped 2 MB at a time):
        // with the products packed at load, a 0.6B checkpoint's 112 gains
        // held ~200 MB of it. Copied, the mapping is dropped like the rest.
        w.owned = HostBuffer(size_t(w.bytes()));
        std::memcpy(w.owned.data(), tensor->data, size_t(w.bytes()));
        dropped.emplace_back(tensor->data, size_t(w.bytes()));
      } else if (tensor->dtype == w.dtype) {
        w.data = tensor->data; // used in place, straight from the mapped file
      } else {
        std::vector<float> values = readAsF32(*tensor);
        w.owned = HostBuffer(values.size() * dtypeSize(w.dtype), kWeightPages);
        convertFromF32(w.dtype, values.data(), w.owned.data(), values.size());
      }
      break;
    }
    case manifest::WeightKind::FoldGain:
      foldGain(weights.at(size_t(entry.inputs[0])), weights.at(size_t(entry.inputs[1])), w);
      break;
    case manifest::WeightKind::ConcatRows:
      if (deferred[index]) {
        // Its column blocks are packed straight from the parts (one copy of
        // the rows, not two); the concatenation itself never exists.
        break;
      }
      concatRows(entry, w);
      break;
    case manifest::WeightKind::PackColumnBlocks:
      packColumnBlocksOf(size_t(entry.inputs[0]), entry, w);
      break;
    }
    if (!w.owned.empty())
      w.data = w.owned.data();
    weights.push_back(std::move(w));
  }

  /// Whether concatenation `index` is read only by column-block packing, with
  /// parts that hold whole column blocks.
  bool onlyPacked(size_t index) const {
    if (read[index] || consumers[index].empty())
      return false;
    for (size_t consumer : consumers[index])
      if (m.weights[consumer].kind != manifest::WeightKind::PackColumnBlocks)
        return false;
    for (int64_t input : m.weights[index].inputs)
      if (m.weights[size_t(input)].shape.size() != 2 ||
          m.weights[size_t(input)].shape[0] % kColumnBlockRows != 0)
        return false;
    return true;
  }

  /// The row-major parts a weight's rows come from: itself, or the parts of a
  /// concatenation that was never materialized.
  std::vector<const WeightData *> rowParts(size_t index) const {
    if (deferred[index]) {
      std::vector<const WeightData *> parts;
      for (int64_t input : m.weights[index].inputs)
        parts.push_back(&weights[size_t(input)]);
      return parts;
    }
    return {&weights[index]};
  }

  void concatRows(const manifest::Weight &entry, WeightData &w) {
    w.owned = HostBuffer(size_t(w.bytes()), kWeightPages);
    uint8_t *to = w.owned.data();
    for (int64_t input : entry.inputs) {
      const WeightData &part = weights.at(size_t(input));
      const uint8_t *from = bytesOf(part);
      const int64_t bytes = part.bytes();
      constexpr int64_t kSlice = int64_t(1) << 20;
      pool.parallelFor((bytes + kSlice - 1) / kSlice, [&](int64_t begin, int64_t end) {
        const int64_t first = begin * kSlice, last = std::min(bytes, end * kSlice);
        std::memcpy(to + first, from + first, size_t(last - first));
      });
      to += bytes;
      dropMappedPages(part);
    }
  }

  void foldGain(const WeightData &matrix, const WeightData &gain, WeightData &folded) {
    const std::vector<float> gains = widen(gain);
    const int64_t columns = int64_t(gains.size());
    // Row by row: an f32 copy of the whole matrix never exists.
    const size_t inSize = dtypeSize(matrix.dtype), outSize = dtypeSize(folded.dtype);
    folded.owned = HostBuffer(size_t(folded.elements) * outSize, kWeightPages);
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

  void packColumnBlocksOf(size_t sourceIndex, const manifest::Weight &entry,
                          WeightData &packed) {
    packed.owned = HostBuffer(size_t(packed.bytes()), kWeightPages);
    auto *to = reinterpret_cast<uint16_t *>(packed.owned.data());
    const int64_t columns = entry.shape[1];
    const int64_t blockBytes = kColumnBlockRows * columns * 2;
    for (const WeightData *part : rowParts(sourceIndex)) {
      const auto *from = reinterpret_cast<const uint16_t *>(bytesOf(*part));
      // In 16 chunks per thread, each dropping the mapped pages it has read:
      // the tied lm_head's 311 MB are otherwise resident twice until the end.
      const int64_t blocks = part->elements / columns / kColumnBlockRows;
      pool.parallelFor(
          blocks,
          [&](int64_t begin, int64_t end) {
            packColumnBlocks(from, to, columns, begin, end);
            if (part->owned.empty())
              checkpoint.dropPages(part->data + begin * blockBytes,
                                   size_t((end - begin) * blockBytes));
          },
          16);
      to += blocks * kColumnBlockRows * columns;
      dropMappedPages(*part);
    }
  }

  const manifest::Manifest &m;
  const Checkpoint &checkpoint;
  ThreadPool &pool;
  BoundWeights bound;
  std::vector<WeightData> weights;
  std::vector<bool> read, needed, deferred;
  std::vector<size_t> lastUse;
  std::vector<std::vector<size_t>> consumers, releasedAfter;
  std::vector<std::pair<const uint8_t *, size_t>> dropped; // mapped ranges no longer read
};

} // namespace

std::vector<WeightData> evaluateWeightPlan(const manifest::Manifest &m,
                                           const Checkpoint &checkpoint, ThreadPool &pool,
                                           std::vector<std::string> *warnings,
                                           const WeightPlanProgress &progress) {
  return PlanEvaluator(m, checkpoint, pool).evaluate(warnings, progress);
}

std::vector<WeightData> bindEmbeddedWeights(const manifest::Manifest &m, const uint8_t *section,
                                            uint64_t sectionBytes, const std::string &file) {
  std::vector<WeightData> weights(m.weights.size());
  for (const manifest::EmbeddedWeight &e : m.embedded.entries) {
    if (uint64_t(e.offset) > sectionBytes || uint64_t(e.bytes) > sectionBytes - uint64_t(e.offset))
      throw LoadError(fmt::format("{}: embedded weight {} at bytes {}..{}: expected it within the "
                                  "{}-byte section '{}'",
                                  file, e.id, e.offset, e.offset + e.bytes, sectionBytes,
                                  m.embedded.section));
    WeightData &w = weights[size_t(e.id)];
    w.dtype = m.weights[size_t(e.id)].dtype;
    w.elements = e.bytes / int64_t(dtypeSize(w.dtype));
    w.data = section + e.offset;
  }
  return weights;
}

} // namespace q3::runtime
