//===- AttentionTuner.cpp - measure the prefill attention's instructions --===//
#include "backends/cpu/AttentionTuner.h"
#include "backends/cpu/TuningKernel.h"
#include "backends/cpu/TuningRecord.h"
#include "backends/cpu/passes/CpuPasses.h"
#include "runtime/CallerStack.h"
#include "runtime/KernelABI.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/xxhash.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

namespace q3::cpu {
namespace {

constexpr int64_t kPromptRows = 512; // a prefill chunk (the default ubatch)
constexpr int kRepetitions = 4;
// f32 replaces the default (vdpbf16ps, as the products) only when it measured
// this much faster: single-thread rates on a loaded VM swing by tens of
// percent, and two compiles of one model should agree.
constexpr double kF32Margin = 1.10;

// The builds measured: f32 FMAs, and vdpbf16ps on 1 to 3 blocks of rows per
// workgroup (each set adds 12 KiB of scratch for head_dim 128: 4 sets no
// longer fit a 48 KiB L1 beside the shared key and value copies).
const std::vector<AttentionRate> kCandidates = {{false, 1}, {true, 1}, {true, 2}, {true, 3}};

std::string candidateName(const AttentionRate &r) {
  return r.bf16 ? fmt::format("avx512bf16_sets{}", r.rowSets) : "f32";
}

AttentionKernel measuredKernel(const AttentionKernel &shape, const AttentionRate &candidate) {
  AttentionKernel kernel = shape;
  kernel.name = "tune_attention_" + candidateName(candidate);
  kernel.paths = AttentionKernel::Paths::PrefillOnly;
  kernel.bf16Prefill = candidate.bf16;
  kernel.prefillRowSets = candidate.rowSets;
  return kernel;
}

std::vector<float> randomFloats(size_t count, std::mt19937 &rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float &v : values)
    v = uniform(rng);
  return values;
}

/// One layer's causal prefill of kPromptRows rows, the same random inputs
/// for every kernel measured; the keys and values in the model's cache type.
struct PrefillInputs {
  std::vector<float> q, out;
  std::vector<uint8_t> keys, values, scratch;

  explicit PrefillInputs(const AttentionKernel &shape) {
    std::mt19937 rng(7);
    const int64_t rowValues = shape.headDim;
    q = randomFloats(size_t(kPromptRows * shape.queryHeads * rowValues), rng);
    keys = randomStored(shape.cache, shape.kvHeads * kPromptRows * rowValues, rng);
    values = randomStored(shape.cache, shape.kvHeads * kPromptRows * rowValues, rng);
    out.resize(q.size());
  }

  /// Seconds of one single-thread run of `loaded` (a kernel of `shape`),
  /// given its thread scratch as the runtime gives it.
  double time(const LoadedTuningKernel &loaded, const AttentionKernel &shape) {
    scratch.resize(size_t(shape.threadScratch().bytesFor(kPromptRows)));
    void *buffers[] = {q.data(), keys.data(), values.data(), out.data(), scratch.data()};
    const int64_t bytes[] = {int64_t(q.size() * 4), int64_t(keys.size()), int64_t(values.size()),
                             int64_t(out.size() * 4), int64_t(scratch.size())};
    const int64_t scalars[] = {kPromptRows, kPromptRows, kPromptRows}; // rows, visible, capacity
    const auto start = std::chrono::steady_clock::now();
    loaded.entry(buffers, bytes, scalars, 0, kPromptRows * shape.workgroupsPerRow());
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
};

/// GFLOP/s of every candidate build of `shape`: the best of kRepetitions
/// runs each, the candidates taking turns (bestOfInterleaved).
std::vector<AttentionRate> measure(const AttentionKernel &shape, const CpuTarget &target) {
  std::vector<AttentionKernel> kernels;
  std::vector<std::string> sources, names;
  for (const AttentionRate &candidate : kCandidates) {
    kernels.push_back(measuredKernel(shape, candidate));
    sources.push_back(attentionSource(kernels.back()));
    names.push_back(kernels.back().name);
  }
  const std::vector<LoadedTuningKernel> loaded = loadTuningSources(sources, names, target);
  PrefillInputs inputs(shape);
  std::vector<std::function<double()>> runs;
  for (size_t i = 0; i < kernels.size(); ++i)
    runs.push_back([&, i] { return inputs.time(loaded[i], kernels[i]); });
  // On a stack of the runtime's size, not the compiler's main thread's.
  std::vector<double> best;
  runtime::CallerStack(runtime::kKernelStackBytes).run([&] {
    best = bestOfInterleaved(runs, kRepetitions);
  });
  // Row t scores and sums t + 1 positions per query head: two products of
  // head_dim multiply-adds each.
  const double positions = double(kPromptRows) * double(kPromptRows + 1) / 2;
  const double flops = 2.0 * 2.0 * double(shape.headDim) * double(shape.queryHeads) * positions;
  std::vector<AttentionRate> rates = kCandidates;
  for (size_t i = 0; i < rates.size(); ++i)
    rates[i].gflops = flops / best[i] / 1e9;
  return rates;
}

std::string cacheKey(const CpuTarget &target, const AttentionKernel &shape) {
  std::string sources;
  for (const AttentionRate &candidate : kCandidates)
    sources += attentionSource(measuredKernel(shape, candidate));
  return fmt::format("attention {} {:016x} {} {}x{}x{} [{}] {:016x}", target.llvmCpu,
                     llvm::xxHash64(target.features), target.requiredFeatures.size(),
                     shape.queryHeads, shape.kvHeads, shape.headDim,
                     fmt::join(shape.kvHeadMap, ","), llvm::xxHash64(sources));
}

/// The fastest vdpbf16ps build, unless f32 FMAs measured kF32Margin faster.
AttentionRate choose(const std::vector<AttentionRate> &rates) {
  AttentionRate f32, bf16;
  for (const AttentionRate &r : rates)
    if (!r.bf16)
      f32 = r;
    else if (r.gflops > bf16.gflops)
      bf16 = r;
  return f32.gflops > kF32Margin * bf16.gflops ? f32 : bf16;
}

} // namespace

bool attentionTunable(const CpuTarget &target, const AttentionKernel &shape) {
  return shape.bf16Flashable() && targetHas(target, "avx512bf16");
}

AttentionTuning tuneAttention(const CpuTarget &target, const AttentionKernel &shape,
                              double maxForeignShare) {
  if (!attentionTunable(target, shape))
    throw std::invalid_argument("--tune: attention of this shape has no choice on this CPU");
  std::vector<std::string> names;
  for (const AttentionRate &candidate : kCandidates)
    names.push_back(candidateName(candidate));
  AttentionTuning tuning;
  const std::vector<double> rates = namedRatesCachedOrMeasured(
      cacheKey(target, shape), names, maxForeignShare,
      [&] {
        std::vector<double> gflops;
        for (const AttentionRate &r : measure(shape, target))
          gflops.push_back(r.gflops);
        return gflops;
      },
      tuning.provenance);
  tuning.measured = kCandidates;
  for (size_t i = 0; i < rates.size(); ++i)
    tuning.measured[i].gflops = rates[i];
  tuning.chosen = choose(tuning.measured);
  return tuning;
}

void recordAttentionTuning(mlir::ModuleOp module, const AttentionTuning &tuning) {
  TuningRecord record(module);
  mlir::Builder &b = record.builder;
  llvm::SmallVector<mlir::NamedAttribute> rates;
  for (const AttentionRate &r : tuning.measured)
    rates.push_back(b.getNamedAttr(candidateName(r), record.rate(r.gflops)));
  record.set("attention_matmul", b.getStringAttr(tuning.chosen.bf16 ? "avx512bf16" : "f32"));
  record.set("attention_row_sets", b.getI64IntegerAttr(tuning.chosen.rowSets));
  record.set("attention_gflops", b.getDictionaryAttr(rates));
  record.setOthersShare("attention_others_share", tuning.provenance);
  record.set(
      "attention_measured_on",
      b.getStringAttr(fmt::format("{}-row causal prefill of one layer, one thread", kPromptRows)));
  record.commit();
}

} // namespace q3::cpu
